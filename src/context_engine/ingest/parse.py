"""Markdown and plain-text parsing, markdown-aware chunking and the breadcrumb format (DESIGN.md §4).

Three parts, used in this order by the write path:

1. :class:`MarkdownParser` (and :func:`parse_plain` for ``.txt``) turns source text into a
   :class:`ParsedDocument`: title, front matter, sections (heading path + blocks whose markdown is kept verbatim),
   lead sentence(s), language and plain text. Parsing never fails on content: broken YAML front matter becomes
   ``{}`` plus a recorded warning.
2. :class:`MarkdownChunker` cuts a parsed document into L2 :class:`~context_engine.schema.nodes.Chunk` s: split on
   headings, pack whole blocks up to a token cap, never split code blocks, tables or raw HTML, split only an
   over-long paragraph/list on sentence boundaries, with overlap only inside an over-long section, and merge tiny
   sections with their neighbours.
3. The breadcrumb helpers: :data:`BREADCRUMB_SEPARATOR`, :func:`format_breadcrumb` / :func:`split_breadcrumb`
   (an escaped display form and its inverse) and :func:`embedding_input` (``title + breadcrumb + content``).

Token counts here are estimates (:func:`estimate_tokens`), not a model tokenizer: cheap, deterministic and
CJK-aware, which is what chunk caps and context packing need.

The parser lives here; the document model and breadcrumbs in :mod:`~context_engine.ingest.document`, the chunker in
:mod:`~context_engine.ingest.chunker` and the text measures in :mod:`~context_engine.ingest.text`. This module
re-exports their names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# The document model, the chunker and the text measures live in their own modules (issue 28: no module over 800
# lines); their names are re-exported here, the write path's one import.
from context_engine.ingest.chunker import MarkdownChunker
from context_engine.ingest.document import (
    ATOMIC_KINDS,
    BREADCRUMB_SEPARATOR,
    PROSE_KINDS,
    Block,
    BlockKind,
    ParsedDocument,
    Section,
    embedding_input,
    first_prose_block,
    format_breadcrumb,
    split_breadcrumb,
)
from context_engine.ingest.text import (
    Language,
    collapse_whitespace,
    detect_language,
    estimate_tokens,
    is_cjk,
    sentence_boundaries,
    split_sentences,
)

if TYPE_CHECKING:  # markdown-it and yaml are imported when a document is parsed: a search process never pays them
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

__all__ = [
    "ATOMIC_KINDS",
    "BREADCRUMB_SEPARATOR",
    "Block",
    "BlockKind",
    "Language",
    "MarkdownChunker",
    "MarkdownParser",
    "PROSE_KINDS",
    "ParsedDocument",
    "Section",
    "collapse_whitespace",
    "detect_language",
    "embedding_input",
    "estimate_tokens",
    "first_prose_block",
    "format_breadcrumb",
    "is_cjk",
    "parse_plain",
    "sentence_boundaries",
    "split_breadcrumb",
    "split_sentences",
]

# --------------------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------------------

_KIND_BY_OPEN: dict[str, BlockKind] = {
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "blockquote",
    "table_open": "table",
    "fence": "code",
    "code_block": "code",
    "html_block": "html",
    "hr": "hr",
}

#: Section headings (casefolded) whose first paragraph is the document's lead: runbooks put the alert's meaning
#: there, not in the first paragraph of the file.
LEAD_SECTION_NAMES: frozenset[str] = frozenset(
    {
        "meaning",
        "summary",
        "overview",
        "description",
        "introduction",
        "purpose",
        "about",
        "abstract",
        "含义",
        "概述",
        "概要",
        "简介",
        "描述",
        "说明",
        "摘要",
        "介绍",
    }
)
_LEAD_MIN_CHARS = {"en": 80, "zh": 30}
_LEAD_MAX_SENTENCES = 3
_UNTITLED = "untitled"


def _normalize_source(text: str) -> str:
    # Same normalisation markdown-it applies, done first so token.map line numbers index our lines.
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")


# Hugo shortcodes ({{< ref "x.md" >}}) are common in runbook sites; markdown-it leaves a link whose destination is
# one as literal text because of the spaces.
_SHORTCODE_LINK_RE = re.compile(r"!?\[([^\]]*)\]\(\s*\{\{[<%].*?[>%]\}\}\s*\)")
_SHORTCODE_RE = re.compile(r"\{\{[<%].*?[>%]\}\}")


def _inline_plain(tok: Token) -> str:
    text = _inline_text(tok)
    if "{{" in text:
        text = _SHORTCODE_RE.sub("", _SHORTCODE_LINK_RE.sub(r"\1", text))
    return collapse_whitespace(text)


def _inline_text(tok: Token) -> str:
    parts: list[str] = []
    for child in tok.children or ():
        kind = child.type
        if kind in ("text", "code_inline", "text_special"):
            parts.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif kind == "image":
            parts.append(child.content)  # alt text
    return "".join(parts)


def _trimmed(lines: Sequence[str], start: int, end: int) -> tuple[str, int, int]:
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end]).rstrip(), start, end


def _container_plain(tokens: Sequence[Token], kind: BlockKind) -> str:
    """Plain text of a container's inner tokens: one line per inline (list items) or per table row."""
    lines: list[str] = []
    row: list[str] = []
    for tok in tokens:
        if tok.type == "inline":
            text = _inline_plain(tok)
            if kind == "table":
                row.append(text)
            elif text:
                lines.append(text)
        elif tok.type == "tr_close":
            lines.append(" | ".join(row))
            row = []
    return "\n".join(lines)


@dataclass(slots=True)
class _Heading:
    level: int
    text: str
    line: str


class MarkdownParser:
    """Parse markdown into a :class:`ParsedDocument` with markdown-it-py (CommonMark + tables + front matter).

    The parser is stateless after construction and safe to reuse; build one per process.
    """

    def __init__(self) -> None:
        self._md: MarkdownIt | None = None  # built on first use (a search-only process never parses)

    def _markdown(self) -> MarkdownIt:
        if self._md is None:
            from markdown_it import MarkdownIt
            from mdit_py_plugins.front_matter import front_matter_plugin

            self._md = MarkdownIt("commonmark").enable("table").use(front_matter_plugin)
        return self._md

    def parse(self, text: str, *, fallback_title: str) -> ParsedDocument:
        """Parse a markdown document.

        Blocks keep their markdown verbatim (sliced from the source lines by ``token.map``); source lines that
        produce no token (link reference definitions) become ``other`` blocks so nothing is lost. An empty heading
        (``##``) is not a section break.

        Args:
            text: the document, any line endings, optional BOM and YAML front matter (``---`` fenced, first line).
            fallback_title: used when there is neither an H1 nor a front-matter ``title`` (the file stem).

        Returns:
            The parsed document. Never raises on content: invalid YAML front matter is ignored with a warning.
        """
        source = _normalize_source(text)
        lines = source.split("\n")
        tokens = self._markdown().parse(source)
        front_matter: dict[str, Any] = {}
        warnings: list[str] = []
        events: list[_Heading | Block] = []
        covered = 0
        i, n = 0, len(tokens)
        while i < n:
            tok = tokens[i]
            j = i
            if tok.nesting == 1:  # a level-0 container: its closer is the next level-0 token
                j = i + 1
                while tokens[j].level != 0:
                    j += 1
            if tok.map is not None:
                start, end = tok.map
                if start > covered and (gap := _gap_block(lines, covered, start)) is not None:
                    events.append(gap)
                covered = max(covered, end)
                if tok.type == "front_matter":
                    front_matter = _load_front_matter(tok.content, warnings)
                elif (event := _token_event(tokens, i, j, lines)) is not None:
                    events.append(event)
            i = j + 1
        if covered < len(lines) and (gap := _gap_block(lines, covered, len(lines))) is not None:
            events.append(gap)

        title = _choose_title(events, front_matter, fallback_title)
        sections = _build_sections(events, title)
        return _finish(title, front_matter, sections, warnings)



def _gap_block(lines: Sequence[str], start: int, end: int) -> Block | None:
    """Source lines ``start..end`` that produced no token (link reference definitions), as an ``other`` block."""
    gap, gs, ge = _trimmed(lines, start, end)
    return Block("other", gap, "", estimate_tokens(gap), gs, ge) if gap else None


def _token_event(tokens: Sequence[Token], i: int, j: int, lines: Sequence[str]) -> _Heading | Block | None:
    """The heading or block of the level-0 token ``tokens[i]`` (its closer at ``j``), its markdown sliced from
    ``lines``; ``None`` for an empty heading, an empty block or a token of no kept kind."""
    tok = tokens[i]
    assert tok.map is not None
    start, end = tok.map
    if tok.type == "heading_open":
        inline = tokens[i + 1]
        heading = _inline_plain(inline)
        if not heading:
            return None
        level = int(tok.tag[1:])
        return _Heading(level, heading, f"{'#' * level} {inline.content.strip()}")
    kind = _KIND_BY_OPEN.get(tok.type)
    if kind is None:
        return None
    body, bs, be = _trimmed(lines, start, end)
    if kind == "code":
        plain = tok.content.rstrip()
    elif kind == "paragraph":
        plain = _inline_plain(tokens[i + 1])
    elif kind in ("list", "blockquote", "table"):
        plain = _container_plain(tokens[i + 1 : j], kind)
    else:
        plain = ""
    return Block(kind, body, plain, estimate_tokens(body), bs, be) if body else None

def _load_front_matter(content: str, warnings: list[str]) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(content)
    except yaml.YAMLError as err:
        warnings.append(f"front matter ignored: invalid YAML ({type(err).__name__})")
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        warnings.append(f"front matter ignored: a YAML {type(data).__name__}, not a mapping")
        return {}
    return {str(k): v for k, v in data.items()}


def _choose_title(events: Iterable[_Heading | Block], front_matter: Mapping[str, Any], fallback: str) -> str:
    for ev in events:
        if isinstance(ev, _Heading) and ev.level == 1:
            return ev.text
    fm_title = front_matter.get("title")
    if isinstance(fm_title, (str, int, float)) and not isinstance(fm_title, bool):
        text = collapse_whitespace(str(fm_title))
        if text:
            return text
    return collapse_whitespace(fallback) or _UNTITLED


def _build_sections(events: Sequence[_Heading | Block], title: str) -> tuple[Section, ...]:
    root_line = f"# {title}"
    sections: list[Section] = []
    stack: list[_Heading] = []
    path: tuple[str, ...] = (title,)
    heading_lines: tuple[str, ...] = (root_line,)
    level = 0
    blocks: list[Block] = []
    for ev in events:
        if isinstance(ev, Block):
            blocks.append(ev)
            continue
        if level or blocks:  # the preamble (level 0) exists only when it has content
            sections.append(Section(path, level, heading_lines, tuple(blocks)))
        while stack and stack[-1].level >= ev.level:
            stack.pop()
        stack.append(ev)
        path = tuple(h.text for h in stack)
        heading_lines = tuple(h.line for h in stack)
        if path[0] != title:  # no H1, or a second H1 (often a mistyped H2): keep the document in the path
            path, heading_lines = (title, *path), (root_line, *heading_lines)
        level = ev.level
        blocks = []
    if level or blocks:
        sections.append(Section(path, level, heading_lines, tuple(blocks)))
    return tuple(sections)


def _finish(
    title: str, front_matter: dict[str, Any], sections: tuple[Section, ...], warnings: list[str]
) -> ParsedDocument:
    prose = [s.heading for s in sections if s.level] + [
        b.plain for s in sections for b in s.blocks if b.kind in PROSE_KINDS
    ]
    language = detect_language("\n".join(prose))
    units = [title]
    for s in sections:
        if s.level:
            units.append(s.heading)
        units.extend(b.plain for b in s.blocks if b.plain)
    return ParsedDocument(
        title=title,
        front_matter=front_matter,
        sections=sections,
        lead=_lead(sections, language),
        language=language,
        plain_text="\n\n".join(units),
        warnings=tuple(warnings),
    )


def _lead(sections: Sequence[Section], language: Language) -> str:
    block: Block | None = None
    for s in sections:
        if s.level and s.heading.casefold().rstrip(":：") in LEAD_SECTION_NAMES:
            block = first_prose_block(s.blocks)
            if block is not None:
                break
    if block is None:
        all_blocks = [b for s in sections for b in s.blocks]
        block = next((b for b in all_blocks if b.kind == "paragraph" and b.plain), None) or first_prose_block(
            all_blocks
        )
    if block is None:
        return ""
    sentences = split_sentences(block.plain)
    if block.kind != "paragraph":
        sentences = sentences[:1]  # one list item / quote line is a lead; several are a list
    joiner = "" if language == "zh" else " "
    lead = ""
    for k, sentence in enumerate(sentences[:_LEAD_MAX_SENTENCES]):
        if k and len(lead) >= _LEAD_MIN_CHARS[language]:
            break
        lead = f"{lead}{joiner}{sentence}" if lead else sentence
    return lead


def parse_plain(text: str, fallback_title: str) -> ParsedDocument:
    """Parse a plain-text document: paragraphs are separated by blank lines; there are no headings.

    Args:
        text: the document text, any line endings.
        fallback_title: the title (the file stem); ``"untitled"`` when blank.

    Returns:
        A document with one section (path ``(title,)``, level 0) of ``paragraph`` blocks, or no section when the
        text is blank.
    """
    source = _normalize_source(text)
    lines = source.split("\n")
    title = collapse_whitespace(fallback_title) or _UNTITLED
    blocks: list[Block] = []
    start = None
    for k, line in enumerate([*lines, ""]):
        if line.strip():
            start = k if start is None else start
        elif start is not None:
            body, bs, be = _trimmed(lines, start, k)
            blocks.append(Block("paragraph", body, collapse_whitespace(body), estimate_tokens(body), bs, be))
            start = None
    sections = (Section((title,), 0, (f"# {title}",), tuple(blocks)),) if blocks else ()
    return _finish(title, {}, sections, [])
