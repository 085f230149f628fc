"""`replace_plan`: a person replaces a session's live prd.json (`tilth plan edit`, the dashboard): only
with a valid plan, and only when the plan is still the one the person edited (a running session updates
task statuses in it), so a session never reads a broken plan nor loses a status."""

from __future__ import annotations

from pathlib import Path

from tilth.actions.acted import Acted, changeable, check_by, record_act
from tilth.core.errors import BadInput


def replace_plan(home: Path, session_id: str, edited: bytes, *, expected: bytes, by: str = "cli") -> Acted:
    """`expected`: the plan as it was when the person began editing."""
    from tilth.store.jsonio import write_atomic
    from tilth.store.prd import parse_plan, plan_lock

    check_by(by)
    paths, _ = changeable(home, session_id, archived_ok=True)
    live = paths.prd
    if edited == expected:
        return Acted(paths.id, f"plan unchanged: {live}")
    try:
        parse_plan(edited, str(live))
    except BadInput as exc:
        raise BadInput(f"{exc}; the previous plan is kept") from None
    with plan_lock(live):
        if live.read_bytes() != expected:
            raise BadInput(f"{live} changed while you edited it (the session updated a task's status); "
                           "the plan is not replaced")
        write_atomic(live, edited)
        event = record_act(paths, "plan", by)
    return Acted(paths.id, f"plan saved: {live} (the session picks it up before its next task)", (event,))
