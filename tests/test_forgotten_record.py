"""A session the broker forgot is read from its own record on the shared remote (`dispatch/recorded.py`):
the last files snapshot says how it ended or how far it got, and with signing on it counts only when its
signature verifies. Real git: a session run here, its files sealed and pushed to a bare remote."""

from __future__ import annotations

import json
import subprocess

from conftest import git, task
from tilth.dispatch.carried import carried_files, seal
from tilth.dispatch.recorded import read
from tilth.git.records import fetch_records, remote_record
from tilth.store.home import session_paths

SECRET = b"the team's secret, 32 bytes long"


def test_a_forgotten_session_counts_as_finished_only_when_its_record_verifies(sandbox, tmp_path):
    assert sandbox.start("rec", [task("T-1")]).returncode == 0
    files = carried_files(session_paths("rec", sandbox.home))
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)

    def pushed(files: dict[str, bytes], secret: bytes | None) -> tuple[str, str]:
        seal(sandbox.repo, "rec", files, "ended", secret)
        git(sandbox.repo, "push", "-q", str(remote), "session/rec", "refs/tilth/sessions/rec:refs/tilth/sessions/rec")
        tip = remote_record(tmp_path, str(remote))["rec"].branch
        assert tip is not None
        return str(fetch_records(tmp_path / "clones", str(remote), ["rec"])), tip

    records, tip = pushed(files, SECRET)
    ended = read(records, "rec", tip, SECRET)
    assert ended.finished and ended.said == "done" and ended.state["progress"] == "1/1", ended
    record = json.loads(files["session.json"])
    forged = {**files, "session.json": json.dumps({**record, "state": "running"}).encode()}
    records, tip = pushed(forged, b"not the team's secret, 32 bytes!")
    refused = read(records, "rec", tip, SECRET)
    assert not refused.finished and refused.said == "unverified", refused
    assert "does not match its signature" in refused.untrusted
    unsigned = read(records, "rec", tip, None)  # signing off: the record is data, and says running
    assert not unsigned.finished and unsigned.said == "running"
