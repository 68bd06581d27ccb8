"""Operators' Markdown (task overview, rules, notes) rendered to HTML that is safe to show.

markdown-it-py in CommonMark mode with raw HTML off: every ``<tag>`` in the source comes out as
escaped text rather than markup, and its link validator drops ``javascript:``, ``vbscript:``,
``file:`` and ``data:`` targets (the link text stays, as plain text). Links that do render get
``rel="nofollow noopener"`` so a task page lends no rank to, and no window handle to, what it
links.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token

LINK_REL = "nofollow noopener"


def _link_open(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    tokens[idx].attrSet("rel", LINK_REL)
    return str(renderer.renderToken(tokens, idx, options, env))


@cache
def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    parser.enable(["table", "strikethrough"])
    parser.add_render_rule("link_open", _link_open)
    return parser


def markdown_html(text: str) -> SafeString:
    """``text`` as HTML with no raw HTML and no script-bearing links; empty text gives ''."""
    if not text.strip():
        return mark_safe("")
    # Safe: the parser escapes every character of the source it does not turn into markup.
    return mark_safe(_parser().render(text))
