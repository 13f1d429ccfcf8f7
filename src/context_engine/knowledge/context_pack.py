"""Post-retrieval of lookup_knowledge: chunk expansion and context packing (DESIGN.md §7.4; seed 001 §10.1).

* :meth:`ContextPacker.expand` grows a document's best chunk into an evidence block: first the other chunks of the
  same section (an over-long section split by the chunker shares one breadcrumb), then chunks the semantic layer
  also matched, then up to ``neighbour_chunks`` adjacent chunks on each side of that section, always contiguous,
  following text before preceding text, while the block stays within ``block_max_tokens``. Overlap that the chunker
  repeated between consecutive pieces of one section is removed; a chunk from another section gets its heading line.
* :meth:`ContextPacker.pack` formats the evidence blocks, strongest first, under a token budget. A block that does
  not fit is cut at a line boundary when at least ``context_min_block_tokens`` remain, else left out (recorded).

Token counts are :func:`context_engine.ingest.parse.estimate_tokens` (CJK-aware: an ideograph counts one token).
The estimate is additive over whitespace-separated pieces, so the sum of the parts bounds the joined text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from context_engine.ingest.parse import estimate_tokens, split_breadcrumb
from context_engine.schema.knowledge import (
    ContextPack,
    ContextPackEntry,
    ContextPackOmission,
    EvidenceBlock,
    RelevanceLevel,
)
from context_engine.settings import KnowledgeSettings

_SEPARATOR = "\n\n---\n\n"
_TRUNCATION_MARK = "\n[…]"


@dataclass(frozen=True, slots=True)
class ChunkText:
    """One level=2 chunk of a document: its index, display breadcrumb and text."""

    chunk_index: int
    breadcrumb: str
    text: str


@dataclass(frozen=True, slots=True)
class Expansion:
    """An evidence block's text and the chunks it joins (ascending)."""

    text: str
    chunk_indexes: list[int]
    token_estimate: int


class ContextPacker:
    """Expansion and packing with the ``knowledge`` settings (``neighbour_chunks``, ``block_max_tokens``,
    ``context_token_budget``, ``context_min_block_tokens``)."""

    def __init__(self, settings: KnowledgeSettings) -> None:
        self._s = settings

    # ---- expansion ----------------------------------------------------------------------------------------------
    def expand(self, chunks: Sequence[ChunkText], anchor: int, matched: set[int]) -> Expansion:
        """The evidence block around chunk ``anchor`` of one document.

        Args:
            chunks: the document's level=2 chunks (any order).
            anchor: ``chunk_index`` of the best-matching chunk.
            matched: chunk indexes the semantic layer returned above the threshold.

        Returns:
            The block text and its chunk indexes. Only the anchor when it alone exceeds ``block_max_tokens``.
        """
        by_index = {c.chunk_index: c for c in chunks}
        if anchor not in by_index:
            return Expansion("", [anchor], 0)
        base = by_index[anchor]
        lo = hi = anchor
        used = estimate_tokens(base.text)
        cap = self._s.block_max_tokens
        reach = self._s.neighbour_chunks
        sec_lo, sec_hi = _section(by_index, anchor)

        def priority(i: int) -> int | None:
            return _priority(by_index.get(i), i, base, matched, (sec_lo - reach, sec_hi + reach))

        while True:
            options = [(p, 0 if i > anchor else 1, i) for i in (hi + 1, lo - 1) if (p := priority(i)) is not None]
            options.sort()
            added = False
            for _, _, i in options:
                cost = estimate_tokens(by_index[i].text) + _heading_cost(by_index[i], base)
                if used + cost <= cap:
                    used += cost
                    lo, hi = min(lo, i), max(hi, i)
                    added = True
                    break
            if not added:
                break
        indexes = list(range(lo, hi + 1))
        text = _join([by_index[i] for i in indexes], base.breadcrumb)
        return Expansion(text, indexes, estimate_tokens(text))

    # ---- packing ------------------------------------------------------------------------------------------------
    def pack(self, blocks: Sequence[EvidenceBlock], budget_tokens: int | None = None) -> ContextPack:
        """Format ``blocks`` (already in rank order) for an agent's context within the token budget.

        ``DEDUPED`` blocks are never packed (recorded as omitted, reason ``deduped``).
        """
        budget = budget_tokens or self._s.context_token_budget
        parts: list[str] = []
        entries: list[ContextPackEntry] = []
        omitted: list[ContextPackOmission] = []
        used = 0
        sep_cost = estimate_tokens(_SEPARATOR)
        for i, block in enumerate(blocks):
            if block.relevance_level == RelevanceLevel.DEDUPED:
                omitted.append(ContextPackOmission(index=i, doc_id=block.doc_id, reason="deduped"))
                continue
            header = _header(len(entries) + 1, block)
            overhead = estimate_tokens(header) + (sep_cost if parts else 0)
            body_cost = estimate_tokens(block.text)
            if used + overhead + body_cost <= budget:
                parts.append(f"{header}\n\n{block.text}")
                used += overhead + body_cost
                entries.append(ContextPackEntry(index=i, doc_id=block.doc_id, tokens=overhead + body_cost))
                continue
            room = budget - used - overhead - estimate_tokens(_TRUNCATION_MARK)
            if room >= self._s.context_min_block_tokens:
                cut = truncate_to_tokens(block.text, room)
                if cut:
                    body = cut + _TRUNCATION_MARK
                    cost = overhead + estimate_tokens(body)
                    parts.append(f"{header}\n\n{body}")
                    used += cost
                    entries.append(ContextPackEntry(index=i, doc_id=block.doc_id, tokens=cost, truncated=True))
                    continue
            omitted.append(ContextPackOmission(index=i, doc_id=block.doc_id, reason="budget"))
        text = _SEPARATOR.join(parts)
        return ContextPack(
            text=text, token_estimate=estimate_tokens(text), budget_tokens=budget, entries=entries, omitted=omitted
        )


def packed_bodies(pack: ContextPack, blocks: Sequence[EvidenceBlock]) -> dict[int, str]:
    """The text each packed block has in ``pack.text`` (``entries``' ``index`` -> body, without its header; a cut
    body ends with the truncation mark). ``pack`` must be :meth:`ContextPacker.pack` of ``blocks``.

    Each header is known exactly (``_header``), so the bodies are found by position, not by splitting on the
    separator (which a markdown body may contain).
    """
    starts: list[tuple[int, int, int]] = []  # (entry index, header start, body start)
    pos = 0
    for number, entry in enumerate(pack.entries, 1):
        header = _header(number, blocks[entry.index]) + "\n\n"
        at = pack.text.find(header, pos)
        if at < 0:  # not this pack's blocks
            return {}
        starts.append((entry.index, at, at + len(header)))
        pos = at + len(header)
    out: dict[int, str] = {}
    for k, (index, _, body_start) in enumerate(starts):
        end = starts[k + 1][1] - len(_SEPARATOR) if k + 1 < len(starts) else len(pack.text)
        out[index] = pack.text[body_start:end]
    return out


def truncate_to_tokens(text: str, limit: int) -> str:
    """The longest prefix of ``text`` made of whole lines (or, for a first line over ``limit``, whole words or
    characters) whose token estimate is at most ``limit``; ``""`` when not even one word fits."""
    if estimate_tokens(text) <= limit:
        return text
    out: list[str] = []
    used = 0
    for line in text.split("\n"):
        cost = estimate_tokens(line)
        if used + cost > limit:
            if not out:
                return _cut_words(line, limit)
            break
        out.append(line)
        used += cost
    return "\n".join(out).rstrip()


def _cut_words(line: str, limit: int) -> str:
    kept = ""
    for piece in line.split(" "):
        candidate = f"{kept} {piece}" if kept else piece
        if estimate_tokens(candidate) > limit:
            if not kept:  # one long CJK run or identifier: cut by characters
                chars = ""
                for ch in piece:
                    if estimate_tokens(chars + ch) > limit:
                        break
                    chars += ch
                return chars
            break
        kept = candidate
    return kept


def _header(number: int, block: EvidenceBlock) -> str:
    crumb = f" — {block.breadcrumb}" if block.breadcrumb else ""
    return (
        f"[{number}] {block.title}{crumb}\n"
        f"(source: {block.doc_id}; relevance: {block.relevance_level.value}; similarity: {block.similarity:.3f})"
    )


def _heading_line(chunk: ChunkText) -> str:
    parts = split_breadcrumb(chunk.breadcrumb)
    depth = max(2, min(6, len(parts)))
    return f"{'#' * depth} {parts[-1]}" if parts else ""


def _section(by_index: dict[int, ChunkText], anchor: int) -> tuple[int, int]:
    """The first and last chunk index of the anchor's section: the run of chunks sharing its breadcrumb."""
    breadcrumb = by_index[anchor].breadcrumb
    lo = hi = anchor
    while lo - 1 in by_index and by_index[lo - 1].breadcrumb == breadcrumb:
        lo -= 1
    while hi + 1 in by_index and by_index[hi + 1].breadcrumb == breadcrumb:
        hi += 1
    return lo, hi


def _priority(
    chunk: ChunkText | None, i: int, base: ChunkText, matched: set[int], reach: tuple[int, int]
) -> int | None:
    """Which neighbour to add first: 0 the anchor's section, 1 a chunk the semantic layer matched, 2 a chunk within
    ``reach`` of the section; ``None``: not to add (absent, or out of reach)."""
    if chunk is None:
        return None
    if chunk.breadcrumb == base.breadcrumb:
        return 0
    if i in matched:
        return 1
    if reach[0] <= i <= reach[1]:
        return 2
    return None


def _heading_cost(chunk: ChunkText, base: ChunkText) -> int:
    """Tokens of the heading line :func:`_join` may add for ``chunk`` (the anchor's own heading counted too)."""
    if chunk.text.lstrip().startswith("#"):
        return 0
    return estimate_tokens(_heading_line(chunk)) + (
        0 if chunk.breadcrumb == base.breadcrumb else estimate_tokens(_heading_line(base))
    )


def _join(chunks: Sequence[ChunkText], anchor_breadcrumb: str) -> str:
    """Chunks in order; repeated overlap between pieces of one section removed; a heading line where the section
    changes (the block's first chunk needs none when it is in the anchor's section, shown in the block header)."""
    out = ""
    prev: ChunkText | None = None
    for c in chunks:
        text = c.text
        if prev is not None and c.breadcrumb == prev.breadcrumb:
            text = _drop_overlap(prev.text, text)
        new_section = c.breadcrumb != anchor_breadcrumb if prev is None else c.breadcrumb != prev.breadcrumb
        if new_section and not text.lstrip().startswith("#"):
            heading = _heading_line(c)
            text = f"{heading}\n\n{text}" if heading else text
        if text:
            out = f"{out}\n\n{text}" if out else text
        prev = c
    return out


def _drop_overlap(prev: str, nxt: str, min_chars: int = 20) -> str:
    """``nxt`` without its longest prefix that is also a suffix of ``prev`` (the chunker's sentence overlap)."""
    if len(nxt) < min_chars:
        return nxt
    head = nxt[:min_chars]
    tail = prev[-4000:]
    pos = tail.find(head)
    while pos != -1:
        candidate = tail[pos:]
        if nxt.startswith(candidate):
            return nxt[len(candidate) :].lstrip()
        pos = tail.find(head, pos + 1)
    return nxt
