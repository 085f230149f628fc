"""The fake Anthropic Messages and OpenAI Responses servers, exercised with plain http.client,
plus (when installed) the real Claude Code and Codex CLIs run against them."""

from __future__ import annotations

import gzip
import http.client
import json
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import fake_anthropic as fa
import fake_responses as fr
from cli_agents import agent_bin, missing
from fake_anthropic import FakeAnthropic
from fake_responses import FakeResponses


def post(url: str, path: str, body: dict | None, headers: dict[str, str] | None = None,
         timeout: float = 5) -> tuple[http.client.HTTPResponse, http.client.HTTPConnection]:
    conn = http.client.HTTPConnection(urlsplit(url).hostname, urlsplit(url).port, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else b""
    conn.request("POST", path, data, {"content-type": "application/json", **(headers or {})})
    return conn.getresponse(), conn


def sse_events(resp: http.client.HTTPResponse) -> list[tuple[str, dict]]:
    """(event name, data) pairs; checks each `event:` line names the data's `type`."""
    events = []
    for chunk in resp.read().decode().split("\n\n"):
        if not chunk.strip():
            continue
        fields = dict(line.split(": ", 1) for line in chunk.splitlines())
        data = json.loads(fields["data"])
        assert fields["event"] == data["type"]
        events.append((fields["event"], data))
    return events


def read_error(resp: http.client.HTTPResponse) -> dict:
    assert resp.getheader("content-type") == "application/json"
    return json.loads(resp.read())


# ---------------------------------------------------------------- Anthropic Messages

MSG = {"model": "m", "max_tokens": 100, "stream": True,
       "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "env info"}]}


@pytest.fixture
def anth():
    with FakeAnthropic() as server:
        yield server


def test_anthropic_stream_text_and_tool_use(anth):
    anth.enqueue("m", fa.reply(fa.text("Writing the file."), fa.tool_use("Write", file_path="/r/a.txt", content="a\n"),
                               usage=fa.usage(321, 17, cache_creation_input_tokens=5, cache_read_input_tokens=7)))
    resp, conn = post(anth.root_url, "/v1/messages?beta=true", MSG, {"X-Api-Key": "sk-ant-x"})
    assert resp.status == 200 and resp.getheader("content-type") == "text/event-stream"
    events = sse_events(resp)
    conn.close()
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["role"] == "assistant" and start["model"] == "m" and start["content"] == []
    assert start["stop_reason"] is None
    assert start["usage"] == {"input_tokens": 321, "output_tokens": 1,
                              "cache_creation_input_tokens": 5, "cache_read_input_tokens": 7}
    text = "".join(d["delta"]["text"] for _, d in events if d.get("index") == 0 and d["type"] == "content_block_delta")
    assert text == "Writing the file."
    assert events[1][1]["content_block"] == {"type": "text", "text": ""}
    tool_start = events[5][1]
    assert tool_start["index"] == 1 and tool_start["content_block"]["input"] == {}
    assert tool_start["content_block"]["name"] == "Write" and tool_start["content_block"]["id"].startswith("toolu_")
    deltas = [d["delta"] for _, d in events if d.get("index") == 1 and d["type"] == "content_block_delta"]
    assert all(delta["type"] == "input_json_delta" for delta in deltas)
    assert json.loads("".join(delta["partial_json"] for delta in deltas)) == {"file_path": "/r/a.txt", "content": "a\n"}
    assert events[-2][1] == {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                             "usage": {"output_tokens": 17}}


def test_anthropic_plus_combines_blocks_and_text_reply_ends_turn(anth):
    anth.enqueue("m", fa.text("a") + fa.tool_use("Bash", command="ls"), fa.text("done"))
    first, conn = post(anth.root_url, "/v1/messages", {**MSG, "stream": False})
    message = json.loads(first.read())
    second, conn2 = post(anth.root_url, "/v1/messages", MSG)
    events = sse_events(second)
    conn.close(), conn2.close()
    assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
    assert message["stop_reason"] == "tool_use"
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"


def test_anthropic_non_streaming_message(anth):
    anth.enqueue("m", fa.reply(fa.tool_use("Write", file_path="/x", content="y"), usage=fa.usage(9, 4)))
    resp, conn = post(anth.root_url, "/v1/messages", {**MSG, "stream": False})
    message = json.loads(resp.read())
    conn.close()
    assert resp.status == 200 and resp.getheader("request-id").startswith("req_")
    assert message["type"] == "message" and message["model"] == "m" and message["stop_reason"] == "tool_use"
    block = message["content"][0]
    assert block["type"] == "tool_use" and block["name"] == "Write" and block["input"] == {"file_path": "/x", "content": "y"}
    assert message["usage"] == {"input_tokens": 9, "output_tokens": 4,
                                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def test_anthropic_fifo_per_model_then_fallback_then_handler(anth):
    anth.enqueue("m", fa.text("m1"), fa.text("m2"))
    anth.enqueue(None, fa.text("any"))
    anth.set_handler(lambda body: fa.text(f"handled {len(body['messages'])}"))

    def ask(model):
        resp, conn = post(anth.root_url, "/v1/messages", {**MSG, "model": model, "stream": False})
        try:
            return json.loads(resp.read())["content"][0]["text"]
        finally:
            conn.close()

    assert [ask("m"), ask("other"), ask("m"), ask("m")] == ["m1", "any", "m2", "handled 2"]


def test_anthropic_unscripted_and_bad_requests_get_error_envelopes(anth):
    resp, conn = post(anth.root_url, "/v1/messages", MSG)
    assert resp.status == 500 and resp.getheader("x-should-retry") == "false"
    assert read_error(resp)["error"]["type"] == "api_error"
    resp, _ = post(anth.root_url, "/v1/messages", {"model": "m"})
    assert resp.status == 400 and read_error(resp)["error"]["type"] == "invalid_request_error"
    resp, _ = post(anth.root_url, "/v1/complete", MSG)
    assert resp.status == 404 and read_error(resp)["error"]["type"] == "not_found_error"


def test_anthropic_faults(anth):
    anth.enqueue("m", fa.fault(500, "boom"), fa.overloaded(), fa.rate_limited(retry_after=2),
                 fa.fault(400, "bad", headers={"x-extra": "1"}))
    resp, _ = post(anth.root_url, "/v1/messages", MSG)
    assert resp.status == 500
    assert read_error(resp) == {"type": "error", "error": {"type": "api_error", "message": "boom"}, "request_id": "req_fake"}
    resp, _ = post(anth.root_url, "/v1/messages", MSG)
    assert resp.status == 529 and read_error(resp)["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    resp, _ = post(anth.root_url, "/v1/messages", MSG)
    assert resp.status == 429 and resp.getheader("retry-after") == "2"
    assert resp.getheader("anthropic-ratelimit-requests-remaining") == "0"
    assert read_error(resp)["error"]["type"] == "rate_limit_error"
    resp, _ = post(anth.root_url, "/v1/messages", MSG)
    assert resp.status == 400 and resp.getheader("x-extra") == "1"
    assert read_error(resp)["error"]["type"] == "invalid_request_error"


def test_anthropic_usage_limit_shape(anth):
    anth.enqueue("m", fa.usage_limit(resets_in=600))
    resp, conn = post(anth.root_url, "/v1/messages", MSG)
    body = read_error(resp)
    conn.close()
    assert resp.status == 429 and body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert resp.getheader("retry-after") == "600"
    assert resp.getheader("anthropic-ratelimit-unified-status") == "rejected"
    assert resp.getheader("anthropic-ratelimit-unified-representative-claim") == "five_hour"
    reset = int(resp.getheader("anthropic-ratelimit-unified-reset"))
    assert abs(reset - (time.time() + 600)) < 5
    assert resp.getheader("anthropic-ratelimit-unified-5h-reset") == str(reset)


def test_anthropic_stream_error_event(anth):
    anth.enqueue("m", fa.stream_error())
    resp, conn = post(anth.root_url, "/v1/messages", MSG)
    events = sse_events(resp)
    conn.close()
    assert resp.status == 200
    assert [name for name, _ in events] == ["message_start", "error"]
    assert events[1][1]["error"]["type"] == "overloaded_error"


def test_anthropic_stream_error_as_http_error_when_not_streaming(anth):
    anth.enqueue("m", fa.stream_error(), fa.stream_error("api_error", "boom"))
    resp, _ = post(anth.root_url, "/v1/messages", {**MSG, "stream": False})
    assert resp.status == 529 and read_error(resp)["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    resp, _ = post(anth.root_url, "/v1/messages", {**MSG, "stream": False})
    assert resp.status == 500 and read_error(resp)["error"] == {"type": "api_error", "message": "boom"}


def test_anthropic_records_requests(anth):
    anth.enqueue("m", fa.text("ok"))
    resp, conn = post(anth.root_url, "/v1/messages?beta=true", MSG,
                      {"X-Api-Key": "sk-ant-x", "Anthropic-Version": "2023-06-01"})
    resp.read()
    conn.close()
    [request] = anth.posts()
    assert request["method"] == "POST" and request["path"] == "/v1/messages"
    assert request["query"] == {"beta": ["true"]}
    assert request["headers"]["x-api-key"] == "sk-ant-x" and request["headers"]["anthropic-version"] == "2023-06-01"
    assert request["body"] == MSG
    assert [m["role"] for m in request["body"]["messages"]] == ["user", "system"]


def test_chunked_and_gzipped_request_bodies_are_recorded(anth):
    anth.enqueue("m", fa.text("ok"), fa.text("ok"))
    port = urlsplit(anth.root_url).port
    for headers, data in (({"Transfer-Encoding": "chunked"}, iter([json.dumps(MSG).encode()[:10], json.dumps(MSG).encode()[10:]])),
                          ({"Content-Encoding": "gzip"}, gzip.compress(json.dumps(MSG).encode()))):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/v1/messages", data, headers, encode_chunked="Transfer-Encoding" in headers)
        assert conn.getresponse().status == 200
        conn.close()
    assert [r["body"] for r in anth.posts()] == [MSG, MSG]


def test_anthropic_api_key_and_side_routes():
    with FakeAnthropic(api_key="sk-right") as server:
        server.enqueue("m", fa.text("ok"), fa.text("ok"))
        resp, _ = post(server.root_url, "/v1/messages", MSG, {"x-api-key": "sk-wrong"})
        assert resp.status == 401 and read_error(resp)["error"]["type"] == "authentication_error"
        resp, _ = post(server.root_url, "/v1/messages", MSG, {"x-api-key": "sk-right"})
        assert resp.status == 200
        resp, _ = post(server.root_url, "/v1/messages", MSG, {"authorization": "Bearer sk-right"})
        assert resp.status == 200
        resp, _ = post(server.root_url, "/v1/messages/count_tokens", MSG, {"x-api-key": "sk-right"})
        assert resp.status == 200 and json.loads(resp.read())["input_tokens"] > 0
        conn = http.client.HTTPConnection("127.0.0.1", urlsplit(server.root_url).port, timeout=5)
        conn.request("HEAD", "/api/hello")
        assert conn.getresponse().status == 200
        conn.close()


def check_drop_hang_stall(url: str, path: str, body: dict, first_event: bytes) -> None:
    """Sends three requests, answered by drop(), hang() and stall() (in that order)."""
    with pytest.raises(http.client.RemoteDisconnected):
        post(url, path, body)
    with pytest.raises(socket.timeout):
        post(url, path, body, timeout=0.5)
    resp, conn = post(url, path, body, timeout=0.5)
    assert resp.status == 200 and resp.getheader("content-type") == "text/event-stream"
    assert first_event in resp.readline()  # `event: <first_event>`
    with pytest.raises(socket.timeout):
        resp.read()
    conn.close()


def test_anthropic_drop_hang_stall(anth):
    anth.enqueue("m", fa.drop(), fa.hang(), fa.stall())
    check_drop_hang_stall(anth.root_url, "/v1/messages", MSG, b"message_start")


def test_anthropic_shutdown_releases_hung_and_stalled_requests():
    start = time.monotonic()
    with FakeAnthropic() as server:
        server.enqueue("m", fa.hang(), fa.stall(), fa.delay(30, fa.text("late")))
        conns = []
        for _ in range(3):
            conn = http.client.HTTPConnection("127.0.0.1", urlsplit(server.root_url).port, timeout=10)
            conn.request("POST", "/v1/messages", json.dumps(MSG).encode())
            conns.append(conn)
        time.sleep(0.2)
    assert time.monotonic() - start < 3
    for conn in conns:
        conn.close()


# ---------------------------------------------------------------- OpenAI Responses

RESP = {"model": "gpt-5.5", "stream": True, "input": [{"type": "message", "role": "user",
                                                       "content": [{"type": "input_text", "text": "hi"}]}]}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


@pytest.fixture
def resp_server():
    with FakeResponses() as server:
        yield server


def test_responses_stream_items_and_usage(resp_server):
    resp_server.enqueue("gpt-5.5", fr.reply(fr.message("Patching now."), fr.exec_command("ls -la"), fr.apply_patch(PATCH),
                                            usage=fr.usage(321, 17, cached_tokens=3, reasoning_tokens=2)))
    resp, conn = post(resp_server.base_url, "/v1/responses", RESP, {"Authorization": "Bearer sk-stub"})
    assert resp.status == 200 and resp.getheader("content-type") == "text/event-stream"
    events = sse_events(resp)
    conn.close()
    names = [name for name, _ in events]
    assert names == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
        "response.output_item.added", "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "response.output_item.done",
        "response.completed"]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert events[0][1]["response"]["status"] == "in_progress"
    assert "".join(d["delta"] for n, d in events if n == "response.output_text.delta") == "Patching now."
    done = [d["item"] for n, d in events if n == "response.output_item.done"]
    assert done[0]["type"] == "message" and done[0]["role"] == "assistant"
    assert done[0]["content"] == [{"type": "output_text", "text": "Patching now.", "annotations": []}]
    args = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta")
    assert json.loads(args) == {"cmd": "ls -la"} == json.loads(done[1]["arguments"])
    assert done[1]["type"] == "function_call" and done[1]["name"] == "exec_command"
    assert done[2] == {"type": "custom_tool_call", "id": done[2]["id"], "status": "completed",
                       "call_id": done[2]["call_id"], "name": "apply_patch", "input": PATCH}
    assert "".join(d["delta"] for n, d in events if n == "response.custom_tool_call_input.delta") == PATCH
    assert len({item["call_id"] for item in done[1:]}) == 2
    added = [d["item"] for n, d in events if n == "response.output_item.added"]
    assert [item["status"] for item in added] == ["in_progress"] * 3
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed" and completed["output"] == done
    assert completed["usage"] == {"input_tokens": 321, "input_tokens_details": {"cached_tokens": 3},
                                  "output_tokens": 17, "output_tokens_details": {"reasoning_tokens": 2},
                                  "total_tokens": 338}


def test_responses_non_streaming_and_fifo(resp_server):
    resp_server.enqueue("gpt-5.5", fr.message("one") + fr.function_call("f", a=1))
    resp_server.enqueue(None, fr.message("fallback"))
    resp, conn = post(resp_server.base_url, "/v1/responses", {**RESP, "stream": False})
    body = json.loads(resp.read())
    assert body["object"] == "response" and body["status"] == "completed" and body["model"] == "gpt-5.5"
    assert [item["type"] for item in body["output"]] == ["message", "function_call"]
    assert body["usage"] == fr.DEFAULT_USAGE
    resp, conn2 = post(resp_server.base_url, "/v1/responses", {**RESP, "stream": False})
    assert json.loads(resp.read())["output"][0]["content"][0]["text"] == "fallback"
    resp, conn3 = post(resp_server.base_url, "/v1/responses", RESP)
    assert resp.status == 500 and read_error(resp)["error"]["type"] == "server_error"
    for each in (conn, conn2, conn3):
        each.close()


def test_responses_failed_and_error_event(resp_server):
    resp_server.enqueue("gpt-5.5", fr.failed("model melted", "server_error"), fr.error_event("nope", "rate_limit_exceeded"))
    resp, _ = post(resp_server.base_url, "/v1/responses", RESP)
    events = sse_events(resp)
    assert [n for n, _ in events] == ["response.created", "response.in_progress", "response.failed"]
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed" and failed["error"] == {"code": "server_error", "message": "model melted"}
    resp, _ = post(resp_server.base_url, "/v1/responses", RESP)
    events = sse_events(resp)
    assert [n for n, _ in events] == ["response.created", "response.in_progress", "error"]
    assert events[-1][1]["code"] == "rate_limit_exceeded" and events[-1][1]["message"] == "nope"


def test_responses_failures_as_http_errors_when_not_streaming(resp_server):
    resp_server.enqueue("gpt-5.5", fr.failed("melted", "server_error"), fr.error_event("nope", "rate_limit_exceeded"))
    resp, _ = post(resp_server.base_url, "/v1/responses", {**RESP, "stream": False})
    assert resp.status == 500 and read_error(resp)["error"]["message"] == "melted"
    resp, _ = post(resp_server.base_url, "/v1/responses", {**RESP, "stream": False})
    assert resp.status == 500 and read_error(resp)["error"]["code"] == "rate_limit_exceeded"


def test_responses_faults_and_usage_limit(resp_server):
    resp_server.enqueue("gpt-5.5", fr.fault(500, "boom"), fr.rate_limited(retry_after=1), fr.usage_limit(resets_in=900))
    resp, _ = post(resp_server.base_url, "/v1/responses", RESP)
    assert resp.status == 500
    assert read_error(resp) == {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}
    resp, _ = post(resp_server.base_url, "/v1/responses", RESP)
    assert resp.status == 429 and resp.getheader("retry-after") == "1"
    assert read_error(resp)["error"]["code"] == "rate_limit_exceeded"
    resp, _ = post(resp_server.base_url, "/v1/responses", RESP)
    error = read_error(resp)["error"]
    assert resp.status == 429
    assert error["type"] == "usage_limit_reached" and error["code"] == "usage_limit_reached"
    assert error["message"].startswith("You've hit your usage limit") and error["plan_type"] == "plus"
    assert error["resets_in_seconds"] == 900 and abs(error["resets_at"] - (time.time() + 900)) < 5
    assert resp.getheader("x-codex-primary-used-percent") == "100"


def test_responses_drop_hang_stall(resp_server):
    resp_server.enqueue("gpt-5.5", fr.drop(), fr.hang(), fr.stall())
    check_drop_hang_stall(resp_server.base_url, "/v1/responses", RESP, b"response.created")


def test_responses_models_auth_and_request_log():
    with FakeResponses(api_key="sk-stub") as server:
        server.enqueue("gpt-5.5", fr.message("ok"))
        resp, _ = post(server.base_url, "/v1/responses", RESP)
        assert resp.status == 401 and read_error(resp)["error"]["code"] == "invalid_api_key"
        resp, conn = post(server.base_url, "/v1/responses", RESP, {"Authorization": "Bearer sk-stub", "Originator": "x"})
        resp.read()
        conn.request("GET", "/v1/models", headers={"Authorization": "Bearer sk-stub"})
        models = json.loads(conn.getresponse().read())
        conn.close()
    assert models == {"object": "list", "data": [{"id": "gpt-5.5", "object": "model", "created": 0, "owned_by": "fake"}]}
    assert [(r["method"], r["path"]) for r in server.requests] == [
        ("POST", "/v1/responses"), ("POST", "/v1/responses"), ("GET", "/v1/models")]
    logged = server.posts()[1]
    assert logged["headers"]["authorization"] == "Bearer sk-stub" and logged["headers"]["originator"] == "x"
    assert logged["body"] == RESP


# ---------------------------------------------------------------- the real CLIs

def cli(name: str) -> Path:
    path = agent_bin(name)
    if shutil.which("timeout") is None or shutil.which("git") is None:
        missing("the real CLI tests need `timeout` and `git` on PATH (coreutils, git)")
    return path


def git_repo(path: Path) -> Path:
    path.mkdir()
    for args in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return path


def run_cli(argv: list[str], env: dict[str, str], cwd: Path, prompt: Path, tmp_path: Path) -> tuple[int, list[dict], str]:
    with prompt.open("rb") as stdin:
        proc = subprocess.run(["timeout", "90", *argv], cwd=cwd, env=env, stdin=stdin, capture_output=True, timeout=120)
    (tmp_path / "stdout.jsonl").write_bytes(proc.stdout)
    (tmp_path / "stderr.txt").write_bytes(proc.stderr)
    events = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.startswith("{")]
    return proc.returncode, events, proc.stderr.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.cli_agents
def test_real_claude_code_writes_a_file(tmp_path):
    claude = cli("claude")
    repo = git_repo(tmp_path / "repo")
    target = repo / "hello.txt"
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Create hello.txt containing 'hello from stub'.\n")
    with FakeAnthropic() as server:
        server.enqueue("claude-stub-model",
                       fa.reply(fa.text("Writing it."), fa.tool_use("Write", file_path=str(target), content="hello from stub\n"),
                                usage=fa.usage(123, 42, cache_read_input_tokens=10)),
                       fa.reply(fa.text("Done: wrote the file."), usage=fa.usage(200, 8)))
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path / "home"), "TERM": "dumb",
               "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config"), "IS_SANDBOX": "1",
               "ANTHROPIC_BASE_URL": server.root_url, "ANTHROPIC_API_KEY": "sk-ant-stub",
               "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}
        (tmp_path / "home").mkdir()
        rc, events, stderr = run_cli(
            [str(claude), "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions",
             "--model", "claude-stub-model", "--no-session-persistence"], env, repo, prompt, tmp_path)
    assert rc == 0, stderr[-2000:]
    assert target.read_text() == "hello from stub\n"
    result = events[-1]
    assert result["type"] == "result" and result["is_error"] is False, result
    assert result["result"] == "Done: wrote the file."
    assert result["usage"]["input_tokens"] == 323 and result["usage"]["output_tokens"] == 50
    assert result["usage"]["cache_read_input_tokens"] == 10
    posts = server.posts()
    assert len(posts) == 2 and all(p["query"] == {"beta": ["true"]} for p in posts)
    assert posts[0]["headers"]["x-api-key"] == "sk-ant-stub"
    assert "system" in [m["role"] for m in posts[0]["body"]["messages"]]
    assert posts[1]["body"]["messages"][-1]["content"][0]["type"] == "tool_result"


@pytest.mark.cli_agents
def test_real_codex_applies_a_patch(tmp_path):
    codex = cli("codex")
    repo = git_repo(tmp_path / "repo")
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Create hello.txt containing 'hello from stub'.\n")
    with FakeResponses() as server:
        server.enqueue("gpt-5.5",
                       fr.reply(fr.apply_patch("*** Begin Patch\n*** Add File: hello.txt\n+hello from stub\n*** End Patch\n"),
                                usage=fr.usage(321, 17, cached_tokens=20)),
                       fr.reply(fr.exec_command("echo second > second.txt"), usage=fr.usage(400, 10)),
                       fr.reply(fr.message("Done: wrote the file."), usage=fr.usage(500, 5)))
        provider = (f'model_providers.stub={{name="stub",base_url="{server.base_url}",env_key="STUB_API_KEY",'
                    'wire_api="responses",request_max_retries=0,stream_max_retries=0}')
        # tmp_path is usually under /tmp: Codex then warns that it won't create its helper binaries
        # (apply_patch alias, sandbox helper) there, but with the bypass flag neither is needed.
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path / "home"), "TERM": "dumb",
               "CODEX_HOME": str(tmp_path / "codex-home"), "STUB_API_KEY": "sk-stub"}
        (tmp_path / "home").mkdir()
        (tmp_path / "codex-home").mkdir()
        rc, events, stderr = run_cli(
            [str(codex), "exec", "--json", "--skip-git-repo-check", "--ephemeral",
             "--dangerously-bypass-approvals-and-sandbox", "--disable", "plugins", "-c", "analytics.enabled=false",
             "-m", "gpt-5.5", "-c", "model_provider=stub", "-c", provider, "-"], env, repo, prompt, tmp_path)
    assert rc == 0, stderr[-2000:]
    assert (repo / "hello.txt").read_text() == "hello from stub\n"
    assert (repo / "second.txt").read_text() == "second\n"
    types = [(e["type"], e.get("item", {}).get("type")) for e in events]
    assert ("item.completed", "file_change") in types and ("item.completed", "command_execution") in types
    assert events[-2]["item"] == {"id": events[-2]["item"]["id"], "type": "agent_message", "text": "Done: wrote the file."}
    assert events[-1]["type"] == "turn.completed"
    assert events[-1]["usage"]["input_tokens"] == 1221 and events[-1]["usage"]["output_tokens"] == 32
    assert events[-1]["usage"]["cached_input_tokens"] == 20
    posts = server.posts()
    assert len(posts) == 3 and posts[0]["headers"]["authorization"] == "Bearer sk-stub"
    assert [t.get("name") for t in posts[0]["body"]["tools"] if t.get("type") == "custom"] == ["apply_patch"]
    assert posts[1]["body"]["input"][-1]["type"] == "custom_tool_call_output"
    assert posts[2]["body"]["input"][-1]["type"] == "function_call_output"
