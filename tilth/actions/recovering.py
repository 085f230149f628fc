"""`tilth resume --forgotten`, and the supervisor's own re-queue when the broker came back empty: every
session only the shared remote's record has is made known to the broker again, a finished one as its
record shows it ended (no job), an unfinished one queued for a worker unless one holds it
(`dispatch/recorded.recover`). One command for all of them, whatever their number."""

from __future__ import annotations

from pathlib import Path

from tilth.actions.acted import Acted, check_by
from tilth.core.errors import BadInput


def resume_forgotten(home: Path, *, by: str, emptied_only: bool = False) -> Acted | None:
    """Every forgotten session recovered, one line each; `emptied_only` (the supervisor): only when the
    broker came back empty (it has lost its mark of ever holding sessions), else None. `by` is not
    kept: a job carries only what it runs."""
    from tilth.actions.remote_read import broker_for, forgotten
    from tilth.dispatch.broker import BrokerDown
    from tilth.dispatch.recorded import recover

    check_by(by)
    broker = broker_for(home)
    if broker is None:
        raise BadInput("`tilth resume --forgotten` is for dispatched sessions: this machine's config.toml has no "
                       "[dispatch] section")
    try:
        if emptied_only and broker.remembers():
            return None
        lines = recover(broker, forgotten(broker, home))
    except BrokerDown as exc:
        if emptied_only:
            return None  # the next look, once it answers
        raise BadInput(f"the broker {broker.dispatch.broker_shown} is unreachable ({exc}); start it or fix "
                       "[dispatch] broker_url") from None
    if not lines:
        if emptied_only:
            return None
        return Acted("", f"no forgotten sessions: the broker knows every session on {broker.dispatch.remote}",
                     dispatched=True)
    return Acted("", lines[0], more=tuple(lines[1:]), dispatched=True)
