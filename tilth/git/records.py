"""What the shared remote itself records of dispatched sessions, read without touching any clone a
worker runs sessions in: which sessions it has (`remote_record`: one `git ls-remote` of both ref
kinds), and each named session's files snapshot fetched into a bare repository kept only for reading
(`$TILTH_HOME/clones/<key>.records`, refs `refs/tilth/recorded/<id>`), so a worker's branch ahead of
the remote is never moved back by someone reading the record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tilth.git.carry import BRANCH_REF, FILES_REF, clone_dir, clone_lock
from tilth.git.gitcli import run

RECORDED_REF = "refs/tilth/recorded/{}"


@dataclass(frozen=True)
class OnRemote:
    files: str
    """The files snapshot's commit on the remote."""
    branch: str | None
    """The session branch's tip on the remote (what a snapshot's signature covers), None without one."""


def remote_record(cwd: Path, remote: str) -> dict[str, OnRemote]:
    """Every session whose files are on `remote`, by id as named there (the caller checks each id
    before it names anything)."""
    listed = run(cwd, "ls-remote", "--", remote, FILES_REF.format("*"), BRANCH_REF.format("*")).stdout
    refs: dict[str, str] = {}
    for line in listed.splitlines():
        sha, tab, ref = line.partition("\t")
        if tab:
            refs[ref] = sha
    files_prefix, branch_prefix = FILES_REF.format(""), BRANCH_REF.format("")
    return {ref[len(files_prefix):]: OnRemote(sha, refs.get(branch_prefix + ref[len(files_prefix):]))
            for ref, sha in refs.items() if ref.startswith(files_prefix)}


def records_dir(clones: Path, remote: str) -> Path:
    clone = clone_dir(clones, remote)
    return clone.with_name(clone.name + ".records")


def fetch_records(clones: Path, remote: str, ids: list[str]) -> Path:
    """The files snapshots of `ids` (each on the remote) fetched, only their last commit, into this
    machine's reading repository of `remote` as `RECORDED_REF`; that repository's path."""
    records = records_dir(clones, remote)
    with clone_lock(records):
        if not (records / "HEAD").exists():
            clones.mkdir(parents=True, exist_ok=True)
            run(clones, "init", "--quiet", "--bare", str(records))
        if ids:
            run(records, "fetch", "--quiet", "--force", "--no-tags", "--depth=1", "--", remote,
                *(f"+{FILES_REF.format(i)}:{RECORDED_REF.format(i)}" for i in ids))
    return records
