"""L0 abstracts and L1 overviews for documents and directories (DESIGN.md §1, §4).

The default :class:`ExtractiveSummarizer` is offline and deterministic: it only selects and trims text the document
already contains, in the document's own language.

* Document L0: ``title + lead sentence(s)``, e.g. ``"KubePodCrashLooping: Pod is in CrashLoop which means ..."``,
  at most ``l0_max_chars`` characters.
* Document L1: the title line, then the heading outline indented by depth with each section's first sentence, at
  most ``l1_max_chars`` characters.
* Directory L0: its name, how many children it has and the first children's titles; directory L1: one line per
  child with its abstract. Chinese wording when most children are Chinese.

An LLM summarizer may implement the same :class:`Summarizer` protocol; the write path falls back to this one when
it fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from context_engine.ingest.parse import (
    Language,
    ParsedDocument,
    Section,
    collapse_whitespace,
    detect_language,
    first_prose_block,
    is_cjk,
    sentence_boundaries,
    split_sentences,
)
from context_engine.settings import IngestSettings

__all__ = [
    "ChildSummary",
    "ExtractiveSummarizer",
    "Summarizer",
    "Summary",
    "truncate_text",
]

ELLIPSIS = "…"
#: An outline line longer than this is trimmed, so one long sentence cannot crowd out the rest of the outline.
L1_LINE_MAX_CHARS = 240
#: Directory overview lines are shortened to share the budget among children, but not below this.
L1_DIR_LINE_MIN_CHARS = 60
_TRAILING_JUNK = " \t\n,;:、，；：-–—(（[【"


@dataclass(frozen=True, slots=True)
class Summary:
    """A node's two summary levels.

    Attributes:
        abstract: L0, one or two sentences, at most ``l0_max_chars`` characters.
        overview: L1, structure and key points, at most ``l1_max_chars`` characters.
    """

    abstract: str
    overview: str


@dataclass(frozen=True, slots=True)
class ChildSummary:
    """What a directory summary needs to know about one child.

    Attributes:
        name: the child's URI segment (file or directory name).
        title: the child's title (a directory's title is usually its name).
        abstract: the child's L0.
        is_dir: whether the child is a directory.
    """

    name: str
    title: str
    abstract: str
    is_dir: bool


class Summarizer(Protocol):
    """Produces L0/L1 for documents and directories (DESIGN §4)."""

    def summarize_document(self, doc: ParsedDocument) -> Summary:
        """L0 and L1 of one parsed document."""
        ...

    def summarize_directory(self, name: str, children: Sequence[ChildSummary], *, total: int | None = None) -> Summary:
        """L0 and L1 of a directory from its children's summaries (or a sample of them and the ``total`` count)."""
        ...


def truncate_text(text: str, max_chars: int) -> str:
    """Shorten ``text`` to at most ``max_chars`` characters.

    Prefers the longest run of whole sentences that keeps at least half the budget (returned as is); else cuts at a
    word boundary (or between CJK characters), drops trailing punctuation and appends ``"…"``.

    Args:
        text: whitespace-collapsed text.
        max_chars: the limit, ``>= 1``.

    Returns:
        ``text`` unchanged when it fits, else a prefix (plus ``"…"``) of at most ``max_chars`` characters.
    """
    if len(text) <= max_chars:
        return text
    sentence_cuts = [c for c in sentence_boundaries(text, newlines="all") if c <= max_chars]
    if sentence_cuts and sentence_cuts[-1] >= max_chars // 2:
        return text[: sentence_cuts[-1]].rstrip()
    limit = max_chars - len(ELLIPSIS)
    cut = limit
    while cut > limit // 2 and not _is_break(text, cut):
        cut -= 1
    if cut <= limit // 2:
        cut = limit
    return text[:cut].rstrip(_TRAILING_JUNK) + ELLIPSIS


def _is_break(text: str, pos: int) -> bool:
    before, after = text[pos - 1], text[pos]
    return before.isspace() or after.isspace() or is_cjk(before) or is_cjk(after)


def _colon(language: Language) -> str:
    return "：" if language == "zh" else ": "


def _first_sentence(section: Section) -> str:
    block = first_prose_block(section.blocks)
    if block is None:
        return ""
    sentences = split_sentences(block.plain)
    return sentences[0] if sentences else ""


def _pack_lines(lines: Sequence[str], max_chars: int, tail_for: Callable[[int], str]) -> str:
    """Join lines with newlines within ``max_chars``; when some must go, keep the most lines that still leave room
    for ``tail_for(number_dropped)`` as a last line. ``lines[0]`` (the header) is always kept."""
    joined = "\n".join(lines)
    if len(joined) <= max_chars:
        return joined
    ends = [-1]  # ends[k] = len("\n".join(lines[:k]))
    for line in lines:
        ends.append(ends[-1] + 1 + len(line))
    for k in range(len(lines) - 1, 0, -1):
        tail = tail_for(len(lines) - k)
        if ends[k] + 1 + len(tail) <= max_chars:
            return "\n".join([*lines[:k], tail])
    return truncate_text(lines[0], max_chars)


class ExtractiveSummarizer:
    """The default, offline :class:`Summarizer` (DESIGN §4): extractive, deterministic, in the document's language.

    Args:
        settings: ``l0_max_chars`` and ``l1_max_chars`` are used.
    """

    def __init__(self, settings: IngestSettings) -> None:
        self._l0 = settings.l0_max_chars
        self._l1 = settings.l1_max_chars

    def summarize_document(self, doc: ParsedDocument) -> Summary:
        """Summarise a parsed document.

        L0 is ``"<title>: <lead>"`` (``"<title>：<lead>"`` in Chinese), or the lead alone when it already starts
        with the title, or the title alone when the document has no prose. L1 is the title, an intro sentence for
        text before the first subheading, then ``"- <heading>: <first sentence>"`` per section indented two spaces
        per level below the title; a document without headings lists the first sentence of each paragraph.

        Args:
            doc: the parsed document.

        Returns:
            The summary; L0 ≤ ``l0_max_chars`` and L1 ≤ ``l1_max_chars`` characters.
        """
        title = collapse_whitespace(doc.title)
        lead = doc.lead
        if not lead:
            abstract = title
        elif lead.casefold().startswith(title.casefold()):
            abstract = lead
        else:
            abstract = f"{title}{_colon(doc.language)}{lead}"
        return Summary(truncate_text(abstract, self._l0), self._overview(doc, title))

    def _overview(self, doc: ParsedDocument, title: str) -> str:
        colon = _colon(doc.language)
        lines = [truncate_text(title, L1_LINE_MAX_CHARS)]
        roots = [s for s in doc.sections if s.path == (title,)]
        others = [s for s in doc.sections if s.path != (title,)]
        if not others:  # no headings: key points, one per paragraph
            for section in roots:
                for block in section.blocks:
                    sentences = split_sentences(block.plain) if block.kind in ("paragraph", "blockquote") else []
                    if sentences:
                        lines.append(truncate_text(f"- {sentences[0]}", L1_LINE_MAX_CHARS))
        else:
            intro = next((s for s in map(_first_sentence, roots) if s), "")
            if intro:
                lines.append(truncate_text(intro, L1_LINE_MAX_CHARS))
            for section in others:
                depth = max(0, len(section.path) - (2 if section.path[0] == title else 1))
                first = _first_sentence(section)
                line = f"{'  ' * depth}- {section.heading}" + (f"{colon}{first}" if first else "")
                lines.append(truncate_text(line, L1_LINE_MAX_CHARS))
        return _pack_lines(lines, self._l1, lambda _dropped: ELLIPSIS)

    def summarize_directory(self, name: str, children: Sequence[ChildSummary], *, total: int | None = None) -> Summary:
        """Summarise a directory from its children, sorted by name so the output does not depend on their order.

        Chinese wording (``"目录 kubernetes：包含 49 项：A、B 等。"``) when more than half of the children's
        titles and abstracts are Chinese, else English (``"Directory kubernetes: 49 items: A, B, and 47 more."``).
        L1 is a header line and one ``"- <name>: <abstract>"`` line per child (a title the name already shows is
        not repeated), each shortened so that all children fit when possible, else ending with a count of the
        children left out.

        Args:
            name: the directory's name (its last URI segment).
            children: its direct children, or a sample of them (a large directory's first and last ones).
            total: how many children the directory has when ``children`` is a sample (the count shown).

        Returns:
            The summary; L0 ≤ ``l0_max_chars`` and L1 ≤ ``l1_max_chars`` characters.
        """
        kids = sorted(children, key=lambda c: (c.name.casefold(), c.name, c.title, c.abstract, c.is_dir))
        zh_count = sum(1 for c in kids if detect_language(f"{c.title} {c.abstract}") == "zh")
        language: Language = "zh" if zh_count * 2 > len(kids) else "en"
        name = collapse_whitespace(name)
        n = max(total or 0, len(kids))
        return Summary(self._dir_abstract(name, kids, language, n), self._dir_overview(name, kids, language, n))

    def _dir_abstract(self, name: str, kids: Sequence[ChildSummary], language: Language, n: int) -> str:
        zh = language == "zh"
        if n == 0:
            return truncate_text(f"目录 {name}：空。" if zh else f"Directory {name}: empty.", self._l0)
        head = f"目录 {name}：包含 {n} 项" if zh else f"Directory {name}: {n} item{'s' if n != 1 else ''}"
        labels = [_label(c) for c in kids]
        best = f"{head}。" if zh else f"{head}."
        for k in range(1, len(kids) + 1):
            listed = ("、" if zh else ", ").join(labels[:k])
            if k == n:
                text = f"{head}：{listed}。" if zh else f"{head}: {listed}."
            else:
                text = f"{head}：{listed} 等。" if zh else f"{head}: {listed}, and {n - k} more."
            if len(text) > self._l0:
                break
            best = text
        return truncate_text(best, self._l0)

    def _dir_overview(self, name: str, kids: Sequence[ChildSummary], language: Language, n: int) -> str:
        zh = language == "zh"
        header = f"目录 {name}（共 {n} 项）" if zh else f"Directory {name} ({n} item{'s' if n != 1 else ''})"
        if n == 0:
            return truncate_text(header, self._l1)
        colon = _colon(language)
        per_line = max(L1_DIR_LINE_MIN_CHARS, (self._l1 - len(header)) // max(1, len(kids)) - 1)
        lines = [truncate_text(header, self._l1)]
        for child in kids:
            lines.append(truncate_text(_child_line(child, colon), per_line))
        unlisted = n - len(kids)  # children outside the sample
        if unlisted > 0:
            lines.append(_more(unlisted, zh))
        return _pack_lines(lines, self._l1, lambda dropped: _more(dropped - (1 if unlisted > 0 else 0) + unlisted, zh))


def _more(count: int, zh: bool) -> str:
    return f"……另有 {count} 项" if zh else f"… and {count} more"


def _child_line(child: ChildSummary, colon: str) -> str:
    """``"- <name>: <abstract>"``, without repeating a title that the name already shows."""
    label = f"{child.name}/" if child.is_dir else child.name
    text = collapse_whitespace(child.abstract)
    title = collapse_whitespace(child.title)
    names = {child.name.casefold(), child.name.rsplit(".", 1)[0].casefold()}
    if title and title.casefold() in names:
        for sep in (": ", "：", ":"):
            if text.casefold().startswith(title.casefold() + sep) and len(text) > len(title) + len(sep):
                text = text[len(title) + len(sep) :].lstrip()
                break
    elif title and not text.casefold().startswith(title.casefold()):
        text = f"{title}{colon}{text}" if text else title
    return f"- {label}{colon}{text}" if text else f"- {label}"


def _label(child: ChildSummary) -> str:
    label = collapse_whitespace(child.title) or child.name
    return f"{label}/" if child.is_dir else label
