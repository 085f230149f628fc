"""The `tilth` command line: the parser root, `start`/`run`/`resume`/`status`/`config`, and errors
as one line and an exit code. Handlers parse arguments and call into the library; the loop itself
lives in run/session_run.py and run/loop.py. Exit codes: 0 all done, 1 a task failed, 2 bad input,
3 stopped before finishing."""

from __future__ import annotations

import argparse
import os
import sys

from tilth.core import VERSION
from tilth.cli import (cmd_answer, cmd_calibrate, cmd_config, cmd_daemon, cmd_dispatch, cmd_digest, cmd_doctor,
                       cmd_memory, cmd_plan, cmd_prep, cmd_review, cmd_serve, inputs)
from tilth.cli.backend_choice import backend_choice
from tilth.cli.pick import ID_HELP, pick_paths
from tilth.cli.stderr import say
from tilth.core.errors import BadInput, DiskFull, TilthError
from tilth.core.terminal import guard_std_streams

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (~5 ms of a cold start)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


# Handlers import their libraries when they run: building the parser (`tilth --help`) and
# `tilth status` on an empty home must not pay for pydantic, pygit2, the openai SDK, rich,
# watchfiles or apscheduler (tests/test_cold_start.py, bench/cold_start.py).

NO_SESSIONS = "no sessions; create one with `tilth start`"
"""`tilth status` with no session; the same line as views/status.render_table([])."""


def run_foreground(session_id: str, resume: bool, expect_queued: bool = False) -> int:
    from tilth.core.settings_load import load_settings
    from tilth.run.session_run import run_session
    from tilth.run.stopflag import StopFlag
    from tilth.store.home import session_paths
    from tilth.store.session import load_session, refuse_archived
    from tilth.views.readable import print_event

    paths = session_paths(session_id)
    record = load_session(paths)
    refuse_archived(record)
    settings = load_settings(paths.home)
    print(f"session {record.id}: branch {record.branch}, worktree {record.worktree}", flush=True)
    return run_session(paths, settings, StopFlag().install(), resume=resume, echo=print_event,
                       expect_queued=expect_queued)


def parallel_count(text: str) -> int:
    """`--parallel N`: a whole number from 1 to 32."""
    if not text.isdigit() or not 1 <= int(text) <= 32:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tasks from 1 to 32")
    return int(text)


def use_parallel(args: argparse.Namespace) -> None:
    """`--parallel N` is the `parallel_tasks` setting, from the environment the settings load (so it is
    recorded with the session and travels with it, like any setting this shell sets)."""
    import os

    if getattr(args, "parallel", None) is not None:
        os.environ["TILTH_PARALLEL_TASKS"] = str(args.parallel)


def cmd_start(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tilth.actions.starting import start_session
    from tilth.cli.show_acted import show
    from tilth.core.clock import iso
    from tilth.core.settings_load import load_settings
    from tilth.daemon.queue import parse_when
    from tilth.store.home import session_paths, tilth_home

    if args.at and args.foreground:
        raise BadInput("--at schedules a start for the supervisor; drop --foreground")
    if args.id is not None and not args.id.strip():
        raise BadInput("--id is empty; pass a session id, or leave --id out for a generated one")
    seed = Path(args.seed).expanduser() if args.seed else None
    checks = inputs.checks(args.check)
    if args.prd is not None:
        prd = Path(args.prd).expanduser()
    elif seed is not None:
        prd = seed / "prd.json"
    else:
        raise BadInput("no plan: pass --prd a prd.json, or --seed the directory `tilth prep` wrote")
    start_at = iso(parse_when(args.at)) if args.at else None
    use_parallel(args)
    settings = load_settings(tilth_home())
    dispatching = cmd_dispatch.wanted(args, settings)
    repo = args.repo if dispatching else inputs.repository(args.repo)  # dispatched: the remote, or [dispatch]'s
    plan_file, done_with_plan = cmd_plan.plan_for_start(prd)  # a Ralph prd.json, a checklist, ...: converted
    beside = prd if prd.is_dir() else prd.parent  # a converted plan's seed-meta.json is beside the original
    if seed is None and plan_file.parent != beside and (beside / "seed-meta.json").is_file():
        seed = beside
    try:
        backend = backend_choice(args, settings)
        acted = start_session(tilth_home(), plan_file, repo=repo, backend=backend,
                              by="cli", session_id=args.id, base=args.base, checks=checks, seed=seed,
                              start_at=start_at, dispatch=dispatching, foreground=args.foreground, settings=settings,
                              progress=lambda line: print(line, flush=True))
    finally:
        done_with_plan()
    if acted.dispatched:
        return show(acted)
    for line in acted.warnings:
        say(line)
    print(f"plan: {session_paths(acted.session_id).prd} (edit it while the session runs; tilth picks up changes "
          "between tasks)", flush=True)
    print(cmd_plan.failure_line(settings), flush=True)
    if backend.name != "scripted":
        from tilth.agents.accounting import Caps

        print(Caps.bounds_line(settings), flush=True)
        cmd_plan.announce_forecast(acted.session_id, settings, say)
    if dashboard := cmd_serve.dashboard_line(acted.session_id):
        print(dashboard, flush=True)
    if args.foreground:
        return run_foreground(acted.session_id, resume=False)
    print("\n".join(acted.lines), flush=True)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from tilth.daemon.handoff import still_queued
    from tilth.store.home import session_paths

    if args.at:
        raise BadInput(f"`tilth run` runs a session now, in this process; to start it later use "
                       f"`tilth start --at {args.at}`")
    if args.from_queue and not still_queued(session_paths(args.id)):
        print(f"session {args.id} is no longer queued; nothing to run")
        return 0
    return run_foreground(args.id, resume=args.resume, expect_queued=args.from_queue)


def cmd_resume(args: argparse.Namespace) -> int:
    from tilth.actions.place import resume_session
    from tilth.cli.show_acted import show
    from tilth.store.home import tilth_home

    if args.forgotten or args.from_supervisor:
        return resume_forgotten(args)
    session_id = args.id or pick_paths(None).id
    use_parallel(args)
    acted = resume_session(tilth_home(), session_id, by="cli", reload_settings=args.reload_settings,
                           foreground=args.foreground)
    if args.foreground and not acted.dispatched:
        for line in acted.warnings:
            say(line)
        return run_foreground(acted.session_id, resume=True)
    return show(acted)


def resume_forgotten(args: argparse.Namespace) -> int:
    """`--forgotten`: every session the broker forgot; `--from-supervisor` (the supervisor's child): only
    when the broker came back empty, silent otherwise."""
    from tilth.actions.recovering import resume_forgotten as recover
    from tilth.cli.show_acted import show
    from tilth.store.home import tilth_home

    if args.id or args.foreground or args.reload_settings or args.parallel:
        raise BadInput("`tilth resume --forgotten` takes no session id or other option: it queues every session "
                       "the broker forgot")
    acted = recover(tilth_home(), by="cli", emptied_only=args.from_supervisor)
    return 0 if acted is None else show(acted)


def supervisor_line(home: Path, summaries: list[dict[str, Any]]) -> str:
    from tilth.daemon.control import heartbeat_age, holder

    info = holder(home)
    waiting = sum(1 for s in summaries if s["state"] == "queued" and s.get("supervised"))
    paused = sum(1 for s in summaries if s["state"] == "paused" and s.get("supervised"))
    also = f", {paused} paused" if paused else ""
    if info is None:
        return f"supervisor: not running; {waiting} queued{also} session(s) wait for it (`tilth daemon` starts it)" \
            if waiting or paused else "supervisor: not running"
    age = heartbeat_age(info)
    beat = f", heartbeat {age:.0f}s ago" if age is not None else ""
    return f"supervisor: running (pid {info.get('pid')}{beat}); {waiting} queued{also}"


def cmd_status(args: argparse.Namespace) -> int:
    from tilth.store.home import all_session_ids, tilth_home

    home = tilth_home()
    if args.id:
        from tilth.actions.place import locate

        place = locate(home, args.id)
        cmd_daemon.revive_supervisor(home)  # a supervisor that died, with work waiting: start one
        print(place.status(args.json))
        return 0
    if not all_session_ids(home):  # a new user: answered without the session models
        if args.json:
            print("[]")
        else:
            print("\n".join([f"{NO_SESSIONS}\n{supervisor_line(home, [])}", *cmd_dispatch.status_lines()]))
        return 0
    cmd_daemon.revive_supervisor(home)  # a supervisor that died, with work waiting: start one
    from tilth.views.status import print_rich_table, render_table
    from tilth.views.status_data import all_summaries

    summaries = all_summaries(home)
    if args.json:
        print(json_text(summaries))
    elif sys.stdout.isatty():
        print_rich_table(summaries, supervisor_line(home, summaries))
    else:
        print(render_table(summaries, supervisor_line(home, summaries)))
    if not args.json and (dispatched := cmd_dispatch.status_lines()):
        print("\n".join(dispatched))
    return 0


def json_text(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()


class Commands(argparse._SubParsersAction):  # type: ignore[type-arg]  # argparse makes it, by class
    """Subcommands whose one-line `help` in `tilth --help` is also the description in their own `-h`."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if kwargs.get("help") not in (None, argparse.SUPPRESS):
            kwargs.setdefault("description", kwargs["help"])
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilth", description="Turn a task list into a reviewable git branch.")
    parser.register("action", "parsers", Commands)
    parser.add_argument("--version", action="version", version=f"tilth {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)

    start = sub.add_parser("start", help="create a session and hand it to the supervisor (or run it: --foreground)")
    start.add_argument("--repo", help="the git repository to work on (default: the one holding the current "
                                      "directory; with --dispatch: the remote URL or bare repository every worker "
                                      "reaches, default [dispatch] remote)")
    start.add_argument("--prd", help="the plan: a JSON array of tasks (a seed-meta.json beside it comes along), a "
                                      "directory holding prd.json, or "
                                      "a Ralph prd.json, GitHub issue export, markdown checklist or directory of "
                                      "markdown task files (converted, see `tilth import`)")
    start.add_argument("--seed", metavar="DIR", help="a `tilth prep` output: its seed-meta.json comes along, and "
                                                     "its prd.json is the plan unless --prd names another")
    start.add_argument("--id", help="session id (default: timestamp + random suffix)")
    start.add_argument("--base", help="revision the session branch starts from (default: HEAD, which must be "
                                       "a clean, attached checkout)")
    start.add_argument("--backend", help="agent backend; `scripted` replays a scenario (tests/demo, no model)")
    start.add_argument("--scenario", help="scenario file for the scripted backend")
    start.add_argument("--check", action="append", default=[], metavar="CMD",
                       help="a command run before every evaluation; failing blocks acceptance (repeatable)")
    start.add_argument("--foreground", action="store_true", help="run the session in this process")
    start.add_argument("--parallel", type=parallel_count, metavar="N",
                       help="run up to N independent tasks at once, each in its own worktree (docs/parallel.md)")
    start.add_argument("--dispatch", action="store_true", help="queue it in the broker for a `tilth worker` on any "
                                                               "machine ([dispatch] in config.toml)")
    start.add_argument("--at", metavar="TIME", help="start no earlier than this ISO-8601 time (local unless it has a zone)")
    start.set_defaults(handler=cmd_start)

    run = sub.add_parser("run", help="run an existing session in this process")
    run.add_argument("id", help="session id")
    run.add_argument("--resume", action="store_true", help="run it as `tilth resume` does (retry the failed tasks from their placeholders)")
    run.add_argument("--from-queue", action="store_true", help=argparse.SUPPRESS)
    run.add_argument("--at", help=argparse.SUPPRESS)  # refused in one line: scheduling is `tilth start --at`
    run.set_defaults(handler=cmd_run)

    resume = sub.add_parser("resume", help="reconcile with the branch, retry the failed tasks from their placeholders, continue")
    resume.add_argument("id", nargs="?", help=ID_HELP)
    resume.add_argument("--parallel", type=parallel_count, metavar="N",
                        help="run up to N independent tasks at once from now on (docs/parallel.md)")
    resume.add_argument("--foreground", action="store_true",
                        help="run the session in this process (default: hand it to the supervisor)")
    resume.add_argument("--reload-settings", action="store_true",
                        help="take every current session/machine-scoped setting (config.toml, environment, defaults) "
                             "over the recorded ones, not only those this shell sets")
    resume.add_argument("--forgotten", action="store_true",
                        help="dispatched sessions the broker forgot (restarted without persistence): each made known "
                             "to it again as its record on the remote shows it; the unfinished ones queued again")
    resume.add_argument("--from-supervisor", action="store_true", help=argparse.SUPPRESS)
    resume.set_defaults(handler=cmd_resume)

    status = sub.add_parser("status", help="all sessions, or one with its tasks")
    status.add_argument("id", nargs="?", help="show this session and its tasks (default: every session)")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(handler=cmd_status)

    cmd_config.register(sub)
    cmd_memory.register(sub)
    cmd_answer.register(sub)
    cmd_plan.register(sub)
    cmd_prep.register(sub)
    cmd_calibrate.register(sub)
    cmd_review.register(sub)
    cmd_daemon.register(sub)
    cmd_digest.register(sub)
    cmd_serve.register(sub)
    cmd_doctor.register(sub)
    cmd_dispatch.register(sub)
    return parser


def git_error() -> type[Exception]:
    """pygit2's error class once pygit2 is loaded; before that nothing can raise it, and
    `tilth --help` must not import pygit2 just to name it in an except clause."""
    if "pygit2" not in sys.modules:
        return NoGitError
    from tilth.git.gitops import GitError

    return GitError


class NoGitError(Exception):
    """Never raised: stands in for pygit2.GitError while pygit2 is not loaded."""


def main(argv: list[str] | None = None) -> int:
    guard_std_streams()  # nothing a model, plan, broker or file wrote reaches the terminal raw
    try:
        args = build_parser().parse_args(argv)
        code: int = args.handler(args)
        sys.stdout.flush()  # a reader that has gone shows up here, not at interpreter exit
        return code
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except BrokenPipeError:
        # `tilth status | head -1`: the reader has gone, which is fine. Point stdout at devnull
        # so the flush at exit cannot raise again (the recipe in Python's `signal` docs).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except TilthError as exc:
        say(str(exc))
        return exc.exit_code
    except git_error() as exc:
        from tilth.git.integrity import git_failure

        failure = git_failure(exc, "the repository", "run the command again")
        say(str(failure))
        return failure.exit_code
    except OSError as exc:
        from tilth.core.diskspace import is_disk_full, no_space

        if not is_disk_full(exc):
            raise
        say(f"{no_space(exc)} and run the command again")
        return DiskFull.exit_code
