"""Project conventions (AGENTS.md, CLAUDE.md, TILTH_CONTEXT_FILES), read from the committed
tree at the session branch HEAD, never from the worktree: a worker cannot rewrite the
rules its evaluator reads. tilth never writes these files."""

from __future__ import annotations

import pygit2


def committed_text(repo: pygit2.Repository, name: str) -> str | None:
    tree = repo.head.peel(pygit2.Commit).tree
    try:
        entry = tree[name.strip("/")]
    except KeyError:
        return None
    blob = repo[entry.id]
    if not isinstance(blob, pygit2.Blob) or blob.is_binary:
        return None
    return blob.data.decode("utf-8", errors="replace")


def conventions_text(repo: pygit2.Repository, names: list[str]) -> str:
    """The existing files, first listed first, each under its own heading."""
    parts = []
    for name in names:
        text = committed_text(repo, name)
        if text and text.strip():
            parts.append(f"From {name}:\n{text.strip()}")
    return "\n\n".join(parts)
