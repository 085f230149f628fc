"""`[dispatch]` in config.toml: sessions run by `tilth worker` processes on any machine through
a Redis broker (RQ), instead of by this machine's supervisor. Absent: everything stays local."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Dispatch(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    broker_url: str = Field(min_length=1)
    """The Redis every machine reaches, e.g. `redis://127.0.0.1:6379/0` (run it with `appendonly yes`
    so a restart loses no queued session)."""
    remote: str = Field(min_length=1)
    """The git remote every machine can reach (a URL or a bare repository path): session branches
    and the sessions' files (`refs/tilth/sessions/<id>`) are pushed there."""
    queue: str = Field("tilth", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """The RQ queue name (one per team or pool of workers)."""
    lease_s: float = Field(30.0, ge=2, le=3600)
    """A worker holds a session by a lease in the broker that it renews every third of this; a
    worker that dies loses it after this long."""
    heartbeat_s: int = Field(10, ge=1, le=600)
    """How often a worker tells RQ its job is alive; RQ gives up on a silent job this plus 60 s later
    and hands it to another worker."""
    maintenance_s: int = Field(30, ge=1, le=3600)
    """How often each worker looks for jobs whose worker died (RQ's maintenance interval)."""
    always: bool = False
    """`tilth start` dispatches without `--dispatch` (`--foreground` still runs here)."""
    takeovers: int = Field(10, ge=0, le=1000)
    """How many times a session's job is handed to another worker after its worker died or crashed."""
    retry_s: float = Field(5.0, ge=0.1, le=3600)
    """The first wait before a job whose run failed (a push that could not be made, a remote that is
    down) is tried again; each later retry waits twice as long, up to 30 times this."""
    push_patience_s: float = Field(600.0, ge=1, le=86400)
    """How long a worker keeps trying a session's last push when it fails for any reason but a
    refusal because the remote moved on (the remote down, a hook or quota refusing), waiting longer each time, before
    it fails the job so that a retry (`retry_s`) or another worker carries on from the remote."""
    push_wait_max_s: float = Field(10.0, ge=0.1, le=600)
    """The longest wait between two tries of a session's last push (the waits double from `retry_s`,
    at most 5 s, up to this): a session ends `done` at most about this long after the remote is back."""
    remotes: list[str] = Field(default_factory=list)
    """Remotes besides `remote` this worker takes sessions from; a job naming any other is refused
    (a broker writer must not point the worker's git credentials at a server of theirs)."""
    secret_file: Path | None = None
    """A file holding the team's shared signing secret (at least 32 characters, e.g. `openssl rand -hex
    32`, readable by its owner only). Set on the submitting machines and every worker: jobs and
    snapshots are signed, and a worker refuses an unsigned or altered one (docs/dispatch-trust.md)."""

    @property
    def broker_shown(self) -> str:
        """`broker_url` with its password (and ACL user's) replaced by `***`, for anything printed."""
        return re.sub(r"^(\w+://)[^@/]*@", r"\1***@", self.broker_url)

    @field_validator("broker_url")
    @classmethod
    def _redis(cls, value: str) -> str:
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a Redis URL (redis://host:6379/0, rediss://..., unix:///path)")
        return value
