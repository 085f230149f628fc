"""The HTTP scaffolding shared by the fake API servers (fake_openai, fake_anthropic, fake_responses).

`ScriptedServer` is a threaded HTTP server on 127.0.0.1:<free port> that answers each POST with
the next scripted `Response` for the request's model (FIFO per model, then the model=None
fallback queue, then an optional handler), logs every request, and handles the reply kinds that
need no wire format: "bytes" (sent verbatim), "drop" (close without answering), "hang" (never
answer until the server stops), any `delay` and `held` answers (given up when the client hangs up
first, counted in `hung_up`). Leaving the `with` block releases hung, stalled
and delayed handlers and keep-alive connections. A subclass renders "reply" (and its own kinds,
e.g. "stall") in `_render` and routes requests in `_get` / `_post`.
"""

from __future__ import annotations

import gzip
import itertools
import json
import select
import socket
import sys
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, ClassVar
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Response:
    """One scripted answer. `kind`: "reply" (rendered per request by the API module), "bytes" (sent
    verbatim), "drop" (close without answering), "hang" (never answer until the server stops),
    "stall" (headers and the stream's first event, then silence) or a module's own kind.
    Each API module subclasses this with its reply fields."""
    kind: str
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    held: bool = False
    """With `delay`: not answered at all if the client hangs up first (see `held`)."""

    # `a + b` concatenates these fields of two replies ...
    _concat: ClassVar[tuple[str, ...]] = ()
    # ... and takes these from `b` unless it leaves them None
    _latest: ClassVar[tuple[str, ...]] = ()

    def __add__(self, other: Response) -> Response:
        """`part + part`: one reply holding both (headers merged, delays added)."""
        if not self._concat or self.kind != "reply" or getattr(other, "kind", None) != "reply":
            return NotImplemented
        changes = {name: getattr(self, name) + getattr(other, name) for name in self._concat}
        for name in self._latest:
            changes[name] = getattr(other, name) if getattr(other, name) is not None else getattr(self, name)
        return replace(self, **changes, headers={**self.headers, **other.headers}, delay=self.delay + other.delay)

    @classmethod
    def raw(cls, status: int, body: bytes, content_type: str = "application/json") -> Response:
        """Send `body` verbatim with `status`."""
        return cls("bytes", status=status, body=body, content_type=content_type)

    @classmethod
    def drop(cls) -> Response:
        """Close the connection without sending anything."""
        return cls("drop")

    @classmethod
    def hang(cls) -> Response:
        """Accept the request and never send headers (until the server shuts down)."""
        return cls("hang")

    @classmethod
    def stall(cls) -> Response:
        """Send 200, the SSE headers and the stream's first event, then nothing (until the server shuts down)."""
        return cls("stall")


def delay(seconds: float, response: Response) -> Response:
    """`response`, answered `seconds` later (or dropped if the server stops first)."""
    return replace(response, delay=response.delay + seconds)


def held(seconds: float, response: Response) -> Response:
    """`response`, answered `seconds` later unless the client hangs up first: then it is never
    answered and `ScriptedServer.hung_up` counts it (a client killed while it waited)."""
    return replace(response, delay=response.delay + seconds, held=True)


def halves(text: str) -> list[str]:
    """`text` split in two non-empty parts (fewer if it is that short), to stream as deltas."""
    mid = (len(text) + 1) // 2
    return [part for part in (text[:mid], text[mid:]) if part]


def openai_error(message: str, type_: str = "fake_error", code: str | None = None, **extra: object) -> dict:
    """The OpenAI error envelope (Chat Completions and Responses)."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code, **extra}}


def openai_model(model_id: str) -> dict:
    """A model object as OpenAI's `/v1/models` lists it."""
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "fake"}


def openai_models(models: list[str]) -> dict:
    """OpenAI's `GET /v1/models` body."""
    return {"object": "list", "data": [openai_model(m) for m in models]}


class ScriptedServer:
    """Use as a context manager; `base_url` (…/v1) and `root_url` are set on entering."""

    thread_name = "fake-http"
    post_path = "/v1/messages"  # the route answered with scripted responses; what `posts()` lists by default
    dict_body = False  # hand the model handler {} (not None) for a body that isn't a JSON object
    request_id_header: str | None = None  # sent with every answer, e.g. "request-id"
    sse_no_cache = False  # send `Cache-Control: no-cache` with SSE streams
    handler_class: type[Handler]  # set below, to `Handler`; a subclass may extend it (e.g. with do_HEAD)

    def __init__(self, models: list[str] | None = None, api_key: str | None = None) -> None:
        """`models`: fixed model list (default: the models scripted so far). `api_key`: refuse
        requests without it (see `_key_ok`)."""
        self.requests: list[dict] = []
        self.hung_up = 0
        """`held` answers never sent: the client hung up while they were held."""
        self.base_url = ""  # http://127.0.0.1:PORT/v1
        self.root_url = ""  # http://127.0.0.1:PORT
        self._queues: dict[str | None, deque[Response]] = defaultdict(deque)
        self._models: list[str] = list(models or [])
        self._fixed_models = models is not None
        self._api_key = api_key
        self._handler: Callable[[dict], Response] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._ids = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def enqueue(self, model: str | None, *responses: Response) -> None:
        """Script `responses` (FIFO) for `model`; model=None: for any model with nothing left."""
        with self._lock:
            self._queues[model].extend(responses)
            if model is not None and model not in self._models and not self._fixed_models:
                self._models.append(model)

    def set_handler(self, fn: Callable[[dict], Response]) -> None:
        """Called with the parsed request body when no scripted response is left."""
        self._handler = fn

    def posts(self, path: str | None = None) -> list[dict]:
        """The recorded POSTs to `path` (default `post_path`; query string ignored)."""
        path = self.post_path if path is None else path
        with self._lock:
            return [r for r in self.requests if r.get("method", "POST") == "POST" and r["path"] == path]

    def __enter__(self):
        self._server = _Server(("127.0.0.1", 0), self.handler_class)
        self._server.fake = self
        self.root_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.base_url = self.root_url + "/v1"
        # A short poll interval keeps shutdown() from adding half a second to every test.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()  # wakes handlers in delay(), hang() and stall()
        self._server.shutdown()
        with self._lock:  # unblock handler threads idling on keep-alive connections
            for conn in self._connections:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._server.server_close()
        self._thread.join(timeout=5)

    # ---- what a subclass adapts to its wire format

    def _log_entry(self, h: Handler, body: dict | None) -> dict:
        """The `requests` entry for one request."""
        url = urlsplit(h.path)
        return {"method": h.command, "path": url.path, "query": parse_qs(url.query, keep_blank_values=True),
                "headers": {k.lower(): v for k, v in h.headers.items()}, "body": body, "time": time.time()}

    def _key_ok(self, headers) -> bool:
        return self._api_key is None or headers.get("authorization") == f"Bearer {self._api_key}"

    def _key_refusal(self) -> tuple[int, bytes]:
        """Status and body answering a request without the API key."""
        raise NotImplementedError

    def _handler_failed(self, exc: Exception) -> Response:
        """What the client gets when the handler raises (a 500 rather than a hung request)."""
        raise NotImplementedError

    def _unscripted(self, model: str | None) -> Response:
        """What the client gets when nothing is scripted for `model` and there is no handler."""
        raise NotImplementedError

    def _no_route(self, h: Handler) -> None:
        """Answer a request for a path this API doesn't have (a 404)."""
        raise NotImplementedError

    def _model_list(self) -> dict:
        """The body of `GET /v1/models`."""
        raise NotImplementedError

    def _get(self, h: Handler, path: str) -> None:
        """Answer GET `path` (trailing slash stripped); the request is already logged and authorized."""
        if path != "/v1/models":
            return self._no_route(h)
        h.send_json(200, self._model_list())

    def _post(self, h: Handler, path: str, body: dict | None) -> None:
        """Answer POST `path`: the scripted answer on `post_path`, 404 elsewhere."""
        if path != self.post_path:
            return self._no_route(h)
        self._answer(h, body if isinstance(body, dict) or not self.dict_body else {})

    def _render(self, h: Handler, r: Response, body: dict) -> None:
        """Send a reply (or a module-specific kind such as "stall") for request `body`."""
        raise NotImplementedError

    # ---- shared answering

    def _pick(self, body: dict | None) -> Response:
        model = body.get("model") if isinstance(body, dict) else None
        with self._lock:
            for key in (model, None):
                if self._queues.get(key):
                    return self._queues[key].popleft()
        if self._handler is not None:
            try:
                return self._handler(body)
            except Exception as exc:  # surface handler bugs to the client instead of hanging it
                return self._handler_failed(exc)
        return self._unscripted(model)

    def _answer(self, h: Handler, body: dict | None) -> None:
        """Pick the next response for `body` and send it: delay, drop, hang and bytes here, the rest
        via `_render` (with a non-dict body replaced by {})."""
        r = self._pick(body)
        if r.held and h.hung_up_within(r.delay):
            with self._lock:
                self.hung_up += 1
            r = r.drop()
        elif r.delay and not r.held and self._stopping.wait(r.delay):
            r = r.drop()  # the server is shutting down: don't answer late
        if r.kind == "drop":
            h.close_connection = True
        elif r.kind == "hang":
            h.wait_for_stop()
        elif r.kind == "bytes":
            h.send(r.status, r.body, r.content_type, r.headers)
        else:
            self._render(h, r, body if isinstance(body, dict) else {})


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True
    fake: ScriptedServer

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # disconnects are expected; real bugs stay loud
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streaming, as the real APIs do
    server: _Server

    @property
    def fake(self) -> ScriptedServer:
        return self.server.fake

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle plus delayed ACK adds ~40ms per request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.fake._lock:
            self.fake._connections.add(self.connection)

    def finish(self) -> None:
        with self.fake._lock:
            self.fake._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline().strip():  # trailers
                pass
            return b"".join(parts)
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def record(self) -> dict | None:
        """Read, decode and log the request body; None if absent or not JSON."""
        data = self._read_body()
        try:
            if (self.headers.get("content-encoding") or "").lower() in ("gzip", "x-gzip"):
                data = gzip.decompress(data)
            body = json.loads(data) if data else None
        except (ValueError, OSError, EOFError):
            body = None  # unparsed (or an encoding we can't undo, e.g. zstd): see headers["content-encoding"]
        entry = self.fake._log_entry(self, body)
        with self.fake._lock:
            self.fake.requests.append(entry)
        return body

    def _request_id(self) -> None:
        if self.fake.request_id_header:
            self.send_header(self.fake.request_id_header, f"req_fake{next(self.fake._ids)}")

    def send(self, status: int, body: bytes, content_type: str = "application/json",
             headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self._request_id()
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status: int, data: object, headers: dict[str, str] | None = None) -> None:
        self.send(status, json.dumps(data).encode(), headers=headers)

    def start_stream(self, headers: dict[str, str] | None = None) -> None:
        """200 and the headers of a chunked `text/event-stream`."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if self.fake.sse_no_cache:
            self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self._request_id()
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def sse(self, event: dict) -> None:
        """One `event: <type>` / `data: <json>` SSE event."""
        self.chunk(b"event: %s\ndata: %s\n\n" % (event["type"].encode(), json.dumps(event).encode()))

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def hung_up_within(self, seconds: float) -> bool:
        """Wait up to `seconds` for the client to close the connection (or the server to stop, which
        shuts it down): True when it did."""
        if select.select([self.connection], [], [], seconds)[0]:
            try:
                return not self.connection.recv(1, socket.MSG_PEEK)
            except OSError:
                return True
        return False

    def wait_for_stop(self) -> None:
        self.fake._stopping.wait()
        self.close_connection = True

    def _authorized(self) -> bool:
        if self.fake._key_ok(self.headers):
            return True
        self.send(*self.fake._key_refusal())
        return False

    def do_GET(self) -> None:
        self.record()
        if self._authorized():
            self.fake._get(self, urlsplit(self.path).path.rstrip("/"))

    def do_POST(self) -> None:
        body = self.record()
        if self._authorized():
            self.fake._post(self, urlsplit(self.path).path.rstrip("/"), body)


ScriptedServer.handler_class = Handler
