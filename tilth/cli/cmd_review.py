"""Subcommands that hand a session's branch to a reviewer or retire the session:
push, pr, diff, log, cleanse, reset. Handlers only parse, call the library and print."""

from __future__ import annotations

import argparse

from tilth.cli.pick import pick_session, session_command

# The libraries (actions/retiring, review: pygit2, pydantic) are imported by the handler that uses them.


def cmd_push(args: argparse.Namespace) -> int:
    from tilth.cli import review

    _, record = pick_session(args.id)
    print(review.push(record, args.remote).describe())
    return 0


def cmd_pr(args: argparse.Namespace) -> int:
    from tilth.cli import review

    paths, record = pick_session(args.id)
    opened = review.open_pr(paths, record, args.base, args.remote, args.web, echo=lambda line: print(line, flush=True))
    if opened.pr_url:
        from tilth.cli.follow_pr import start_following

        if start_following(paths, record, opened.pr_url, args.remote):
            print(f"`tilth follow {record.id}` carries it to green (CI failures become follow-up tasks)")
    if not opened.via_gh:
        where = opened.compare_url or f"your forge, from {record.branch} into {opened.base}"
        print(f"gh is not on PATH; open the pull request at {where}")
        print(f"description: {opened.body_file}")
    return 0


def cmd_follow(args: argparse.Namespace) -> int:
    from tilth.cli.follow_pr import follow

    paths, record = pick_session(args.id)
    if args.poll is None:
        from tilth.core.settings_load import load_settings

        args.poll = load_settings(paths.home).follow_poll_s
    pr = follow(paths, record, args.once, args.poll, say=lambda line: print(line, flush=True), again=args.again)
    return 1 if pr.state == "needs_person" else 0


def cmd_diff(args: argparse.Namespace) -> int:
    from tilth.cli import review

    _, record = pick_session(args.id)
    return review.show_diff(record)


def cmd_log(args: argparse.Namespace) -> int:
    from tilth.cli import review

    _, record = pick_session(args.id)
    print("\n".join(review.log_lines(record)))
    return 0


def cmd_cleanse(args: argparse.Namespace) -> int:
    from tilth.actions.retiring import cleanse_session
    from tilth.cli.show_acted import show

    paths, _ = pick_session(args.id)
    return show(cleanse_session(paths.home, paths.id, by="cli"))


def ask(question: str) -> bool:
    try:
        answer = input(question)
    except EOFError:
        print()
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_reset(args: argparse.Namespace) -> int:
    from tilth.actions.retiring import reset_session
    from tilth.cli.show_acted import show

    paths, _ = pick_session(args.id)
    return show(reset_session(paths.home, paths.id, by="cli", confirm=(lambda _question: True) if args.yes else ask))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    push = session_command(sub, "push", "push session/<id> from the source repo (your git, your credentials)",
                           cmd_push)
    push.add_argument("--remote", default="origin", help="remote to push to (default: origin)")

    pr = session_command(sub, "pr", "push if needed, then open a pull request with `gh` or print where to open one",
                         cmd_pr)
    pr.add_argument("--base", help="branch to merge into (default: the branch checked out in the repo, else main)")
    pr.add_argument("--remote", default="origin", help="remote to push to and open the PR on (default: origin)")
    pr.add_argument("--web", action="store_true", help="let gh finish creating the PR in the browser")

    follow = session_command(sub, "follow", "carry the session's pull request to green: re-run a flaky job once, "
                             "turn a CI failure into a follow-up task pushed to the PR; never merges", cmd_follow)
    follow.add_argument("--once", action="store_true", help="one poll: read, act, exit (for scripts and cron)")
    follow.add_argument("--again", action="store_true",
                        help="the PR waits for you and you have answered (raised a cap, looked at it): follow on")
    follow.add_argument("--poll", type=float, default=None,
                        help="seconds between polls (default: the follow_poll_s setting, 60; with jitter)")

    session_command(sub, "diff", "the session branch against its base commit", cmd_diff)

    session_command(sub, "log", "the session's commits with task, iterations and outcome", cmd_log)

    session_command(sub, "cleanse", "archive a merged or pushed session: remove worktree and branch, keep the record",
                    cmd_cleanse)

    reset = session_command(sub, "reset", "remove a session entirely: worktree, branch and session dir", cmd_reset)
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")
