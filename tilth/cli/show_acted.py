"""An action's result on the terminal: its warnings on stderr, its sentence and lines on stdout."""

from __future__ import annotations

from tilth.cli.stderr import say

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (~5 ms of a cold start)
if TYPE_CHECKING:
    from tilth.actions.acted import Acted


def show(acted: Acted) -> int:
    for line in acted.warnings:
        say(line)
    print("\n".join(acted.lines), flush=True)
    return 0
