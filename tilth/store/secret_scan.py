"""Find secrets in text with detect-secrets' detectors: where each is and what kind.

detect-secrets is imported on first use (about 0.3 s), so only a process that scans pays for it;
`requests`, which its plugins import for `verify` alone, is never loaded (`core/deferred.py`).
Its plugins are used directly, never its `scan_*` entry points: those keep global settings, and a
plugin's `verify` would send a found key to its provider; here nothing found ever leaves the process.

Which detectors, and why (AGENTS.md, Dependencies):
- every format detector (`RegexBasedDetector`: GitHub, GitLab, AWS key ids and quoted secret keys,
  Slack, Stripe, OpenAI, JWT, private key headers, credentials in URLs, ...), whichever this
  version of detect-secrets ships, except the public-IP one (an address is not a secret);
- the keyword detector (`password=`, `secret:`, `api_key = "..."`, quoted or not) only where the
  value it names is one token that detect-secrets' own entropy plugins also call random
  (base64 charset above 4.5 bits, hex above 3.0): alone it flags every `password = "test"`
  fixture, so a worker reading such a test would see it redacted and could not edit it;
- the high-entropy plugins never alone: hashes, lock-file integrity lines and base64 fixtures
  are random too, and would be redacted and refused all over ordinary code.
A keyword value must also pass the heuristic filters detect-secrets applies to every scan
(sequential strings, UUIDs, `${templates}`, `$VARIABLES`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator

from tilth.core.deferred import defer

SKIPPED = {"IPPublicDetector"}
"""Format detectors left out: an IP address is not a secret."""
MIN_GROUP = 8
"""A detector's capture group shorter than this is a prefix (`ghp`), not the secret: the whole match is."""
_HINT = re.compile(r"key|pw|pass|secret|token|contrase")
"""A line without any of these has no keyword finding, nor one of detect-secrets' assignment regexes
(`build_assignment_regex`: an optional prefix, then a secret keyword among these, then the value),
so those run only on the lines that have one: most of the scan's time is theirs otherwise."""
_ASSIGNMENT_START = r"(?:(?<=\W)|(?<=^))"
KEYWORD_WINDOW = 300
"""The keyword detector's regexes backtrack badly on long lines (minified code, one-line JSON): on a
line longer than this, each keyword is looked at with this many characters either side."""
_PRIVATE_KEY_END = re.compile(r"-----END[A-Z ]*PRIVATE KEY[A-Z ]*-----|---- END SSH2[A-Z ]*----")


@dataclass(frozen=True)
class Finding:
    kind: str
    """The detector's name for it (`GitHub Token`, `AWS Access Key`, `Secret Keyword`, ...)."""
    start: int
    end: int
    """Where the secret is in the text scanned (a private key: from its header to its END line)."""


@lru_cache(maxsize=1)
def _detectors() -> tuple[list[tuple[str, re.Pattern[str], bool]], Any, Any, Any, tuple[Any, ...]]:
    defer("requests", annotation_only=("Response",))  # its plugins use it in `verify` alone, never called
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.filters import heuristic
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString

    mapping: dict[str, Any] = get_mapping_from_secret_type_to_class()
    formats = [(kind, regex, regex.pattern.startswith(_ASSIGNMENT_START))
               for kind, cls in mapping.items()
               if issubclass(cls, RegexBasedDetector) and cls.__name__ not in SKIPPED
               and cls.__module__.startswith("detect_secrets.plugins.")  # never a custom plugin file
               for regex in cls().denylist]
    keyword_regexes = {**keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP, **keyword.CONFIG_DENYLIST_REGEX_TO_GROUP}
    denylist = re.compile(keyword.DENYLIST_REGEX.lower())
    filters = (heuristic.is_sequential_string, heuristic.is_potential_uuid, heuristic.is_templated_secret,
               heuristic.is_prefixed_with_dollar_sign)
    return formats, (keyword.KeywordDetector(), keyword_regexes, denylist), Base64HighEntropyString(), \
        HexHighEntropyString(), filters


def load() -> None:
    """Import the detectors now (a benchmark's warm-up; otherwise the first scan does it)."""
    _detectors()


def find_secrets(text: str) -> list[Finding]:
    """Every secret the detectors see in `text`, in order, overlaps merged."""
    formats, (keyword, keyword_regexes, denylist), base64, hexa, filters = _detectors()
    lowered = text.lower()  # searched in lower case: ten times faster than IGNORECASE
    if len(lowered) != len(text):  # a character whose lower case is longer: offsets would drift
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    spans: list[Finding] = []
    hinted = _lines_with(text, lowered, _HINT)
    for kind, regex, needs_hint in formats:
        for offset, line in (hinted if needs_hint else [(0, text)]):
            for match in regex.finditer(line):
                start, end = _secret_span(match)
                if kind == "Private Key" and (tail := _PRIVATE_KEY_END.search(text, offset + end)):
                    end = tail.end() - offset
                spans.append(Finding(kind, offset + start, offset + end))
    for offset, part in _lines_with(text, lowered, denylist, KEYWORD_WINDOW):
        spans += _keyword_findings(part, offset, keyword, keyword_regexes, base64, hexa, filters)
    return _merged(spans)


def _lines_with(text: str, lowered: str, regex: re.Pattern[str], window: int | None = None) -> list[tuple[int, str]]:
    """(offset, line) of each line where `regex` matches `lowered`, each once; with `window`, a line
    longer than it is cut to `window` characters either side of each match instead."""
    parts, last = [], -1
    for hit in regex.finditer(lowered):
        if hit.start() <= last:
            continue
        start = text.rfind("\n", 0, hit.start()) + 1
        end = text.find("\n", hit.end())
        end = len(text) if end < 0 else end
        if window is not None and end - start > window:
            start, end = max(start, hit.start() - window), min(end, hit.end() + window)
        last = end if window is None else hit.end()
        parts.append((start, text[start:end]))
    return parts


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    groups = [i for i in range(1, (match.re.groups or 0) + 1) if match.group(i)]
    best = max(groups, key=lambda i: len(match.group(i)), default=None)
    if best is not None and len(match.group(best)) >= MIN_GROUP:
        return match.span(best)
    return match.span()


def _keyword_findings(line: str, offset: int, keyword: Any, regexes: dict[Any, Any], base64: Any, hexa: Any,
                      filters: tuple[Any, ...]) -> Iterator[Finding]:
    for value in keyword.analyze_string(line, regexes):
        token = value.split()[0].strip("'\"`,;") if value.split() else ""
        if token and _random(token, base64, hexa) and not any(f(token) for f in filters):
            at = line.find(token)
            if at >= 0:
                yield Finding(keyword.secret_type, offset + at, offset + at + len(token))


def _random(token: str, base64: Any, hexa: Any) -> bool:
    if all(c in hexa.charset for c in token):
        return bool(hexa.calculate_shannon_entropy(token) > hexa.entropy_limit)
    return bool(base64.calculate_shannon_entropy(token) > base64.entropy_limit)


def _merged(found: list[Finding]) -> list[Finding]:
    out: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.start, -f.end)):
        if out and f.start < out[-1].end:
            if f.end > out[-1].end:
                out[-1] = Finding(out[-1].kind, out[-1].start, f.end)
            continue
        out.append(f)
    return out


def redacted(text: str, mark: str, json_safe: bool = False) -> str:
    """`text` with every finding replaced by `mark`; `json_safe`: each cut short before a quote or a
    backslash, so an escape sequence of a JSON string is never split."""
    found = find_secrets(text)
    if not found:
        return text
    parts, at = [], 0
    for f in found:
        end = f.end
        if json_safe:
            end = min([i for i in (text.find("\\", f.start, end), text.find('"', f.start, end)) if i >= 0] or [end])
        if end > f.start:
            parts += [text[at:f.start], mark]
            at = end
    parts.append(text[at:])
    return "".join(parts)
