"""A real Redis from the OS packages (`make redis`: scripts/install-redis.sh) on a loopback port,
for the dispatch tests and benchmark: a password always required (`--requirepass`, in the URL as
a team runs it), append-only file on, fsynced every write, so a restart loses nothing that was
acknowledged (`persistent=False`: nothing kept across a restart).

Without `redis-server` a test skips with the reason; with `TILTH_REQUIRE_REDIS=1` or `CI=true`
it fails instead.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path


def redis_bin() -> str | None:
    return shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists()
                                            else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, directory: Path, binary: str, persistent: bool = True, tls: bool = False):
        self.dir, self.binary, self.port = directory, binary, free_port()
        self.tls = tls
        self.password = secrets.token_hex(12)
        self.persistent = persistent
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        if self.tls:
            return (f"rediss://:{self.password}@127.0.0.1:{self.port}/0?ssl_cert_reqs=required"
                    f"&ssl_ca_certs={self.dir / 'tls.crt'}")
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def tls_args(self) -> list[str]:
        """TLS only (no plain port), with a self-signed certificate for 127.0.0.1 made here."""
        cert, key = self.dir / "tls.crt", self.dir / "tls.key"
        if not cert.exists():
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                            "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                            "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        return ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(cert), "--tls-key-file",
                str(key), "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"]

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(
            [self.binary, *(self.tls_args() if self.tls else ["--port", str(self.port)]), "--bind", "127.0.0.1",
             "--dir", str(self.dir),
             "--appendonly", "yes" if self.persistent else "no", "--appendfsync", "always", "--save", "",
             "--requirepass", self.password],
            stdout=open(self.dir / "redis.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 20) -> None:
        import redis

        deadline = time.monotonic() + timeout
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        while True:
            try:
                if client.ping():
                    return
            except (redis.ConnectionError, redis.BusyLoadingError):
                pass
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"redis-server exited {self.proc.returncode}: "
                                     f"{(self.dir / 'redis.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError("redis-server did not answer PING")
            time.sleep(0.05)

    def stop(self) -> None:
        """An orderly shutdown (the append-only file is complete), then the process is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()
