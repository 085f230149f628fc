"""Secrets never reach disk nor a model: every write through jsonio, every tool result and every
prompt passes through `redact`.

Three things are replaced by `[redacted]`: the keys registered once per process (from the
resolved settings), the user's `secret_patterns`, and, in a process that handles agent output
(`scan_for_secrets`: the runner, `tilth prep`), whatever detect-secrets' detectors find
(`store/secret_scan.py`). The detectors are imported on first use, so a command that only looks
(`tilth status`, `tilth logs`) never pays for them; what it shows was redacted when written.

JSON (a whole document, or JSONL lines) is scanned string by string, decoded, and each secret is
replaced in its escaped form, so a replacement never breaks a line a reader must parse.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: `tilth --help` imports this module, never typing
if TYPE_CHECKING:
    from typing import Callable

MARK = b"[redacted]"
_secrets: set[bytes] = set()
_patterns: list[re.Pattern[bytes]] = []
_scanning = False
_clean: dict[int, None] = {}
"""Hashes of the last texts `redact_text` returned: a prompt or tool result written after it was
redacted is not scanned twice (str hashes are keyed per process, so an agent cannot aim a collision)."""
CLEAN_KEPT = 64
_clean_values: dict[int, None] = {}
"""Hashes of JSON string values the detectors found nothing in: a state file rewritten after every
task (prd.json, summary.json) scans only the values it did not hold before, not the whole plan again."""
CLEAN_VALUES_KEPT = 8192
_documents: dict[str, bytes] = {}
"""Per rewritten file, the last whole JSON document of it the detectors found nothing in, when it is
big (`DIFF_FROM` bytes): the next write of that file scans only the values on the lines that differ
from it, so flipping one status of a 10,000-task plan scans one line, not 50,000 values."""
DOCUMENTS_KEPT = 4
DIFF_FROM = 64 * 1024
_TOKEN = (rb'[ \t\r\n]+|[\[\]{},:]|"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
          rb"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
"""One JSON token: what a changed region of a kept document must consist of, wholly (compiled on
first use, through `re`'s cache: a command that only looks never pays for it)."""
_COLON = rb"[ \t\r\n]*:"


def register_secret(value: str | None) -> None:
    if value and len(value) >= 6 and value != "not-needed":
        _secrets.add(value.encode())


def register_patterns(patterns: list[str]) -> None:
    for pattern in patterns:
        compiled = re.compile(pattern.encode())
        if compiled not in _patterns:
            _patterns.append(compiled)


def scan_for_secrets() -> None:
    """From now on this process's `redact` also replaces what the secret detectors find."""
    global _scanning
    _scanning = True


def scanning() -> bool:
    return _scanning


def redact(data: bytes, rewritten: str | None = None) -> bytes:
    """`rewritten`: the path of a whole file written again and again (prd.json, summary.json): the
    JSON values the detectors found clean are remembered, so the next write scans only the new ones."""
    for secret in _secrets:
        if secret in data:
            data = data.replace(secret, MARK)
    for pattern in _patterns:
        data = pattern.sub(MARK, data)
    if _scanning and data.strip():
        if rewritten is not None:
            return _rewritten(rewritten, data)
        text = data.decode("utf-8", errors="surrogateescape")
        data = _detected(text).encode("utf-8", errors="surrogateescape")
    return data


def redact_text(text: str) -> str:
    clean = redact(text.encode("utf-8", errors="surrogateescape")).decode("utf-8", errors="surrogateescape")
    if _scanning and len(clean) > 256:
        _clean[hash(clean)] = None
        if len(_clean) > CLEAN_KEPT:
            del _clean[next(iter(_clean))]
    return clean


def secrets_in(text: str, encoded: bool = False) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each secret in `text`: registered keys, `secret_patterns` matches and
    what the detectors find (whether or not this process scans its writes); overlaps are kept.
    `encoded` (the commit gate): also each base64 or hex blob whose decoded text holds one of them
    (`store/encoded.py`), the whole blob."""
    from tilth.store.secret_scan import find_secrets

    if encoded:
        from tilth.store.encoded import encoded_findings

        return secrets_in(text) + encoded_findings(text, secrets_in)

    raw = text.encode("utf-8", errors="surrogateescape")
    spans = []
    for secret in _secrets:
        at = raw.find(secret)
        while at >= 0:
            spans.append((at, at + len(secret), "a tilth key"))
            at = raw.find(secret, at + 1)
    spans += [(m.start(), m.end(), "secret_patterns") for pattern in _patterns for m in pattern.finditer(raw)]
    found = [(len(raw[:s].decode("utf-8", errors="surrogateescape")), len(raw[:e].decode("utf-8", errors="surrogateescape")),
              kind) for s, e, kind in spans]
    return found + [(f.start, f.end, f.kind) for f in find_secrets(text)]


def _detected(text: str, rewritten: bool = False) -> str:
    from tilth.store.secret_scan import redacted

    mark = MARK.decode()
    if hash(text) in _clean:
        return text
    if text.lstrip()[:1] in ("{", "["):
        whole = _in_json(text, mark, rewritten)
        if whole is not None:
            return whole
        lines = text.split("\n")
        if all(not line.strip() or line.lstrip()[:1] in ("{", "[") for line in lines):
            done = [_in_json(line, mark) if line.strip() else line for line in lines]
            if all(line is not None for line in done):
                return "\n".join(done)  # type: ignore[arg-type]
    return redacted(text, mark)


def _rewritten(path: str, data: bytes) -> bytes:
    """`redact`'s detectors over a whole file written again and again: when it differs from the
    file's kept document only in a few whole lines of JSON tokens, only their values are scanned."""
    before = _documents.pop(path, None)
    if before is not None and _only_clean_lines_changed(before, data):
        _keep_document(path, data)
        return data
    text = data.decode("utf-8", errors="surrogateescape")
    if hash(text) in _clean or text.lstrip()[:1] not in ("{", "["):
        return _detected(text, True).encode("utf-8", errors="surrogateescape")
    found = _json_secrets(text, remember=True)
    if found is None:
        return _detected(text, True).encode("utf-8", errors="surrogateescape")
    if not found and len(data) >= DIFF_FROM:
        _keep_document(path, data)
    return _replaced(text, found, MARK.decode()).encode("utf-8", errors="surrogateescape")


def _keep_document(path: str, data: bytes) -> None:
    _documents[path] = data
    while len(_documents) > DOCUMENTS_KEPT:
        del _documents[next(iter(_documents))]


def _only_clean_lines_changed(before: bytes, data: bytes) -> bool:
    """True when `data` is `before` (a JSON document the detectors found nothing in) with a few whole
    lines replaced by lines of complete JSON tokens whose string values the detectors find nothing in
    either. A JSON string never holds a raw newline, so every string of `data` outside those lines
    is one of `before`'s, byte for byte; which strings are keys is decided by the token after them."""
    same = min(len(before), len(data))
    head = _common(before, data, same, lambda a, low, high: a[low:high])
    tail = _common(before, data, same - head, lambda a, low, high: a[len(a) - high:len(a) - low])
    start = data.rfind(b"\n", 0, head) + 1
    end = data.find(b"\n", len(data) - tail)
    end = len(data) if end < 0 else end
    before_start = start
    while before_start > 0 and data[before_start - 1] in b" \t\r\n":
        before_start -= 1
    if (end - start) * 8 > len(data):
        return False  # a large change is scanned whole
    colon = re.compile(_COLON)
    if data[before_start - 1:before_start] == b'"' and bool(colon.match(data, start)) != bool(colon.match(before, start)):
        return False  # the string just before the changed lines is a key in one and a value in the other
    import orjson

    values, at, tokens = [], start, re.compile(_TOKEN)
    while at < end:
        token = tokens.match(data, at, end)
        if token is None:
            return False
        at = token.end()
        if token.group().startswith(b'"') and not colon.match(data, at):
            try:
                values.append(orjson.loads(token.group()))
            except orjson.JSONDecodeError:
                return False
    return _json_values_clean(values)


def _common(a: bytes, b: bytes, most: int, part: Callable[[bytes, int, int], bytes]) -> int:
    """The length of the longest common prefix or suffix of `a` and `b`, at most `most`, by bisection:
    `part(x, low, high)` is the bytes from `low` to `high` counted from x's start or end; only the
    part not yet known equal is compared, so the whole takes about two passes over the bytes."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if part(a, low, middle) == part(b, low, middle):
            low = middle
        else:
            high = middle - 1
    return low


def _json_values_clean(values: list[str]) -> bool:
    """Scan the values not known clean; remember them and say True when the detectors find nothing."""
    from tilth.store.secret_scan import find_secrets

    fresh = [s for s in dict.fromkeys(values) if hash(s) not in _clean_values and (len(s) <= 256 or hash(s) not in _clean)]
    if fresh and find_secrets("\n".join(fresh)):
        return False
    _remember_clean(fresh, [])
    return True


def _in_json(raw: str, mark: str, remember: bool = False) -> str | None:
    """`raw` with the secrets in its string values replaced; None when it is not JSON."""
    found = _json_secrets(raw, remember)
    return None if found is None else _replaced(raw, found, mark)


def _json_secrets(raw: str, remember: bool = False) -> set[str] | None:
    """The secrets the detectors find in the string values of JSON `raw`; None when it is not JSON."""
    import orjson

    from tilth.store.secret_scan import find_secrets

    try:
        doc = orjson.loads(raw.encode("utf-8", errors="surrogateescape"))
    except orjson.JSONDecodeError:
        return None
    strings: list[str] = []
    _collect(doc, strings)
    fresh = [s for s in dict.fromkeys(strings) if hash(s) not in _clean_values and (len(s) <= 256 or hash(s) not in _clean)]
    joined = "\n".join(fresh)
    findings = find_secrets(joined) if joined else []
    if remember:
        _remember_clean(fresh, [(f.start, f.end) for f in findings])
    return {joined[f.start:f.end] for f in findings}


def _replaced(raw: str, found: set[str], mark: str) -> str:
    """`raw` (JSON) with each of `found` replaced in its escaped forms, else by the detectors over the text."""
    import orjson

    from tilth.store.secret_scan import redacted

    missed = False
    for secret in sorted(found, key=len, reverse=True):
        forms = [orjson.dumps(secret).decode()[1:-1], _ascii_escaped(secret)]
        hit = [form for form in forms if form in raw]
        for form in hit:
            raw = raw.replace(form, mark)
        missed = missed or not hit
    return redacted(raw, mark, json_safe=True) if missed else raw


def _remember_clean(values: list[str], findings: list[tuple[int, int]]) -> None:
    """Mark each of `values` (scanned joined by newlines, in this order) that no finding touches."""
    start = 0
    for value in values:
        end = start + len(value)
        if not any(s <= end and e >= start for s, e in findings):
            _clean_values[hash(value)] = None
        start = end + 1
    while len(_clean_values) > CLEAN_VALUES_KEPT:
        del _clean_values[next(iter(_clean_values))]


def _collect(value: object, out: list[str]) -> None:
    """Every string value of a parsed JSON document, in document order; a loop, not recursion:
    prd.json and summary.json are walked on every write."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(item.values()))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _ascii_escaped(secret: str) -> str:
    import json

    return json.dumps(secret)[1:-1]
