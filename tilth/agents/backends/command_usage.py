"""A `command` agent's usage lines: each stdout line that is a JSON object with `"type": "usage"` is
one model call it made (`prompt_tokens`, `completion_tokens`, `cached_tokens`, `cache_write_tokens`,
`cost` in USD, `model`; any may be left out), summed over the run as it streams, so the spend cap
counts the agent while it runs. Everything else it prints is its answer, read at the end."""

from __future__ import annotations

from typing import Any

from tilth.agents.backends.agent_stream import AgentReport, Step

FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens")


class CommandUsage:
    def __init__(self) -> None:
        self._report = AgentReport()
        self.lines = 0
        """Usage lines read; none: the run reported nothing to count."""

    def feed(self, event: dict[str, Any]) -> list[Step]:
        if event.get("type") != "usage":
            return []
        self.lines += 1
        report = self._report
        for name in FIELDS:
            value = event.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                setattr(report, name, (getattr(report, name) or 0) + value)
        cost = event.get("cost")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0:
            report.cost_usd = (report.cost_usd or 0.0) + float(cost)
        if isinstance(event.get("model"), str) and event["model"]:
            report.model = event["model"]
        return []

    def report(self) -> AgentReport:
        return self._report

    def finish(self, stdout: str, stderr: str, exit_code: int) -> AgentReport:
        """The run's report at its end: the usage summed, the whole stdout as its answer."""
        report = self._report
        report.final_text = stdout
        report.is_error = exit_code != 0
        return report
