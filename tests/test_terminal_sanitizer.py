"""Nothing a model, a plan or a file wrote reaches the person's terminal raw: a task title, a
verdict's concern, a worker's case, a learning and a parked question holding `ESC ] 0 ; ... BEL`
(retitle) and `ESC [ 2 J` (clear) are printed by every command that shows them with the control
characters escaped (`core/terminal.clean`), and still readable as text."""

from __future__ import annotations

import json

import pytest

from conftest import task
from tilth.core.terminal import clean

HOSTILE = "\x1b]0;owned\x07\x1b[2J\r\x9b31m"
SHOWN = "\\x1b]0;owned\\x07\\x1b[2J\\x0d\\u009b31m"


def raw_controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0]


def test_clean_escapes_every_control_character_but_newline_and_tab():
    assert clean(f"a\tb\nc{HOSTILE}") == f"a\tb\nc{SHOWN}"
    assert clean("\u202eevil\u2066") == "\\u202eevil\\u2066", "direction overrides reorder what is shown"
    assert clean("plain ≥ $0.01 – ok") == "plain ≥ $0.01 – ok"
    assert not raw_controls(clean("".join(map(chr, range(0x100)))).replace("\n", "").replace("\t", ""))


@pytest.mark.slow
def test_no_command_prints_a_raw_escape_from_a_plan_or_a_model(sandbox):
    plan = [task("T-1", f"Greet {HOSTILE}", description=f"say hi {HOSTILE}"), task("T-2", "Ask"),
            task("T-1b", f"Greet {HOSTILE}")]
    reject = {"verdict": "reject", "category": "weak_test", "concern": f"no test {HOSTILE}", "next_step": "add one"}
    ask = {"verdict": "needs_human", "question": f"which greeting {HOSTILE}?", "concern": f"unclear {HOSTILE}"}
    scenario = {"tasks": {
        "T-1": [{"write": {"a.py": "x = 1\n"}, "verdict": reject, "case": {"summary": f"wrote it {HOSTILE}"}},
                {"write": {"a.py": "x = 2\n"}, "learnings": [f"greet politely {HOSTILE}"]}],
        "T-2": [{"write": {"b.py": "y = 1\n"}, "verdict": ask}]}}
    outputs: dict[str, str] = {}

    def run(name: str, *args: str, code: int | None = None) -> str:
        result = sandbox.tilth(*args, timeout=60)
        if code is not None:
            assert result.returncode == code, (name, result.stdout, result.stderr)
        outputs[name] = result.stdout + result.stderr
        return outputs[name]

    started = sandbox.start("s1", plan, scenario)
    outputs["start --foreground"] = started.stdout + started.stderr
    run("status", "status")
    run("status <id>", "status", "s1", code=0)
    run("logs", "logs", "s1", code=0)
    run("logs --all", "logs", "s1", "--all", code=0)
    run("logs -f", "logs", "s1", "-f", code=0)
    run("wait", "wait", "s1")
    run("digest", "digest", code=0)
    run("learnings", "learnings", "s1", code=0)
    run("log", "log", "s1", code=0)
    run("doctor", "doctor", "s1")
    run("summarize", "summarize", "s1", code=0)
    run("plan check", "plan", "check", str(sandbox.write_json("check.json", plan)))
    run("note", "note", "s1", f"be brief {HOSTILE}", code=0)
    run("answer", "answer", "s1", "T-2", f"hello {HOSTILE}")
    run("config", "config", "s1", code=0)

    assert "T-2" in outputs["status <id>"] and "which greeting" in outputs["status <id>"]
    for name, text in outputs.items():
        assert not raw_controls(text), f"`tilth {name}` printed raw control characters: {text[:600]!r}"
    shown = {name for name, text in outputs.items() if "\\x1b]0;owned\\x07\\x1b[2J" in text}
    assert {"start --foreground", "status <id>", "logs", "logs -f", "digest", "learnings", "log",
            "plan check"} <= shown, f"the escaped text is still shown to read: {sorted(shown)}"
    assert json.loads(sandbox.tilth("status", "--json").stdout)[0]["tasks"][0]["title"] == f"Greet {HOSTILE}", \
        "--json keeps the text exactly (JSON escapes it)"


def test_the_spinner_keeps_its_own_controls_under_the_guard_and_cleans_what_it_names(monkeypatch):
    import io
    import sys
    import threading

    from tilth.cli.liveness import CLEAR, waiting
    from tilth.core.terminal import Guarded

    class Terminal(io.StringIO):
        spun = threading.Event()

        def isatty(self):
            return True

        def write(self, text):
            if text.count("\r") and self.getvalue().count("\r") >= 1:
                self.spun.set()
            return super().write(text)

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", Guarded(terminal))
    with waiting(f"waiting on {HOSTILE}", line_to=io.StringIO()):
        assert terminal.spun.wait(10), terminal.getvalue()
    shown = terminal.getvalue()
    assert shown.startswith(f"\r| waiting on {SHOWN} 0s\r") and shown.endswith(CLEAR), shown
    assert not raw_controls(shown.replace("\r", "").replace(CLEAR[1:], ""))
