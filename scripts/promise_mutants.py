"""`make mutants`: break each promise of the README and docs/ on purpose and see whether a test notices.

The breakages are a fixed list in `scripts/promise_mutants.toml` (unlike `scripts/mutate.py`'s
generic operators, each one is a promise a person relies on: the sessions hidden from the worker,
an fsync, a timed-out check refused, the lease checked before a push, ...). Each entry names the
promise in words and by its ids (`promises`), the file, an exact source edit (`old` occurs exactly
once in the file; `new` replaces it) and the tests that should catch it (AGENTS.md's module -> tests
map, narrowed to the tests that exercise the promise).

The promises themselves are marked where they are made: `<!-- promise: id -->` (or `id, id`) right
after the sentence or in the table row of README.md, docs/*.md or AGENTS.md, an HTML comment, so the rendered
page reads as before and a reworded sentence keeps its mark. `coverage_problems` holds the two
lists together: every marked promise has a breakage, or a reason under `[unbreakable]` (no source
edit can break it), or an entry under `[owed]` (a breakage not written yet, and why); every
breakage names promises that are marked.

For each entry the runner copies the tree (the files git knows, as they are in the working tree)
to a fresh directory, applies the edit there, and gives the copy a virtual environment of its own
(no pip, a `.pth` naming the copy and then this checkout's `.venv` site-packages for the
dependencies): the named tests run with that environment's python, so they and every `python -m
tilth` they spawn import the mutated copy, whatever environment a test gives its subprocesses (the
runner checks that: a python of the copy's environment started with an empty environment elsewhere
resolves `tilth` inside the copy). A mutant is *caught* when a test fails, *survived* when the
named tests pass, *skipped* when they only skipped (a skip proves nothing: counted as survived),
*timeout* when the whole run overran, *error* when the copy could not be set up (both counted
as survived). It prints a table and the share
caught, and exits 1 under `--min` percent (90).

    .venv/bin/python scripts/promise_mutants.py                 # every entry, one at a time
    .venv/bin/python scripts/promise_mutants.py --only fsync-atomic-file,lease-before-push
    .venv/bin/python scripts/promise_mutants.py --only verify-command-proves  # a promise's entries
    .venv/bin/python scripts/promise_mutants.py --list          # the entries, nothing run
    .venv/bin/python scripts/promise_mutants.py --baseline      # the named tests on the unmutated copy first

CI's switches are exported (`TILTH_REQUIRE_BWRAP=1`, `TILTH_REQUIRE_REDIS=1`), so a test that
needs bubblewrap or redis-server fails (and a mutant counts as caught) only when the tool is really
missing; the runner refuses to start without both, rather than print a false table.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import venv
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "scripts" / "promise_mutants.toml"
MARK = re.compile(r"<!-- promise: (.*?) -->")
PROMISE_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
REQUIRED_TOOLS = ("bwrap", "redis-server")


@dataclass(frozen=True)
class Breakage:
    id: str
    promise: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    promises: tuple[str, ...] = ()
    """The ids of the marked promises it breaks."""


def load(path: Path = LIST) -> list[Breakage]:
    data = tomllib.loads(path.read_text())
    return [Breakage(id=m["id"], promise=" ".join(m["promise"].split()), file=m["file"], old=m["old"],
                     new=m["new"], tests=tuple(m["tests"]), promises=tuple(m.get("promises", ())))
            for m in data["mutant"]]


def load_exempt(path: Path = LIST) -> tuple[dict[str, str], dict[str, str]]:
    """The promises without a breakage, each with its reason: `[unbreakable]` (no edit of the source
    can break it) and `[owed]` (one can, and is not written yet)."""
    data = tomllib.loads(path.read_text())
    return dict(data.get("unbreakable", {})), dict(data.get("owed", {}))


def documented(root: Path = ROOT) -> dict[str, list[str]]:
    """Every promise id marked in README.md, docs/*.md and AGENTS.md (its invariants), with where (`docs/x.md:12`)."""
    found: dict[str, list[str]] = {}
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "AGENTS.md"]:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for match in MARK.finditer(line):
                for promise in match.group(1).split(","):
                    promise = promise.strip()
                    found.setdefault(promise, []).append(f"{doc.relative_to(root)}:{number}")
    return found


def coverage_problems(breakages: list[Breakage], unbreakable: dict[str, str], owed: dict[str, str],
                      marked: dict[str, list[str]]) -> list[str]:
    """What leaves a documented promise without a breakage, or a breakage without a documented promise."""
    found = []
    broken = {p for b in breakages for p in b.promises}
    for b in breakages:
        if not b.promises:
            found.append(f"{b.id}: names no promise (promises = [...], the ids marked in README.md or docs/)")
        found += [f"{b.id}: names {p!r}, which no README.md or docs/ line marks" for p in b.promises if p not in marked]
    for promise, places in sorted(marked.items()):
        if not PROMISE_ID.fullmatch(promise):
            found.append(f"{promise!r} ({places[0]}): a promise id is lower-case words joined by '-'")
        if promise not in broken and promise not in unbreakable and promise not in owed:
            found.append(f"{promise} ({', '.join(places)}): no breakage breaks it; add one to "
                         "scripts/promise_mutants.toml, or say why under [unbreakable] or [owed]")
    for kind, table in (("unbreakable", unbreakable), ("owed", owed)):
        for promise, reason in sorted(table.items()):
            if promise not in marked:
                found.append(f"[{kind}] {promise}: no README.md or docs/ line marks it")
            if promise in broken:
                found.append(f"[{kind}] {promise}: a breakage breaks it; take it out of [{kind}]")
            if len(str(reason).split()) < 4:
                found.append(f"[{kind}] {promise}: say why in a sentence")
    return found


def problems(breakages: list[Breakage], root: Path = ROOT) -> list[str]:
    """What is wrong with the list on this tree: each `old` must occur exactly once in its file, the
    mutated file must still compile, ids must be unique, and each named test file must exist."""
    found, seen = [], set()
    for b in breakages:
        if b.id in seen:
            found.append(f"{b.id}: the id is used twice")
        seen.add(b.id)
        source_path = root / b.file
        if not source_path.is_file():
            found.append(f"{b.id}: {b.file} does not exist")
            continue
        source = source_path.read_text()
        count = source.count(b.old)
        if count != 1:
            found.append(f"{b.id}: the old text occurs {count} times in {b.file} (must be once; refresh the entry)")
            continue
        if b.old == b.new:
            found.append(f"{b.id}: old and new are the same")
        if b.file.endswith(".py"):
            try:
                compile(mutated(source, b), b.file, "exec")
            except SyntaxError as exc:
                found.append(f"{b.id}: the mutated {b.file} does not compile: {exc}")
        if not b.tests:
            found.append(f"{b.id}: no tests named")
        for test in b.tests:
            test_file = test.split("::")[0]
            if not (root / test_file).is_file():
                found.append(f"{b.id}: the test file {test_file} does not exist")
            elif "::" in test and f"def {test.split('::')[1].split('[')[0]}(" not in (root / test_file).read_text():
                found.append(f"{b.id}: {test} names no test function in {test_file}")
    return found


def mutated(source: str, b: Breakage) -> str:
    return source.replace(b.old, b.new, 1)


def copy_tree(source: Path, dest: Path) -> None:
    """The files git knows (tracked and untracked, not ignored), as they are in the working tree."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=source,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = source / name
        if not src.is_file() and not src.is_symlink():
            continue  # deleted in the working tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)
    os.chmod(dest, 0o755)  # tests that run tilth as an unprivileged user must be able to import it


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"TILTH_REQUIRE_BWRAP": "1", "TILTH_REQUIRE_REDIS": "1"})
    return env


def make_venv(copy: Path) -> Path:
    """The copy's own environment: its python imports tilth from the copy (first on the path, with
    no editable-install finder), everything else from this checkout's environment. Returns its python."""
    venv_dir = copy / ".mutant-venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(venv_dir)
    site = next((venv_dir / "lib").glob("python3*/site-packages"))
    deps = next(Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (site / "mutant.pth").write_text(f"{copy}\n{deps}\n")
    return venv_dir / "bin" / "python"


def imports_copy(python: Path, copy: Path) -> bool:
    """A python of the copy's environment with nothing in its environment, started elsewhere, imports the copy."""
    probe = subprocess.run([str(python), "-c", "import tilth, sys; sys.stdout.write(tilth.__file__)"],
                           env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, cwd="/", capture_output=True, text=True)
    return probe.returncode == 0 and Path(probe.stdout).resolve().is_relative_to(copy.resolve())


@dataclass
class Outcome:
    id: str
    result: str  # caught, survived, skipped, timeout
    seconds: float
    detail: str


def run_tests(copy: Path, tests: tuple[str, ...], timeout: float, per_test: int) -> tuple[str, str]:
    python = make_venv(copy)
    if not imports_copy(python, copy):
        return "error", "the copy's python does not import tilth from the copy"
    report = copy / ".mutant-junit.xml"
    argv = [str(python), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", f"--timeout={per_test}",
            f"--junitxml={report}", *tests]
    try:
        done = subprocess.run(argv, cwd=copy, env=environment(), capture_output=True, text=True, timeout=timeout,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        return "timeout", f"over {timeout:.0f} s"
    finally:
        sweep(copy)
    if not report.exists():
        return "caught", f"pytest exit {done.returncode}, no report: {done.stderr.strip()[-200:]}"
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    total, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
    if failed:
        first = next((case for case in suite.iter("testcase") if case.find("failure") is not None
                      or case.find("error") is not None), None)
        if first is None:
            return "caught", "? failed"
        why = first.find("failure") if first.find("failure") is not None else first.find("error")
        said = " ".join((why.get("message") or "").split())[:160]
        return "caught", f"{first.get('name')} failed: {said}"
    if done.returncode not in (0, 5) and total == 0:
        return "caught", f"pytest exit {done.returncode}: {done.stdout.strip()[-200:]}"
    if total == skipped:
        return "skipped", f"{skipped} skipped, none ran"
    return "survived", f"{total - skipped} passed"


def sweep(copy: Path) -> None:
    """Kill whatever the mutant's run left behind: every process started from the copy's python or inside
    the copy (daemons and workers start sessions of their own, so the run's process group misses them),
    so no mutated worker lives on to answer the next mutant's broker or hold a core."""
    mine, marker = os.getpid(), str(copy).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == mine:
            continue
        try:
            started_there = marker in (proc / "cmdline").read_bytes() or \
                os.readlink(proc / "cwd").startswith(str(copy))
        except OSError:
            continue
        if started_there:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def run_one(b: Breakage, base: Path, work: Path, timeout: float, per_test: int, apply: bool = True) -> Outcome:
    copy = work / b.id
    shutil.copytree(base, copy, symlinks=True)
    if apply:
        target = copy / b.file
        target.write_text(mutated(target.read_text(), b))
    started = time.monotonic()
    try:
        result, detail = run_tests(copy, b.tests, timeout, per_test)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return Outcome(b.id, result, time.monotonic() - started, detail)


def table(breakages: list[Breakage], outcomes: dict[str, Outcome]) -> str:
    rows = [("id", "result", "s", "file", "detail")]
    for b in breakages:
        o = outcomes[b.id]
        rows.append((b.id, o.result, f"{o.seconds:.0f}", b.file.removeprefix("tilth/"), o.detail[:120]))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the entries and run nothing")
    ap.add_argument("--only", default="", help="comma-separated ids of entries or of promises (their entries)")
    ap.add_argument("--jobs", "-j", type=int, default=1, help="mutants run at once (default 1: the machine is shared)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per mutant's whole test run")
    ap.add_argument("--per-test", type=int, default=300, help="pytest-timeout per test")
    ap.add_argument("--min", type=float, default=90.0, help="exit 1 under this percentage caught")
    ap.add_argument("--baseline", action="store_true", help="first run each entry's tests unmutated; they must pass")
    args = ap.parse_args(argv)

    breakages = load()
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {b.id for b in breakages} - {p for b in breakages for p in b.promises}
        if unknown:
            print(f"promise_mutants: no entry or promise named {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        breakages = [b for b in breakages if b.id in wanted or wanted & set(b.promises)]
    wrong = problems(breakages)
    if wrong:
        print("promise_mutants: the list does not fit this tree:\n  " + "\n  ".join(wrong), file=sys.stderr)
        return 2
    if args.list:
        for b in breakages:
            print(f"{b.id}  {b.file}  [{', '.join(b.promises)}]\n    {b.promise}\n    tests: {' '.join(b.tests)}")
        return 0
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        print(f"promise_mutants: {', '.join(missing)} not on PATH (make redis; apt install bubblewrap): "
              "the tests that need them would fail and count as catches", file=sys.stderr)
        return 2

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the copies are removed on the way out
    with tempfile.TemporaryDirectory(prefix="tilth-mutants-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        base = work / "base"
        copy_tree(ROOT, base)
        if args.baseline:
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                clean = list(pool.map(lambda b: run_one(b, base, work, args.timeout, args.per_test, apply=False),
                                      breakages))
            broken = [o for o in clean if o.result != "survived"]
            for o in broken:
                print(f"baseline: {o.id}: the named tests do not pass unmutated ({o.result}: {o.detail})")
            if broken:
                return 2
        outcomes: dict[str, Outcome] = {}

        def one(b: Breakage) -> Outcome:
            o = run_one(b, base, work, args.timeout, args.per_test)
            print(f"{o.id}: {o.result} ({o.seconds:.0f} s) {o.detail}", flush=True)
            return o

        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for o in pool.map(one, breakages):
                outcomes[o.id] = o
    caught = sum(o.result == "caught" for o in outcomes.values())
    share = 100.0 * caught / len(breakages) if breakages else 100.0
    print()
    print(table(breakages, outcomes))
    print(f"\n{caught} of {len(breakages)} breakages caught ({share:.0f}%), "
          f"{time.monotonic() - started:.0f} s; survivors: "
          f"{', '.join(o.id for o in outcomes.values() if o.result != 'caught') or 'none'}")
    return 0 if share >= args.min else 1


if __name__ == "__main__":
    sys.exit(main())
