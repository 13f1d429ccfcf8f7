"""The parsed document model, the breadcrumb format and the embedding input (DESIGN.md §4).

:class:`ParsedDocument` (sections of :class:`Block` s) is what :mod:`~context_engine.ingest.parse` produces and
:mod:`~context_engine.ingest.chunker` cuts; :func:`format_breadcrumb` / :func:`split_breadcrumb` are an escaped
display form of a heading path and its inverse; :func:`embedding_input` is ``title + breadcrumb + content``. Split
out of :mod:`context_engine.ingest.parse`, which re-exports these names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from context_engine.ingest.text import Language
from context_engine.schema.nodes import Chunk

__all__ = [
    "ATOMIC_KINDS",
    "BREADCRUMB_SEPARATOR",
    "PROSE_KINDS",
    "Block",
    "BlockKind",
    "ParsedDocument",
    "Section",
    "embedding_input",
    "embedding_prefix",
    "first_prose_block",
    "format_breadcrumb",
    "split_breadcrumb",
]

BlockKind = Literal["paragraph", "list", "code", "table", "blockquote", "html", "hr", "other"]

#: Block kinds that are never split, even when larger than the chunk cap (DESIGN §4). Raw HTML is included
#: because cutting it at a sentence boundary would break its tags (an HTML table is still a table).
ATOMIC_KINDS: frozenset[str] = frozenset({"code", "table", "html"})
#: Block kinds that carry prose: lead sentences and section first sentences come from these.
PROSE_KINDS: frozenset[str] = frozenset({"paragraph", "list", "blockquote"})

BREADCRUMB_SEPARATOR = " > "

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


def first_prose_block(blocks: Iterable[Block]) -> Block | None:
    """The first paragraph, list or blockquote with text among ``blocks``; ``None`` if there is none."""
    return next((b for b in blocks if b.kind in PROSE_KINDS and b.plain), None)


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


def embedding_prefix(title: str, breadcrumb: Sequence[str]) -> str:
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
    prefix = embedding_prefix(chunk.title, chunk.breadcrumb)
    return f"{prefix}\n\n{chunk.text}" if chunk.text else prefix


