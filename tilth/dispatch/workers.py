"""`tilth worker [--concurrency N]`: N RQ workers on this machine, each in its own process
group, restarted when one exits (an RQ worker quits on some broker errors), each exit and start
one line of its output; SIGTERM/SIGINT stop them all: each running session stops at its next
safe point and is queued again for another worker."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis
from rq import Queue, Worker
from rq.executions import Execution
from rq.job import Job
from rq.worker import DequeueStrategy

from tilth.core.settings_load import load_settings
from tilth.core.processes import proc_stat
from tilth.dispatch.broker import Broker, BrokerDown
from tilth.dispatch.holding import sweep
from tilth.dispatch.jobdata import SERIALIZER, TilthJob
from tilth.dispatch.vouched import bring_back_own
from tilth.store.home import tilth_home

RESTART_BACKOFF_S = (1, 2, 5, 10, 30)


class TilthWorker(Worker):
    """An RQ worker that outlives a broker outage while a job runs: a missed heartbeat is tried
    again at the next interval instead of ending the worker (RQ gives a silent job 60 s plus
    the interval before another worker may take it)."""

    def maintain_heartbeats(self, job: Job, execution: Execution) -> None:
        try:
            super().maintain_heartbeats(job, execution)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            self.log.warning("heartbeat for job %s missed: %s", job.id, exc)

    def handle_warm_shutdown_request(self) -> None:
        """The session stops at its next safe point (the job queues it again for another
        worker) instead of this shutdown waiting for the whole session."""
        if self.horse_pid:
            try:
                os.kill(self.horse_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def work_here() -> int:
    """One RQ worker in this process (a child of `tilth worker`)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    d = load_settings(tilth_home()).dispatch
    if d is None:
        print("tilth worker: no [dispatch] section in config.toml", file=sys.stderr)
        return 2
    connection = redis.Redis.from_url(d.broker_url)
    # RQ looks for abandoned jobs only between waits for the next job, and waits worker_ttl - 15 s.
    # JSON only, tilth's job class only: a job naming anything else fails unrun (jobdata.py).
    queue = Queue(d.queue, connection=connection, serializer=SERIALIZER, job_class=TilthJob)
    worker = TilthWorker([queue], connection=connection, serializer=SERIALIZER, job_class=TilthJob,
                         job_monitoring_interval=d.heartbeat_s, maintenance_interval=d.maintenance_s,
                         worker_ttl=d.maintenance_s + 15)
    worker.work(logging_level="INFO", dequeue_strategy=DequeueStrategy.DEFAULT, with_scheduler=True)
    return 0


def serve(concurrency: int) -> int:
    """Keep `concurrency` workers running until SIGTERM/SIGINT, and every `maintenance_s` (even while
    every worker here is busy with a session) sweep for sessions nobody holds and, with
    `requeue_forgotten`, bring back the sessions this machine pushed last if the broker came back empty."""
    stopping = threading.Event()
    home = tilth_home()
    settings = load_settings(home)
    dispatch, vouching = settings.dispatch, settings.requeue_forgotten
    if dispatch is None:
        print("tilth worker: no [dispatch] section in config.toml", file=sys.stderr)
        return 2
    broker = Broker(dispatch)
    swept = time.monotonic()

    def stop(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    children: dict[int, subprocess.Popen[bytes]] = {}
    restarts = dict.fromkeys(range(concurrency), 0)
    while not stopping.is_set():
        for slot in range(concurrency):
            child = children.get(slot)
            if child is not None and child.poll() is None:
                continue
            if child is not None:
                backoff = RESTART_BACKOFF_S[min(restarts[slot], len(RESTART_BACKOFF_S) - 1)]
                print(f"tilth worker: slot {slot} (pid {child.pid}) exited: {exit_reason(child.returncode, broker)}; "
                      f"starting it again in {backoff}s", flush=True)
                stopping.wait(backoff)
                restarts[slot] += 1
                if stopping.is_set():
                    break
            children[slot] = subprocess.Popen([sys.executable, "-m", "tilth.dispatch"],
                                              start_new_session=True)
            again = f" (started again, {restarts[slot]} time{'s' * (restarts[slot] > 1)})" if restarts[slot] else ""
            print(f"tilth worker: slot {slot} pid {children[slot].pid}{again}", flush=True)
        if time.monotonic() - swept >= dispatch.maintenance_s:
            swept = time.monotonic()
            if vouching:
                bring_back(broker, home)
            try:
                sweep(broker)
            except BrokerDown:
                pass  # the next sweep, once the broker is back
        stopping.wait(min(1.0, dispatch.maintenance_s))
    for child in children.values():
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + 600
    for child in children.values():
        try:
            child.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for pid in family(child.pid):  # the job's process is in a group of its own (RQ's fork)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            child.wait()
    return 0


def bring_back(broker: Broker, home: Path) -> None:
    """`bring_back_own`, its lines in this worker's output; a failure is said and tried again next time,
    never the end of the worker."""
    try:
        for line in bring_back_own(broker, home):
            print(f"tilth worker: the broker came back empty: {line}", flush=True)
    except BrokerDown:
        pass
    except Exception as exc:  # a remote or clone it cannot read now: the sessions wait for the next look
        print(f"tilth worker: the sessions this machine pushed last are not brought back yet: {exc}", flush=True)


def exit_reason(code: int, broker: Broker) -> str:
    """How an RQ worker process ended, and whether the broker answers now (RQ's workers exit on some
    broker errors: a job's end or the worker's own start while the broker is away)."""
    how = f"exit code {code}" if code >= 0 else f"killed by {signal_name(-code)}"
    try:
        broker.redis.ping()
    except BrokerDown:
        return f"{how}; the broker does not answer"
    return how


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def family(pid: int) -> list[int]:
    """`pid` and every process below it, read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            if (stat := proc_stat(int(entry))) is not None:
                parents.setdefault(stat[1], []).append(int(entry))
    found, look = [], [pid]
    while look:
        current = look.pop()
        found.append(current)
        look += parents.get(current, [])
    return found
