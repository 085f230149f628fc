"""The dashboard's secret and its one-time login links, under `$TILTH_HOME/dashboard/` (0700; the
agent sandbox hides all of `$TILTH_HOME`):

  secret                32 random bytes as hex (0600), made on first use, replaced whole by `rotate`;
                        every login cookie and CSRF token of the dashboard is an HMAC under it
  logins/<sha256>       one file (0600, empty) per login link not yet used, named by the hash of the
                        link's token (the token itself is never on disk); its mtime is when it was made

A link works once: using it is removing its file, and only one remover succeeds. After LOGIN_TTL_S,
or a rotation, it no longer works. `tilth serve` makes one when it starts, `tilth serve --login`
and `tilth daemon --serve` make one each (any process of the home's owner can: no server is asked).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tilth.core.clock import wall
from tilth.core.errors import BadInput
from tilth.store.jsonio import fsync_dir

DIR = "dashboard"
LOGIN_TTL_S = 24 * 3600
"""How long an unused login link works."""
LOGIN_PARAM = "once"
"""A login link is the dashboard's `/login?once=<token>` (`web/acting.py` serves it)."""
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{32,64}")


def login_link(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}/login?{LOGIN_PARAM}={token}"


class DashboardSecret:
    """The secret (read again whenever its file changes, so a rotation reaches a running dashboard)
    and the login links."""

    def __init__(self, home: Path):
        self.dir = home / DIR
        self.file = self.dir / "secret"
        self.logins = self.dir / "logins"
        self._seen: tuple[int, int, int] | None = None
        self._value = b""

    def value(self) -> bytes:
        """The secret, made now when there is none; one that others may read is refused."""
        with _refused(self.dir):
            return self._read()

    def _read(self) -> bytes:
        try:
            st = os.stat(self.file)
        except FileNotFoundError:
            self._place(replace=False)
            st = os.stat(self.file)
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise BadInput(f"the dashboard's secret {self.file} is readable by others; "
                           "`tilth serve --rotate-secret` makes a new one")
        seen = (st.st_ino, st.st_mtime_ns, st.st_size)
        if seen != self._seen:
            value = self.file.read_bytes().strip()
            if len(value) < 32:
                raise BadInput(f"the dashboard's secret {self.file} is damaged; "
                               "`tilth serve --rotate-secret` makes a new one")
            self._value, self._seen = value, seen
        return self._value

    def rotate(self) -> None:
        """A new secret: every login cookie and every unused login link stops working."""
        with _refused(self.dir):
            self._place(replace=True)
            if self.logins.is_dir():
                for entry in os.scandir(self.logins):
                    Path(entry.path).unlink(missing_ok=True)

    def mint_login(self) -> str:
        """A new login link's token (its file made; expired ones removed)."""
        self.value()
        with _refused(self.dir):
            self._private(self.logins)
            now = wall()
            for entry in os.scandir(self.logins):
                try:
                    if now - entry.stat().st_mtime > LOGIN_TTL_S:
                        os.unlink(entry.path)
                except FileNotFoundError:
                    pass
            token = secrets.token_urlsafe(32)
            fd = os.open(self.logins / _name(token), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
        return token

    def use_login(self, token: str) -> bool:
        """True once for a link's token made here and not yet used or expired; the link is spent either way."""
        if not TOKEN_SHAPE.fullmatch(token):
            return False
        path = self.logins / _name(token)
        try:
            made = path.stat().st_mtime
            path.unlink()  # the one use: a second remover gets FileNotFoundError
        except FileNotFoundError:
            return False
        return wall() - made <= LOGIN_TTL_S

    def _private(self, directory: Path) -> None:
        directory.parent.mkdir(parents=True, exist_ok=True)
        directory.mkdir(mode=0o700, exist_ok=True)
        if stat.S_IMODE(directory.stat().st_mode) != 0o700:
            os.chmod(directory, 0o700)

    def _place(self, replace: bool) -> None:
        """Write a new secret (0600 from its first byte); without `replace` one made meanwhile stays."""
        self._private(self.dir)
        fd, tmp = tempfile.mkstemp(prefix=".secret.", dir=self.dir)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_hex(32).encode() + b"\n")
                f.flush()
                os.fsync(f.fileno())
            if replace:
                os.replace(tmp, self.file)
            else:
                try:
                    os.link(tmp, self.file)
                except FileExistsError:
                    pass
        finally:
            Path(tmp).unlink(missing_ok=True)
        fsync_dir(self.dir)


@contextmanager
def _refused(where: Path) -> Iterator[None]:
    """Another user's dashboard: one line, not a traceback."""
    try:
        yield
    except PermissionError:
        raise BadInput(f"{where} is not yours to use (permission denied): the dashboard's secret and login links "
                       "belong to the user who runs its `tilth serve`") from None


def _name(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
