"""The package tree is the architecture: each subpackage may import only what AGENTS.md's layer table
says, read from AGENTS.md itself so the table and this test cannot drift: its "may import" cell (with
`(only `git/worktree_git`: ...)` naming the only modules of a package it may use), and the rules in its
middle column ("imported only by `actions/` and `cli/`", "imported by nothing", "never imports git,
agents or run"). A lower layer importing a higher one fails here, imports inside functions included;
so does an import cycle between two modules, and two modules with one file name."""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import tilth

ROOT = Path(tilth.__file__).parent
AGENTS_MD = ROOT.parent / "AGENTS.md"
HEADER = "| package | what lives here | may import |"
ENTRY_POINTS = {"__init__.py", "__main__.py"}
# File names Python itself gives a meaning to, so several packages may each have one.
PACKAGE_FILES = {"__init__.py", "__main__.py"}


@dataclass
class Layer:
    """One row of the table, as its words say."""

    may: set[str]
    """The packages it may import besides itself."""
    only: dict[str, set[str]] = field(default_factory=dict)
    """package -> the only modules of it that it may import (`(only `git/worktree_git`: ...)`)."""
    importers: set[str] | None = None
    """"imported only by ..." / "imported by nothing": the only packages that may import it."""
    never: set[str] = field(default_factory=set)
    """"never imports ...": packages it never imports."""


def _names(text: str) -> set[str]:
    """`a/`, `b/` and `c/` -> {a, b, c}; a, b or c -> {a, b, c}."""
    return {n.strip("`/") for n in re.split(r",\s*|\s+(?:and|or)\s+", text.strip()) if n.strip()}


def _top_level(cell: str) -> list[str]:
    """The cell's comma-separated items, commas inside parentheses kept."""
    items, depth, current = [], 0, ""
    for char in cell:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    return [*items, current.strip()] if current.strip() else items


def read_table(text: str) -> dict[str, Layer]:
    """AGENTS.md's layer table; a phrase this test cannot read fails, so the table says only what is checked."""
    lines = text.splitlines()
    at = lines.index(HEADER) + 2  # past the header and its |---| line
    rows = []
    while at < len(lines) and lines[at].startswith("|"):
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", lines[at].strip())[1:-1]])
        at += 1
    packages = []
    for name, _, _ in rows:
        found = re.fullmatch(r"`(\w+)/`", name)
        assert found, f"AGENTS.md's layer table: {name!r} is not a package written as `name/`"
        packages.append(found[1])
    table = {}
    for package, (_, job, cell) in zip(packages, rows):
        layer = Layer(set())
        if cell == "everything":
            layer.may = set(packages) - {package}
        elif cell != "nothing of tilth":
            for item in _top_level(cell):
                found = re.fullmatch(r"(\w+)(?: \((?:only ((?:`[\w/]+`(?:, )?)+): [^()]*"
                                     r"|and what `(\w+)/` may import: ([\w, ]+))\))?", item)
                assert found, f"AGENTS.md's layer table, {package}/: the layer test cannot read {item!r}"
                layer.may.add(found[1])
                if found[2]:
                    layer.only[found[1]] = {m.replace("/", ".") for m in re.findall(r"`([\w/]+)`", found[2])}
                if found[4]:
                    layer.may |= _names(found[4])
        if re.search(r"imported by nothing", job):
            layer.importers = set()
        if found := re.search(r"imported only by (`\w+/`(?:(?:, | and )`\w+/`)*)", job):
            layer.importers = _names(found[1])
        if found := re.search(r"never imports (\w+(?:(?:, | or | and )\w+)*)", job):
            layer.never = _names(found[1])
        table[package] = layer
    for layer in table.values():
        named = layer.may | layer.never | (layer.importers or set()) | set(layer.only)
        assert named <= set(table), f"AGENTS.md's layer table names packages it has no row for: {named - set(table)}"
    return table


TABLE = read_table(AGENTS_MD.read_text())


def tilth_imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, imported tilth module) for every import in the file, wherever it appears; `from tilth.a
    import b` is the module `tilth.a.b` when b is one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tilth"]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: use absolute imports (tilth.<layer>...)"
            if node.module and node.module.split(".")[0] == "tilth":
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    is_module = (root.parent / sub.replace(".", "/")).with_suffix(".py").exists() or \
                        (root.parent / sub.replace(".", "/") / "__init__.py").exists()
                    found.append((node.lineno, sub if is_module else node.module))
    return found


def layer_of(module: str, table: dict[str, Layer] = TABLE) -> str:
    parts = module.split(".")
    assert len(parts) >= 2 and parts[1] in table, f"{module} is in no layer"
    return parts[1]


def violations(root: Path, table: dict[str, Layer]) -> list[str]:
    """Every import in the tree under `root` that the table's words forbid, with the rule it breaks."""
    wrong = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if len(rel.parts) == 1:
            continue
        own = rel.parts[0]
        for line, module in tilth_imports(path, root):
            target = layer_of(module, table)
            if target == own:
                continue
            where = f"tilth/{rel}:{line} ({own}) imports {module}"
            rules = table[own], table[target]
            if target not in rules[0].may:
                wrong.append(f"{where}: {own}/ may import {', '.join(sorted(rules[0].may)) or 'nothing of tilth'}")
            if target in rules[0].never:
                wrong.append(f"{where}: {own}/ never imports {target}/")
            if target in rules[0].only and ".".join(module.split(".")[1:3]) not in rules[0].only[target]:
                wrong.append(f"{where}: of {target}/ only {', '.join(sorted(rules[0].only[target]))}")
            if rules[1].importers is not None and own not in rules[1].importers:
                wrong.append(f"{where}: {target}/ is imported only by {', '.join(sorted(rules[1].importers)) or 'nothing'}")
    return wrong


def test_only_entry_points_live_at_the_top() -> None:
    top = {p.name for p in ROOT.glob("*.py")}
    assert top == ENTRY_POINTS, f"modules outside any layer: {sorted(top - ENTRY_POINTS)}"
    subpackages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert subpackages == set(TABLE), "AGENTS.md's layer table has a row for each subpackage, and only those"


def test_no_package_imports_what_agents_md_forbids() -> None:
    wrong = violations(ROOT, TABLE)
    assert not wrong, "imports AGENTS.md's layer table forbids:\n" + "\n".join(wrong)


def test_the_table_agrees_with_itself_and_has_no_cycle() -> None:
    for name, layer in TABLE.items():
        assert name not in layer.may, f"{name}/ lists itself"
        assert not layer.may & layer.never, f"{name}/ may import what it never imports: {layer.may & layer.never}"
        assert set(layer.only) <= layer.may, f"{name}/ restricts packages it may not import: {set(layer.only)}"
        for lower in layer.may:
            importers = TABLE[lower].importers
            assert importers is None or name in importers, \
                f"{name}/ may import {lower}/, which is imported only by {sorted(importers or ())}"

    def reach(name: str, seen: set[str]) -> set[str]:
        for lower in TABLE[name].may - seen:
            seen.add(lower)
            reach(lower, seen)
        return seen

    looping = [name for name in TABLE if name in reach(name, set())]
    assert not looping, f"packages that may import themselves through others: {looping}"


def test_the_check_reads_the_words_and_sees_each_kind_of_violation(tmp_path: Path) -> None:
    table = read_table("\n".join([
        HEADER, "|---|---|---|",
        "| `core/` | the base | nothing of tilth |",
        "| `git/` | git | core |",
        "| `agents/` | agents | core, git (only `git/worktree_git`: a reason, with a colon) |",
        "| `daemon/` | the supervisor; never imports git or agents (it runs children) | core |",
        "| `dispatch/` | workers; imported only by `actions/` and `cli/` (and by RQ) | core |",
        "| `web/` | the dashboard; imported only by `cli/` | core, actions (and what `actions/` may import: dispatch) |",
        "| `actions/` | actions | core, dispatch |",
        "| `cli/` | commands; imported by nothing | everything |",
    ]))
    assert table["agents"].only == {"git": {"git.worktree_git"}} and table["daemon"].never == {"git", "agents"}
    assert table["dispatch"].importers == {"actions", "cli"} and table["cli"].importers == set()
    assert table["web"].may == {"core", "actions", "dispatch"} and table["cli"].may == set(table) - {"cli"}
    pkg = tmp_path / "tilth"
    for name, body in {"core/a.py": "def f():\n    from tilth.cli import main\n",  # up the layers, deferred
                       "agents/b.py": "from tilth.git import gitops\n",  # not the one module of git allowed
                       "daemon/c.py": "import tilth.git.gitops\n",  # what it never imports
                       "web/d.py": "from tilth.dispatch.broker import Broker\n",  # imported only by others
                       "git/gitops.py": "", "git/worktree_git.py": "from tilth.core import a\n",
                       "dispatch/broker.py": "", "cli/main.py": "", "actions/e.py": "from tilth.dispatch import broker\n"}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(body)
    found = violations(pkg, table)
    assert [line.split(" imports ")[0] for line in found] == [
        "tilth/agents/b.py:1 (agents)", "tilth/core/a.py:2 (core)", "tilth/core/a.py:2 (core)",
        "tilth/daemon/c.py:1 (daemon)", "tilth/daemon/c.py:1 (daemon)", "tilth/web/d.py:1 (web)"], found
    assert found[-1].endswith("dispatch/ is imported only by actions, cli"), found


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
    """Every module has a docstring, and its first line is a phrase of its own (at least four words)
    saying the module's one job, not a bare title."""
    silent = [str(p.relative_to(ROOT)) for p in sorted(ROOT.rglob("*.py"))
              if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert not silent, f"modules without a docstring saying their one job: {silent}"
    terse = [str(p.relative_to(ROOT)) for p in sorted(ROOT.rglob("*.py"))
             if len(ast.get_docstring(ast.parse(p.read_text())).strip().splitlines()[0].split()) < 4]  # type: ignore[union-attr]
    assert not terse, f"modules whose docstring's first line does not say their job: {terse}"


def test_no_two_modules_share_a_file_name() -> None:
    names = Counter(p.name for p in ROOT.rglob("*.py") if p.name not in PACKAGE_FILES)
    shared = sorted(name for name, count in names.items() if count > 1)
    where = [str(p.relative_to(ROOT)) for p in sorted(ROOT.rglob("*.py")) if p.name in shared]
    assert not shared, f"modules sharing a file name (name each for its job): {where}"
