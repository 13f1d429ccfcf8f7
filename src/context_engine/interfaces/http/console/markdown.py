"""Markdown for the console's excerpts (issue 29 item 5): rendered by markdown-it-py (CommonMark and tables), then
sanitised by nh3 (the Ammonia sanitiser) to an allow-list of tags and attributes.

Documents often carry HTML of their own (runbooks use ``<details>``); it is rendered when the allow-list has it and
stripped to its text when not. Nothing that the console's Content-Security-Policy would refuse can come out: no
``style`` attribute, no ``<script>``/``<style>``, no event handler, no image (``img-src`` is ``'self'``; an image
from another host would be a CSP violation), links only to ``http``, ``https`` and ``mailto`` with
``rel="noopener noreferrer nofollow"``. Headings become paragraphs (``p.md-h``): an excerpt's ``# Title`` must not be
a second ``h1`` in the page, nor break its heading order.
"""

from __future__ import annotations

from typing import Any

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

#: Tags an excerpt may keep.
TAGS = frozenset(
    {
        "p", "br", "hr", "strong", "em", "b", "i", "code", "pre", "blockquote", "ul", "ol", "li", "a",
        "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "del", "sub", "sup", "kbd",
    }
)  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "p": {"class"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


def _heading_open(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    return f'<p class="md-h md-{tokens[idx].tag}">'


def _heading_close(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    return "</p>\n"


_MD = MarkdownIt("commonmark", {"html": True}).enable("table")
_MD.add_render_rule("heading_open", _heading_open)
_MD.add_render_rule("heading_close", _heading_close)


def render_markdown(text: str | None) -> Markup:
    """``text`` (markdown, possibly with HTML) as sanitised HTML, safe to insert into a page unescaped."""
    html = _MD.render(text or "")
    clean = nh3.clean(
        html,
        tags=set(TAGS),
        attributes={k: set(v) for k, v in ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return Markup(clean)  # noqa: S704 - sanitised by nh3 just above
