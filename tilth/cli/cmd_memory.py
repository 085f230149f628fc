"""`tilth summarize` and `tilth learnings`: the memory channels a person may want to read; `tilth note`:
the one a person writes."""

from __future__ import annotations

import argparse

from tilth.cli.pick import pick_session, session_command


def cmd_summarize(args: argparse.Namespace) -> int:
    from tilth.core.settings_load import load_settings
    from tilth.store.progress_summary import SummarySettings, summary_path, write_summary

    paths, _ = pick_session(args.id)
    settings = load_settings(paths.home)
    before = summary_path(paths).stat().st_size if summary_path(paths).exists() else 0
    journal = paths.progress.stat().st_size if paths.progress.exists() else 0
    text = write_summary(paths, SummarySettings(settings.summary_recent_tasks, settings.summary_learnings,
                                                    settings.summary_table_rows))
    print(f"progress summary for {paths.id}: {before} -> {len(text.encode())} bytes "
          f"(journal {journal} bytes) at {summary_path(paths)}")
    return 0


def cmd_learnings(args: argparse.Namespace) -> int:
    from tilth.store.progress_summary import learnings_path

    paths, _ = pick_session(args.id)
    path = learnings_path(paths)
    print(path.read_text().strip() if path.exists() else f"no proposed learnings yet for {paths.id}")
    return 0


def cmd_note(args: argparse.Namespace) -> int:
    from tilth.actions.place import leave_note
    from tilth.cli.show_acted import show
    from tilth.store.home import tilth_home

    return show(leave_note(tilth_home(), args.id, args.text, by="cli", task=args.task))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    note = session_command(sub, "note", "leave a note for a session's agents: taken at the next task boundary and "
                                        "shown in every later worker and evaluator prompt; never interrupts an "
                                        "iteration", cmd_note, "the session to note")
    note.add_argument("text", help="what the agents should know")
    note.add_argument("--task", metavar="ID", help="only for this task")
    session_command(sub, "summarize", "regenerate a session's progress summary and print its size", cmd_summarize)
    session_command(sub, "learnings", "print the learnings proposed after each task", cmd_learnings)
