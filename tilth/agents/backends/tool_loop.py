"""The model's tool loop: ask, answer every tool call of the reply, nudge a reply without one,
until a call ends it (`Done`) or the steps run out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from tilth.agents.backends.chat import ModelReply, ToolCall

CUT_OFF = "Your reply was cut off by the length limit. Keep replies short and act through the tools."


Value = TypeVar("Value")


@dataclass(frozen=True)
class Done(Generic[Value]):
    """What a tool call that ends the loop hands back (a case, a question, a plan)."""

    value: Value


Handler = Callable[[ToolCall, int, "str | None"], "str | Done[Value]"]
"""(call, step, thought: the reply's text, with its first call only) -> the tool result, or Done."""


def answer_calls(messages: list[dict[str, Any]], reply: ModelReply, calls: list[ToolCall], step: int,
                 handle: Handler[Value]) -> Done[Value] | None:
    """The reply into the conversation, then each call's result; stops at a call that ends the loop."""
    messages.append(reply.as_message())
    for index, call in enumerate(calls):
        result = handle(call, step, None if index else reply.content)
        if isinstance(result, Done):
            return result
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return None


def tool_loop(messages: list[dict[str, Any]], steps: int, ask: Callable[[int], ModelReply], handle: Handler[Value],
              nudge: str, after_step: Callable[[], None] | None = None) -> Done[Value] | None:
    """Up to `steps` replies (`ask(step)`); a reply without a tool call gets `nudge` (or, cut off by the
    length limit, CUT_OFF); `after_step` runs once a reply's calls are answered. None: steps used up."""
    for step in range(steps):
        reply = ask(step)
        if not reply.tool_calls:
            messages.append(reply.as_message())
            messages.append({"role": "user", "content": CUT_OFF if reply.finish_reason == "length" else nudge})
            continue
        done = answer_calls(messages, reply, reply.tool_calls, step, handle)
        if done is not None:
            return done
        if after_step is not None:
            after_step()
    return None
