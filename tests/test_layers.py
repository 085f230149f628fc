"""The package tree is the architecture: each subpackage may import only the ones listed for
it in AGENTS.md. A lower layer importing a higher one fails here, imports inside functions
included."""

from __future__ import annotations

import ast
from pathlib import Path

import tilth

ROOT = Path(tilth.__file__).parent

# What each subpackage may import besides itself (AGENTS.md, "Layers").
MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "store": {"core"},
    "git": {"core", "store"},
    "agents": {"core", "store", "git"},
    "views": {"core", "store", "git", "agents"},
    "run": {"core", "store", "git", "agents", "views"},
    "daemon": {"core", "store"},
    "web": {"core", "store", "git", "agents", "views"},
    "dispatch": {"core", "store", "git", "agents", "views", "run"},
    "cli": {"core", "store", "git", "agents", "views", "run", "daemon", "web", "dispatch"},
}
ENTRY_POINTS = {"__init__.py", "__main__.py"}


def tilth_imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported tilth module) for every import in the file, wherever it appears."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tilth"]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: use absolute imports (tilth.<layer>...)"
            if node.module == "tilth":
                found += [(node.lineno, f"tilth.{a.name}") for a in node.names]
            elif node.module and node.module.split(".")[0] == "tilth":
                found.append((node.lineno, node.module))
    return found


def layer_of(module: str) -> str:
    parts = module.split(".")
    assert len(parts) >= 2 and parts[1] in MAY_IMPORT, f"{module} is in no layer"
    return parts[1]


def test_only_entry_points_live_at_the_top() -> None:
    top = {p.name for p in ROOT.glob("*.py")}
    assert top == ENTRY_POINTS, f"modules outside any layer: {sorted(top - ENTRY_POINTS)}"
    subpackages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert subpackages == set(MAY_IMPORT)


def test_no_layer_imports_one_it_may_not() -> None:
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if len(rel.parts) == 1:
            continue
        own = rel.parts[0]
        for line, module in tilth_imports(path):
            target = layer_of(module)
            if target != own and target not in MAY_IMPORT[own]:
                wrong.append(f"tilth/{rel}:{line} ({own}) imports {module} ({target})")
    assert not wrong, "layer violations:\n" + "\n".join(wrong)


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from tilth.cli.main import main\n    import tilth.run.loop\n")
    assert [layer_of(m) for _, m in tilth_imports(bad)] == ["cli", "run"]
    assert "cli" not in MAY_IMPORT["store"] and "run" not in MAY_IMPORT["daemon"]


def test_only_the_cli_imports_the_dashboard() -> None:
    assert [layer for layer, allowed in MAY_IMPORT.items() if "web" in allowed] == ["cli"]
    assert "web" not in MAY_IMPORT["daemon"]  # `tilth daemon --serve` runs `tilth serve` as a child process


def test_allowed_sets_are_closed_and_acyclic() -> None:
    for layer, allowed in MAY_IMPORT.items():
        assert layer not in allowed
        for lower in allowed:
            assert MAY_IMPORT[lower] <= allowed, f"{layer} may import {lower} but not all {lower} may import"
            assert layer not in MAY_IMPORT[lower], f"{layer} and {lower} may import each other"
