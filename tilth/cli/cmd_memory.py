"""`tilth summarize` and `tilth learnings`: the memory channels a person may want to read."""

from __future__ import annotations

import argparse

from tilth.cli.pick import ID_HELP, pick_session


def cmd_summarize(args: argparse.Namespace) -> int:
    from tilth.core.config import load_settings
    from tilth.store.summary import SummarySettings, summary_path, write_summary

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
    from tilth.store.summary import learnings_path

    paths, _ = pick_session(args.id)
    path = learnings_path(paths)
    print(path.read_text().strip() if path.exists() else f"no proposed learnings yet for {paths.id}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    summarize = sub.add_parser("summarize", help="regenerate a session's progress summary and print its size")
    summarize.add_argument("id", nargs="?", help=ID_HELP)
    summarize.set_defaults(handler=cmd_summarize)
    learnings = sub.add_parser("learnings", help="print the learnings proposed after each task")
    learnings.add_argument("id", nargs="?", help=ID_HELP)
    learnings.set_defaults(handler=cmd_learnings)
