"""`tilth plan edit [id]`: edit a copy of a session's live prd.json in $EDITOR, saved through
`actions/planning.replace_plan`;
`tilth plan check FILE|DIR`: errors (exit 2) and warnings of a plan in any format tilth reads;
`tilth import FILE|DIR`: a plan written for another tool as tilth's prd.json; and the plan
`tilth start --prd` runs (the same formats, converted, saying which)."""

from __future__ import annotations

import argparse
import os

from tilth.cli.pick import ID_HELP, pick_session
from tilth.core.errors import BadInput

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (~5 ms of a cold start)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Callable

    from tilth.actions.acted import Acted
    from tilth.core.config import Settings
    from tilth.store.home import SessionPaths


def edit_plan(paths: SessionPaths, editor: str) -> Acted:
    """Open a copy of the plan in the editor; the saved copy goes to `actions/planning.replace_plan`,
    and is left for the person when it is refused."""
    import shlex
    import subprocess
    import tempfile
    from pathlib import Path

    from tilth.actions.planning import replace_plan

    live = paths.prd
    before = live.read_bytes()
    fd, name = tempfile.mkstemp(prefix=f"tilth-{live.parent.name}-prd-", suffix=".json")
    copy = Path(name)
    keep = False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(before)
        try:
            subprocess.run([*shlex.split(editor), str(copy)], check=False)
        except OSError as exc:
            raise BadInput(f"cannot run the editor {editor!r} ($EDITOR): {exc.strerror}; the plan is unchanged") from None
        try:
            return replace_plan(paths.home, paths.id, copy.read_bytes(), expected=before, by="cli")
        except BadInput as exc:
            keep = True
            raise BadInput(f"{exc}, your edit is in {copy}") from None
    finally:
        if not keep:
            copy.unlink(missing_ok=True)


def cmd_plan(args: argparse.Namespace) -> int:
    from tilth.cli.show_acted import show

    paths, _ = pick_session(args.id)
    return show(edit_plan(paths, os.environ.get("EDITOR") or "vi"))


def said(line: str) -> None:
    import sys

    print(f"plan: {line}", file=sys.stderr, flush=True)


def cmd_check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tilth.cli.plan_check import lint
    from tilth.cli.plan_import import read_plan
    from tilth.store.prd import parse_plan

    path = Path(args.file).expanduser()
    plan = read_plan(path)
    if plan.fmt != "tilth":
        said(plan.said)
    warnings = lint(parse_plan(plan.data, str(path)))
    for warning in warnings:
        print(warning)
    count = f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''}" if warnings else "no warnings"
    print(f"{path}: valid, {plan.count} task{'s' if plan.count != 1 else ''}, {count}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from tilth.cli.plan_import import read_plan
    from tilth.store.jsonio import write_atomic

    source = Path(args.source).expanduser()
    plan = read_plan(source)
    said(plan.said)
    if args.out is None or args.out == "-":
        sys.stdout.write(plan.data.decode())
        return 0
    out = Path(args.out).expanduser()
    if out.exists() and source.exists() and out.resolve() == source.resolve():
        raise BadInput(f"--out {out} is the file being imported; write the plan somewhere else")
    if out.exists() and not args.force:
        raise BadInput(f"--out {out} exists; pass --force to replace it")
    write_atomic(out, plan.data)
    print(f"wrote {out}: {plan.count} task{'s' if plan.count != 1 else ''} (check it with `tilth plan check {out}`)")
    return 0


def plan_for_start(prd: Path) -> tuple[Path, Callable[[], None]]:
    """The prd.json file `tilth start --prd` hands on, and what to call once the session exists: the
    file itself when it is tilth's own (or missing: `start` says so), a directory's prd.json, else
    the plan converted into a temp file (removed by the call)."""
    import shutil
    import tempfile
    from pathlib import Path

    from tilth.cli.plan_import import read_plan

    if prd.is_dir() and (prd / "prd.json").is_file():
        said(f"read {prd / 'prd.json'}")
        return prd / "prd.json", lambda: None
    if not prd.exists():
        return prd, lambda: None
    plan = read_plan(prd)
    if plan.fmt == "tilth":
        return prd, lambda: None
    said(plan.said)
    tmp = tempfile.mkdtemp(prefix="tilth-plan-")
    converted = Path(tmp) / "prd.json"
    converted.write_bytes(plan.data)
    return converted, lambda: shutil.rmtree(tmp, ignore_errors=True)


def failure_line(settings: Settings) -> str:
    """What `tilth start` says about a failed task."""
    if settings.stop_on_failure:
        return "the first failed task ends the session (stop_on_failure = true)"
    return "a failed task does not stop the others, only the tasks that depend on it (stop_on_failure = false)"


def register(sub: argparse._SubParsersAction) -> None:
    plan = sub.add_parser("plan", help="check a plan, or edit a session's live plan in $EDITOR")
    actions = plan.add_subparsers(dest="plan_command", required=True, metavar="{check,edit}",
                                  help="check: errors and warnings of a plan file; edit: a session's live plan")
    edit = actions.add_parser("edit", help="open a session's live prd.json in $EDITOR (default vi); an invalid "
                                           "plan is not saved (exit 2)",
                              description="Open a session's live prd.json in $EDITOR (default vi); an invalid plan "
                                          "is not saved (exit 2).")
    edit.add_argument("id", nargs="?", help=ID_HELP)
    edit.set_defaults(handler=cmd_plan)
    check = actions.add_parser("check", help="validate a plan (errors: exit 2) and lint it (warnings: exit 0)",
                               description="Validate a plan as `tilth start` does (errors: exit 2) and print "
                                           "warnings (vague criteria, duplicate titles, tasks too large): exit 0.")
    check.add_argument("file", metavar="FILE|DIR", help="a prd.json, a Ralph prd.json, a GitHub issue export, a "
                                                         "markdown checklist or a directory of markdown task files")
    check.set_defaults(handler=cmd_check)

    imp = sub.add_parser("import", help="convert a Ralph prd.json, GitHub issue export, markdown checklist or "
                                        "directory of markdown task files into tilth's prd.json")
    imp.add_argument("source", metavar="FILE|DIR", help="the plan to convert (its format is detected)")
    imp.add_argument("--out", metavar="FILE", help="where to write prd.json (default: standard output)")
    imp.add_argument("--force", action="store_true", help="replace --out if it exists")
    imp.set_defaults(handler=cmd_import)
