"""The git CLI calls tilth makes in the user's source repository, as subprocesses.

Used where tilth acts on the user's behalf and must behave exactly like their own git
(push with their credential helpers, SSH config and pre-push hook; diff through their
pager) and for read-only questions about refs. Everything else is pygit2, in gitops.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tilth.core.errors import BadInput, TilthError


class GitFailed(TilthError):
    """A git (or gh) command or a libgit2 call failed; the message carries its most telling line."""


def telling_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("!", "fatal:", "error:")):
            return line
    return lines[-1] if lines else "(no message)"


def run(cwd: str | Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise BadInput("git is not on PATH; install git or fix PATH") from None
    if check and proc.returncode != 0:
        raise GitFailed(f"git {args[0]} failed in {cwd}: {telling_line(proc.stderr)}")
    return proc


def require_repo(repo: str | Path) -> Path:
    path = Path(repo)
    if not path.is_dir():
        raise BadInput(f"the session's repository {path} is gone; nothing to act on there")
    return path


def branch_tip(repo: str | Path, branch: str) -> str | None:
    """The branch's tip commit, None when there is no such branch; a tip that is there but
    cannot be read (a damaged object) is an error naming it, not a missing branch."""
    proc = run(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", check=False)
    if proc.returncode == 0 and proc.stdout.strip():
        return proc.stdout.strip()
    ref = run(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    if ref.returncode != 0:
        return None
    sha = ref.stdout.strip()
    probe = run(repo, "cat-file", "-t", sha, check=False)
    raise GitFailed(f"the tip {sha} of {branch} in {repo} cannot be read ({telling_line(probe.stderr)}); "
                    "`git fsck` there shows what is damaged")


def remote_urls(repo: str | Path, remote: str) -> tuple[str, str]:
    """(fetch URL, push URL) of a remote, after insteadOf rewriting."""
    fetch = run(repo, "remote", "get-url", "--", remote, check=False)
    if fetch.returncode != 0:
        raise BadInput(f"{repo} has no remote {remote!r}; add it (`git remote add {remote} URL`) or pass --remote")
    push = run(repo, "remote", "get-url", "--push", "--", remote)
    return fetch.stdout.strip(), push.stdout.strip()


def remote_tip(repo: str | Path, url: str, branch: str) -> str | None:
    """The sha the remote at `url` has for the branch, asked over the wire (never a stale tracking ref)."""
    out = run(repo, "ls-remote", "--", url, f"refs/heads/{branch}").stdout.split()
    return out[0] if out else None


def push_branch(repo: str | Path, remote: str, branch: str, lease: str | None = None) -> None:
    """A plain push, or with `lease` (the branch was rewritten: a retried task's placeholder left it)
    `--force-with-lease` against exactly that old tip: refused, in one line, when the remote has moved."""
    ref = f"refs/heads/{branch}"
    forced = [f"--force-with-lease={ref}:{lease}"] if lease else []
    proc = run(repo, "push", *forced, "--", remote, f"{ref}:{ref}", check=False)
    if proc.returncode == 0:
        return
    if lease and "rejected" in proc.stderr:
        raise GitFailed(f"{remote}'s {branch} is no longer at {lease[:7]}, the tip tilth's rewrite of it replaces "
                        f"(someone pushed there): nothing was pushed or overwritten; look at what is there "
                        f"(`git -C {repo} fetch {remote} {branch}`), then push again")
    message = f"git push of {branch} to {remote} failed: {telling_line(proc.stderr)}"
    if "rejected" in proc.stderr:
        message += (f"; {remote} has commits {branch} lacks (someone pushed there): check them, then "
                    f"`git -C {repo} push --force-with-lease {remote} {branch}`")
    raise GitFailed(message)


def pushed_ref(session_id: str, remote: str) -> str:
    """Where the source repo keeps the tip tilth last pushed of a session to a remote (the lease of a rewrite)."""
    return f"refs/tilth/pushed/{session_id}/{remote}"


def ref_target(repo: str | Path, ref: str) -> str | None:
    proc = run(repo, "rev-parse", "--verify", "--quiet", ref, check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def set_ref(repo: str | Path, ref: str, sha: str) -> None:
    run(repo, "update-ref", ref, sha)


def contains(repo: str | Path, tip: str, sha: str) -> bool:
    """`sha` is in `tip`'s history (False when `sha` is no commit here: someone else's push)."""
    return run(repo, "merge-base", "--is-ancestor", sha, tip, check=False).returncode == 0


def current_branch(repo: str | Path) -> str | None:
    proc = run(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def refs_containing(repo: str | Path, sha: str) -> list[str]:
    """Local branches and remote-tracking refs whose history includes `sha`."""
    out = run(repo, "for-each-ref", "--contains", sha, "--format=%(refname)", "refs/heads", "refs/remotes")
    return out.stdout.split()


LOG_FIELDS = ("sha", "subject", "Tilth-Task", "Tilth-Iterations", "Tilth-Outcome")


def log_records(repo: str | Path, base: str, branch: str) -> list[dict[str, str]]:
    """Commits base..branch, oldest first, with tilth's trailers (empty when absent)."""
    trailers = "".join(f"%x1f%(trailers:key={key},valueonly,separator=%x2C)" for key in LOG_FIELDS[2:])
    out = run(repo, "log", "--reverse", f"--format=%h%x1f%s{trailers}%x1e", f"{base}..refs/heads/{branch}").stdout
    records = []
    for chunk in out.split("\x1e"):
        if chunk.strip():
            values = [v.strip() for v in chunk.strip("\n").split("\x1f")]
            records.append(dict(zip(LOG_FIELDS, values)))
    return records


def show_diff(repo: str | Path, base: str, branch: str) -> int:
    """`git diff base..branch` printed as text: the files are the worker's, so no external diff driver,
    textconv, pager or colour of git's runs, and what is printed goes through the terminal guard
    (`core/terminal.py`) like every other line tilth prints."""
    done = subprocess.run(["git", "-C", str(repo), "-c", "core.pager=cat", "diff", "--no-ext-diff", "--no-textconv",
                           "--no-color", f"{base}..refs/heads/{branch}"], capture_output=True)
    sys.stdout.write(done.stdout.decode("utf-8", "replace"))
    sys.stderr.write(done.stderr.decode("utf-8", "replace"))
    return done.returncode
