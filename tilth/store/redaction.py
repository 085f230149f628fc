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


def redact(data: bytes, rewritten: bool = False) -> bytes:
    """`rewritten`: a whole file written again and again (prd.json, summary.json): the JSON values
    the detectors found clean are remembered, so the next write scans only the new ones."""
    for secret in _secrets:
        if secret in data:
            data = data.replace(secret, MARK)
    for pattern in _patterns:
        data = pattern.sub(MARK, data)
    if _scanning and data.strip():
        text = data.decode("utf-8", errors="surrogateescape")
        data = _detected(text, rewritten).encode("utf-8", errors="surrogateescape")
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


def _in_json(raw: str, mark: str, remember: bool = False) -> str | None:
    """`raw` with the secrets in its string values replaced; None when it is not JSON."""
    import orjson

    from tilth.store.secret_scan import find_secrets, redacted

    try:
        doc = orjson.loads(raw.encode("utf-8", errors="surrogateescape"))
    except orjson.JSONDecodeError:
        return None
    strings: list[str] = []
    _collect(doc, strings)
    fresh = [s for s in dict.fromkeys(strings) if hash(s) not in _clean_values and (len(s) <= 256 or hash(s) not in _clean)]
    joined = "\n".join(fresh)
    findings = find_secrets(joined) if joined else []
    found = {joined[f.start:f.end] for f in findings}
    if remember:
        _remember_clean(fresh, [(f.start, f.end) for f in findings])
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
