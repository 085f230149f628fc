"""`tilth plan edit [id]`: edit a session's live prd.json in $EDITOR, validated on save."""

from __future__ import annotations

import argparse
import os

from tilth.cli.pick import ID_HELP, pick_session
from tilth.core.errors import BadInput

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (~5 ms of a cold start)
if TYPE_CHECKING:
    from pathlib import Path


def edit_plan(live: Path, editor: str) -> str:
    """Open a copy of the plan in the editor; a saved copy replaces the plan only when it is
    valid and the plan did not change meanwhile, so a running session never reads a broken plan."""
    import shlex
    import subprocess
    import tempfile
    from pathlib import Path

    from tilth.store.jsonio import write_atomic
    from tilth.store.prd import parse_plan, plan_lock

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
        edited = copy.read_bytes()
        if edited == before:
            return f"plan unchanged: {live}"
        try:
            parse_plan(edited, str(live))
        except BadInput as exc:
            keep = True
            raise BadInput(f"{exc}; the previous plan is kept, your edit is in {copy}") from None
        with plan_lock(live):
            if live.read_bytes() != before:
                keep = True
                raise BadInput(f"{live} changed while you edited it (the session updated a task's status); "
                               f"the plan is not replaced, your edit is in {copy}")
            write_atomic(live, edited)
        return f"plan saved: {live} (the session picks it up before its next task)"
    finally:
        if not keep:
            copy.unlink(missing_ok=True)


def cmd_plan(args: argparse.Namespace) -> int:
    paths, _ = pick_session(args.id)
    print(edit_plan(paths.prd, os.environ.get("EDITOR") or "vi"))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    plan = sub.add_parser("plan", help="edit a session's live plan in $EDITOR, validated on save")
    plan.add_argument("action", choices=["edit"], help="edit: open prd.json in $EDITOR (default vi); "
                                                        "an invalid plan is not saved (exit 2)")
    plan.add_argument("id", nargs="?", help=ID_HELP)
    plan.set_defaults(handler=cmd_plan)
