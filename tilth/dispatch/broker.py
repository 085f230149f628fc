"""What tilth keeps in the broker (Redis) for dispatched sessions, besides RQ's own jobs.

    tilth:sessions           SET     every dispatched session id
    tilth:memory             STRING  set once anything was registered: a broker without it came back empty
    tilth:vouched:<machine>  STRING  this worker machine (a hash of its host and TILTH_HOME) brought back the
                                     sessions it pushed last, once for this broker's life (`vouched.py`)
    tilth:session:<id>       HASH    the session's state as the broker knows it: `STATE_FIELDS`, declared once
    tilth:events:<id>        STREAM  the session's events.jsonl lines, field `e` (mirrored by the runner)
    tilth:lease:<id>         STRING  the worker token that runs the session; expires unless renewed
    tilth:taker:<id>         STRING  the worker token that last took the lease (kept after it lapses): a
                                     worker whose lease lapsed takes it again only if nobody took it since
    tilth:stop:<id>          STRING  a person asked the session to stop (`tilth stop` from any machine)
    tilth:inbox:<id>         LIST    answers and notes left from any machine (`tilth answer/note`), JSON
                                     {kind, id, task, text, by}; the worker writes them into the session's
                                     files (`by` kept only as cli or dashboard, else unknown) and trims
                                     them once a push carried them

The lease, not a local file lock, keeps two workers off one session: it is taken with SET NX PX
(the taker recorded in the same Lua call) and renewed or released only by its holder
(compare-and-act in one Lua call).
"""

from __future__ import annotations

import socket
from types import TracebackType
from typing import Any

import orjson
import redis
from redis.typing import EncodableT, FieldT
from rq import Callback, Queue, Retry
from rq.job import Job

from tilth.core.clock import wall
from tilth.core.dispatching import Dispatch
from tilth.dispatch.jobdata import JOB_FUNCTION, SERIALIZER, TilthJob, check_remote
from tilth.dispatch.signing import job_signature, load_secret
from tilth.store.home import check_session_id

PREFIX = "tilth"
STREAM_MAX = 50_000
ENDED = {"done", "failed", "stopped", "waiting", "crashed", "refused"}

_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
_TAKE = ("if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
         "redis.call('set', KEYS[2], ARGV[1]) return 1 else return 0 end")
_RETAKE = """
local holder = redis.call('get', KEYS[1])
if holder then return {'held', holder} end
local taker = redis.call('get', KEYS[2])
if taker and taker ~= ARGV[1] then return {'taken', taker} end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('set', KEYS[2], ARGV[1])
if taker then return {'again', ''} end
return {'unrecorded', ''}
"""
"""A lapsed lease taken again only if nobody took it since (one call, so no taker slips in between)."""
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

BrokerDown = (redis.ConnectionError, redis.TimeoutError)

STATE_FIELDS = {
    "id": "the session id",
    "state": "a session state, `finishing` (ended, its last push not yet on the remote), `refused` or `forgotten`",
    "reason": "why it ended or was refused, one line",
    "progress": "`<done>/<tasks>` as last pushed to the remote",
    "current": "the task in progress, or empty",
    "branch": "`session/<id>` on the shared remote",
    "remote": "the shared remote's URL",
    "worker": "the worker token that holds it, or empty",
    "pid": "the holding worker's job process",
    "job": "the RQ job id of its current job",
    "tasks": "JSON: each task's id, title and status",
    "questions": "JSON: each parked task's open question",
    "updated": "when it was last written (Unix time)",
}
"""The `tilth:session:<id>` hash, every field of it: a write of any other is refused."""
LISTED = ("tasks", "questions")
"""The fields held as JSON lists."""


class Broker:
    def __init__(self, dispatch: Dispatch):
        self.dispatch = dispatch
        self.redis = redis.Redis.from_url(dispatch.broker_url, socket_timeout=10, socket_connect_timeout=5,
                                          health_check_interval=5)

    # -- keys ---------------------------------------------------------------------------
    @staticmethod
    def key(kind: str, session_id: str | None = None) -> str:
        return f"{PREFIX}:{kind}" + (f":{session_id}" if session_id else "")

    # -- the lease ----------------------------------------------------------------------
    def take_lease(self, session_id: str, token: str) -> bool:
        return bool(self.redis.eval(_TAKE, 2, self.key("lease", session_id), self.key("taker", session_id), token,
                                    int(self.dispatch.lease_s * 1000)))

    def retake_lease(self, session_id: str, token: str) -> tuple[str, str]:
        """A lease this token held and failed to renew: `("again", "")` taken again, nobody having
        taken it since; `("unrecorded", "")` taken again, the broker holding no record of its takers
        (restarted without persistence); `("held", other)` another token holds it now; `("taken",
        other)` another token took it since (its lease since released or lapsed)."""
        said = self.redis.eval(_RETAKE, 2, self.key("lease", session_id), self.key("taker", session_id), token,
                               int(self.dispatch.lease_s * 1000))
        kind, other = said if isinstance(said, list) and len(said) == 2 else (b"held", b"unknown")
        return reply_text(kind), reply_text(other)

    def renew_lease(self, session_id: str, token: str) -> bool:
        return bool(self.redis.eval(_RENEW, 1, self.key("lease", session_id), token, int(self.dispatch.lease_s * 1000)))

    def release_lease(self, session_id: str, token: str) -> None:
        self.redis.eval(_RELEASE, 1, self.key("lease", session_id), token)

    def lease_holder(self, session_id: str) -> str | None:
        held = self.redis.get(self.key("lease", session_id))
        return reply_text(held) if held else None

    # -- stop requests ------------------------------------------------------------------
    def request_stop(self, session_id: str, by: str = "cli") -> None:
        """The value says who asked (cli|dashboard); any value is a request."""
        self.redis.set(self.key("stop", session_id), by.encode(), ex=7 * 86400)

    def stop_requested(self, session_id: str) -> bool:
        return bool(self.redis.exists(self.key("stop", session_id)))

    def stop_requested_on(self, session_id: str) -> str | None:
        """Where a pending stop was asked: "the dashboard", else "`tilth stop`" (never the stored text
        itself, which anyone with the broker could write); None without one."""
        asked = self.redis.get(self.key("stop", session_id))
        if asked is None:
            return None
        return "the dashboard" if asked == b"dashboard" else "`tilth stop`"

    def clear_stop(self, session_id: str) -> None:
        self.redis.delete(self.key("stop", session_id))

    # -- answers and notes from other machines -----------------------------------------
    def leave(self, session_id: str, kind: str, task: str | None, text: str, by: str = "cli") -> str:
        import secrets

        item_id = secrets.token_hex(4)
        self.redis.rpush(self.key("inbox", session_id),
                         orjson.dumps({"kind": kind, "id": item_id, "task": task, "text": text, "by": by}))
        return item_id

    def inbox(self, session_id: str) -> list[dict[str, Any]]:
        found = []
        for raw in self.redis.lrange(self.key("inbox", session_id), 0, -1):
            try:
                found.append(orjson.loads(raw))
            except orjson.JSONDecodeError:
                found.append({})
        return found

    def taken(self, session_id: str, count: int) -> None:
        """The first `count` items are in the session's pushed files now."""
        if count:
            self.redis.ltrim(self.key("inbox", session_id), count, -1)

    # -- state and events ---------------------------------------------------------------
    def register(self, session_id: str, fields: dict[str, Any]) -> None:
        with self.redis.pipeline() as pipe:
            pipe.set(self.key("memory"), b"1", nx=True)
            pipe.sadd(self.key("sessions"), session_id)
            pipe.hset(self.key("session", session_id), mapping=_flat(fields))
            pipe.execute()

    def set_state(self, session_id: str, fields: dict[str, Any]) -> None:
        """Listed too: a broker restarted without persistence learns of a session from its next write."""
        with self.redis.pipeline() as pipe:
            pipe.sadd(self.key("sessions"), session_id)
            pipe.hset(self.key("session", session_id), mapping=_flat({**fields, "updated": wall()}))
            pipe.execute()

    def claim(self, session_id: str) -> bool:
        """List a session the broker forgot; True for the one caller that listed it (so only that one
        acts on it)."""
        return bool(self.redis.sadd(self.key("sessions"), session_id))

    def remember(self) -> None:
        """Mark this broker as one that has held tilth's sessions (`remembers`): a broker restarted
        without persistence comes back without the mark."""
        self.redis.set(self.key("memory"), b"1", nx=True)

    def remembers(self) -> bool:
        return bool(self.redis.exists(self.key("memory")))

    def state(self, session_id: str) -> dict[str, Any] | None:
        raw = self.redis.hgetall(self.key("session", session_id))
        if not raw:
            return None
        found: dict[str, Any] = {reply_text(k): reply_text(v) for k, v in raw.items()}
        for listed in LISTED:
            try:
                found[listed] = orjson.loads(found.get(listed) or "[]")
            except orjson.JSONDecodeError:
                found[listed] = []
        return found

    def session_ids(self) -> list[str]:
        return sorted(reply_text(i) for i in self.redis.smembers(self.key("sessions")))

    def append_events(self, session_id: str, lines: list[bytes]) -> None:
        with self.redis.pipeline() as pipe:
            for line in lines:
                pipe.xadd(self.key("events", session_id), {"e": line}, maxlen=STREAM_MAX, approximate=True)
            pipe.execute()

    def events(self, session_id: str, after: str = "-", block_ms: int | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Events after stream id `after` ("-": from the start; "$" with block: only new ones)."""
        stream = self.key("events", session_id)
        if block_ms is None:
            start = "-" if after == "-" else f"({after}"
            rows = self.redis.xrange(stream, start, "+") or []
        else:
            got = self.redis.xread({stream: "0-0" if after == "-" else after}, block=block_ms, count=1000)
            rows = got[0][1] if isinstance(got, list) and got else []  # RESP2: [[stream, entries]]
        out = []
        for entry_id, fields in rows:
            if entry_id is None or fields is None:
                continue
            try:
                out.append((reply_text(entry_id), orjson.loads(fields[b"e"])))
            except (KeyError, orjson.JSONDecodeError):
                continue
        return out

    def forget(self, session_id: str) -> None:
        self.redis.delete(*(self.key(k, session_id) for k in ("session", "events", "lease", "taker", "stop", "inbox")))
        self.redis.srem(self.key("sessions"), session_id)


def job_queue(broker: Broker) -> Queue:
    """The session queue, its jobs written and read as JSON by tilth's job class."""
    return Queue(broker.dispatch.queue, connection=broker.redis, serializer=SERIALIZER, job_class=TilthJob)


def retry(dispatch: Dispatch) -> Retry | None:
    """Takeovers and retries wait (doubling from `retry_s`), never an instant burst."""
    if not dispatch.takeovers:
        return None
    waits = [min(dispatch.retry_s * 2 ** n, dispatch.retry_s * 30) for n in range(min(dispatch.takeovers, 12))]
    return Retry(max=dispatch.takeovers, interval=waits)


def enqueue(broker: Broker, session_id: str, remote: str, resume: bool = False) -> str:
    check_session_id(session_id)
    check_remote(remote)
    secret = load_secret(broker.dispatch)
    signature = {"signature": job_signature(secret, session_id, remote, resume)} if secret else {}
    job = job_queue(broker).enqueue(JOB_FUNCTION, session_id, remote, resume, **signature, job_timeout=-1,
                                    retry=retry(broker.dispatch), on_failure=Callback(job_failed),
                                    result_ttl=7 * 86400, failure_ttl=30 * 86400,
                                    description=f"tilth session {session_id}")
    broker.set_state(session_id, {"state": "queued", "job": job.id, "remote": remote})
    return job.id


def job_failed(job: Job, connection: redis.Redis, exc_type: type[BaseException] | None,
               exc_value: BaseException | None, tb: TracebackType | None) -> None:
    """RQ gave up on the job (its worker died, or tilth crashed in it) with no takeover left: the
    session is marked crashed in the broker, so `tilth wait` ends and `tilth resume` says it."""
    if job.retries_left:
        return
    session_id = job.args[0] if job.args and isinstance(job.args[0], str) else ""
    try:
        check_session_id(session_id)
    except Exception:
        return  # not a session tilth queued: nothing of it in the broker to mark
    current = connection.hget(Broker.key("session", session_id), "job")
    if current is not None and reply_text(current) != job.id:
        return  # a job another one superseded (queued again by a sweep or a resume)
    connection.hset(Broker.key("session", session_id), mapping=_flat({
        "state": "crashed", "worker": "", "updated": wall(),
        "reason": f"no worker could finish it ({exc_type.__name__ if exc_type else 'abandoned'}; takeovers used "
                  f"up); `tilth resume {session_id}` queues it again"}))


def reply_text(reply: bytes | str) -> str:
    """A reply as text (this client's replies are bytes: it never sets decode_responses)."""
    return reply.decode() if isinstance(reply, bytes) else reply


def _flat(fields: dict[str, Any]) -> dict[FieldT, EncodableT]:
    """The hash's fields as Redis holds them; a field `STATE_FIELDS` does not declare is refused."""
    unknown = sorted(set(fields) - STATE_FIELDS.keys())
    if unknown:
        raise ValueError(f"tilth:session hash has no field {', '.join(unknown)}; declare it in broker.STATE_FIELDS")
    return {k: (orjson.dumps(v).decode() if isinstance(v, (list, dict)) else "" if v is None else str(v))
            for k, v in fields.items()}


def worker_token() -> str:
    import os
    import secrets

    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
