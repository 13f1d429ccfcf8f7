"""Markdown-aware chunking: :class:`MarkdownChunker` cuts a parsed document into L2 chunks (DESIGN.md §4).

Split on headings, pack whole blocks up to a token cap, never split code blocks, tables or raw HTML, split only an
over-long paragraph/list on sentence boundaries, with overlap only inside an over-long section, and merge tiny
sections with their neighbours. Split out of :mod:`context_engine.ingest.parse`, which re-exports
:class:`MarkdownChunker`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from context_engine.ingest.document import ATOMIC_KINDS, Block, ParsedDocument, Section, embedding_prefix
from context_engine.ingest.text import CJK_CHARS, estimate_tokens, sentence_boundaries
from context_engine.schema.nodes import Chunk
from context_engine.settings import IngestSettings

__all__ = ["MarkdownChunker"]

_ATOM_RE = re.compile(f"[{CJK_CHARS}]\\s*|[^\\s{CJK_CHARS}]+\\s*|\\s+")
#: A code block, table or HTML block is kept whole up to this many times ``chunk_max_tokens`` (4,096 estimated tokens
#: at the default 256; the largest in the runbooks and docs: 2,070) and cut at line breaks beyond: kept whole, a
#: 1 MB code block was one 1 MB embedding input (gigabytes of memory in the embedder).
ATOMIC_MAX_FACTOR = 16
#: Characters of the title and of each heading kept in a chunk's ``title`` and ``breadcrumb``, and so in its
#: embedding input (the longest heading of the runbooks and docs: 138): a heading is one line of any length, and a
#: 300 KB one was part of the embedding input of every chunk of its section.
HEADING_MAX_CHARS = 256


@dataclass(frozen=True, slots=True)
class _Segment:
    block: int  # index into the section's blocks
    start: int  # offsets into that block's text
    end: int
    tokens: int
    atomic: bool
    alone: bool = False  # a piece of one run cut by characters: a chunk by itself, never joined to another piece


class MarkdownChunker:
    """Cut a :class:`ParsedDocument` into L2 chunks (DESIGN §4).

    Rules, in order:

    * Sections (heading + own blocks) are the unit; a chunk never spans two sections unless they were merged.
    * The token budget of a chunk is ``chunk_max_tokens`` minus the tokens of its embedding prefix
      (title + breadcrumb, see :func:`embedding_input`), but never below half the cap, so the embedded text fits
      the model's window. The title and each heading are cut to :data:`HEADING_MAX_CHARS` there.
    * Tiny sections (content under ``min_chunk_tokens``) are merged with the following section, or else with the
      preceding one, when the result fits one chunk and the two are close in the tree (their common heading path
      loses at most one level from the shallower of them). The merged chunk's breadcrumb is that common path, and
      the headings below it are kept as markdown heading lines in the text, so no heading is lost and none is
      repeated. Sections with no blocks produce no chunk; their headings live on in their subsections'
      breadcrumbs.
    * A section over the budget is packed block by block. Code blocks, tables and raw HTML are not split; one
      over the budget becomes a chunk by itself, up to :data:`ATOMIC_MAX_FACTOR` times the cap (a longer one is cut
      at line breaks like a paragraph). A paragraph, list or blockquote over the budget is cut on sentence
      boundaries (and list-item starts), falling back to word cuts for a sentence over the budget, and to character
      cuts for one run without whitespace over the budget (a URL, base64, a 1 MB "word"): its pieces, of at most
      the budget in tokens and in characters, are chunks by themselves. Consecutive chunks of the same over-long
      section overlap by the last whole sentences/blocks of the previous chunk totalling at most
      ``chunk_overlap_tokens`` (never a code block or table). Chunks of different sections never overlap. A short
      paragraph ending with a colon ("Other things to check:") that would end a chunk moves to the next one instead,
      with the block it introduces (no overlap then).

    Args:
        settings: ``chunk_max_tokens`` and ``chunk_overlap_tokens`` are used.
        min_chunk_tokens: below this, a section counts as tiny; default ``max(8, chunk_max_tokens // 8)``.
    """

    def __init__(self, settings: IngestSettings, *, min_chunk_tokens: int | None = None) -> None:
        self._cap = settings.chunk_max_tokens
        self._overlap = settings.chunk_overlap_tokens
        self._atomic_max = ATOMIC_MAX_FACTOR * self._cap
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
            single code block, table or HTML block (then at most ``ATOMIC_MAX_FACTOR * chunk_max_tokens``).
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
                title=_short(doc.title),
                breadcrumb=_crumbs(path),
                text=text,
                category=category,
                source=source,
                token_estimate=estimate_tokens(text),
            )
            for k, (path, text) in enumerate(pieces)
        ]

    # -- grouping -------------------------------------------------------------------------------------------------

    def _budget(self, title: str, path: Sequence[str]) -> int:
        prefix = embedding_prefix(_short(title), _crumbs(path))
        return max(self._cap // 2, self._cap - estimate_tokens(prefix))

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
            if seg.tokens > budget or seg.alone:  # an atomic block over the budget, a piece of a cut run: alone
                if current:
                    windows.append(current)
                windows.append([seg])
                current, used = [], 0
                continue
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
            if (atomic and block.tokens <= self._atomic_max) or block.tokens <= budget:
                yield _Segment(k, 0, len(block.text), block.tokens, atomic)
                continue
            text = block.text
            newlines: Literal["none", "items", "all"] = (
                "none" if block.kind == "paragraph" else "all" if atomic else "items"
            )
            bounds = [0, *sentence_boundaries(text, newlines=newlines), len(text)]
            for start, end in pairwise(bounds):
                tokens = estimate_tokens(text[start:end])
                # the lines of a code block or table cut above the atomic limit stay out of overlaps (atomic)
                if tokens <= budget:
                    yield _Segment(k, start, end, tokens, atomic)
                else:
                    for s, e, alone in _hard_split(text, start, end, budget):
                        yield _Segment(k, s, e, estimate_tokens(text[s:e]), atomic, alone)


def _hard_split(text: str, start: int, end: int, budget: int) -> list[tuple[int, int, bool]]:
    """Cut ``text[start:end]`` at whitespace/CJK-character boundaries into spans of at most ``budget`` tokens.

    Returns:
        ``(start, end, alone)`` spans in order; ``alone`` marks the pieces of one run over the budget, cut by
        characters (:func:`_cut_run`), which must not be joined again: a run's pieces can estimate lower than the
        run (``estimate_tokens``), so their join could exceed the budget.
    """
    spans: list[tuple[int, int, bool]] = []
    span_start, used = start, 0
    for m in _ATOM_RE.finditer(text, start, end):
        a, b = m.start(), m.end()
        cost = estimate_tokens(m.group())
        if used and used + cost > budget:
            spans.append((span_start, a, False))
            span_start, used = a, 0
        if cost > budget:  # one huge "word" (a URL, base64, a run of letters): cut by characters
            spans.extend((s, e, True) for s, e in _cut_run(text, a, b, budget))
            span_start, used = b, 0
            continue
        used += cost
    if span_start < end:
        spans.append((span_start, end, False))
    return spans


def _cut_run(text: str, start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Cut ``text[start:end]`` (no whitespace) by characters into near-equal pieces of at most ``budget`` tokens and
    at most ``budget`` characters (a stretch whose characters cost more than the first piece's is cut smaller)."""
    size = min(end - start, budget)
    while size > 1 and estimate_tokens(text[start : start + size]) > budget:
        size = size * 3 // 4
    count = -(-(end - start) // size)
    base, extra = divmod(end - start, count)  # the same number of pieces, evened out: no tiny last piece
    pieces: list[tuple[int, int]] = []
    pos = start
    for i in range(count):
        stop = pos + base + (i < extra)
        while pos < stop:
            size = stop - pos
            while size > 1 and estimate_tokens(text[pos : pos + size]) > budget:
                size = size * 3 // 4
            pieces.append((pos, pos + size))
            pos += size
    return pieces


def _short(name: str) -> str:
    """A title or heading as a chunk keeps it: at most :data:`HEADING_MAX_CHARS` characters, cut with ``"…"``."""
    return name if len(name) <= HEADING_MAX_CHARS else name[: HEADING_MAX_CHARS - 1].rstrip() + "…"


def _crumbs(path: Sequence[str]) -> list[str]:
    return [_short(name) for name in path]


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
