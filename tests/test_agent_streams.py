"""ClaudeStream and CodexStream fed the stdout the real CLIs printed against the stub servers.

tests/streams/*.jsonl are that stdout, unchanged except that Claude's init event is cut down to
a few keys (docs/cli-agents.md §5 says how each was produced)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tilth.agents.backends.agent_stream import STEP_CHARS, STEP_KINDS, AgentReport, Step
from tilth.agents.backends.claude_stream import ClaudeStream
from tilth.agents.backends.codex_stream import CodexStream

STREAMS = Path(__file__).parent / "streams"


def events(name: str) -> list[dict]:
    return [json.loads(line) for line in (STREAMS / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def run(reader, lines: list[dict]) -> tuple[AgentReport, list[Step]]:
    steps = []
    for event in lines:
        steps += reader.feed(event)
    assert all(step.kind in STEP_KINDS and len(step.text) <= STEP_CHARS for step in steps)
    return reader.report(), steps


def claude(name: str) -> tuple[AgentReport, list[Step]]:
    return run(ClaudeStream(), events(name))


def codex(name: str) -> tuple[AgentReport, list[Step]]:
    return run(CodexStream(local_tz=timezone.utc), events(name))


def utc(unix: int) -> datetime:
    return datetime.fromtimestamp(unix, timezone.utc)


# ---------------------------------------------------------------- Claude Code


def test_claude_successful_run():
    report, steps = claude("claude-ok")
    assert report.session_id == "a25926cb-ca0d-4eac-b8cc-523a09432943"
    assert report.model == "claude-stub-model"
    assert report.final_text.startswith("Done: wrote the file.")
    # result.usage: input 123+150+200, cache writes 7, cache reads 10+5; output 42+30+8
    assert (report.prompt_tokens, report.completion_tokens) == (473 + 7 + 15, 80)
    assert report.cost_usd == pytest.approx(0.00353)
    assert report.turns == 3 and report.events == 8
    assert (report.is_error, report.error, report.limit) == (False, None, None)
    assert [(s.kind, s.name) for s in steps] == [
        ("init", None), ("message", None), ("tool_use", "Write"), ("tool_result", "Write"),
        ("tool_use", "Bash"), ("tool_result", "Bash"), ("message", None)]
    assert "hello.txt" in steps[2].text and steps[3].text.startswith("File created successfully")


def test_claude_limit_wording_in_tool_output_and_messages_is_not_a_limit():
    report, steps = claude("claude-ok")
    echoed = [s.text for s in steps if s.kind == "tool_result" and s.name == "Bash"]
    assert echoed and "hit your usage limit" in echoed[0] and "Request rejected (429)" in echoed[0]
    assert "429 rate limit" in report.final_text
    assert report.limit is None and not report.is_error
    # a tool result holding a whole rejected rate_limit_event line, as `cat` of a log would give
    copied = json.dumps(events("claude-usage-limit-oauth")[1])
    lines = events("claude-ok")
    lines.insert(-1, {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_fake4", "content": [{"type": "text", "text": copied}]}]}})
    report, _ = run(ClaudeStream(), lines)
    assert report.limit is None and not report.is_error


def test_claude_rejected_event_then_success_is_not_a_limit():
    lines = events("claude-ok")
    lines.insert(2, events("claude-usage-limit-oauth")[1])
    report, _ = run(ClaudeStream(), lines)
    assert report.limit is None and report.final_text.startswith("Done")


def test_claude_usage_limit_with_subscription_token():
    report, steps = claude("claude-usage-limit-oauth")
    assert report.is_error and report.error == "You've hit your 5-hour limit · resets 12:20am (UTC)"
    assert report.limit is not None and report.limit.message == report.error
    assert report.limit.resets_at == utc(1795479652)
    assert report.final_text is None and report.turns == 1 and report.cost_usd == 0
    assert [s.kind for s in steps] == ["init", "error"]


def test_claude_usage_limit_after_some_work_keeps_the_work_and_the_reset():
    report, steps = claude("claude-limit-after-work-oauth")
    assert report.limit.resets_at == utc(1795483266)
    assert report.limit.message.startswith("You've hit your weekly limit")
    assert report.final_text == "Writing it."
    assert (report.prompt_tokens, report.completion_tokens, report.turns) == (100, 20, 2)
    assert [(s.kind, s.name) for s in steps] == [
        ("init", None), ("message", None), ("tool_use", "Write"), ("tool_result", "Write"), ("error", None)]


@pytest.mark.parametrize("name, message", [
    ("claude-usage-limit-apikey",
     "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later."),
    ("claude-rate-limited-apikey", "API Error: Request rejected (429) · Number of requests has exceeded your rate limit."),
    ("claude-rate-limited-oauth", "API Error: Server is temporarily limiting requests (not your usage limit) · "
                                  "Number of requests has exceeded your rate limit."),
])
def test_claude_429_without_a_reset_time(name, message):
    report, steps = claude(name)
    assert report.is_error and report.error == message
    assert report.limit is not None and report.limit.message == message and report.limit.resets_at is None
    assert steps[-1] == Step("error", message)


@pytest.mark.parametrize("name, status", [("claude-fault500-retry1", "500"), ("claude-overloaded", "529")])
def test_claude_server_errors_are_not_limits(name, status):
    report, steps = claude(name)
    assert report.is_error and report.error.startswith(f"API Error: {status}")
    assert report.limit is None and report.final_text is None
    assert steps[-1].kind == "error"
    if status == "500":
        assert [s.kind for s in steps] == ["init", "retry", "error"] and "500" in steps[1].text


def test_claude_reset_time_is_dropped_once_the_account_is_allowed_again():
    rejected_with_reset = events("claude-usage-limit-oauth")[1]
    allowed = events("claude-limit-after-work-oauth")[3]
    assert rejected_with_reset["rate_limit_info"]["resetsAt"] and allowed["rate_limit_info"]["status"] == "allowed"
    lines = events("claude-rate-limited-apikey")
    report, _ = run(ClaudeStream(), [lines[0], rejected_with_reset, allowed, *lines[1:]])
    assert report.limit is not None and report.limit.resets_at is None


def test_claude_api_error_followed_by_a_reply_is_not_how_a_killed_run_ended():
    api_error = events("claude-usage-limit-oauth")[2]
    assert api_error["is_api_error_message"]
    lines = events("claude-ok")[:-1]
    report, _ = run(ClaudeStream(), [lines[0], api_error, *lines[1:]])
    assert (report.is_error, report.error, report.limit) == (False, None, None)
    report, _ = run(ClaudeStream(), [*lines, api_error])
    assert report.is_error and report.limit.resets_at == utc(1795479652)


def test_claude_allowed_warning_is_not_a_limit():
    report, _ = claude("claude-ok-warning-oauth")
    assert report.final_text == "All done, no rate limit hit."
    assert (report.is_error, report.limit) == (False, None)


def test_claude_truncated_stream():
    lines = events("claude-ok")
    assert lines[-1]["type"] == "result"
    report, steps = run(ClaudeStream(), lines[:-1])
    assert report.final_text.startswith("Done: wrote the file.")
    assert report.session_id == "a25926cb-ca0d-4eac-b8cc-523a09432943"
    # killed before its result: the streamed turns are counted, msg_fake2's two blocks once (123+150+200 input,
    # 7 cache-write, 5+10 cached); output only as far as message_start said (1 a turn), a lower bound
    assert (report.prompt_tokens, report.completion_tokens, report.cost_usd, report.turns) == (495, 3, None, 3)
    assert (report.cached_tokens, report.cache_write_tokens) == (15, 7)
    assert (report.is_error, report.limit) == (False, None)
    assert len(steps) == 7
    whole, _ = run(ClaudeStream(), lines)
    assert (whole.prompt_tokens, whole.completion_tokens, whole.cached_tokens, whole.cache_write_tokens) == \
        (495, 80, 15, 7)
    # killed after Claude Code printed its 429 but before the result line
    report, _ = run(ClaudeStream(), events("claude-limit-after-work-oauth")[:-1])
    assert report.is_error and report.limit.resets_at == utc(1795483266)
    assert report.final_text == "Writing it."


# ---------------------------------------------------------------- Codex


def test_codex_successful_run():
    report, steps = codex("codex-ok")
    assert report.session_id == "01a20ab3-bc47-7730-82d3-38bbde3d365f"
    assert report.final_text == "Done. The command printed a usage limit / 429 rate limit message, but that was only text."
    assert (report.prompt_tokens, report.completion_tokens) == (1221, 32)
    assert report.cost_usd is None and report.events == 8
    assert (report.is_error, report.error, report.limit) == (False, None, None)
    assert [(s.kind, s.name) for s in steps] == [
        ("init", None), ("file_change", "item_0"), ("command", "item_1"), ("command", "item_1"), ("message", "item_2")]
    assert steps[1].text == "add /root/stream-capture/runs/codex-ok/repo/hello.txt"
    assert steps[2].text.startswith("/bin/bash -lc") and not steps[2].text.endswith("(exit 0)")
    assert steps[3].text.endswith("(exit 0)")


def test_codex_limit_wording_in_output_is_not_a_limit():
    report, steps = codex("codex-ok")
    assert "hit your usage limit" in steps[3].text and "(429)" in steps[3].text
    assert report.limit is None and not report.is_error


def test_codex_usage_sums_over_turns():
    lines = events("codex-ok")
    lines += [{"type": "turn.started"}, lines[-1]]
    report, _ = run(CodexStream(), lines)
    assert (report.prompt_tokens, report.completion_tokens) == (2442, 64)
    assert (report.cached_tokens, report.cache_write_tokens) == (40, 0)  # of the 2442, priced at the cached rate


def test_codex_usage_limit():
    report, steps = codex("codex-usage-limit")
    assert report.is_error and report.error.startswith("You’ve hit your usage limit. Upgrade to Pro")
    assert report.limit.message == report.error
    assert report.limit.resets_at == datetime(2026, 11, 24, 0, 21, tzinfo=timezone.utc)
    assert [s.kind for s in steps] == ["init", "error"]
    assert (report.prompt_tokens, report.final_text) == (None, None)


def test_codex_usage_limit_after_work_and_reset_in_other_zones():
    report, steps = codex("codex-limit-after-work")
    assert report.limit.resets_at == datetime(2026, 11, 24, 1, 21, tzinfo=timezone.utc)
    assert [s.kind for s in steps] == ["init", "command", "command", "error"]
    berlin_winter = timezone(timedelta(hours=1))
    report, _ = run(CodexStream(local_tz=berlin_winter), events("codex-limit-after-work"))
    assert report.limit.resets_at == datetime(2026, 11, 24, 0, 21, tzinfo=timezone.utc)


@pytest.mark.parametrize("tail, resets", [
    ("Try again at 3:05 PM.", "today 15:05"),
    ("Upgrade to Plus to continue using Codex (https://chatgpt.com/explore/plus), or try again at Jan 1st, 2027 9:00 AM.",
     datetime(2027, 1, 1, 9, 0, tzinfo=timezone.utc)),
    ("Try again later.", None),
])
def test_codex_usage_limit_reset_formats(tail, resets):
    failed = {"type": "turn.failed", "error": {"message": f"You've hit your usage limit. {tail}"}}
    report, _ = run(CodexStream(local_tz=timezone.utc), [{"type": "thread.started", "thread_id": "t"}, failed])
    if resets == "today 15:05":
        resets = datetime.now(timezone.utc).replace(hour=15, minute=5, second=0, microsecond=0)
    assert report.limit is not None and report.limit.resets_at == resets


def test_codex_429_after_retries_is_a_limit_without_reset():
    report, steps = codex("codex-rate-limited-retry1")
    assert report.error == "exceeded retry limit, last status: 429 Too Many Requests, request id: req_fake2"
    assert report.limit.message == report.error and report.limit.resets_at is None
    assert [s.kind for s in steps] == ["init", "retry", "error"]
    assert steps[1].text.startswith("Reconnecting... 1/1")


@pytest.mark.parametrize("name, error", [
    ("codex-fault500-retry1", "We’re currently experiencing high demand, which may cause temporary errors."),
    ("codex-failed", "stream disconnected before completion: model melted"),
])
def test_codex_server_failures_are_not_limits(name, error):
    report, steps = codex(name)
    assert report.is_error and report.error == error and report.limit is None
    assert steps[-1] == Step("error", error)


def test_codex_warning_item_and_truncated_stream():
    warning = {"type": "item.completed", "item": {"id": "item_0", "type": "error",
                                                  "message": "Model metadata for `stub-model` not found."}}
    lines = events("codex-ok")
    assert lines[-1]["type"] == "turn.completed"
    report, steps = run(CodexStream(), [lines[0], warning, *lines[1:-1]])
    assert steps[1] == Step("error", "Model metadata for `stub-model` not found.", "item_0")
    assert report.final_text.startswith("Done.")
    assert (report.prompt_tokens, report.completion_tokens) == (None, None)
    assert (report.is_error, report.limit) == (False, None)
