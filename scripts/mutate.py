"""A small mutation tester: does the test suite notice when one line of a module is wrong?

It makes one mutant at a time of ONE module in a COPY of the repository, runs a targeted set
of test files against it (`pytest -x -q` with a timeout), and restores the file. A mutant is
*killed* when the tests fail, *survived* when they pass, *timeout* when the run overran.

Mutation operators (sites inside docstrings, `document({...})` calls, f-strings, `raise`
statements, decorators and annotations are never mutated):

    CMP    flip a comparison: == <-> !=, < -> >=, <= -> >, > -> <=, >= -> <, in <-> not in, is <-> is not
    IF     negate the condition of an `if`, a conditional expression or a comprehension filter
           (unless it is one comparison or a `not`, which CMP and NOT already negate)
    BOOL   True <-> False
    NOT    drop a `not`
    ANDOR  and <-> or
    DEL    delete a statement that is a bare call (`register_secret(...)`, `events.emit(...)`)
    NUM    a numeric constant n -> n+1 and n -> n-1
    RET    `return x` -> `return None`

Run it against a copy, never the working tree (tests spawn `python -m tilth`, so PYTHONPATH
is exported to them and bytecode writing is off, so a same-size mutant is never served from
a stale .pyc):

    rm -rf /tmp/mut && mkdir /tmp/mut && git archive HEAD | tar -x -C /tmp/mut
    python scripts/mutate.py --root /tmp/mut --module tilth/run/outcomes.py \\
        --tests "tests/test_crash_matrix.py tests/test_session_flow.py" --limit 40 --seed 1 \\
        --out /tmp/outcomes.jsonl

Export what CI exports (`TILTH_REQUIRE_BWRAP=1`): otherwise a mutant that makes tilth think
bubblewrap cannot run only turns the sandbox tests into skips, and survives.

`--list` prints the mutants without running anything; `--only 3,17` runs just those ids (ids
are stable for a given source file); `--limit N --seed S` samples N mutants reproducibly.
The file is restored after every mutant, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

CMP_FLIP = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE,
            ast.GtE: ast.Lt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


@dataclass
class Mutant:
    id: int
    op: str
    line: int
    start: int  # byte offsets into the source
    end: int
    before: str
    after: str


def _offsets(source: bytes) -> list[int]:
    starts, pos = [0], 0
    for line in source.splitlines(keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def _excluded_nodes(tree: ast.Module) -> set[int]:
    """ids of nodes never mutated: text for people, registries, decorators, annotations."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.JoinedStr, ast.Raise)):
            mark(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "document":
            mark(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "document":
            mark(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in node.decorator_list:
                mark(d)
            if not isinstance(node, ast.ClassDef):
                mark(node.returns)
                for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                          node.args.vararg, node.args.kwarg):
                    if a is not None:
                        mark(a.annotation)
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            mark(node)  # docstrings
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mark(node)
    return skip


def find_mutants(source: bytes) -> list[Mutant]:
    tree = ast.parse(source)
    skip = _excluded_nodes(tree)
    starts = _offsets(source)
    text = source.decode()
    found: list[tuple[str, ast.AST, str | None]] = []  # (op, node, replacement or None for unparse)

    def seg(node: ast.AST) -> str:
        return ast.get_source_segment(text, node) or ast.unparse(node)

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in CMP_FLIP:
                    new = ast.Compare(node.left, [*node.ops[:i], CMP_FLIP[type(op)](), *node.ops[i + 1:]],
                                      node.comparators)
                    found.append(("CMP", node, f"({ast.unparse(new)})"))
        conditions = [node.test] if isinstance(node, (ast.If, ast.While, ast.IfExp)) else \
            node.ifs if isinstance(node, ast.comprehension) else []
        for cond in conditions:
            # a single comparison or a `not x` is already negated by CMP or NOT
            if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and type(cond.ops[0]) in CMP_FLIP
                    or isinstance(cond, ast.UnaryOp) and isinstance(cond.op, ast.Not)):
                found.append(("IF", cond, f"(not ({seg(cond)}))"))
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            found.append(("BOOL", node, str(not node.value)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            for delta in (1, -1):
                found.append(("NUM", node, f"({node.value + delta!r})"))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            found.append(("NOT", node, f"({seg(node.operand)})"))
        if isinstance(node, ast.BoolOp):
            flipped = ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
            found.append(("ANDOR", node, f"({ast.unparse(flipped)})"))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            found.append(("DEL", node, "pass"))
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            found.append(("RET", node, "return None"))

    original = ast.dump(tree)
    mutants: list[Mutant] = []
    seen: set[bytes] = set()
    for op, node, replacement in sorted(found, key=lambda f: (f[1].lineno, f[1].col_offset, f[0], f[2])):
        start = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        mutated = source[:start] + replacement.encode() + source[end:]
        try:
            if ast.dump(ast.parse(mutated)) == original or mutated in seen:
                continue
        except SyntaxError:
            continue
        seen.add(mutated)
        before = " ".join(source[start:end].decode().split())
        mutants.append(Mutant(len(mutants), op, node.lineno, start, end, before, replacement))
    return mutants


def run_tests(root: Path, tests: list[str], timeout: float) -> tuple[str, float, str]:
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header", *tests]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return "timeout", time.monotonic() - began, out
    took = time.monotonic() - began
    status = {0: "survived", 1: "killed"}.get(proc.returncode, f"killed(exit {proc.returncode})")
    return status, took, out


def drop_bytecode(path: Path) -> None:
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, type=Path, help="a COPY of the repository")
    parser.add_argument("--module", required=True, help="path of the module to mutate, relative to --root")
    parser.add_argument("--tests", default="", help="pytest arguments, space-separated (fast killers first)")
    parser.add_argument("--limit", type=int, help="sample at most this many mutants")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="comma-separated mutant ids to run")
    parser.add_argument("--timeout", type=float, help="seconds per run (default: 3x the baseline + 30)")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--out", type=Path, help="append one JSON line per result here")
    args = parser.parse_args()

    root = args.root.resolve()
    if root == Path(__file__).resolve().parent.parent and not args.list:
        parser.error("--root is this checkout; run against a copy (see the module docstring)")
    target = root / args.module
    source = target.read_bytes()
    mutants = find_mutants(source)
    chosen = mutants
    if args.only:
        wanted = {int(i) for i in args.only.split(",")}
        chosen = [m for m in mutants if m.id in wanted]
    elif args.limit is not None and args.limit < len(mutants):
        chosen = sorted(random.Random(args.seed).sample(mutants, args.limit), key=lambda m: m.id)
    if args.list:
        for m in chosen:
            print(f"{m.id:4} {m.op:5} {args.module}:{m.line}  {m.before}  ->  {m.after}")
        print(f"{len(chosen)} of {len(mutants)} mutants")
        return 0

    tests = shlex.split(args.tests)
    drop_bytecode(target)
    status, baseline, out = run_tests(root, tests, timeout=args.timeout or 1800)
    if status != "survived":
        print(out[-3000:])
        print(f"baseline is not green ({status}); fix that first")
        return 2
    timeout = args.timeout or baseline * 3 + 30
    print(f"baseline green in {baseline:.0f}s; {len(chosen)} of {len(mutants)} mutants; timeout {timeout:.0f}s",
          flush=True)

    counts: dict[str, int] = {}
    try:
        for m in chosen:
            target.write_bytes(source[:m.start] + m.after.encode() + source[m.end:])
            drop_bytecode(target)
            try:
                status, took, out = run_tests(root, tests, timeout)
            finally:
                target.write_bytes(source)
                drop_bytecode(target)
            kind = "killed" if status.startswith("killed") else status
            counts[kind] = counts.get(kind, 0) + 1
            print(f"{m.id:4} {status:9} {took:5.0f}s {m.op:5} {args.module}:{m.line}  {m.before}  ->  {m.after}",
                  flush=True)
            if args.out:
                failed = [line for line in out.splitlines() if line.startswith(("FAILED", "ERROR"))][:3]
                with args.out.open("a") as f:
                    f.write(json.dumps({**asdict(m), "module": args.module, "status": status,
                                        "seconds": round(took, 1), "failed": failed}) + "\n")
    finally:
        target.write_bytes(source)
        drop_bytecode(target)
    print(f"{args.module}: {len(chosen)} run, " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
