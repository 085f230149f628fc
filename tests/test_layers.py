"""The package tree is the architecture: each subpackage may import only the ones listed for
it in AGENTS.md. A lower layer importing a higher one fails here, imports inside functions
included; so does an import cycle between two modules, and two modules with one file name."""

from __future__ import annotations

import ast
from collections import Counter
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
    "web": {"core", "store", "git", "agents", "views", "run", "daemon", "dispatch", "actions"},
    "dispatch": {"core", "store", "git", "agents", "views", "run"},
    "actions": {"core", "store", "git", "agents", "views", "run", "daemon", "dispatch"},
    "cli": {"core", "store", "git", "agents", "views", "run", "daemon", "web", "dispatch", "actions"},
}
ENTRY_POINTS = {"__init__.py", "__main__.py"}
# File names Python itself gives a meaning to, so several packages may each have one.
PACKAGE_FILES = {"__init__.py", "__main__.py"}


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
    assert "web" not in MAY_IMPORT["actions"]
    assert "web" not in MAY_IMPORT["daemon"]  # `tilth daemon --serve` runs `tilth serve` as a child process


def test_allowed_sets_are_closed_and_acyclic() -> None:
    for layer, allowed in MAY_IMPORT.items():
        assert layer not in allowed
        for lower in allowed:
            assert MAY_IMPORT[lower] <= allowed, f"{layer} may import {lower} but not all {lower} may import"
            assert layer not in MAY_IMPORT[lower], f"{layer} and {lower} may import each other"


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the tilth modules it imports, wherever in the file: `from tilth.a import b` names
    the module `tilth.a.b` when b is one, else `tilth.a`."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.split(".")[0] == root.name}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == root.name:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in modules else node.module)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (imports inside functions count):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_sees_a_deferred_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "tilth"
    (pkg / "store").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "__init__.py").write_text("")
    (pkg / "store" / "a.py").write_text("from tilth.store import b\n")
    (pkg / "store" / "b.py").write_text("def f():\n    import tilth.store.c\n")
    (pkg / "store" / "c.py").write_text("def g():\n    from tilth.store.a import x\n")
    (pkg / "store" / "d.py").write_text("from tilth.store import a\n")
    assert cycles(import_graph(pkg)) == [["tilth.store.a", "tilth.store.b", "tilth.store.c"]]


def test_every_module_says_its_job() -> None:
    silent = [str(p.relative_to(ROOT)) for p in sorted(ROOT.rglob("*.py"))
              if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert not silent, f"modules without a docstring saying their one job: {silent}"


def test_no_two_modules_share_a_file_name() -> None:
    names = Counter(p.name for p in ROOT.rglob("*.py") if p.name not in PACKAGE_FILES)
    shared = sorted(name for name, count in names.items() if count > 1)
    where = [str(p.relative_to(ROOT)) for p in sorted(ROOT.rglob("*.py")) if p.name in shared]
    assert not shared, f"modules sharing a file name (name each for its job): {where}"
