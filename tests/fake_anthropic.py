"""A real local HTTP server speaking the Anthropic Messages API wire format.

Claude Code (a native binary) cannot be intercepted in-process, so tests point it here with
`ANTHROPIC_BASE_URL=server.root_url` (no `/v1`: it posts to `/v1/messages?beta=true`):

    with FakeAnthropic() as server:
        server.enqueue("claude-stub-model",
                       reply(text("Writing it."), tool_use("Write", file_path="/x/a.txt", content="a\\n")),
                       text("Done."))

Replies are scripted per model (FIFO), with a model=None fallback queue and an optional handler,
as in fake_openai.FakeOpenAI. A reply is rendered as SSE when the request says `"stream": true`
and as a plain `message` JSON otherwise. Besides replies: `fault()` (Anthropic error envelope),
`rate_limited()`, `overloaded()`, `usage_limit()`, `stream_error()`, `drop()`, `hang()`, `stall()`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from fake_http import Handler, ScriptedServer, delay, halves
from fake_http import Response as _Response

__all__ = ["DEFAULT_USAGE", "ERROR_TYPES", "Response", "text", "tool_use", "thinking", "usage", "reply", "error_body",
           "fault", "rate_limited", "overloaded", "usage_limit", "raw", "drop", "hang", "stall", "stream_error",
           "delay", "FakeAnthropic"]

DEFAULT_USAGE = {"input_tokens": 100, "output_tokens": 20,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}


@dataclass(frozen=True)
class Response(_Response):
    # kind: "reply" (rendered per request), "bytes" (sent verbatim), "drop" (close without answering),
    # "hang" (never answer until the server stops), "stall" (headers + message_start, then silence),
    # "stream_error" (headers + message_start, then an SSE `error` event).
    # `text("a") + tool_use(...)`: one reply with both content blocks.
    blocks: tuple[dict, ...] = ()
    stop_reason: str | None = None
    usage: dict | None = None

    _concat = ("blocks",)
    _latest = ("stop_reason", "usage")


def text(content: str) -> Response:
    """A reply with one text block."""
    return Response("reply", blocks=({"type": "text", "text": content},))


def tool_use(name: str, **input: object) -> Response:
    """A reply with one tool_use block; its id (`toolu_fake<N>`) is assigned when sent."""
    return Response("reply", blocks=({"type": "tool_use", "name": name, "input": input},))


def thinking(content: str, signature: str = "sig-fake") -> Response:
    return Response("reply", blocks=({"type": "thinking", "thinking": content, "signature": signature},))


def usage(input_tokens: int = 100, output_tokens: int = 20, cache_creation_input_tokens: int = 0,
          cache_read_input_tokens: int = 0, **extra: object) -> dict:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_creation_input_tokens,
            "cache_read_input_tokens": cache_read_input_tokens, **extra}


def reply(*parts: Response, stop_reason: str | None = None, usage: dict | None = None,
          headers: dict[str, str] | None = None) -> Response:
    """Combine `text()` / `tool_use()` parts into one reply. `stop_reason` defaults to "tool_use"
    when a tool_use block is present, else "end_turn"; `usage` defaults to DEFAULT_USAGE."""
    blocks = tuple(block for part in parts for block in part.blocks)
    return Response("reply", blocks=blocks, stop_reason=stop_reason, usage=usage, headers=dict(headers or {}))


def error_body(status: int, message: str | None = None, type_: str | None = None) -> dict:
    return {"type": "error",
            "error": {"type": type_ or ERROR_TYPES.get(status, "api_error"), "message": message or f"fake fault {status}"},
            "request_id": "req_fake"}


def fault(status: int, message: str | None = None, type_: str | None = None,
          headers: dict[str, str] | None = None, body: dict | None = None) -> Response:
    """An HTTP error with an Anthropic-style error envelope (type picked from the status)."""
    data = json.dumps(body if body is not None else error_body(status, message, type_)).encode()
    return Response("bytes", status=status, body=data, headers=dict(headers or {}))


def rate_limited(retry_after: float = 0, message: str = "Number of requests has exceeded your rate limit.") -> Response:
    """A plain per-minute 429 (what the API sends to API-key users), with `retry-after`."""
    return fault(429, message, headers={"retry-after": f"{retry_after:g}",
                                        "anthropic-ratelimit-requests-limit": "50",
                                        "anthropic-ratelimit-requests-remaining": "0",
                                        "anthropic-ratelimit-requests-reset": _iso(time.time() + retry_after)})


def overloaded(message: str = "Overloaded") -> Response:
    return fault(529, message, "overloaded_error")


def usage_limit(resets_in: float = 3600, claim: str = "five_hour",
                message: str = "This request would exceed your account's rate limit. Please try again later.") -> Response:
    """The 429 a subscription account gets when its 5-hour / weekly allowance is spent: a
    rate_limit_error plus the `anthropic-ratelimit-unified-*` headers Claude Code reads
    (status "rejected", the reset as a unix time, which window was hit) and `retry-after`.
    Claude Code 2.1.330 with an API key: one request, no retry (a long `retry-after` alone stops it
    retrying), then a result with is_error, api_error_status 429, and the text
    "API Error: Request rejected (429) · <message>". rc=1."""
    reset = int(time.time() + resets_in)
    window = {"five_hour": "5h", "seven_day": "7d"}.get(claim, "5h")
    return fault(429, message, "rate_limit_error", headers={
        "retry-after": str(int(resets_in)),
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(reset),
        "anthropic-ratelimit-unified-representative-claim": claim,
        f"anthropic-ratelimit-unified-{window}-status": "rejected",
        f"anthropic-ratelimit-unified-{window}-reset": str(reset),
        f"anthropic-ratelimit-unified-{window}-utilization": "1.0",
        "anthropic-ratelimit-unified-fallback": "unavailable",
        "anthropic-ratelimit-unified-overage-status": "rejected",
        "anthropic-ratelimit-unified-overage-disabled-reason": "out_of_credits",
        "x-should-retry": "false",
    })


raw = Response.raw
drop = Response.drop
hang = Response.hang
stall = Response.stall


def stream_error(type_: str = "overloaded_error", message: str = "Overloaded") -> Response:
    """200 and `message_start`, then an SSE `error` event, as the API does when it fails mid-stream.
    A non-streaming request gets the same error as an HTTP status (529 for overloaded_error)."""
    return Response("stream_error", body=json.dumps({"type": "error", "error": {"type": type_, "message": message}}).encode())


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class FakeAnthropic(ScriptedServer):
    """`base_url` is http://127.0.0.1:PORT/v1 (for SDKs), `root_url` http://127.0.0.1:PORT (for
    ANTHROPIC_BASE_URL); POST /v1/messages[/count_tokens], GET /v1/models, HEAD anything."""

    thread_name = "fake-anthropic"
    post_path = "/v1/messages"
    request_id_header = "request-id"
    sse_no_cache = True
    dict_body = True

    def __init__(self, api_key: str | None = None) -> None:
        """`api_key`: answer 401 authentication_error to any request that sends neither
        `x-api-key: <key>` nor `Authorization: Bearer <key>`."""
        super().__init__(api_key=api_key)

    def __enter__(self) -> FakeAnthropic:
        return super().__enter__()

    def _key_ok(self, headers) -> bool:
        return super()._key_ok(headers) or headers.get("x-api-key") == self._api_key

    def _key_refusal(self) -> tuple[int, bytes]:
        return 401, json.dumps(error_body(401, "invalid x-api-key")).encode()

    def _handler_failed(self, exc: Exception) -> Response:
        return fault(500, f"fake server: handler raised {exc!r}", headers={"x-should-retry": "false"})

    def _unscripted(self, model: str | None) -> Response:
        return fault(500, f"fake server: no scripted response for model {model}", headers={"x-should-retry": "false"})

    def _no_route(self, h: Handler) -> None:
        h.send_json(404, error_body(404, f"fake server: no route {h.command} {h.path}"))

    def _model_list(self) -> dict:
        data = [{"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in self._models]
        return {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None}

    def _post(self, h: Handler, path: str, body: dict | None) -> None:
        if path == "/v1/messages/count_tokens":
            return h.send_json(200, {"input_tokens": len(json.dumps(body)) // 4})
        messages = body.get("messages") if isinstance(body, dict) else None
        if path == "/v1/messages" and not isinstance(messages, list):
            return h.send_json(400, error_body(400, "messages: Field required"))
        super()._post(h, path, body)

    def _render(self, h: Handler, r: Response, body: dict) -> None:
        if r.kind == "stream_error" and not body.get("stream"):
            # Claude Code retries a failed stream without streaming: answer that with the HTTP equivalent
            error = json.loads(r.body)["error"]
            status = next((s for s, t in ERROR_TYPES.items() if t == error["type"]), 500)
            return h.send_json(status, error_body(status, error["message"], error["type"]))
        message, _ = self._message(r if r.kind == "reply" else Response("reply"), body.get("model"))
        if r.kind == "reply" and not body.get("stream"):
            return h.send_json(200, message, headers=r.headers)
        h.start_stream(r.headers)
        if r.kind == "stall":
            h.sse(self._message_start(message))
            return h.wait_for_stop()
        if r.kind == "stream_error":
            h.sse(self._message_start(message))
            h.sse(json.loads(r.body))
        else:
            for event in self._events(message):
                h.sse(event)
        h.end_stream()

    def _message(self, r: Response, model: str | None) -> tuple[dict, list[dict]]:
        """The reply as a complete `message` plus its content blocks with ids filled in."""
        blocks = []
        for block in r.blocks:
            if block["type"] == "tool_use":
                block = {"type": "tool_use", "id": f"toolu_fake{next(self._ids)}", "name": block["name"],
                         "input": block["input"]}
            blocks.append(block)
        stop = r.stop_reason or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
        message = {"id": f"msg_fake{next(self._ids)}", "type": "message", "role": "assistant", "model": model,
                   "content": blocks, "stop_reason": stop, "stop_sequence": None,
                   "usage": dict(DEFAULT_USAGE if r.usage is None else r.usage)}
        return message, blocks

    @staticmethod
    def _message_start(message: dict) -> dict:
        u = message["usage"]
        start_usage = {k: v for k, v in u.items() if k != "output_tokens"}
        start_usage["output_tokens"] = 1 if u.get("output_tokens") else 0
        return {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                     "usage": start_usage}}

    def _events(self, message: dict) -> list[dict]:
        events = [self._message_start(message)]
        for i, block in enumerate(message["content"]):
            if block["type"] == "text":
                events.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
                events += [{"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": part}}
                           for part in halves(block["text"])]
            elif block["type"] == "thinking":
                events.append({"type": "content_block_start", "index": i,
                               "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
                events += [{"type": "content_block_delta", "index": i,
                            "delta": {"type": "thinking_delta", "thinking": part}} for part in halves(block["thinking"])]
                events.append({"type": "content_block_delta", "index": i,
                               "delta": {"type": "signature_delta", "signature": block["signature"]}})
            else:
                events.append({"type": "content_block_start", "index": i,
                               "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"],
                                                 "input": {}}})
                events += [{"type": "content_block_delta", "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": part}}
                           for part in ["", *halves(json.dumps(block["input"]))]]
            events.append({"type": "content_block_stop", "index": i})
        events.append({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                       "usage": {"output_tokens": message["usage"].get("output_tokens", 0)}})
        events.append({"type": "message_stop"})
        return events


class _Handler(Handler):
    def do_HEAD(self) -> None:  # Claude Code probes `HEAD /api/hello` unless non-essential traffic is off
        self.record()
        self.send(200, b"")


FakeAnthropic.handler_class = _Handler
