"""A real local HTTP server speaking the OpenAI Chat Completions wire format.

The `openai` SDK talks through its own HTTP stack, which respx cannot intercept, so tests that
drive the real SDK point `base_url` at this server instead:

    with FakeOpenAI() as server:
        server.enqueue("worker", reply("hi"), fault(429, headers={"Retry-After": "0"}))
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)

Responses are scripted per model (FIFO), with a model=None fallback queue and an optional
handler; `reply()` is rendered as SSE or as a plain chat.completion depending on the request.
A session's final review (tilth/run/final_review.py) that nothing is scripted for gets an accept
that uses no tokens and costs nothing, so a test that is not about it still ends with a deterministic
"no findings" and the same token and cost totals (one more request and `model_call` event, though).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from fake_http import Handler, ScriptedServer, delay, halves, held, openai_error, openai_model, openai_models
from fake_http import Response as _Response
from tilth.run.final_review import ASK as FINAL_REVIEW_ASK

__all__ = ["DEFAULT_USAGE", "Response", "call", "SUBMIT", "ACCEPT", "reply", "fault", "raw", "drop", "delay", "held",
           "FakeOpenAI"]

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


@dataclass(frozen=True)
class Response(_Response):
    # kind: "reply" (rendered per request), "bytes" (sent verbatim) or "drop"
    content: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()
    finish_reason: str | None = None
    usage: dict | None = None


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
    return json.dumps(openai_error(message, type_)).encode()


def fault(status: int, body: dict | str | None = None, headers: dict[str, str] | None = None) -> Response:
    """An HTTP error; a str body becomes the message of an OpenAI-style error envelope."""
    data = json.dumps(body).encode() if isinstance(body, dict) else _error_body(body or f"fake fault {status}")
    return Response("bytes", status=status, body=data, headers=dict(headers or {}))


raw = Response.raw
drop = Response.drop


class FakeOpenAI(ScriptedServer):
    """`base_url` is http://127.0.0.1:PORT/v1; POST /v1/chat/completions, GET /v1/models[/<id>]."""

    thread_name = "fake-openai"
    post_path = "/v1/chat/completions"

    def __init__(self, models: list[str] | None = None, api_key: str | None = None) -> None:
        """`models`: serve exactly these, as OpenAI does (`GET /v1/models/<id>` answers 404
        `model_not_found` for any other); default: list the scripted models, no `/models/<id>`.
        `api_key`: answer 401 `invalid_api_key` to any request without it."""
        super().__init__(models, api_key)

    def _pick(self, body: dict | None) -> _Response:
        if isinstance(body, dict) and FINAL_REVIEW_ASK in json.dumps(body.get("messages")):
            with self._lock:
                scripted = self._queues.get(body.get("model")) or self._queues.get(None) or self._handler
            if not scripted:
                return reply(tool_calls=[ACCEPT], usage=NO_USAGE, cost=0.0)
        return super()._pick(body)

    def __enter__(self) -> FakeOpenAI:
        return super().__enter__()

    def _log_entry(self, h: Handler, body: dict | None) -> dict:
        entry = super()._log_entry(h, body)
        return {"path": entry["path"], "headers": entry["headers"], "body": body}

    def _key_refusal(self) -> tuple[int, bytes]:
        return 401, json.dumps(openai_error("Incorrect API key provided.", "invalid_request_error",
                                            "invalid_api_key")).encode()

    def _handler_failed(self, exc: Exception) -> Response:
        return raw(500, _error_body(f"fake server: handler raised {exc!r}"))

    def _unscripted(self, model: str | None) -> Response:
        return fault(500, f"fake server: no scripted response for model {model}", headers={"x-should-retry": "false"})

    def _no_route(self, h: Handler) -> None:
        h.send(404, _error_body(f"fake server: no route {h.command} {h.path}"))

    def _model_list(self) -> dict:
        return openai_models(self._models)

    def _get(self, h: Handler, path: str) -> None:
        model = path.removeprefix("/v1/models/") if path.startswith("/v1/models/") else None
        if model is None or not self._fixed_models:
            return super()._get(h, path)
        if model not in self._models:
            message = f"The model `{model}` does not exist or you do not have access to it."
            return h.send_json(404, openai_error(message, "invalid_request_error", "model_not_found"))
        h.send_json(200, openai_model(model))

    def _render(self, h: Handler, r: Response, body: dict) -> None:
        model = body.get("model")
        if not body.get("stream"):
            return h.send_json(200, self._completion(r, model), headers=r.headers)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        h.start_stream()
        for event in [*self._chunks(r, model, include_usage), "[DONE]"]:
            h.chunk(b"data: %s\n\n" % (event if isinstance(event, str) else json.dumps(event)).encode())
        h.end_stream()

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
        chunks += [chunk({"content": part}) for part in halves(r.content or "")]
        for i, (name, args) in enumerate(r.tool_calls):
            chunks.append(chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                                 "function": {"name": name, "arguments": ""}}]}))
            chunks += [chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
                       for part in halves(args)]
        chunks.append(chunk({}, r.finish_reason))
        if include_usage:
            chunks.append({**base, "choices": [], "usage": r.usage})
        return chunks
