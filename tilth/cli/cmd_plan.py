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
    from tilth.store.prd_record import Task
    from tilth.views.forecast import Forecast
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


def cmd_cost(args: argparse.Namespace) -> int:
    """`tilth plan cost [PRD]`: the plan's forecast from this TILTH_HOME's receipts (`views/forecast.py`)."""
    from pathlib import Path

    from tilth.cli.plan_import import read_plan
    from tilth.core.errors import BadInput
    from tilth.core.settings_load import load_settings
    from tilth.store.home import tilth_home
    from tilth.store.prd import parse_plan

    path = Path(args.file or "prd.json").expanduser()
    if args.file is None and not path.exists():
        raise BadInput("name the plan to forecast: tilth plan cost PRD (there is no prd.json here)")
    plan = read_plan(path)
    if plan.fmt != "tilth":
        said(plan.said)
    print(start_forecast(load_settings(tilth_home()), parse_plan(plan.data, str(path))).line())
    return 0


def start_forecast(settings: Settings, tasks: list[Task]) -> Forecast:
    """The forecast for `tasks` under `settings`' models and backends."""
    from tilth.core.travel import session_view
    from tilth.store.home import tilth_home
    from tilth.views.forecast import forecast, history, models_key

    return forecast(history(tilth_home()), models_key(session_view(settings)), tasks)


def announce_forecast(session_id: str, settings: Settings, warn: Callable[[str], None]) -> None:
    """At `tilth start`: the forecast printed, kept as the session's forecast.json (`status --json`),
    and a warning when the spend cap is below its low end."""
    import orjson

    from tilth.store.home import session_paths
    from tilth.store.jsonio import write_atomic
    from tilth.store.prd import load_plan

    paths = session_paths(session_id)
    found = start_forecast(settings, load_plan(paths.prd))
    write_atomic(paths.dir / "forecast.json", orjson.dumps(found.data()))
    print(found.line(), flush=True)
    cap = settings.max_spend_usd
    if found.known and found.low is not None and cap is not None and cap < found.low:
        warn(f"the spend cap ${cap:g} is below the forecast's low end ${found.low:.2f}: this plan will most likely "
             f"stop at the cap before it is done; raise TILTH_MAX_SPEND_USD, or plan to raise it and resume")


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
    file itself when it is tilth's own (or missing: `start` says so), else the plan converted into a
    temp file (removed by the call). A directory holding a prd.json is read as that file, in any format."""
    import shutil
    import tempfile
    from pathlib import Path

    from tilth.cli.inputs import plan_file
    from tilth.cli.plan_import import read_plan

    given, prd = prd, plan_file(prd)
    if not prd.exists():
        return prd, lambda: None
    plan = read_plan(prd)
    if plan.fmt == "tilth":
        if prd != given:
            said(f"read {prd}")
        return prd, lambda: None
    said(f"{plan.said} from {prd}" if prd != given else plan.said)
    tmp = tempfile.mkdtemp(prefix="tilth-plan-")
    converted = Path(tmp) / "prd.json"
    converted.write_bytes(plan.data)
    return converted, lambda: shutil.rmtree(tmp, ignore_errors=True)


def failure_line(settings: Settings) -> str:
    """What `tilth start` says about a failed task."""
    if settings.stop_on_failure:
        return "the first failed task ends the session (stop_on_failure = true)"
    return "a failed task does not stop the others, only the tasks that depend on it (stop_on_failure = false)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = sub.add_parser("plan", help="check a plan, or edit a session's live plan in $EDITOR")
    actions = plan.add_subparsers(dest="plan_command", required=True, metavar="{check,edit,cost}",
                                  help="check: errors and warnings of a plan file; edit: a session's live plan; "
                                       "cost: a plan's forecast cost")
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
    cost = actions.add_parser("cost", help="forecast what running a plan costs, from this TILTH_HOME's earlier sessions",
                              description="Forecast what running a plan costs with the configured models and backends: "
                                          "a range ($low-$high, 5th to 95th percentile) and its median, from the "
                                          "receipts of earlier sessions in this TILTH_HOME (tasks of similar criteria "
                                          "count and description size weigh more); says so when there is too little "
                                          "history.")
    cost.add_argument("file", nargs="?", metavar="PRD", help="the plan (default: prd.json here), in any format "
                                                             "`tilth plan check` reads")
    cost.set_defaults(handler=cmd_cost)

    imp = sub.add_parser("import", help="convert a Ralph prd.json, GitHub issue export, markdown checklist or "
                                        "directory of markdown task files into tilth's prd.json")
    imp.add_argument("source", metavar="FILE|DIR", help="the plan to convert (its format is detected)")
    imp.add_argument("--out", metavar="FILE", help="where to write prd.json (default: standard output)")
    imp.add_argument("--force", action="store_true", help="replace --out if it exists")
    imp.set_defaults(handler=cmd_import)
