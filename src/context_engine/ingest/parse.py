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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Literal

from context_engine.schema.nodes import Chunk
from context_engine.settings import IngestSettings

if TYPE_CHECKING:  # markdown-it and yaml are imported when a document is parsed: a search process never pays them
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

__all__ = [
    "BREADCRUMB_SEPARATOR",
    "Block",
    "BlockKind",
    "Language",
    "MarkdownChunker",
    "MarkdownParser",
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

Language = Literal["zh", "en"]
BlockKind = Literal["paragraph", "list", "code", "table", "blockquote", "html", "hr", "other"]

#: Block kinds that are never split, even when larger than the chunk cap (DESIGN §4). Raw HTML is included
#: because cutting it at a sentence boundary would break its tags (an HTML table is still a table).
ATOMIC_KINDS: frozenset[str] = frozenset({"code", "table", "html"})
#: Block kinds that carry prose: lead sentences and section first sentences come from these.
PROSE_KINDS: frozenset[str] = frozenset({"paragraph", "list", "blockquote"})

BREADCRUMB_SEPARATOR = " > "

# --------------------------------------------------------------------------------------------------------------
# Token estimate and language
# --------------------------------------------------------------------------------------------------------------

# Ideographs (CJK unified + extension A + compatibility + supplementary planes), kana, bopomofo and hangul.
_CJK_CHARS = (
    "\u1100-\u11ff\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
_CJK_RE = re.compile(f"[{_CJK_CHARS}]")
_WORD_RE = re.compile(r"\w+")
_PUNCT_RE = re.compile(r"[^\w\s]")
_LATIN_WORD_RE = re.compile(r"[A-Za-z\u00c0-\u024f]+")

#: Share of CJK "units" (ideographs vs. Latin words) from which a text counts as Chinese. Chinese runbooks are full
#: of English alert names, commands and identifiers, so the bar is well below one half; measured on the runbook
#: corpora, Chinese prose scores >= 0.6 and English prose 0.0.
ZH_MIN_RATIO = 0.3


def estimate_tokens(text: str) -> int:
    """Estimate how many model tokens ``text`` takes, CJK-aware.

    Each CJK ideograph, kana or hangul syllable counts 1; each run of other word characters counts 1.3 (word pieces
    per English word, rounded up over the whole text); each punctuation or symbol character counts 1 (a BERT-style
    tokenizer emits one piece per punctuation mark). Whitespace is free. The estimate is additive over pieces cut at
    whitespace, and never smaller for pieces than for their concatenation, so capping pieces caps their join.

    Args:
        text: any text (markdown, code, plain).

    Returns:
        The estimated token count, ``>= 0``; ``0`` for empty or whitespace-only text.
    """
    if not text:
        return 0
    rest, cjk = _CJK_RE.subn(" ", text)
    words = len(_WORD_RE.findall(rest))
    punct = len(_PUNCT_RE.findall(rest))
    return cjk + (words * 13 + 9) // 10 + punct


def detect_language(text: str) -> Language:
    """Classify text as Chinese (``"zh"``, any CJK script) or English (``"en"``, everything else).

    Heuristic: the share of CJK characters among CJK characters plus Latin words; ``"zh"`` from
    :data:`ZH_MIN_RATIO`. Pass prose (not code) for a stable answer.

    Args:
        text: the text to classify.

    Returns:
        ``"zh"`` or ``"en"``; ``"en"`` for text without letters.
    """
    cjk = len(_CJK_RE.findall(text))
    if cjk == 0:
        return "en"
    words = len(_LATIN_WORD_RE.findall(text))
    return "zh" if cjk >= ZH_MIN_RATIO * (cjk + words) else "en"


def is_cjk(ch: str) -> bool:
    """Whether ``ch`` is a CJK ideograph, kana, bopomofo or hangul character."""
    return bool(_CJK_RE.match(ch))


_CJK_NEWLINE_RE = re.compile(f"(?<=[{_CJK_CHARS}\u3000-\u303f\uff00-\uffef])[ \t]*\n[ \t]*(?=[{_CJK_CHARS}])")
_SPACES_RE = re.compile(r"\s+")


def collapse_whitespace(text: str) -> str:
    """Collapse whitespace runs to one space and drop line breaks between CJK characters (no spaces in Chinese)."""
    return _SPACES_RE.sub(" ", _CJK_NEWLINE_RE.sub("", text)).strip()


# --------------------------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------------------------

# A sentence ends after 。！？ (no space needed), or after . ! ? followed by whitespace. Closing quotes and brackets
# stay with their sentence.
_SENTENCE_END_RE = re.compile(r"[。！？]+[”’」』）)\"']*[ \t]*|[.!?]+[”’\"')\]]*(?=\s|$)")
_ABBREVIATIONS = ("e.g", "i.e", "cf", "vs", "fig", "approx", "mr", "mrs", "ms", "dr")
_LIST_ITEM_START_RE = re.compile(r"\n(?=[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]|[ \t]*\n)")


def sentence_boundaries(text: str, *, newlines: Literal["none", "items", "all"]) -> list[int]:
    """Offsets where a new sentence starts in ``text`` (plain or markdown), for cutting it without losing a byte.

    Sentence ends are as in :func:`split_sentences`; the whitespace after a sentence stays with it. ``newlines``
    adds cuts at every line break (``"all"``), only before list items and blank lines (``"items"``, for markdown
    lists), or none (``"none"``, for wrapped markdown paragraphs).

    Args:
        text: the text to cut.
        newlines: which line breaks are boundaries.

    Returns:
        Ascending offsets, each strictly between 0 and ``len(text)``.
    """
    cuts: set[int] = set()
    n = len(text)
    for m in _SENTENCE_END_RE.finditer(text):
        end = m.end()
        if m.group()[0] == ".":
            nxt = end
            while nxt < n and text[nxt].isspace():
                nxt += 1
            if nxt < n and text[nxt].islower():
                continue  # "the app. then ..." or "e.g. foo": not a sentence end
            before = text[max(0, m.start() - 7) : m.start()].casefold()
            if any(
                before.endswith(a) and (len(before) == len(a) or not before[-len(a) - 1].isalnum())
                for a in _ABBREVIATIONS
            ):
                continue
        while end < n and text[end].isspace():
            end += 1
        if 0 < end < n:
            cuts.add(end)
    if newlines == "all":
        cuts.update(m.end() for m in re.finditer(r"\n+", text) if m.end() < n)
    elif newlines == "items":
        cuts.update(m.start() + 1 for m in _LIST_ITEM_START_RE.finditer(text))
    return sorted(c for c in cuts if 0 < c < n)


def split_sentences(text: str) -> list[str]:
    """Split plain text into sentences, English and Chinese.

    Boundaries: after ``。！？`` (with any closing quote), after ``. ! ?`` followed by whitespace (but not before a
    lowercase letter, and not after ``e.g.``/``i.e.``-style abbreviations), and at every line break (list items and
    plain-text lines are separate units).

    Args:
        text: plain text (no markdown syntax needed).

    Returns:
        Sentences in document order, whitespace-collapsed, none empty.
    """
    out: list[str] = []
    start = 0
    for cut in [*sentence_boundaries(text, newlines="all"), len(text)]:
        piece = collapse_whitespace(text[start:cut])
        if piece:
            out.append(piece)
        start = cut
    return out


# --------------------------------------------------------------------------------------------------------------
# Parsed document model
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """One top-level markdown block.

    Attributes:
        kind: paragraph, list, code (fenced or indented), table, blockquote, html, hr, or other (source lines that
            produce no token, e.g. link reference definitions; kept so no text is lost).
        text: the block's markdown, verbatim from the source lines (leading/trailing blank lines removed).
        plain: inline markup removed (links → their text, code spans → their content, emphasis dropped),
            whitespace collapsed; list items and table rows one per line; the code itself for code blocks;
            ``""`` for html, hr and other.
        tokens: :func:`estimate_tokens` of ``text``.
        line_start: first source line, 0-based, counted in the normalised source including front matter.
        line_end: one past the last source line.
    """

    kind: BlockKind
    text: str
    plain: str
    tokens: int
    line_start: int
    line_end: int


@dataclass(frozen=True, slots=True)
class Section:
    """A heading and the blocks up to the next heading.

    Attributes:
        path: heading path, outermost first, plain text, e.g. ``("KubePodCrashLooping", "Diagnosis")``. It always
            starts with the document title: a path that would not (no H1, or a later H1, which in runbooks is
            usually a mistyped H2) is rooted at it; content before the first heading has path ``(title,)``.
        level: heading level 1–6; ``0`` for content before the first heading.
        heading_lines: one ATX heading line per element of ``path`` (``"## Diagnosis"``), inline markdown kept;
            used when merged sections must show a heading that is not in the breadcrumb.
        blocks: the section's own blocks (not its subsections'); empty for a heading directly followed by another.
    """

    path: tuple[str, ...]
    level: int
    heading_lines: tuple[str, ...]
    blocks: tuple[Block, ...]

    @property
    def heading(self) -> str:
        """The section's own heading text (last element of ``path``)."""
        return self.path[-1]

    @property
    def tokens(self) -> int:
        """Sum of the blocks' token estimates (an upper bound for their ``"\\n\\n"`` join)."""
        return sum(b.tokens for b in self.blocks)

    @property
    def markdown(self) -> str:
        """The blocks' markdown joined by blank lines, without the heading line."""
        return "\n\n".join(b.text for b in self.blocks)


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A parsed markdown or plain-text document (DESIGN §4).

    Attributes:
        title: the first H1, else front matter ``title``, else the fallback (file stem), else ``"untitled"``.
        front_matter: the YAML front matter as a mapping; ``{}`` when absent or invalid.
        sections: in document order; see :class:`Section`.
        lead: the first sentence(s) of body text, plain (no headings, code, tables or front matter). Taken from a
            "Meaning"/"Summary"/"Overview"/"含义"/"概述"-style section when there is one, else the first paragraph.
        language: ``"zh"`` or ``"en"`` by :func:`detect_language` on headings and prose.
        plain_text: title, headings and every block's plain text, one unit per paragraph.
        warnings: what degraded while parsing (e.g. invalid front matter); never fatal.
    """

    title: str
    front_matter: Mapping[str, Any]
    sections: tuple[Section, ...]
    lead: str
    language: Language
    plain_text: str
    warnings: tuple[str, ...] = field(default=())

    @property
    def blocks(self) -> Iterator[Block]:
        """All blocks in document order."""
        for s in self.sections:
            yield from s.blocks

    @property
    def is_empty(self) -> bool:
        """True when the document has no blocks (title and headings only, or nothing)."""
        return not any(s.blocks for s in self.sections)


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


def first_prose_block(blocks: Iterable[Block]) -> Block | None:
    """The first paragraph, list or blockquote with text among ``blocks``; ``None`` if there is none."""
    return next((b for b in blocks if b.kind in PROSE_KINDS and b.plain), None)


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


# --------------------------------------------------------------------------------------------------------------
# Breadcrumbs and embedding input
# --------------------------------------------------------------------------------------------------------------


def format_breadcrumb(parts: Sequence[str]) -> str:
    """Display form of a heading path: parts joined by :data:`BREADCRUMB_SEPARATOR` (``" > "``).

    Inside a part, ``\\`` becomes ``\\\\`` and ``>`` becomes ``\\>``, so every unescaped ``>`` is a separator and
    :func:`split_breadcrumb` recovers the parts exactly: ``split_breadcrumb(format_breadcrumb(p)) == list(p)`` for
    every list of strings except ``[""]`` (which formats to ``""``, the form of ``[]``). The parser never produces
    an empty part.

    Args:
        parts: the heading path, outermost first.

    Returns:
        e.g. ``"KubePodCrashLooping > Diagnosis"``;
        ``["24/7 Support > Escalation"]`` → ``"24/7 Support \\> Escalation"``.
    """
    return BREADCRUMB_SEPARATOR.join(p.replace("\\", "\\\\").replace(">", "\\>") for p in parts)


def split_breadcrumb(s: str) -> list[str]:
    """Inverse of :func:`format_breadcrumb`.

    Every unescaped ``>`` separates two parts; one space on each side of it belongs to the separator and is removed
    (so hand-written ``"A>B"`` and ``"A > B"`` both give ``["A", "B"]``). ``\\x`` gives ``x``; a trailing lone
    backslash is kept.

    Args:
        s: a breadcrumb display string.

    Returns:
        The parts; ``[]`` for ``""``.
    """
    if not s:
        return []
    parts: list[str] = []
    buf: list[str] = []
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if ch == "\\" and i + 1 < n:
            buf.append(s[i + 1])
            i += 2
            continue
        if ch == ">":
            if buf and buf[-1] == " " and (i == 0 or s[i - 1] == " "):
                buf.pop()
            parts.append("".join(buf))
            buf = []
            i += 2 if i + 1 < n and s[i + 1] == " " else 1
            continue
        buf.append(ch)
        i += 1
    parts.append("".join(buf))
    return parts


def _embedding_prefix(title: str, breadcrumb: Sequence[str]) -> str:
    crumbs = BREADCRUMB_SEPARATOR.join(breadcrumb)
    if breadcrumb and breadcrumb[0] == title:
        return crumbs
    return f"{title}\n{crumbs}" if crumbs else title


def embedding_input(chunk: Chunk) -> str:
    """The text embedded for an L2 chunk: ``title + breadcrumb + content`` (DESIGN §4; seed 001 §6).

    Layout: the breadcrumb joined by ``" > "`` on the first line (unescaped: it is read by a model, never parsed
    back), preceded by a line with the title only when the breadcrumb does not already start with it; a blank line;
    then the chunk text. The chunker reserves the prefix's tokens inside the chunk cap so the whole input fits the
    model's window.

    Args:
        chunk: an L2 chunk.

    Returns:
        e.g. ``"KubePodCrashLooping > Diagnosis\\n\\n- Check template via ..."``.
    """
    prefix = _embedding_prefix(chunk.title, chunk.breadcrumb)
    return f"{prefix}\n\n{chunk.text}" if chunk.text else prefix


# --------------------------------------------------------------------------------------------------------------
# Chunking
# --------------------------------------------------------------------------------------------------------------

_ATOM_RE = re.compile(f"[{_CJK_CHARS}]\\s*|[^\\s{_CJK_CHARS}]+\\s*|\\s+")


@dataclass(frozen=True, slots=True)
class _Segment:
    block: int  # index into the section's blocks
    start: int  # offsets into that block's text
    end: int
    tokens: int
    atomic: bool


class MarkdownChunker:
    """Cut a :class:`ParsedDocument` into L2 chunks (DESIGN §4).

    Rules, in order:

    * Sections (heading + own blocks) are the unit; a chunk never spans two sections unless they were merged.
    * The token budget of a chunk is ``chunk_max_tokens`` minus the tokens of its embedding prefix
      (title + breadcrumb, see :func:`embedding_input`), but never below half the cap, so the embedded text fits
      the model's window.
    * Tiny sections (content under ``min_chunk_tokens``) are merged with the following section, or else with the
      preceding one, when the result fits one chunk and the two are close in the tree (their common heading path
      loses at most one level from the shallower of them). The merged chunk's breadcrumb is that common path, and
      the headings below it are kept as markdown heading lines in the text, so no heading is lost and none is
      repeated. Sections with no blocks produce no chunk; their headings live on in their subsections'
      breadcrumbs.
    * A section over the budget is packed block by block. Code blocks, tables and raw HTML are never split; one
      over the budget becomes a chunk by itself. A paragraph, list or blockquote over the budget is cut on
      sentence boundaries (and list-item starts), falling back to word/character cuts for a sentence over the
      budget. Consecutive chunks of the same over-long section overlap by the last whole sentences/blocks of the
      previous chunk totalling at most ``chunk_overlap_tokens`` (never a code block or table). Chunks of different
      sections never overlap. A short paragraph ending with a colon ("Other things to check:") that would end a
      chunk moves to the next one instead, with the block it introduces (no overlap then).

    Args:
        settings: ``chunk_max_tokens`` and ``chunk_overlap_tokens`` are used.
        min_chunk_tokens: below this, a section counts as tiny; default ``max(8, chunk_max_tokens // 8)``.
    """

    def __init__(self, settings: IngestSettings, *, min_chunk_tokens: int | None = None) -> None:
        self._cap = settings.chunk_max_tokens
        self._overlap = settings.chunk_overlap_tokens
        self._min = max(8, self._cap // 8) if min_chunk_tokens is None else min_chunk_tokens

    def chunk(
        self, doc: ParsedDocument, *, doc_id: str, category: str | None = None, source: str | None = None
    ) -> list[Chunk]:
        """Chunk one document.

        Args:
            doc: the parsed document.
            doc_id: stored on every chunk.
            category: stored on every chunk.
            source: stored on every chunk (e.g. the source path or URI).

        Returns:
            Chunks in document order with ``chunk_index`` 0..n-1 and ``total_chunks`` n; ``[]`` for a document
            without blocks. Every chunk's ``token_estimate`` is at most ``chunk_max_tokens`` unless its text is a
            single code block, table or HTML block.
        """
        pieces: list[tuple[tuple[str, ...], str]] = []
        for group in self._group(doc):
            budget = self._budget(doc.title, group[0].path)
            if len(group) == 1 and group[0].tokens > budget:
                pieces.extend((group[0].path, text) for text in self._split(group[0], budget))
            else:
                common = _common_path(group)
                pieces.append((common, _render(group, common)))
        pieces = [(p, t) for p, t in pieces if t]
        total = len(pieces)
        return [
            Chunk(
                doc_id=doc_id,
                chunk_index=k,
                total_chunks=total,
                title=doc.title,
                breadcrumb=list(path),
                text=text,
                category=category,
                source=source,
                token_estimate=estimate_tokens(text),
            )
            for k, (path, text) in enumerate(pieces)
        ]

    # -- grouping -------------------------------------------------------------------------------------------------

    def _budget(self, title: str, path: Sequence[str]) -> int:
        return max(self._cap // 2, self._cap - estimate_tokens(_embedding_prefix(title, path)))

    def _fits(self, title: str, group: Sequence[Section]) -> bool:
        common = _common_path(group)
        if not common or len(common) < min(len(s.path) for s in group) - 1:
            return False
        return estimate_tokens(_render(group, common)) <= self._budget(title, common)

    def _group(self, doc: ParsedDocument) -> list[list[Section]]:
        forward: list[list[Section]] = []
        for section in doc.sections:
            if not section.blocks:
                continue
            last = forward[-1] if forward else None
            if last and sum(s.tokens for s in last) < self._min and self._fits(doc.title, [*last, section]):
                last.append(section)
            else:
                forward.append([section])
        groups: list[list[Section]] = []
        for group in forward:
            prev = groups[-1] if groups else None
            if prev and sum(s.tokens for s in group) < self._min and self._fits(doc.title, [*prev, *group]):
                prev.extend(group)
            else:
                groups.append(group)
        return groups

    # -- splitting one over-long section --------------------------------------------------------------------------

    def _split(self, section: Section, budget: int) -> list[str]:
        segments = list(self._segments(section, budget))
        windows: list[list[_Segment]] = []
        current: list[_Segment] = []
        used = 0
        for seg in segments:
            if current and used + seg.tokens > budget:
                lead_in = current[-1]
                if len(current) > 1 and _is_lead_in(section.blocks, lead_in) and lead_in.tokens + seg.tokens <= budget:
                    # "Check the following:" belongs with what follows, not at the end of the previous chunk
                    windows.append(current[:-1])
                    current = [lead_in]
                else:
                    windows.append(current)
                    current = self._overlap_tail(current, seg, budget)
                used = sum(s.tokens for s in current)
            if seg.tokens > budget:  # an atomic block over the budget: a chunk by itself
                if current:
                    windows.append(current)
                windows.append([seg])
                current, used = [], 0
                continue
            current.append(seg)
            used += seg.tokens
        if current:
            windows.append(current)
        return [_join_segments(section.blocks, w) for w in windows]

    def _overlap_tail(self, window: Sequence[_Segment], nxt: _Segment, budget: int) -> list[_Segment]:
        tail: list[_Segment] = []
        used = 0
        for seg in reversed(window):
            if seg.atomic or used + seg.tokens > self._overlap or used + seg.tokens + nxt.tokens > budget:
                break
            tail.insert(0, seg)
            used += seg.tokens
        if len(tail) == len(window):  # overlap must not repeat a whole chunk
            tail = tail[1:]
        return tail

    def _segments(self, section: Section, budget: int) -> Iterator[_Segment]:
        for k, block in enumerate(section.blocks):
            atomic = block.kind in ATOMIC_KINDS
            if atomic or block.tokens <= budget:
                yield _Segment(k, 0, len(block.text), block.tokens, atomic)
                continue
            text = block.text
            cuts = sentence_boundaries(text, newlines="none" if block.kind == "paragraph" else "items")
            bounds = [0, *cuts, len(text)]
            for start, end in pairwise(bounds):
                tokens = estimate_tokens(text[start:end])
                if tokens <= budget:
                    yield _Segment(k, start, end, tokens, False)
                else:
                    for s, e in _hard_split(text, start, end, budget):
                        yield _Segment(k, s, e, estimate_tokens(text[s:e]), False)


def _hard_split(text: str, start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Cut ``text[start:end]`` at whitespace/CJK-character boundaries into spans of at most ``budget`` tokens."""
    spans: list[tuple[int, int]] = []
    span_start, used = start, 0
    for m in _ATOM_RE.finditer(text, start, end):
        a, b = m.start(), m.end()
        cost = estimate_tokens(m.group())
        if used and used + cost > budget:
            spans.append((span_start, a))
            span_start, used = a, 0
        if cost > budget:  # one huge "word" (a URL, base64): cut by characters
            pos = a
            while pos < b:
                size = min(b - pos, budget)
                while size > 1 and estimate_tokens(text[pos : pos + size]) > budget:
                    size = size * 3 // 4
                spans.append((pos, pos + size))
                pos += size
            span_start, used = b, 0
            continue
        used += cost
    if span_start < end:
        spans.append((span_start, end))
    return spans


def _is_lead_in(blocks: Sequence[Block], seg: _Segment) -> bool:
    """A whole short paragraph ending with a colon, introducing the next block."""
    block = blocks[seg.block]
    return (
        block.kind == "paragraph" and seg.start == 0 and seg.end == len(block.text) and block.text.endswith((":", "："))
    )


def _join_segments(blocks: Sequence[Block], window: Sequence[_Segment]) -> str:
    parts: list[str] = []
    k = 0
    while k < len(window):
        first = window[k]
        last = first
        while k + 1 < len(window) and window[k + 1].block == first.block:
            k += 1
            last = window[k]
        piece = blocks[first.block].text[first.start : last.end]
        # Indentation is syntax in an indented code block: keep the first line's leading spaces.
        parts.append(piece.strip("\n").rstrip() if blocks[first.block].kind in ATOMIC_KINDS else piece.strip())
        k += 1
    return "\n\n".join(p for p in parts if p)


def _common_path(group: Sequence[Section]) -> tuple[str, ...]:
    common = group[0].path
    for s in group[1:]:
        n = 0
        while n < len(common) and n < len(s.path) and common[n] == s.path[n]:
            n += 1
        common = common[:n]
    return common


def _render(group: Sequence[Section], common: tuple[str, ...]) -> str:
    """Markdown of merged sections: headings below ``common`` as heading lines (once each), then the blocks."""
    parts: list[str] = []
    shown: set[tuple[str, ...]] = set()
    for s in group:
        for depth in range(len(common), len(s.path)):
            key = s.path[: depth + 1]
            if key not in shown:
                shown.add(key)
                parts.append(s.heading_lines[depth])
        parts.extend(b.text for b in s.blocks)
    return "\n\n".join(parts)
