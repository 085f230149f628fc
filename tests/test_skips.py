"""No test skips silently: every `pytest.skip`, `skipif` and `importorskip` in tests/ gives a reason,
and no test is marked to skip unconditionally (tests/test_aider_cli.py's real-aider tests included:
they skip through `cli_agents.missing`, which names what is missing or fails under CI's switch)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def silent_skips(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name, keywords = dotted(node.func), {k.arg for k in node.keywords}
            if name == "pytest.skip" and not node.args and "reason" not in keywords:
                found.append(f"line {node.lineno}: pytest.skip() without a reason")
            if name in ("pytest.mark.skipif", "pytest.importorskip") and "reason" not in keywords:
                found.append(f"line {node.lineno}: {name} without reason=")
            if name == "pytest.mark.skip":
                found.append(f"line {node.lineno}: pytest.mark.skip skips unconditionally")
        elif isinstance(node, ast.Attribute) and dotted(node) == "pytest.mark.skip":
            found.append(f"line {node.lineno}: pytest.mark.skip skips unconditionally")
        if isinstance(node, ast.Call) and dotted(node.func) == "pytest.skip" and node.args:
            reason = node.args[0]
            if isinstance(reason, ast.Constant) and not str(reason.value).strip():
                found.append(f"line {node.lineno}: pytest.skip with an empty reason")
    return sorted(set(found))


def test_every_skip_in_the_tests_gives_its_reason():
    found = {path.name: silent for path in sorted(TESTS.glob("*.py"))
             if (silent := silent_skips(path.read_text()))}
    assert found == {}


def test_the_check_sees_a_silent_skip():
    assert silent_skips("import pytest\npytest.skip()\n") == ["line 2: pytest.skip() without a reason"]
    assert silent_skips("import pytest\n@pytest.mark.skipif(True)\ndef test_x(): pass\n")
    assert silent_skips("import pytest\n@pytest.mark.skip\ndef test_x(): pass\n")
    assert silent_skips("import pytest\npytest.skip('redis-server is not installed')\n") == []
