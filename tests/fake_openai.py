"""A real local HTTP server speaking the OpenAI Chat Completions wire format.

The `openai` SDK talks through its own HTTP stack, which respx cannot intercept, so tests that
drive the real SDK point `base_url` at this server instead:

    with FakeOpenAI() as server:
        server.enqueue("worker", reply("hi"), fault(429, headers={"Retry-After": "0"}))
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)

Responses are scripted per model (FIFO), with a model=None fallback queue and an optional
handler; `reply()` is rendered as SSE or as a plain chat.completion depending on the request.
"""

from __future__ import annotations

import itertools
import json
import socket
import sys
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


@dataclass(frozen=True)
class Response:
    kind: str  # "reply" (rendered per request), "bytes" (sent verbatim) or "drop"
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    content: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()
    finish_reason: str | None = None
    usage: dict | None = None
    delay: float = 0.0


def call(tool: str, **args) -> tuple[str, str]:
    """One tool call, as `reply(tool_calls=[...])` takes it."""
    return tool, json.dumps(args)


SUBMIT = call("submit_case", summary="done", criteria=[{"criterion": "T-1 is done", "evidence": "x"}])
ACCEPT = call("submit_verdict", verdict="accept", category="none", concern="", evidence=[], next_step="")


def reply(content: str | None = None, tool_calls: list[tuple[str, str]] | None = None,
          finish_reason: str | None = None, usage: dict | None = None, cost: object = None,
          null_usage: bool = False) -> Response:
    """`usage` defaults to DEFAULT_USAGE; `null_usage=True` sends `"usage": null` instead."""
    usage = None if null_usage else dict(DEFAULT_USAGE if usage is None else usage)
    if cost is not None and usage is not None:
        usage["cost"] = cost  # OpenRouter reports spend as an extra usage field
    return Response("reply", content=content, tool_calls=tuple(tool_calls or ()), usage=usage,
                    finish_reason=finish_reason or ("tool_calls" if tool_calls else "stop"))


def _error_body(message: str, type_: str = "fake_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "param": None, "code": None}}).encode()


def fault(status: int, body: dict | str | None = None, headers: dict[str, str] | None = None) -> Response:
    """An HTTP error; a str body becomes the message of an OpenAI-style error envelope."""
    data = json.dumps(body).encode() if isinstance(body, dict) else _error_body(body or f"fake fault {status}")
    return Response("bytes", status=status, body=data, headers=dict(headers or {}))


def raw(status: int, body: bytes, content_type: str = "application/json") -> Response:
    return Response("bytes", status=status, body=body, content_type=content_type)


def drop() -> Response:
    return Response("drop")


def delay(seconds: float, response: Response) -> Response:
    return replace(response, delay=response.delay + seconds)


def _halves(text: str) -> list[str]:
    mid = (len(text) + 1) // 2
    return [part for part in (text[:mid], text[mid:]) if part]


class FakeOpenAI:
    def __init__(self, models: list[str] | None = None, api_key: str | None = None) -> None:
        """`models`: serve exactly these, as OpenAI does (`GET /v1/models/<id>` answers 404
        `model_not_found` for any other); default: list the scripted models, no `/models/<id>`.
        `api_key`: answer 401 `invalid_api_key` to any request without it."""
        self.requests: list[dict] = []
        self.base_url = ""
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
        with self._lock:
            self._queues[model].extend(responses)
            if model is not None and model not in self._models and not self._fixed_models:
                self._models.append(model)

    def set_handler(self, fn: Callable[[dict], Response]) -> None:
        self._handler = fn

    def __enter__(self) -> FakeOpenAI:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        # A short poll interval keeps shutdown() from adding half a second to every test.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()  # wakes handlers sleeping in delay()
        self._server.shutdown()
        with self._lock:  # unblock handler threads idling on keep-alive connections
            for conn in self._connections:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._server.server_close()
        self._thread.join(timeout=5)

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
                return raw(500, _error_body(f"fake server: handler raised {exc!r}"))
        return fault(500, f"fake server: no scripted response for model {model}",
                     headers={"x-should-retry": "false"})

    def _completion(self, r: Response, model: str | None) -> dict:
        message: dict = {"role": "assistant", "content": r.content, "refusal": None}
        if r.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                for i, (name, args) in enumerate(r.tool_calls)]
        return {"id": f"chatcmpl-fake{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                             "finish_reason": r.finish_reason}], "usage": r.usage}

    def _chunks(self, r: Response, model: str | None, include_usage: bool) -> list[dict]:
        base = {"id": f"chatcmpl-fake{next(self._ids)}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}
        extra = {"usage": None} if include_usage else {}

        def chunk(delta: dict, finish_reason: str | None = None) -> dict:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return {**base, "choices": [choice], **extra}

        first_content = None if r.content is None and r.tool_calls else ""
        chunks = [chunk({"role": "assistant", "content": first_content, "refusal": None})]
        chunks += [chunk({"content": part}) for part in _halves(r.content or "")]
        for i, (name, args) in enumerate(r.tool_calls):
            chunks.append(chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                                 "function": {"name": name, "arguments": ""}}]}))
            chunks += [chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
                       for part in _halves(args)]
        chunks.append(chunk({}, r.finish_reason))
        if include_usage:
            chunks.append({**base, "choices": [], "usage": r.usage})
        return chunks


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True
    fake: FakeOpenAI

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # disconnects are expected; real bugs stay loud
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streaming, as the real API does
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle plus delayed ACK adds ~40ms per request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.fake._lock:
            self.server.fake._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.fake._lock:
            self.server.fake._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _record(self) -> dict | None:
        length = int(self.headers.get("content-length") or 0)
        data = self.rfile.read(length) if length else b""
        try:
            body = json.loads(data) if data else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.fake.requests.append({"path": urlsplit(self.path).path, "headers": headers, "body": body})
        return body

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _key_refused(self) -> bool:
        key = self.server.fake._api_key
        if key is None or self.headers.get("authorization") == f"Bearer {key}":
            return False
        self._send(401, json.dumps({"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                              "param": None, "code": "invalid_api_key"}}).encode())
        return True

    def do_GET(self) -> None:
        fake = self.server.fake
        self._record()
        if self._key_refused():
            return
        path = urlsplit(self.path).path.rstrip("/")
        model = path.removeprefix("/v1/models/") if path.startswith("/v1/models/") else None
        if model is not None and fake._fixed_models:
            if model not in fake._models:
                message = f"The model `{model}` does not exist or you do not have access to it."
                return self._send(404, json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                                             "param": None, "code": "model_not_found"}}).encode())
            return self._send(200, json.dumps({"id": model, "object": "model", "created": 0,
                                               "owned_by": "fake"}).encode())
        if path != "/v1/models":
            return self._send(404, _error_body(f"fake server: no route GET {self.path}"))
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in fake._models]
        self._send(200, json.dumps({"object": "list", "data": data}).encode())

    def do_POST(self) -> None:
        fake = self.server.fake
        body = self._record()
        if self._key_refused():
            return
        if urlsplit(self.path).path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, _error_body(f"fake server: no route POST {self.path}"))
        r = fake._pick(body)
        if r.delay and fake._stopping.wait(r.delay):
            r = drop()  # the server is shutting down: don't answer late
        if r.kind == "drop":
            self.close_connection = True
            return
        if r.kind == "bytes":
            return self._send(r.status, r.body, r.content_type, r.headers)
        body = body if isinstance(body, dict) else {}
        model = body.get("model")
        if not body.get("stream"):
            return self._send(200, json.dumps(fake._completion(r, model)).encode(), headers=r.headers)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in [*fake._chunks(r, model, include_usage), "[DONE]"]:
            data = b"data: %s\n\n" % (event if isinstance(event, str) else json.dumps(event)).encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")
