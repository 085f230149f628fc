"""A real model behind a real OpenAI-compatible server, spoken to with the real `openai` SDK.

Only protocol outcomes are asserted (a response arrives, finish_reason is valid, forced
tool calls name an offered tool), never what the 135M model says.

Why the tool choice is forced: llama-cpp-python 0.3.36's `chatml-function-calling` handles
`tool_choice="auto"` in two steps. If the model picks a tool it works without streaming, but
with streaming the server raises after sending its 200 headers, so the client sees an empty
stream. If the model picks a plain message, generation ignores `max_tokens` and runs until
the context is full, which takes minutes and then ends in an error. Whether `auto` works
therefore depends on the model's choice, so this test forces the tool.
"""

from __future__ import annotations

import json
import time

import pytest

from llama_server import LlamaServer, llama_server, skip_unless_required  # noqa: F401  (fixture)

try:
    import openai
except ImportError:  # pragma: no cover - depends on the venv
    openai = None

pytestmark = pytest.mark.llama

WRITE_FILE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a text file in the repository, replacing it if it exists.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path relative to the repository root."},
                "content": {"type": "string", "description": "The whole new file content."},
            },
            "required": ["path", "content"],
        },
    },
}
OFFERED = {WRITE_FILE["function"]["name"]}
FORCED = {"type": "function", "function": {"name": "write_file"}}
FINISH_REASONS = {"stop", "length", "tool_calls", "content_filter", "function_call"}
MESSAGES = [
    {"role": "system", "content": "You are a coding agent. Change files only through the tools."},
    {"role": "user", "content": "Create hello.txt containing the word hello."},
]


def _collect_stream(stream) -> tuple[int, str | None, list[tuple[set[str], str]]]:
    """(chunk count, final finish_reason, [(names, arguments)] per tool-call index).

    llama-cpp-python repeats the tool's name and id in every chunk instead of sending them
    once, so names are collected as a set rather than concatenated as OpenAI deltas would be.
    """
    chunks, finish, calls = 0, None, {}
    for chunk in stream:
        chunks += 1
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or []:
                names, args = calls.setdefault(call.index, (set(), []))
                if call.function is not None:
                    if call.function.name:
                        names.add(call.function.name)
                    args.append(call.function.arguments or "")
    return chunks, finish, [(names, "".join(args)) for _, (names, args) in sorted(calls.items())]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_forced_tool_call_round_trips_through_the_openai_sdk(llama_server: LlamaServer, stream: bool):  # noqa: F811
    if openai is None:
        skip_unless_required("the `openai` SDK is not installed in this venv (add it to the test extra)")
    client = openai.OpenAI(base_url=llama_server.base_url, api_key="unused", max_retries=0, timeout=60)
    request = dict(model=llama_server.model, messages=MESSAGES, tools=[WRITE_FILE], tool_choice=FORCED,
                   temperature=0, max_tokens=128)
    started = time.monotonic()
    try:
        if stream:
            chunks, finish, calls = _collect_stream(client.chat.completions.create(stream=True, **request))
            # An exception inside llama-cpp-python's generator ends the stream with no chunks
            # and no error, so an empty or unfinished stream is a protocol failure here.
            assert chunks > 0, f"empty stream; server log tail:\n{llama_server.log_tail()}"
        else:
            response = client.chat.completions.create(**request)
            assert response.choices, response
            choice = response.choices[0]
            finish = choice.finish_reason
            calls = [({c.function.name}, c.function.arguments) for c in choice.message.tool_calls or []]
    finally:
        client.close()
    elapsed = time.monotonic() - started

    assert finish in FINISH_REASONS, f"finish_reason {finish!r}; server log tail:\n{llama_server.log_tail()}"
    # Forcing a function obliges the server to answer with a call to it.
    assert finish == "tool_calls" and calls, (finish, calls)
    for names, arguments in calls:
        assert names and names <= OFFERED, f"tool call names {names} not among offered {OFFERED}"
        assert isinstance(arguments, str)

    parsed = []
    for _, arguments in calls:
        try:
            parsed.append(type(json.loads(arguments)).__name__)
        except ValueError as exc:
            parsed.append(f"unparseable ({exc})")
    print(f"\n{'streamed' if stream else 'whole'} forced write_file in {elapsed:.2f}s: finish_reason={finish} "
          f"arguments={[a for _, a in calls]} json={parsed}")
