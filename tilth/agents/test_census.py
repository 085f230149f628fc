"""The guard's test census: the test ids a tree holds, listed by the runners the session's checks use
(pytest: `--collect-only`, nothing run; unittest: its discovery, listed), confined exactly like the
checks, in a copy of the tree (`run/test_count.py` writes the copies and compares them); and which
tests a skip marker added in the diff covers (`skipped_tests`, read from the file's syntax tree).

A runner is found in a check command (`runners`): `pytest`, `py.test`, `python -m pytest` (after a
`cd DIR &&`, `VAR=value` or `uv run`/`poetry run` prelude, kept), `python -m unittest [discover ...]`;
anything else (`make test`, `tox`) has no census. A listing that cannot be read whole (an unusable
option, a timeout, fewer ids than the runner counted) is no census: nothing is refused by it.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal

from tilth.agents.confinement import Confinement
from tilth.agents.sandbox import amend
from tilth.agents.tools.shell import run_command

RUNNER_FILES = frozenset({"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"})
"""Files that change what a runner collects besides the test files themselves."""
LISTING_CHARS = 5_000_000
"""How much of a listing is read: a suite of ~50,000 tests."""

_PRELUDE = r"(?P<pre>(?:\s*cd\s+[^\s;&|]+\s*&&|\s*[A-Za-z_][A-Za-z0-9_]*=\S*|\s*(?:uv|poetry|pdm|pipenv|hatch)\s+run)*\s*)"
_PYTHON = r"(?:\S*/)?python(?:3(?:\.\d+)?)?"
_PYTEST = re.compile(rf"^{_PRELUDE}(?P<runner>{_PYTHON}\s+-m\s+pytest|(?:\S*/)?py\.?test)(?=\s|$)(?P<args>[^;&|]*)")
_UNITTEST = re.compile(rf"^{_PRELUDE}(?P<runner>{_PYTHON})\s+-m\s+unittest(?=\s|$)(?P<args>[^;&|]*)")
_DROPPED = re.compile(r"^(-q+|-v+|--quiet|--verbose|--lf|--last-failed|--ff|--failed-first|--sw|--stepwise"
                      r"|--cov.*|--no-cov|-n\d*|--numprocesses.*|--collect-only|--co|-x|--exitfirst)$")
_WITH_VALUE = {"-n", "--numprocesses", "--cov", "--cov-report", "--maxfail"}
_CD = re.compile(r"\bcd\s+([^\s;&|]+)\s*&&")
_COLLECTED = re.compile(r"^(\d+)(?:/\d+)? tests? collected|^(\d+) tests? selected|^no tests (?:ran|collected)", re.M)
_ERROR = re.compile(r"^ERROR (\S+)", re.M)
_SUMMARY = re.compile(r"^=+ short test summary info =+$", re.M)

# Lists every test unittest would load, one `TILTH-TEST <id> <file>` line each, then the count.
_LISTING = """
import json, os, sys, unittest
args = json.loads(sys.argv[1])
sys.path.insert(0, os.getcwd())
loader = unittest.TestLoader()
if args["names"]:
    suite = loader.loadTestsFromNames(args["names"])
else:
    suite = loader.discover(args["start"], args["pattern"], args["top"])
def walk(s):
    for t in s:
        yield from (walk(t) if isinstance(t, unittest.TestSuite) else [t])
n = 0
for t in walk(suite):
    module = sys.modules.get(type(t).__module__)
    where = getattr(module, "__file__", None) or ""
    print("TILTH-TEST", t.id(), os.path.relpath(where) if where else "", sep="\\t")
    n += 1
print("TILTH-COUNT", n, sep="\\t")
"""


@dataclass(frozen=True)
class Runner:
    kind: Literal["pytest", "unittest"]
    collect: str
    """The shell command, run at a tree's root, that lists the ids."""
    cd: str = ""
    """The directory the check changes into first: pytest's ids are relative to it (or to the root)."""
    source: str = ""
    """The check command it was found in."""


@dataclass(frozen=True)
class Collection:
    ids: dict[str, str]
    """Each test id -> its file, a repository path."""
    broken: tuple[str, ...] = ()
    """Files that failed to collect (an import error): their ids are unknown."""


@dataclass(frozen=True)
class Counted:
    """What the census found in an attempt's diff, for `agents/guard.refusals`."""

    lost: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Repository path -> the test ids collected on the task's starting point and no longer."""
    skipped: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Repository path -> the tests a skip marker the diff adds there covers."""
    compared: int = 0
    """How many test ids were collected on the starting point (0: no collection compared)."""


def runners(commands: Iterable[str]) -> list[Runner]:
    """The runners the commands use, each listing command once."""
    found: dict[str, Runner] = {}
    for command in commands:
        runner = _pytest(command) or _unittest(command)
        if runner is not None:
            found.setdefault(runner.collect, runner)
    return list(found.values())


def _cd(pre: str) -> str:
    dirs = _CD.findall(pre)
    return str(Path(*dirs)) if dirs else ""


def _args(text: str) -> list[str] | None:
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    kept: list[str] = []
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
            continue
        if re.match(r"^\d*>", word):
            break  # a redirection: the rest is the shell's
        if word in _WITH_VALUE:
            skip_next = True
            continue
        if not _DROPPED.match(word):
            kept.append(word)
    return kept


def _pytest(command: str) -> Runner | None:
    match = _PYTEST.match(command)
    if match is None or (args := _args(match["args"])) is None:
        return None
    line = f"{match['pre']}{match['runner']} {' '.join(shlex.quote(a) for a in args)}".rstrip()
    return Runner("pytest", f"{line} --collect-only --verbosity=-1", _cd(match["pre"]), command)


def _split(args: list[str], valued: set[str]) -> tuple[dict[str, str], list[str | None]]:
    """Options that take a value (`-s DIR`, `--pattern=P`) and the positional arguments."""
    flags: dict[str, str] = {}
    positional: list[str | None] = []
    words = iter(args)
    for word in words:
        name, eq, value = word.partition("=")
        if name in valued:
            flags[name] = value if eq else next(words, "")
        elif not word.startswith("-"):
            positional.append(word)
    return flags, positional


def _unittest(command: str) -> Runner | None:
    match = _UNITTEST.match(command)
    if match is None or (args := _args(match["args"])) is None:
        return None
    flags, positional = _split(args, {"-s", "--start-directory", "-p", "--pattern", "-t", "--top-level-directory",
                                      "-k"})
    options: dict[str, object] = {"names": []}
    if not positional or positional[0] == "discover":
        rest = positional[1:] + [None] * 3
        options["start"] = flags.get("-s", flags.get("--start-directory", rest[0] or "."))
        options["pattern"] = flags.get("-p", flags.get("--pattern", rest[1] or "test*.py"))
        options["top"] = flags.get("-t", flags.get("--top-level-directory", rest[2]))
    else:
        options["names"] = positional
    listing = f"{match['pre']}{match['runner']} -c {shlex.quote(_LISTING)} {shlex.quote(json.dumps(options))}"
    return Runner("unittest", listing, _cd(match["pre"]), command)


def collect(runner: Runner, tree: Path, sandbox: Confinement, timeout: float) -> Collection | None:
    """The tree's test ids by `runner`, listed confined as the checks run (the tree's copy writable, so
    a runner's caches stay in it); None when the listing is not whole."""
    wrapper = amend(sandbox.wrapper, tree, writable=[tree])
    env = {**sandbox.env, "PYTHONDONTWRITEBYTECODE": "1"}
    outcome = run_command(f"cd {shlex.quote(str(tree))} && {runner.collect}", tree, timeout=timeout,
                          max_output=LISTING_CHARS, env=env, wrapper=wrapper, max_processes=sandbox.max_processes)
    if outcome.timed_out:
        return None
    read = read_pytest if runner.kind == "pytest" else read_unittest
    listed = read(outcome.output, outcome.exit_code)
    if listed is None:
        return None
    ids, broken = listed
    return Collection({test: _file_of(test, where, runner, tree) for test, where in ids.items()}, tuple(broken))


def read_pytest(output: str, exit_code: int) -> tuple[dict[str, str], list[str]] | None:
    """`{id: its file as pytest names it}` and the files that failed to collect, from `--collect-only
    --verbosity=-1`: the ids come one a line before the first blank line, the count after."""
    if exit_code not in (0, 1, 2, 5):
        return None
    head = output.split("\n\n", 1)[0]
    ids = {line: line.split("::", 1)[0] for line in head.splitlines() if "::" in line and not line.startswith(" ")}
    counted = _COLLECTED.search(output)
    if counted is None:
        return None
    number = int(counted[1] or counted[2] or 0)
    if number != len(ids):
        return None  # cut short, or a format this reader does not know
    summary = list(_SUMMARY.finditer(output))
    broken = sorted({m[1] for m in _ERROR.finditer(output, summary[-1].end())}) if summary else []
    return ids, broken


def read_unittest(output: str, exit_code: int) -> tuple[dict[str, str], list[str]] | None:
    """The listing script's lines; a module that failed to import is a `unittest.loader._FailedTest`."""
    if exit_code != 0:
        return None
    ids: dict[str, str] = {}
    broken: list[str] = []
    count = None
    for line in output.splitlines():
        parts = line.split("\t")
        if parts[0] == "TILTH-TEST" and len(parts) == 3:
            if parts[1].startswith("unittest.loader."):
                broken.append(parts[1].rsplit(".", 1)[-1])
            else:
                ids[parts[1]] = parts[2]
        elif parts[0] == "TILTH-COUNT" and len(parts) == 2 and parts[1].isdigit():
            count = int(parts[1])
    if count is None or count != len(ids) + len(broken):
        return None
    return ids, broken


def _file_of(test: str, where: str, runner: Runner, tree: Path) -> str:
    """A test's file as a repository path: pytest names it relative to its rootdir (the root or the
    check's `cd` directory), the listing relative to where it ran."""
    for candidate in ([str(Path(runner.cd) / where)] if runner.cd else []) + [where]:
        if (tree / candidate).is_file():
            return Path(candidate).as_posix()
    return where


def lost(before: Collection, after: Collection) -> dict[str, tuple[str, ...]]:
    """Repository path -> the ids collected before and not after (a file that failed to collect
    before tells nothing, so nothing of it is lost)."""
    gone: dict[str, list[str]] = {}
    for test, where in before.ids.items():
        if test not in after.ids and where not in before.broken:
            gone.setdefault(where, []).append(test)
    return {where: tuple(sorted(ids)) for where, ids in sorted(gone.items())}


def skipped_tests(path: str, source: str, lines: Iterable[int]) -> list[str] | None:
    """The tests a skip marker on `lines` (1-based) of the file covers, as `path::Class::test`
    qualifiers (`path` alone: the whole module); None when the file does not parse."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    spans: list[tuple[int, int, ast.AST]] = []
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans.append((first, node.end_lineno or node.lineno, node))
    found: list[str] = []
    for line in sorted(set(lines)):
        chain = sorted(((s, -e, n) for s, e, n in spans if s <= line <= e), key=lambda x: (x[0], x[1]))
        parts: list[str] = []
        for _, _, node in chain:
            parts.append(node.name)  # type: ignore[attr-defined]
            if not isinstance(node, ast.ClassDef):
                break  # a test is its class(es) and its function; what is nested inside is the test's
        qualifier = "::".join([path, *parts])
        if qualifier not in found:
            found.append(qualifier)
    return found


def named(qualifiers: Iterable[str], path: str, collection: Collection | None) -> list[str]:
    """The collected ids each qualifier covers (a parametrized test's every case, a class's tests, a
    module's), in the runner's own form; the qualifier itself when none is collected."""
    ids = [test for test, where in collection.ids.items() if where == path] if collection else []
    out: list[str] = []
    for qualifier in qualifiers:
        parts = qualifier.split("::")[1:]
        dotted = "." + ".".join(parts) if parts else ""
        covered = [t for t in ids if t == qualifier or t.startswith((qualifier + "[", qualifier + "::"))
                   or (dotted and (t.endswith(dotted) or dotted + "." in t)) or not parts]
        out += [t for t in (covered or [qualifier]) if t not in out]
    return out
