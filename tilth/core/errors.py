"""The few exceptions tilth raises on purpose.

Flow-control exceptions are caught in two places only: per task (loop.run_task) and at
the top of the process (cli.main), which turns them into one-line messages and exit codes.
"""


class TilthError(Exception):
    """A problem the user can fix; printed as one line. Exit code 2 unless stated."""

    exit_code = 2


class BadInput(TilthError):
    """Invalid plan, config, repository or arguments. Nothing has been created."""


class SessionBusy(TilthError):
    """Another process holds the session lock."""


class PlanChanged(TilthError):
    """prd.json became unreadable or invalid while the session was running."""


class DiskFull(TilthError):
    """A write failed for lack of space (ENOSPC) or quota (EDQUOT); the session, if any, is
    stopped and resumable once space is freed."""

    exit_code = 3


class ToolError(Exception):
    """A refused or failed tool call; the message is shown to the model as is."""


class StopRequested(Exception):
    """A signal asked the session to stop at the next safe point."""
