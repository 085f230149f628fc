"""What the commit gate decodes before it scans (`redaction.secrets_in(..., encoded=True)`): base64
(either alphabet, glued to a name before it) and hex blobs that decode to text; what it does not
see is pinned here as docs/security.md states it: a secret split across lines, or compressed first."""

from __future__ import annotations

import base64
import gzip
import hashlib
import random
import string

from tilth.store.redaction import secrets_in

_rng = random.Random(41)
TOKEN = "ghp_" + "".join(_rng.choices(string.ascii_letters + string.digits, k=36))


def test_base64_and_hex_blobs_are_decoded_and_what_is_not_text_or_is_split_is_not():
    b64 = base64.b64encode(TOKEN.encode()).decode()
    urlsafe = base64.urlsafe_b64encode(f"token: {TOKEN}?".encode()).decode()
    hexed = TOKEN.encode().hex()
    caught = {f"value = '{b64}'": b64, f"{urlsafe}\n": urlsafe, f"KEY_{b64}": f"KEY_{b64}", f'h = "{hexed}"': hexed}
    for text, blob in caught.items():
        found = secrets_in(text, encoded=True)
        assert [(text[s:e], kind.split(", ")[0]) for s, e, kind in found] == [(blob, "GitHub Token")], text
        assert secrets_in(text) == [], "only the gate decodes"
    ordinary = "\n".join([hashlib.sha1(b"x").hexdigest(), hashlib.sha256(b"x").hexdigest(),
                          "some_long_function_name_of_this_module = 1",
                          base64.b64encode(bytes(range(256))).decode(),  # an image, a key file: not text
                          base64.b64encode(gzip.compress(TOKEN.encode())).decode(),  # compressed: not seen
                          base64.b64encode(base64.b64encode(TOKEN.encode())).decode()])  # twice: not seen
    assert secrets_in(ordinary, encoded=True) == []
    split = f"part_one = '{TOKEN[:20]}'\npart_two = '{TOKEN[20:]}'\n"
    assert secrets_in(split, encoded=True) == [], "a secret split across lines is not seen (docs/security.md)"
