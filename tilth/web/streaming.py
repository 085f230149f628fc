"""How a live stream (`web/live.py`) reaches a browser: an ASGI response sending each piece as it
comes, with a cap on the streams open at once (one more is a 503 with Retry-After) and a client
that stops reading dropped: a send still blocked after `stall_s` (the connection's buffers are
full) ends the response, and the server closes that connection.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import AsyncGenerator, Callable

import anyio
from starlette.types import Receive, Scope, Send

STALLED = "ASGI callable returned without completing response."
"""What uvicorn logs when a response ends unfinished: for a dropped stalled client, that is the point."""


class _QuietDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != STALLED


def quiet_dropped_streams() -> None:
    """uvicorn says nothing when a stalled stream is dropped on purpose (its other errors stay)."""
    logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


@dataclass
class StreamGate:
    """The streams open now, at most `most`; a send blocked for `stall_s` drops its client."""

    most: int = 32
    stall_s: float = 30.0
    open: int = field(default=0)

    def enter(self) -> bool:
        if self.open >= self.most:
            return False
        self.open += 1
        return True

    def leave(self) -> None:
        self.open -= 1


HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store"),
           (b"x-accel-buffering", b"no")]
BUSY = b"too many live streams are open; this one is refused for now\n"


class EventStream:
    """The response of one live stream; `source` is made only once the gate lets it in."""

    def __init__(self, source: Callable[[], AsyncGenerator[bytes, None]], gate: StreamGate):
        self.source, self.gate = source, gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.gate.enter():
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", b"5")]})
            await send({"type": "http.response.body", "body": BUSY})
            return
        try:
            async with anyio.create_task_group() as group:
                async def until_gone() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(until_gone)
                await self._pump(send)
                group.cancel_scope.cancel()
        finally:
            self.gate.leave()

    async def _pump(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        async with contextlib.aclosing(self.source()) as pieces:
            async for piece in pieces:
                with anyio.move_on_after(self.gate.stall_s) as waited:
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
                if waited.cancelled_caught:
                    return  # the client stopped reading: drop it (the server closes the connection)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
