"""`tilth doctor [id|--all] [--fix] [--json]`: each session's files cross-checked against its branch
(`run/doctor.py`), and with --fix what git decides repaired (`run/doctor_fix.py`).

Exit 0 when every line is ok, running or repaired; 1 when something is left (without --fix, also
what --fix would repair); 2 for bad input (an unknown id, an id and --all together)."""

from __future__ import annotations

import argparse
import sys

from tilth.cli.pick import ID_HELP

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (a cold start)
if TYPE_CHECKING:
    from tilth.run.doctor_findings import Finding
    from tilth.store.home import SessionPaths


def cmd_doctor(args: argparse.Namespace) -> int:
    from tilth.core.errors import BadInput
    from tilth.store.home import all_session_ids, check_session_id, session_paths, tilth_home

    if args.agents:
        return agents_report(args.json)
    if args.all and args.id:
        raise BadInput(f"name a session or pass --all, not both: tilth doctor {args.id} or tilth doctor --all")
    if args.all:
        ids = all_session_ids()
        if not ids:
            raise BadInput("there are no sessions yet; create one with `tilth start`")
    elif args.id:
        check_session_id(args.id)
        if not session_paths(args.id).session_json.is_file():
            raise BadInput(f"no session {args.id!r} under {tilth_home()}; see `tilth status`, or tilth doctor --all")
        ids = [args.id]
    else:
        from tilth.cli.pick import pick_paths

        ids = [pick_paths(None).id]  # the most recent, said on stderr
    from tilth.run.doctor import diagnose
    from tilth.run.doctor_findings import PERSON, PROBLEM
    from tilth.run.doctor_fix import repair

    print(sandbox_line(), file=sys.stderr, flush=True)
    left = False
    report = []
    for sid in ids:
        paths = session_paths(sid)
        findings = repair(paths) if args.fix else None
        if findings is None:  # not asked to fix, or a runner holds the session: only checked
            findings = diagnose(paths).findings
        left = left or any(f.level in (PERSON, PROBLEM) for f in findings)
        findings = [*findings, *price_findings(paths)]
        for f in findings:
            if args.json:
                report.append({"session": sid, "level": f.level, "text": f.text, "fix": f.fix})
            else:
                print(f"{sid}  {f.level:<14}  {f.text}", flush=True)
    if args.json:
        import json

        print(json.dumps(report, indent=2))
    return 1 if left else 0


def sandbox_line() -> str:
    """How this machine confines the agent's commands now, network included (on stderr: the findings
    on stdout stay one per session)."""
    from tilth.agents.confinement import host_ports
    from tilth.agents.netbox import describe
    from tilth.agents.sandbox import bwrap_works
    from tilth.core.settings_load import load_settings
    from tilth.store.home import tilth_home

    settings = load_settings(tilth_home())
    if settings.sandbox == "off" or not bwrap_works():
        return "sandbox: the agent's commands run UNCONFINED (sandbox = off, or bubblewrap cannot run here)"
    if settings.agent_network == "off":
        return "sandbox: bwrap; agent_network = off: only the sandbox's own loopback"
    return f"sandbox: bwrap; {describe(host_ports(settings))}"


def agents_report(as_json: bool) -> int:
    """`--agents`: each CLI agent installed or not, its version, whether it answers; exit 0 always (not
    every machine needs every agent)."""
    from tilth.agents.agent_versions import installed
    from tilth.core.settings_load import load_settings
    from tilth.store.home import tilth_home

    found = installed(load_settings(tilth_home()))
    if as_json:
        import dataclasses
        import json

        print(json.dumps([dataclasses.asdict(f) for f in found], indent=2))
    else:
        for f in found:
            print(f.line(), flush=True)
    return 0


def price_findings(paths: SessionPaths) -> list[Finding]:
    """The rates in force for the session's models (its recorded settings over this shell's), as `ok` lines."""
    from tilth.agents.pricing import rate_lines
    from tilth.core.errors import BadInput
    from tilth.core.settings_load import load_settings
    from tilth.core.travel import with_session_view
    from tilth.run.doctor_findings import OK, Finding
    from tilth.store.home import tilth_home
    from tilth.store.session import load_session

    try:
        settings = with_session_view(load_settings(tilth_home()), load_session(paths).settings)
    except (BadInput, OSError, ValueError):
        return []  # a damaged session.json or configuration: the findings above say so
    return [Finding(OK, line) for line in rate_lines(settings)]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    summary = ("cross-check a session's files (prd.json, progress.txt, ledger, journal, session.json, lock, worktree) "
               "against its branch; --fix repairs what git decides and never deletes work")
    doctor = sub.add_parser(
        "doctor", help=summary,
        description=f"{summary}. One line per finding: ok, repaired, problem (--fix repairs it) or needs a person "
                    "(with the command to run). Exit 0 when everything is ok or repaired, 1 when anything is left, "
                    "2 for bad input. --fix takes the session lock: a running session is only checked.")
    doctor.add_argument("id", nargs="?", help=ID_HELP)
    doctor.add_argument("--all", action="store_true", help="every session under TILTH_HOME")
    doctor.add_argument("--fix", action="store_true", help="repair what can be derived from git (as tilth resume "
                                                           "would); torn lines are moved aside, never dropped")
    doctor.add_argument("--json", action="store_true", help="the findings as a JSON list")
    doctor.add_argument("--agents", action="store_true", help="which CLI agents are installed (each `<name>_bin`), "
                                                              "their versions and whether each answers; no session")
    doctor.set_defaults(handler=cmd_doctor)
