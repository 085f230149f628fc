"""The fake OpenAI server, exercised through the real `openai` SDK."""

from __future__ import annotations

import json
import time

import openai
import pytest

from fake_openai import FakeOpenAI, delay, drop, fault, raw, reply

TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def client(server):
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    yield client
    client.close()


def ask(client, model="worker", **kwargs):
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "go"}], **kwargs)


def test_text_reply_with_usage_and_cost(server, client):
    server.enqueue("worker", reply("hello there", usage={"prompt_tokens": 7, "completion_tokens": 3,
                                                          "total_tokens": 10}, cost=0.0125))
    resp = ask(client)
    assert resp.model == "worker"
    assert resp.choices[0].message.content == "hello there"
    assert resp.choices[0].message.tool_calls is None
    assert resp.choices[0].finish_reason == "stop"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (7, 3, 10)
    assert resp.usage.model_extra == {"cost": 0.0125}
    assert resp.usage.cost == 0.0125


def test_tool_call_reply(server, client):
    server.enqueue("worker", reply(tool_calls=[("read_file", '{"path": "a.py"}'), ("read_file", '{"path": "b.py"}')]))
    resp = ask(client, tools=TOOLS)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert [c.id for c in choice.message.tool_calls] == ["call_0", "call_1"]
    assert choice.message.tool_calls[0].function.name == "read_file"
    assert json.loads(choice.message.tool_calls[1].function.arguments) == {"path": "b.py"}
    assert resp.usage.total_tokens == 15
    assert not resp.usage.model_extra  # no cost unless asked for


def test_streaming_reassembles_content_tool_calls_and_usage(server, client):
    args = '{"path": "src/main.py", "limit": 200}'
    server.enqueue("worker", reply("Let me look at the file.", tool_calls=[("read_file", args)], cost=0.5))
    stream = ask(client, tools=TOOLS, stream=True, stream_options={"include_usage": True})
    content, calls, finish, usage, chunks = "", {}, None, None, 0
    for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                call["id"] = tc.id or call["id"]
                call["name"] = (tc.function and tc.function.name) or call["name"]
                call["arguments"] += (tc.function and tc.function.arguments) or ""
            finish = choice.finish_reason or finish
    assert chunks >= 6  # role, two content pieces, tool call start + pieces, finish, usage
    assert content == "Let me look at the file."
    assert calls == {0: {"id": "call_0", "name": "read_file", "arguments": args}}
    assert finish == "tool_calls"
    assert usage.total_tokens == 15 and usage.model_extra == {"cost": 0.5}
    assert server.requests[-1]["body"]["stream"] is True


def test_streaming_without_usage_option_sends_no_usage_chunk(server, client):
    server.enqueue("worker", reply("abc"))
    chunks = list(ask(client, stream=True))
    assert all(c.usage is None and len(c.choices) == 1 for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "abc"


def test_rate_limit_exposes_retry_after(server, client):
    server.enqueue("worker", fault(429, "slow down", headers={"Retry-After": "0"}))
    with pytest.raises(openai.RateLimitError) as exc:
        ask(client)
    assert exc.value.response.headers["retry-after"] == "0"
    assert exc.value.status_code == 429
    assert "slow down" in exc.value.message


def test_server_error_then_recovery_on_same_client(server, client):
    server.enqueue("worker", fault(503), reply("back"))
    with pytest.raises(openai.InternalServerError):
        ask(client)
    assert ask(client).choices[0].message.content == "back"


def test_dropped_connection_is_a_connection_error(server, client):
    server.enqueue("worker", drop())
    with pytest.raises(openai.APIConnectionError) as exc:
        ask(client, timeout=2)  # a broken drop() would otherwise hang on the SDK's 600s default
    assert not isinstance(exc.value, openai.APITimeoutError)


def test_delay_past_client_timeout_is_a_timeout(server, client):
    server.enqueue("worker", delay(2, reply("too late")))
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        ask(client, timeout=0.5)
    assert time.monotonic() - started < 1.5


def test_routing_by_model_with_fallback_and_request_log(server, client):
    server.enqueue("worker", reply("w1"), reply("w2"))
    server.enqueue("evaluator", reply("e1"))
    server.enqueue(None, reply("fallback"))
    assert ask(client, "evaluator").choices[0].message.content == "e1"
    assert ask(client, "worker", tools=TOOLS).choices[0].message.content == "w1"
    assert ask(client, "evaluator").choices[0].message.content == "fallback"
    assert ask(client, "worker").choices[0].message.content == "w2"
    with pytest.raises(openai.InternalServerError) as exc:
        ask(client, "worker")
    assert "no scripted response for model worker" in exc.value.message
    bodies = [r["body"] for r in server.requests]
    assert [b["model"] for b in bodies] == ["evaluator", "worker", "evaluator", "worker", "worker"]
    assert bodies[1]["tools"] == TOOLS and "tools" not in bodies[0]
    assert bodies[1]["messages"] == [{"role": "user", "content": "go"}]
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-test"


def test_handler_computes_replies_when_queues_are_empty(server, client):
    server.enqueue("worker", reply("scripted"))
    server.set_handler(lambda body: reply(f"echo {body['messages'][-1]['content']}"))
    assert ask(client).choices[0].message.content == "scripted"
    assert ask(client).choices[0].message.content == "echo go"


def test_raw_bodies_are_passed_through(server, client):
    server.enqueue("worker", raw(200, b'{"error": {"message": "overloaded"}}'), raw(200, b"{}"))
    first = ask(client)
    second = ask(client)
    # The SDK does not raise on an error-shaped 200; callers must notice the missing choices themselves.
    assert first.choices is None and first.model_extra["error"] == {"message": "overloaded"}
    assert second.choices is None


def test_models_endpoint_lists_enqueued_models(server, client):
    server.enqueue("worker", reply("x"))
    server.enqueue("evaluator", reply("y"))
    assert [m.id for m in client.models.list()] == ["worker", "evaluator"]
