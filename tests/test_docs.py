"""The documentation's shape: README.md is a quickstart, and no relative link in it or in docs/ is dead."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "hooks" / "README.md",
        ROOT / "sessions.example" / "README.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)


def prose(text: str) -> str:
    """The text without fenced blocks and code spans, where a bracket is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, each space a hyphen."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", FENCE.sub("", path.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def relative_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(prose(path.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_readme_is_a_quickstart_of_at_most_300_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move reference material to docs/"
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{doc.name})" in (ROOT / "README.md").read_text(), f"README.md does not link {doc.name}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    assert doc.exists()
    dead = []
    for target in relative_links(doc):
        file, _, anchor = target.partition("#")
        resolved = (doc.parent / file).resolve() if file else doc
        if not resolved.exists():
            dead.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            dead.append(f"{target} (no such heading)")
    assert not dead, f"{doc.relative_to(ROOT)}: dead links: {dead}"


def test_every_docs_file_says_what_it_covers_in_its_first_line():
    for doc in sorted((ROOT / "docs").glob("*.md")):
        lines = doc.read_text().splitlines()
        assert lines[0].startswith("# ") and lines[1] == "" and lines[2].strip(), f"{doc.name} opens without its scope"
