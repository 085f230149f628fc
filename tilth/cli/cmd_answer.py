"""`tilth answer <session> <task> "text"|--file F`: the answer read from the command line or a file and
given to `actions/place.answer_question`, which records it and queues the session again when it
had ended."""

from __future__ import annotations

import argparse
from pathlib import Path

from tilth.cli.pick import session_command
from tilth.core.errors import BadInput


def answer_text(args: argparse.Namespace) -> str:
    if (args.text is None) == (args.file is None):
        raise BadInput("give the answer as text or with --file PATH (one of them), e.g. "
                       "tilth answer s1 T-002 \"keep the v2 API\"")
    if args.file is None:
        return str(args.text)
    try:
        return Path(args.file).read_text(errors="replace")
    except OSError as exc:
        raise BadInput(f"cannot read the answer file {args.file}: {exc.strerror}") from None


def cmd_answer(args: argparse.Namespace) -> int:
    from tilth.actions.place import answer_question
    from tilth.cli.show_acted import show
    from tilth.store.home import tilth_home

    return show(answer_question(tilth_home(), args.id, answer_text(args), by="cli", task=args.task))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    answer = session_command(sub, "answer", "answer the question a parked task waits on; the task goes back to "
                                            "pending and the session is queued again", cmd_answer, "the session")
    answer.add_argument("task", help="the parked task (`tilth status <id>` lists open questions)")
    answer.add_argument("text", nargs="?", help="the answer")
    answer.add_argument("--file", metavar="PATH", help="read the answer from this file")
