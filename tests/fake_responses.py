"""A real local HTTP server speaking the OpenAI Responses API wire format (`POST /v1/responses`).

Codex CLI (a native binary) talks to it through a `-c model_providers.<id>={base_url=server.base_url,
wire_api="responses", ...}` provider:

    with FakeResponses() as server:
        server.enqueue("gpt-5.5", apply_patch("*** Begin Patch\\n*** Add File: a.txt\\n+a\\n*** End Patch\\n"),
                       message("Done."))

Replies are scripted per model (FIFO), with a model=None fallback queue and an optional handler,
as in fake_openai.FakeOpenAI. A reply is a list of output items (`message()`, `function_call()`,
`custom_tool_call()`, combined with `+` or `reply()`), rendered as SSE when the request says
`"stream": true` and as a plain `response` JSON otherwise. Besides replies: `fault()` (OpenAI
error envelope), `usage_limit()`, `failed()` (`response.failed`), `error_event()` (SSE `error`),
`drop()`, `hang()`, `stall()`.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass

from fake_http import Handler, ScriptedServer, delay, halves, openai_error, openai_models
from fake_http import Response as _Response

__all__ = ["DEFAULT_USAGE", "Response", "message", "function_call", "custom_tool_call", "apply_patch", "exec_command",
           "usage", "reply", "error_body", "fault", "rate_limited", "usage_limit", "failed", "error_event", "raw",
           "drop", "hang", "stall", "delay", "FakeResponses"]

DEFAULT_USAGE = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120}


@dataclass(frozen=True)
class Response(_Response):
    # kind: "reply" (rendered per request), "bytes" (sent verbatim), "drop" (close without answering),
    # "hang" (never answer until the server stops), "stall" (headers + response.created, then silence),
    # "failed" (response.created/in_progress then response.failed), "error_event" (... then an SSE `error`).
    # `message("a") + function_call(...)`: one reply with both output items.
    items: tuple[dict, ...] = ()
    usage: dict | None = None

    _concat = ("items",)
    _latest = ("usage",)


def message(text: str) -> Response:
    """A reply with one assistant `message` item holding one `output_text` part."""
    return Response("reply", items=({"type": "message", "text": text},))


def function_call(name: str, **arguments: object) -> Response:
    """A reply with one `function_call` item (`arguments` JSON-encoded); call_id assigned when sent."""
    return Response("reply", items=({"type": "function_call", "name": name, "arguments": json.dumps(arguments)},))


def custom_tool_call(name: str, input: str) -> Response:
    """A reply with one `custom_tool_call` item (freeform tools such as Codex's apply_patch)."""
    return Response("reply", items=({"type": "custom_tool_call", "name": name, "input": input},))


def apply_patch(patch: str) -> Response:
    return custom_tool_call("apply_patch", patch)


def exec_command(cmd: str, **arguments: object) -> Response:
    return function_call("exec_command", cmd=cmd, **arguments)


def usage(input_tokens: int = 100, output_tokens: int = 20, cached_tokens: int = 0,
          reasoning_tokens: int = 0) -> dict:
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": input_tokens + output_tokens}


def reply(*parts: Response, usage: dict | None = None, headers: dict[str, str] | None = None) -> Response:
    """Combine output items into one reply; `usage` defaults to DEFAULT_USAGE."""
    return Response("reply", items=tuple(item for part in parts for item in part.items), usage=usage,
                    headers=dict(headers or {}))


error_body = openai_error


def fault(status: int, message: str | None = None, type_: str | None = None, code: str | None = None,
          headers: dict[str, str] | None = None, body: dict | None = None) -> Response:
    """An HTTP error with an OpenAI-style error envelope."""
    data = body if body is not None else error_body(message or f"fake fault {status}",
                                                   type_ or ("server_error" if status >= 500 else "invalid_request_error"),
                                                   code)
    return Response("bytes", status=status, body=json.dumps(data).encode(), headers=dict(headers or {}))


def rate_limited(retry_after: float = 0, message: str = "Rate limit reached for requests.") -> Response:
    return fault(429, message, "requests", "rate_limit_exceeded", headers={"retry-after": f"{retry_after:g}"})


def usage_limit(resets_in: int = 3600, plan_type: str = "plus",
                message: str = "You've hit your usage limit.") -> Response:
    """The 429 Codex maps to its usage-limit error (not retried): `error.type` is
    "usage_limit_reached", with `plan_type` and the reset both as `resets_at` (unix seconds, newer
    Codex) and `resets_in_seconds` (older), plus the `x-codex-primary-*` rate-limit headers.
    Codex 0.169: one request, no retry, `turn.failed` with its own text ("You’ve hit your usage
    limit. Upgrade to Pro (…) or try again at <local time>.", curly apostrophe; `message` is not shown). rc=1."""
    reset = int(time.time()) + resets_in
    body = error_body(message, "usage_limit_reached", "usage_limit_reached", plan_type=plan_type,
                      resets_at=reset, resets_in_seconds=resets_in)
    return fault(429, body=body, headers={"x-codex-primary-used-percent": "100",
                                          "x-codex-primary-window-minutes": "300",
                                          "x-codex-primary-reset-at": str(reset),
                                          "x-codex-primary-reset-after-seconds": str(resets_in)})


def failed(message: str = "fake failure", code: str = "server_error") -> Response:
    """200 and response.created/in_progress, then `response.failed` with `response.error` (a
    non-streaming request gets a 500 with the same code and message)."""
    return Response("failed", body=json.dumps({"code": code, "message": message}).encode())


def error_event(message: str = "fake stream error", code: str = "server_error") -> Response:
    """200 and response.created/in_progress, then a bare SSE `error` event (a non-streaming request
    gets a 500 with the same code and message). Codex 0.169 ignores the event's message and reports
    "stream closed before response.completed"."""
    return Response("error_event", body=json.dumps({"code": code, "message": message}).encode())


raw = Response.raw
drop = Response.drop
hang = Response.hang
stall = Response.stall


class FakeResponses(ScriptedServer):
    """`base_url` is http://127.0.0.1:PORT/v1; POST /v1/responses, GET /v1/models."""

    thread_name = "fake-responses"
    post_path = "/v1/responses"
    dict_body = True
    request_id_header = "x-request-id"
    sse_no_cache = True

    def __init__(self, models: list[str] | None = None, api_key: str | None = None) -> None:
        """`models`: what `GET /v1/models` lists (default: the scripted models).
        `api_key`: answer 401 `invalid_api_key` to any request without `Authorization: Bearer <key>`."""
        super().__init__(models, api_key)

    def __enter__(self) -> FakeResponses:
        return super().__enter__()

    def _key_refusal(self) -> tuple[int, bytes]:
        return 401, json.dumps(error_body("Incorrect API key provided.", "invalid_request_error",
                                          "invalid_api_key")).encode()

    def _handler_failed(self, exc: Exception) -> Response:
        return fault(500, f"fake server: handler raised {exc!r}")

    def _unscripted(self, model: str | None) -> Response:
        return fault(500, f"fake server: no scripted response for model {model}")

    def _no_route(self, h: Handler) -> None:
        h.send_json(404, error_body(f"fake server: no route {h.command} {h.path}"))

    def _model_list(self) -> dict:  # Codex 0.169 never asked for this against a custom provider
        return openai_models(self._models)

    def _render(self, h: Handler, r: Response, body: dict) -> None:
        if r.kind in ("failed", "error_event") and not body.get("stream"):
            error = json.loads(r.body)
            return h.send_json(500, error_body(error["message"], "server_error", error["code"]))
        model = body.get("model")
        rid = f"resp_fake{next(self._ids)}"
        output = self._items(r) if r.kind == "reply" else []
        use = dict(DEFAULT_USAGE if r.usage is None else r.usage)
        if r.kind == "reply" and not body.get("stream"):
            return h.send_json(200, self._response(model, "completed", output, use, rid), headers=r.headers)
        h.start_stream(r.headers)
        seq = itertools.count()

        def sse(event: dict) -> None:
            h.sse({**event, "sequence_number": next(seq)})

        sse({"type": "response.created", "response": self._response(model, "in_progress", [], None, rid)})
        if r.kind == "stall":
            return h.wait_for_stop()
        sse({"type": "response.in_progress", "response": self._response(model, "in_progress", [], None, rid)})
        if r.kind == "failed":
            error = json.loads(r.body)
            sse({"type": "response.failed", "response": self._response(model, "failed", [], None, rid, error)})
        elif r.kind == "error_event":
            sse({"type": "error", **json.loads(r.body), "param": None})
        else:
            for index, item in enumerate(output):
                for event in self._item_events(index, item):
                    sse(event)
            sse({"type": "response.completed", "response": self._response(model, "completed", output, use, rid)})
        h.end_stream()

    def _items(self, r: Response) -> list[dict]:
        """The reply's output items as the API sends them (ids, call_ids, status filled in)."""
        items = []
        for item in r.items:
            n = next(self._ids)
            if item["type"] == "message":
                items.append({"type": "message", "id": f"msg_fake{n}", "status": "completed", "role": "assistant",
                              "content": [{"type": "output_text", "text": item["text"], "annotations": []}]})
            elif item["type"] == "function_call":
                items.append({"type": "function_call", "id": f"fc_fake{n}", "status": "completed",
                              "call_id": f"call_fake{n}", "name": item["name"], "arguments": item["arguments"]})
            else:
                items.append({"type": "custom_tool_call", "id": f"ctc_fake{n}", "status": "completed",
                              "call_id": f"call_fake{n}", "name": item["name"], "input": item["input"]})
        return items

    def _response(self, model: str | None, status: str, output: list[dict], usage: dict | None,
                  rid: str, error: dict | None = None) -> dict:
        return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status,
                "model": model, "output": output, "error": error, "incomplete_details": None, "usage": usage}

    def _item_events(self, index: int, item: dict) -> list[dict]:
        kind = item["type"]
        if kind == "message":
            added = {**item, "status": "in_progress", "content": []}
        elif kind == "function_call":
            added = {**item, "status": "in_progress", "arguments": ""}
        else:
            added = {**item, "status": "in_progress", "input": ""}
        events = [{"type": "response.output_item.added", "output_index": index, "item": added}]
        if kind == "message":
            text = item["content"][0]["text"]
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            events.append({"type": "response.content_part.added", **where,
                           "part": {"type": "output_text", "text": "", "annotations": []}})
            events += [{"type": "response.output_text.delta", **where, "delta": part, "logprobs": []}
                       for part in halves(text)]
            events.append({"type": "response.output_text.done", **where, "text": text, "logprobs": []})
            events.append({"type": "response.content_part.done", **where, "part": item["content"][0]})
        elif kind == "function_call":
            where = {"item_id": item["id"], "output_index": index}
            events += [{"type": "response.function_call_arguments.delta", **where, "delta": part}
                       for part in halves(item["arguments"])]
            events.append({"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"]})
        else:
            where = {"item_id": item["id"], "output_index": index}
            events += [{"type": "response.custom_tool_call_input.delta", **where, "delta": part}
                       for part in halves(item["input"])]
            events.append({"type": "response.custom_tool_call_input.done", **where, "input": item["input"]})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        return events
