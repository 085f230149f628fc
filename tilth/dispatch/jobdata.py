"""Jobs are data: what a `tilth worker` accepts from the broker. RQ jobs are written and read as
JSON (never pickle); a worker runs only tilth's own job function and calls only tilth's own
callback, checked by name before anything is imported, and sends no webhook; the job's arguments are parsed by a strict
model (the session id's one pattern, a remote this worker serves) before any use."""

from __future__ import annotations

import logging
import re
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from redis import Redis
from rq.job import Job, JobStatus
from rq.types import FailureCallbackType, SuccessCallbackType
from rq.serializers import JSONSerializer

from tilth.core.dispatching import Dispatch
from tilth.core.errors import TilthError
from tilth.store.home import check_session_id

log = logging.getLogger("tilth.dispatch")

SERIALIZER = JSONSerializer
JOB_FUNCTION = "tilth.dispatch.job.run_job"
FAILURE_CALLBACK = "tilth.dispatch.broker.job_failed"
REMOTE_FORMS = re.compile(r"^(?:(?:https?|ssh|git|file)://[^\s]+|/[^\s]*|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+)$")
"""A URL of git's ordinary transports, an absolute path, or scp-like `user@host:path`; never a
`transport::` helper (`ext::` runs a command), an option (`-...`) or anything with a space."""


class RefusedJob(TilthError):
    """A job a worker will not run; the job fails with this reason in the worker's log."""


def check_remote(remote: str) -> str:
    if not REMOTE_FORMS.match(remote) or "::" in remote or len(remote) > 1024:
        raise ValueError(f"{remote[:200]!r} is not a git URL (https://, ssh://, git://, file://, an absolute "
                         "path or user@host:path)")
    return remote


class JobArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    session_id: str = Field(max_length=64)
    remote: str
    resume: bool = False
    signature: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")

    @field_validator("session_id")
    @classmethod
    def _id(cls, value: str) -> str:
        try:
            return check_session_id(value)
        except TilthError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("remote")
    @classmethod
    def _remote(cls, value: str) -> str:
        return check_remote(value)


def parse_job(args: tuple[object, ...], kwargs: dict[str, Any], dispatch: Dispatch) -> JobArgs:
    names = ("session_id", "remote", "resume")
    if len(args) > len(names):
        raise RefusedJob(f"refused job: {len(args)} arguments, tilth's job takes at most {len(names)}")
    try:
        job = JobArgs.model_validate({**dict(zip(names, args)), **kwargs})
    except ValidationError as exc:
        error = exc.errors()[0]
        raise RefusedJob(f"refused job: {'.'.join(str(p) for p in error['loc']) or 'arguments'}: "
                         f"{error['msg']}") from None
    if job.remote not in (dispatch.remote, *dispatch.remotes):
        raise RefusedJob(f"refused job for session {job.session_id}: remote {job.remote!r} is not one this "
                         "worker serves ([dispatch] remote or remotes)")
    return job


class TilthJob(Job):
    """RQ's job, refusing to import anything but tilth's job function and failure callback."""

    @property
    def func(self) -> Any:  # as RQ's own property, which is untyped
        name = self.func_name
        if name != JOB_FUNCTION or self.instance is not None:
            log.error("refused job %s: it names %r; a tilth worker runs only %s", self.id, name, JOB_FUNCTION)
            raise RefusedJob(f"refused job {self.id}: it names {name!r}, not {JOB_FUNCTION}")
        return super().func

    @property
    def failure_callback(self) -> FailureCallbackType | None:
        if self._failure_callback_name not in (None, FAILURE_CALLBACK):
            log.error("refused job %s's failure callback %r", self.id, self._failure_callback_name)
            return None
        return super().failure_callback

    @property
    def success_callback(self) -> SuccessCallbackType | None:
        if self._success_callback_name is not None:
            log.error("refused job %s's success callback %r", self.id, self._success_callback_name)
        return None

    def send_webhooks(self, status: str | JobStatus, *, exc_string: str | None = None) -> None:
        """Never: a URL in the job's hash must not make the worker send anything anywhere."""
        if self.webhooks:
            log.error("refused job %s's webhooks to %s", self.id, [w.url for w in self.webhooks])

    @property
    def stopped_callback(self) -> Callable[[Job, Redis], Any] | None:
        if self._stopped_callback_name is not None:
            log.error("refused job %s's stopped callback %r", self.id, self._stopped_callback_name)
        return None
