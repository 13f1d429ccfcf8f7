"""MemoryReadService: explicit L1/L2 reads by URI (DESIGN.md §6, seed 000 §4.2 "MemoryReadService").

Order of operations, so that nothing about an invisible node can leak:

1. Parse the URI; ask the :class:`RequestContext` whether its owner space is visible. No storage is touched for an
   invisible URI.
2. Look the node up in the metadata store. A missing node gives exactly the same ``RET-4032`` (403) as an
   invisible one: same message, details ``{"uri": <the URI as given, normalised>}``; except a missing *memory*
   (``ctx://user/<space>/memories/...``) in a space the caller may see (its own, say, after deleting it), which is
   ``RET-4041`` (404): step 1 decided from the context alone that the space is visible, so the difference tells
   nothing about other spaces (issue 29).
3. Read the level from the content store; redact secrets (``Redactor``, patterns + detect-secrets); L2 is returned
   one page at a time (:func:`page`): at most ``max_chars`` (default and ceiling ``l2_excerpt_max_chars``)
   characters from ``offset``, cut at a line boundary, with the offset of the next page (``None`` at the end).
   Offsets count characters of the redacted text (the pattern pass runs over the whole text, so a secret is never
   split by a page boundary; the detect-secrets pass, which works line by line, then runs over the page).
4. With ``expand_relations``, add up to ``max_relations`` one-hop relations, dropping every target the caller cannot
   see or that no longer exists (silently: reporting them would leak their existence).

L1 gives the overview (scope, structure, key points), L2 the content (seed 000 §4.2 分层返回契约). Directories have
no L2 (``RET-4004``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.observability.metrics import Metrics
from context_engine.retrieval.redaction import Redactor
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import RelationRef, RetrievedBlock
from context_engine.schema.nodes import Level, NodeRecord
from context_engine.schema.uri import ContextURI, parse_uri
from context_engine.settings import ReadSettings
from context_engine.storage.protocols import ContentStore, MetadataStore

__all__ = ["MemoryReadService", "ReadPage", "forbidden", "not_found", "page", "read_uri"]

ReadLevelName = Literal["L0", "L1", "L2"]
_FORBIDDEN_MESSAGE = "the URI does not exist or is not visible to this caller"
_NOT_FOUND_MESSAGE = "no memory at this URI (deleted, or never written)"


def read_uri(uri: str) -> ContextURI:
    """``uri`` of a read (ls, tree, read, stat) parsed with the read code: ``RET-4001``, never ``WRT-4001``."""
    try:
        return parse_uri(uri)
    except ContextEngineError as err:
        if err.code is not ErrorCode.URI_INVALID:
            raise
        raise ContextEngineError(
            ErrorCode.QUERY_INVALID, f"uri is not a valid URI: {err.message}", {"field": "uri"}
        ) from err


def forbidden(uri: str) -> ContextEngineError:
    """The one ``RET-4032`` for a URI that is invisible *or* missing (no existence leak)."""
    return ContextEngineError(ErrorCode.URI_FORBIDDEN, _FORBIDDEN_MESSAGE, {"uri": uri})


def not_found(uri: str) -> ContextEngineError:
    """``RET-4041`` (404) for a memory URI in a space the caller may see that holds no memory (issue 29: a memory the
    caller deleted). Raised only after the visibility check, which reads the context alone, so it says nothing about
    spaces the caller cannot see: those keep the one ``RET-4032``."""
    return ContextEngineError(ErrorCode.TARGET_NOT_FOUND, _NOT_FOUND_MESSAGE, {"uri": uri})


def _shown(uri: str) -> str:
    """The URI as echoed in an error: normalised when it parses, else as given (truncated)."""
    try:
        return str(ContextURI.parse(uri))
    except ContextEngineError:
        return uri if len(uri) <= 120 else uri[:117] + "..."


def page(text: str, offset: int, max_chars: int) -> tuple[str, int | None]:
    """One page of ``text``: at most ``max_chars`` characters from ``offset``, and the offset of the next page.

    The page ends after the last line break in its window when that keeps at least half of it, else at the window's
    end; the last page ends with the text. Pages read one after another by following the returned offset add up to
    ``text`` exactly, and each page has at least one character (so following them always ends).

    Returns:
        ``(page_text, next_offset)``; ``next_offset`` is ``None`` when the page reaches the end of ``text``.
    """
    end = offset + max_chars
    if end >= len(text):
        return text[offset:], None
    cut = text.rfind("\n", offset, end)
    if cut + 1 - offset > max_chars // 2:
        end = cut + 1
    return text[offset:end], end


@dataclass(frozen=True)
class ReadPage:
    """A read block with its paging: ``offset`` and ``next_offset`` (``None`` at the end or for L0/L1) count
    characters of the redacted L2 text, ``total_chars`` is its length (``None`` for L0/L1)."""

    block: RetrievedBlock
    offset: int = 0
    next_offset: int | None = None
    total_chars: int | None = None


class MemoryReadService:
    """Explicit reads with ACL, redaction and one-hop relations.

    Args:
        content: the content store (L0/L1/L2 text).
        metadata: the metadata store (nodes, relations).
        redactor: secret redaction.
        settings: the ``retrieval.read`` section.
        metrics: counts reads by level (``retrieval.read.l1/l2.count``); ``None``: not counted.
    """

    def __init__(
        self,
        content: ContentStore,
        metadata: MetadataStore,
        redactor: Redactor,
        settings: ReadSettings,
        metrics: Metrics | None = None,
    ) -> None:
        self._content = content
        self._metadata = metadata
        self._redactor = redactor
        self._settings = settings
        self._metrics = metrics

    # ---- public API (seed 000 §4.2) --------------------------------------------------------------------------------
    def read(
        self,
        uri: str,
        level: ReadLevelName = "L1",
        expand_relations: bool = False,
        max_relations: int = 0,
        *,
        ctx: RequestContext,
        offset: int = 0,
        max_chars: int | None = None,
    ) -> RetrievedBlock:
        """One node at one level (the block of :meth:`read_page`).

        Args:
            uri: the node's URI (a directory with or without its trailing ``/``).
            level: ``L1`` (overview) or ``L2`` (content excerpt); ``L0`` (abstract) is accepted as well for the CLI.
            expand_relations: add one-hop relations.
            max_relations: how many relations at most (0..``read.max_relations``).
            ctx: the caller (required, keyword); a ``None`` from an untyped caller is refused like an invisible URI,
                never read as anyone.
            offset: L2 only: where the page starts, in characters of the redacted text (0..its length).
            max_chars: L2 only: the page's size at most, 1..``read.l2_excerpt_max_chars``; ``None``: that ceiling.

        Returns:
            A block with ``level_hit`` = ``level``, ``abstract`` always, ``overview`` for L1, ``content_excerpt`` for
            L2 (one page of the redacted text), ``score`` 1.0, ``match_reason`` ``explicit_read``, and
            ``read_recommendation`` ``read_l2`` after an L1 read of a file with content, else ``none``.

        Raises:
            ContextEngineError: as :meth:`read_page`.
        """
        return self.read_page(
            uri, level, expand_relations, max_relations, ctx=ctx, offset=offset, max_chars=max_chars
        ).block

    def read_page(
        self,
        uri: str,
        level: ReadLevelName = "L1",
        expand_relations: bool = False,
        max_relations: int = 0,
        *,
        ctx: RequestContext,
        offset: int = 0,
        max_chars: int | None = None,
    ) -> ReadPage:
        """One node at one level, and for L2 one page of its content with the offset of the next (issue 29).

        Args: as :meth:`read`.

        Returns:
            The block and its paging (:class:`ReadPage`): following ``next_offset`` until it is ``None`` reads the
            whole redacted L2 text.

        Raises:
            ContextEngineError: ``RET-4032`` (403) for an invisible or missing URI, or an unparsable one, all with
                the same message; ``RET-4041`` (404) for a missing memory in a space the caller sees; ``RET-4004``
                when the node has no such level (L2 of a directory); ``RET-4001`` for a level, ``max_relations``,
                ``offset`` (negative, past the end, or not 0 on L0/L1) or ``max_chars`` out of range.
        """
        self._check_level(level)
        self._check_max_relations(max_relations)
        limit = self._check_page(level, offset, max_chars)
        node = self._visible(uri, ctx)
        block, nxt, total = self._block(node, level, ctx, offset, limit)
        if expand_relations and max_relations > 0:
            block.relations = self._relations(node, max_relations, ctx)
        return ReadPage(block, offset, nxt, total)

    def read_batch(
        self, uris: Sequence[str], level: ReadLevelName = "L1", *, ctx: RequestContext
    ) -> list[RetrievedBlock]:
        """Several nodes at one level, in the given order (all or nothing).

        Every URI is checked (visibility, then one batched existence lookup) before any content is read; one
        invisible or missing URI fails the whole batch with the same ``RET-4032`` a single read gives.

        Raises:
            ContextEngineError: as :meth:`read`; ``RET-4001`` for more than ``read.max_batch_uris`` URIs.
        """
        self._check_level(level)
        if len(uris) > self._settings.max_batch_uris:
            raise ContextEngineError(
                ErrorCode.QUERY_INVALID,
                f"read_batch takes at most {self._settings.max_batch_uris} URIs, got {len(uris)}",
                {"field": "uris", "limit": self._settings.max_batch_uris},
            )
        if ctx is None:
            raise forbidden(_shown(uris[0]) if uris else "")
        parsed: list[ContextURI] = []
        for uri in uris:
            u = self._parse_visible(uri, ctx)
            parsed.append(u)
        found = self._metadata.get_nodes(ctx.account_id, [str(u) for u in parsed])
        by_key = {ContextURI.parse(n.uri).key: n for n in found.values()}
        nodes: list[NodeRecord] = []
        for raw, u in zip(uris, parsed, strict=True):
            node = by_key.get(u.key)
            if node is None or not ctx.can_see(node.owner_space):
                raise forbidden(_shown(raw))
            nodes.append(node)
        return [self._block(n, level, ctx, 0, self._settings.l2_excerpt_max_chars)[0] for n in nodes]

    def relations(self, uri: str, max_relations: int, ctx: RequestContext) -> list[RelationRef]:
        """Up to ``max_relations`` one-hop relations of a visible node, to visible, existing targets only.

        Raises:
            ContextEngineError: as :meth:`read` for the URI; ``RET-4001`` for ``max_relations`` out of range.
        """
        self._check_max_relations(max_relations)
        node = self._visible(uri, ctx)
        return self._relations(node, max_relations, ctx) if max_relations > 0 else []

    # ---- internals -----------------------------------------------------------------------------------------------
    @staticmethod
    def _check_level(level: str) -> None:
        if level not in ("L0", "L1", "L2"):
            raise ContextEngineError(
                ErrorCode.QUERY_INVALID, f"level must be L1 or L2, got {level!r}", {"field": "level"}
            )

    def _check_page(self, level: str, offset: int, max_chars: int | None) -> int:
        """The page size to use; ``RET-4001`` for a negative offset, an offset on L0/L1 or a size out of range."""
        ceiling = self._settings.l2_excerpt_max_chars
        if max_chars is not None and not 1 <= max_chars <= ceiling:
            raise ContextEngineError(
                ErrorCode.QUERY_INVALID,
                f"max_chars must be in 1..{ceiling}, got {max_chars}",
                {"field": "max_chars", "max": ceiling},
            )
        if offset < 0 or (offset > 0 and level != "L2"):
            raise ContextEngineError(
                ErrorCode.QUERY_INVALID,
                f"offset must be >= 0, and 0 unless level is L2 (got {offset} at {level})",
                {"field": "offset"},
            )
        return ceiling if max_chars is None else max_chars

    def _check_max_relations(self, max_relations: int) -> None:
        if not 0 <= max_relations <= self._settings.max_relations:
            raise ContextEngineError(
                ErrorCode.QUERY_INVALID,
                f"max_relations must be in 0..{self._settings.max_relations}, got {max_relations}",
                {"field": "max_relations"},
            )

    @staticmethod
    def _parse_visible(uri: str, ctx: RequestContext) -> ContextURI:
        """Parse and check visibility, touching no storage: a malformed URI is ``RET-4001`` (decided from its text
        alone, as on ``ls`` and ``tree``, so it says nothing of what exists), an invisible one the one 403."""
        u = read_uri(uri)
        if not ctx.can_see_uri(u):
            raise forbidden(str(u))
        return u

    def _visible(self, uri: str, ctx: RequestContext) -> NodeRecord:
        if ctx is None:  # typed away, but an untyped caller's None must never read: the one 403
            raise forbidden(_shown(uri))
        u = self._parse_visible(uri, ctx)
        node = self._metadata.get_node(ctx.account_id, str(u))
        if node is None and u.context_type == "memory":
            raise not_found(str(u))
        if node is None or not ctx.can_see(node.owner_space):
            raise forbidden(str(u))
        return node

    def _block(
        self, node: NodeRecord, level: str, ctx: RequestContext, offset: int, max_chars: int
    ) -> tuple[RetrievedBlock, int | None, int | None]:
        lv = Level(level)
        if lv is Level.L2 and node.is_dir:
            raise ContextEngineError(
                ErrorCode.LEVEL_NOT_AVAILABLE,
                f"{node.uri} is a directory: it has L0 and L1 only; read a file below it for L2",
                {"uri": node.uri},
            )
        abstract = self._content.read_level(ctx.account_id, node.uri, Level.L0)
        abstract = self._redactor.redact(abstract, library=False).text if abstract else abstract
        overview = content = None
        nxt = total = None
        if lv is not Level.L0:
            text = self._content.read_level(ctx.account_id, node.uri, lv)
            if text is None:
                raise ContextEngineError(
                    ErrorCode.LEVEL_NOT_AVAILABLE, f"{node.uri} has no {lv.value}", {"uri": node.uri}
                )
            if lv is Level.L1:
                overview = self._redactor.redact(text).text
            else:
                # The pattern pass sees the whole text (a private key or token straddling a page boundary is
                # recognised whole); the line-based detect-secrets pass then runs over the page alone.
                whole = self._redactor.redact(text, library=False).text
                total = len(whole)
                if offset > total:
                    raise ContextEngineError(
                        ErrorCode.QUERY_INVALID,
                        f"offset {offset} is past the end of {node.uri} ({total} characters)",
                        {"field": "offset", "total_chars": total},
                    )
                chunk, nxt = page(whole, offset, max_chars)
                content = self._redactor.redact(chunk).text
            if self._metrics is not None:
                self._metrics.reads.labels(level=lv.value).inc()
        recommendation: Literal["none", "read_l2"] = (
            "read_l2" if lv is not Level.L2 and not node.is_dir and node.has_content else "none"
        )
        block = RetrievedBlock(
            uri=node.uri,
            level_hit=lv.value,
            score=1.0,
            category=node.category or "",
            owner_space=node.owner_space,
            abstract=abstract,
            overview=overview,
            content_excerpt=content,
            relations=[],
            has_overview=node.has_overview,
            has_content=node.has_content,
            read_recommendation=recommendation,
            match_reason="explicit_read",
            occurred_at=node.occurred_at if node.context_type == "memory" and not node.is_dir else None,
        )
        return block, nxt, total

    def _relations(self, node: NodeRecord, max_relations: int, ctx: RequestContext) -> list[RelationRef]:
        edges = self._metadata.get_relations(ctx.account_id, node.uri)
        candidates: list[tuple[str, str, float]] = []
        for edge in edges:
            try:
                target = ContextURI.parse(edge.to_uri)
            except ContextEngineError:
                continue
            if ctx.can_see_uri(target):
                candidates.append((str(target), edge.relation_type, edge.weight))
        if not candidates:
            return []
        existing = self._metadata.get_nodes(ctx.account_id, [c[0] for c in candidates])
        by_key = {ContextURI.parse(n.uri).key: n for n in existing.values()}
        out: list[RelationRef] = []
        for to_uri, relation_type, weight in candidates:
            target_node = by_key.get(ContextURI.parse(to_uri).key)
            if target_node is None or not ctx.can_see(target_node.owner_space):
                continue
            out.append(RelationRef(to_uri=target_node.uri, relation_type=relation_type, weight=weight))
            if len(out) == max_relations:
                break
        return out
