"""Which tests a command's output says failed, per test runner, and the part of that output a person
or a model is shown: whole lines, the ones naming those tests kept.

Read from each runner's standard output (the runners whose format is found all count, so a `make
test` running two of them names both):
- pytest: the short test summary (`FAILED <id>` / `ERROR <id>` / `SUBFAILED(<params>) <id>` under
  `short test summary info`; `-rA`, `-rfE` or the default; a failing subtest counts as its test);
- unittest: the `FAIL: <name> (<id>)` / `ERROR: ...` headings under a line of `=`, given its
  `Ran N tests` line (a subtest counts as its test);
- cargo test: `test <name> ... FAILED`, given a `test result:` line;
- TAP (`node --test` before Node 23, bats, prove): `not ok N - <name>` but for `# TODO`/`# SKIP`,
  given a `TAP version` line; a subtest (indented under `# Subtest: <name>`) is `<parent> > <name>`,
  and a parent failing only through such a subtest is not named again."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from tilth.store.ledger import CommandRun

_PYTEST_SUMMARY = re.compile(r"^=+ short test summary info =+$", re.M)
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR|SUBFAILED\(.*?\)) (.+?)(?: - .*)?$", re.M)
_UNITTEST_RAN = re.compile(r"^Ran \d+ tests? in ", re.M)
_UNITTEST_FAILED = re.compile(r"^={70}\n(?:FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([^)\s]+)\)", re.M)
_CARGO_RESULT = re.compile(r"^test result: ", re.M)
_CARGO_FAILED = re.compile(r"^test (.+) \.\.\. FAILED$", re.M)
_TAP_VERSION = re.compile(r"^TAP version \d+$", re.M)
_TAP_LINE = re.compile(r"^( *)(?:# Subtest: (.+)|not ok \d+(?: -)? ?(.*?))\s*$")
_TAP_DIRECTIVE = re.compile(r"\s#\s*(?:TODO|SKIP)\b.*$", re.I)
PARSED_CHARS = 400_000
"""How much of a command's output is read for failing test ids (a runner's summary comes last)."""
SHOWN_IDS = 10
"""How many ids a verdict or a report line names before `and N more`."""


def pytest_ids(output: str) -> set[str] | None:
    summary = list(_PYTEST_SUMMARY.finditer(output))
    if not summary:
        return None
    return {m.group(1).strip() for m in _PYTEST_FAILED.finditer(output, summary[-1].end())}


def unittest_ids(output: str) -> set[str] | None:
    if not _UNITTEST_RAN.search(output):
        return None
    # Python 3.11 writes `test_x (pkg.Class.test_x)`, older ones `test_x (pkg.Class)`.
    return {where if where.endswith(f".{name}") else f"{where}.{name}"
            for name, where in _UNITTEST_FAILED.findall(output)}


def cargo_ids(output: str) -> set[str] | None:
    if not _CARGO_RESULT.search(output):
        return None
    return set(_CARGO_FAILED.findall(output))


def tap_ids(output: str) -> set[str] | None:
    if not _TAP_VERSION.search(output):
        return None
    parents: list[str] = []
    ids: set[str] = set()
    for line in output.splitlines():
        if not (m := _TAP_LINE.match(line)):
            continue
        depth = len(m.group(1)) // 4
        if m.group(2) is not None:
            parents[depth:] = [m.group(2).strip()]
        elif not _TAP_DIRECTIVE.search(line):
            ids.add(" > ".join([*parents[:depth], m.group(3).strip()]))
    return {i for i in ids if not any(other.startswith(f"{i} > ") for other in ids)}


RUNNERS: dict[str, Callable[[str], set[str] | None]] = {"pytest": pytest_ids, "unittest": unittest_ids,
                                                        "cargo test": cargo_ids, "tap": tap_ids}


def failing_ids(output: str, exit_code: int | None) -> list[str] | None:
    """The failing test ids the output names, sorted; [] for a pass; None when it names none (no
    runner's format found, or none of them names a failing test)."""
    if exit_code == 0:
        return []
    ids: set[str] = set()
    for read in RUNNERS.values():
        ids |= read(output) or set()
    return sorted(ids) or None


def listed(ids: Sequence[str], limit: int = SHOWN_IDS) -> str:
    """`a, b, c`, or the first `limit` and `and N more`."""
    more = f", and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def _naming_line(lines: list[str], test_id: str) -> int | None:
    """The last line naming the test (a runner's summary comes last); by its last name when no line
    holds the whole id (an older unittest's `test_x (pkg.Class)`)."""
    short = re.split(r"::|\.| > ", test_id)[-1]
    for wanted in (test_id, short):
        found = next((i for i in range(len(lines) - 1, -1, -1) if wanted in lines[i]), None)
        if found is not None:
            return found
    return None


def excerpt(output: str, ids: Sequence[str], limit: int) -> str:
    """Whole lines of `output` in about `limit` characters: the line naming each of `ids` (within
    half the budget, the first ids first), then the last lines that fit, in their order, each gap
    marked. Only a last line longer than the whole budget is cut (its end kept)."""
    lines = output.rstrip("\n").split("\n")
    if len(output) <= limit:
        return output
    kept: set[int] = set()
    used = 0
    for test_id in ids:
        at = _naming_line(lines, test_id)
        if at is not None and at not in kept and used + len(lines[at]) + 1 <= limit // 2:
            kept.add(at)
            used += len(lines[at]) + 1
    for at in range(len(lines) - 1, -1, -1):
        if at in kept:
            continue
        if used + len(lines[at]) + 1 > limit:
            if not kept:
                kept.add(at)
                lines[at] = "…" + lines[at][-(limit - 1):]
            break
        kept.add(at)
        used += len(lines[at]) + 1
    shown: list[str] = []
    previous = -1
    for at in sorted(kept):
        if at > previous + 1:
            gap = at - previous - 1
            shown.append(f"[... {gap} line{'s' if gap > 1 else ''} not shown ...]")
        shown.append(lines[at])
        previous = at
    return "\n".join(shown)


def head_lines(text: str, limit: int) -> str:
    """The whole lines of `text` that fit in `limit` characters from its start, and a marker for the
    rest; a first line longer than that is cut at `limit`."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    if cut <= 0:
        return text[:limit] + "…"
    rest = len(text[cut + 1:].rstrip("\n").split("\n"))
    return text[:cut] + f"\n[... {rest} more line{'s' if rest > 1 else ''} not shown ...]"


def how_it_failed(run: CommandRun, status: str | None = None) -> str:
    """What a command tilth ran did, its failing tests named and held against the base commit:
    `exit 0`, `timed out`, `exit 1; failing: a, b`, `exit 1; newly failing: a; failing before this
    session too (not blocking): b`, `exit 1; failing at the base commit too` (nothing to compare);
    `status` in place of `exit N` / `timed out`."""
    if run.passed:
        return status or run.status
    parts = [status or run.status]
    if run.failed_at_base and not run.compared:
        parts.append("failing at the base commit too")
    if run.compared:
        if new := run.newly_failing:
            parts.append(f"newly failing: {listed(new)}")
        if run.failing_before:
            parts.append(f"failing before this session too (not blocking): {listed(run.failing_before)}")
    elif run.failing_ids:
        parts.append(f"failing: {listed(run.failing_ids)}")
    return "; ".join(parts)
