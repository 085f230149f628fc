"""Markdown as HTML, for the transcript, the report and task details: markdown-it-py's CommonMark
with tables and strikethrough, raw HTML off (a `<script>` in a model's text stays text: every
piece of text is escaped), links only where markdown-it allows them (never `javascript:`,
`vbscript:`, `file:` or `data:` other than images), each opening in a new tab without a referrer."""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])

    def link_open(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                  env: EnvType) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        tokens[idx].attrSet("target", "_blank")
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    return md


def markdown(text: str) -> str:
    """`text` (markdown) as an HTML fragment, wrapped in `<div class="md">`."""
    return f'<div class="md">{_parser().render(text)}</div>'
