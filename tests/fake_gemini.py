"""A real local HTTP server speaking the Gemini API wire format (generativelanguage's v1beta).

Gemini CLI talks to `GOOGLE_GEMINI_BASE_URL` with the `@google/genai` SDK: each model call is
`POST /v1beta/models/<model>:streamGenerateContent?alt=sse` (SSE, one `GenerateContentResponse`
per `data:` line) or `:generateContent` (one JSON body), the key in `x-goog-api-key`; it also
asks `:countTokens` before a long prompt. Tests point it here:

    with FakeGemini() as server:
        server.enqueue("gemini-stub", reply(text("Writing it."), function_call("write_file", ...)),
                       reply(text("Done."), usage=usage(1000, 50, cached=200)))

Replies are scripted per model (the path's `<model>`, FIFO), with a model=None fallback queue and
an optional handler, as in fake_openai.FakeOpenAI. Besides replies: `fault()` (Google's error
envelope, `status` such as RESOURCE_EXHAUSTED), `drop()`, `hang()`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from fake_http import Handler, ScriptedServer, delay, halves
from fake_http import Response as _Response

__all__ = ["DEFAULT_USAGE", "Response", "text", "function_call", "usage", "reply", "fault", "raw", "drop", "hang",
           "delay", "FakeGemini"]

DEFAULT_USAGE = {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120}
STATUS_NAMES = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                500: "INTERNAL", 503: "UNAVAILABLE"}
_MODEL_CALL = re.compile(r"^/v1beta/models/([^/:]+):(streamGenerateContent|generateContent|countTokens)$")


@dataclass(frozen=True)
class Response(_Response):
    # `text("a") + function_call(...)`: one reply with both parts.
    parts: tuple[dict, ...] = ()
    usage: dict | None = None
    finish_reason: str | None = None

    _concat = ("parts",)
    _latest = ("usage", "finish_reason")


def text(content: str) -> Response:
    return Response("reply", parts=({"text": content},))


def function_call(name: str, **args: object) -> Response:
    return Response("reply", parts=({"functionCall": {"name": name, "args": args}},))


def usage(prompt: int = 100, output: int = 20, cached: int = 0, thoughts: int = 0) -> dict:
    """`usageMetadata`: `promptTokenCount` includes the `cachedContentTokenCount`; thoughts are apart."""
    found = {"promptTokenCount": prompt, "candidatesTokenCount": output,
             "totalTokenCount": prompt + output + thoughts}
    if cached:
        found["cachedContentTokenCount"] = cached
    if thoughts:
        found["thoughtsTokenCount"] = thoughts
    return found


def reply(*parts: Response, usage: dict | None = None, finish_reason: str = "STOP") -> Response:
    joined = parts[0]
    for part in parts[1:]:
        joined = joined + part
    return Response("reply", parts=joined.parts, usage=dict(usage or DEFAULT_USAGE), finish_reason=finish_reason)


def fault(status: int, message: str | None = None, details: list[dict] | None = None,
          headers: dict[str, str] | None = None) -> Response:
    """Google's error envelope: `{"error": {"code", "message", "status", "details"}}`."""
    body = {"error": {"code": status, "message": message or f"fake fault {status}",
                      "status": STATUS_NAMES.get(status, "UNKNOWN"), "details": details or []}}
    return Response("bytes", status=status, body=json.dumps(body).encode(), headers=dict(headers or {}))


raw = Response.raw
drop = Response.drop
hang = Response.hang


class FakeGemini(ScriptedServer):
    """`root_url` is what GOOGLE_GEMINI_BASE_URL takes; `calls()` the model calls it answered."""

    thread_name = "fake-gemini"
    post_path = "/v1beta/models"

    def __init__(self, api_key: str | None = None) -> None:
        super().__init__(None, api_key)

    def __enter__(self) -> FakeGemini:
        return super().__enter__()

    def calls(self) -> list[dict]:
        """The generate requests (streamed or not), in order; countTokens left out."""
        with self._lock:
            return [r for r in self.requests if r["path"].endswith(("GenerateContent", ":generateContent"))]

    def _log_entry(self, h: Handler, body: dict | None) -> dict:
        entry = super()._log_entry(h, body)
        found = _MODEL_CALL.match(entry["path"])
        return {**entry, "model": found.group(1) if found else None}

    def _key_ok(self, headers) -> bool:
        return self._api_key is None or headers.get("x-goog-api-key") == self._api_key

    def _key_refusal(self) -> tuple[int, bytes]:
        return 400, fault(400, "API key not valid. Please pass a valid API key.").body

    def _handler_failed(self, exc: Exception) -> Response:
        return fault(500, f"fake server: handler raised {exc!r}")

    def _unscripted(self, model: str | None) -> Response:
        return fault(400, f"fake server: no scripted response for model {model}")

    def _no_route(self, h: Handler) -> None:
        h.send(404, fault(404, f"fake server: no route {h.command} {h.path}").body)

    def _model_list(self) -> dict:
        return {"models": [{"name": f"models/{m}"} for m in self._models]}

    def _post(self, h: Handler, path: str, body: dict | None) -> None:
        found = _MODEL_CALL.match(path)
        if found is None:
            return self._no_route(h)
        model, method = found.groups()
        if method == "countTokens":
            words = len(json.dumps(body or {}).split())
            return h.send_json(200, {"totalTokens": words})
        request = {**(body if isinstance(body, dict) else {}), "model": model, "_stream": method.startswith("stream")}
        self._answer(h, request)

    def _render(self, h: Handler, r: Response, body: dict) -> None:
        chunks = self._chunks(r, body.get("model"))
        if not body.get("_stream"):
            whole = dict(chunks[-1])
            whole["candidates"] = [{**chunks[-1]["candidates"][0],
                                    "content": {"role": "model", "parts": list(r.parts)}}]
            return h.send_json(200, whole, headers=r.headers)
        h.start_stream(r.headers)
        for chunk in chunks:
            h.chunk(b"data: %s\r\n\r\n" % json.dumps(chunk).encode())
        h.end_stream()

    def _chunks(self, r: Response, model: str | None) -> list[dict]:
        """The text in two deltas, each function call whole, finishReason and usage on the last."""
        pieces: list[dict] = []
        for part in r.parts:
            if "text" in part:
                pieces += [{"text": half} for half in halves(part["text"])]
            else:
                pieces.append(part)
        pieces = pieces or [{"text": ""}]
        response_id = f"fake-gemini-{next(self._ids)}"

        def chunk(part: dict, last: bool) -> dict:
            candidate: dict = {"content": {"role": "model", "parts": [part]}, "index": 0}
            out: dict = {"candidates": [candidate], "modelVersion": model, "responseId": response_id}
            if last:
                candidate["finishReason"] = r.finish_reason or "STOP"
                out["usageMetadata"] = r.usage or DEFAULT_USAGE
            return out

        return [chunk(part, i == len(pieces) - 1) for i, part in enumerate(pieces)]
