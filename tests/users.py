"""Who runs tilth in a test that must hold both ways: root with every capability (most users run it
so, in a container) and an unprivileged user (`setpriv` to nobody), in a directory outside /tmp that
the user owns (the sandbox hides /tmp, and pytest's /tmp/pytest-of-root is closed to others).
tests/test_confinement_home.py's machines and the dispatch attack tests' clusters
(tests/dispatch_cluster.py) take it from here."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

NOBODY = 65534
USERS = ("root", "unprivileged")
"""The parameter ids: a test that runs both ways is `[root]` and `[unprivileged]`."""


@dataclass(frozen=True)
class User:
    name: str
    """`root` or `unprivileged`."""

    def __post_init__(self) -> None:
        if self.name == "unprivileged" and (os.geteuid() != 0 or not shutil.which("setpriv")):
            pytest.skip("running tilth as an unprivileged user needs these tests run as root, with setpriv")

    @property
    def prefix(self) -> list[str]:
        """What each of the user's commands starts with."""
        if self.name == "root":
            return []
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

    @property
    def uid(self) -> int:
        """Who owns what the user's processes make."""
        return 0 if self.name == "root" else NOBODY

    @property
    def python(self) -> str:
        """The interpreter the user runs tilth with (this venv's packages either way)."""
        return sys.executable if self.name == "root" else python_for_others(tuple(self.prefix))

    def own(self, *paths: Path) -> None:
        """The paths (whole trees) are the user's: made by the test (root) for the user's processes."""
        if self.name != "root":
            subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", *map(str, paths)], check=True)


def outside_tmp(prefix: str) -> Path:
    """A fresh directory under /var/tmp (the caller removes it)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))


@functools.cache
def python_for_others(prefix: tuple[str, ...]) -> str:
    """This venv's interpreter when others may run it; else (its interpreter under a home closed to others,
    as pyenv's in /root) the system's Python of the same version in a venv of its own under /var/tmp, made
    once, whose one `.pth` adds this venv's site-packages (their `.pth` files too: tilth's editable install)."""
    if subprocess.run([*prefix, "sh", "-c", f'exec "{sys.executable}" -c ""'], capture_output=True).returncode == 0:
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(version, path="/usr/local/bin:/usr/bin")
    if system is None:
        pytest.fail(f"others cannot run {sys.executable} and there is no system {version} to run this venv's "
                    "packages with", pytrace=False)
    site = sysconfig.get_paths()["purelib"]
    shim = Path("/var/tmp") / f"tilth-tests-python-{hashlib.sha256(site.encode()).hexdigest()[:12]}"
    if not (shim / "ready").exists():
        building = Path(tempfile.mkdtemp(prefix=shim.name + ".", dir="/var/tmp"))
        subprocess.run([system, "-m", "venv", "--without-pip", str(building)], check=True, capture_output=True)
        own_site = subprocess.run([str(building / "bin" / "python"), "-c", "import sysconfig; "
                                   "print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True,
                                  text=True).stdout.strip()
        (Path(own_site) / "tilth-tests-venv.pth").write_text(f"import site; site.addsitedir({site!r})\n")
        (building / "ready").touch()
        building.chmod(0o755)
        try:
            building.rename(shim)
        except OSError:  # another test process made it first
            shutil.rmtree(building, ignore_errors=True)
    return str(shim / "bin" / "python")
