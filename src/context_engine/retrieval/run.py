"""Per-request state shared by the search_memory stages: the query's level-0 scorer, a metadata cache, the trace.

A :class:`SearchRun` is created once per request by the pipeline (``retrieval/search_memory.py``) and passed to
each stage, so the query is embedded once, its similarities are computed once, and every node's metadata row is
fetched at most once, in batches.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from context_engine.observability.trace import TraceRecorder
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import NodeRecord
from context_engine.storage.protocols import MetadataStore
from context_engine.storage.vector.scoring import L0Scorer


class RequestNodes:
    """Metadata rows of one account, fetched in batches (one ``get_nodes`` call per batch) and kept for the request.

    Thread-safe. A URI that was fetched and is absent is remembered as absent.
    """

    def __init__(self, metadata: MetadataStore, account_id: str) -> None:
        self._metadata = metadata
        self._account = account_id
        self._rows: dict[str, NodeRecord | None] = {}
        self._lock = threading.Lock()
        self.fetches = 0

    def fetch(self, uris: Iterable[str]) -> dict[str, NodeRecord | None]:
        """Rows for ``uris`` (``None`` for missing nodes); only URIs not seen before are queried."""
        wanted = list(dict.fromkeys(uris))
        with self._lock:
            missing = [u for u in wanted if u not in self._rows]
        if missing:
            found = self._metadata.get_nodes(self._account, missing)
            with self._lock:
                self.fetches += 1
                for u in missing:
                    self._rows[u] = found.get(u)
        with self._lock:
            return {u: self._rows[u] for u in wanted}

    def get(self, uri: str) -> NodeRecord | None:
        """The row for ``uri`` if it was fetched and exists."""
        with self._lock:
            return self._rows.get(uri)


def unusable_reason(node: NodeRecord | None, ctx: RequestContext) -> str | None:
    """Why a vector hit must not be returned, or ``None`` when it may be (DESIGN §3: never a searchable orphan).

    ``missing``: no metadata row any more (deleted after indexing); ``pending``: its index write has not finished;
    ``not_visible``: its owner space is not visible to the caller.
    """
    if node is None:
        return "missing"
    if node.index_status != "indexed":
        return "pending"
    if not ctx.can_see(node.owner_space):
        return "not_visible"
    return None


@dataclass
class SearchRun:
    """What one search_memory request shares between stages.

    Attributes:
        scorer: similarities of the request's query vector to the account's level-0 records.
        nodes: the request's metadata cache.
        trace: the request's trace recorder.
        lexical: hybrid first round with ``convex`` fusion only: the fused score (calibrated similarity + BM25
            coverage, 0..1, absolute) by URI; a node's vector score is lifted to it when higher (``Scorer``).
        keyword_top: hybrid first round only: per context type, the first two BM25 hits ``(uri, bm25 score)``, for
            the threshold protection of a clear BM25 first (``Scorer.merge``).
    """

    scorer: L0Scorer
    nodes: RequestNodes
    trace: TraceRecorder = field(default_factory=TraceRecorder)
    lexical: dict[str, float] = field(default_factory=dict)
    # convex hybrid only: the dense weight w of the fusion, so candidates the first round did not fuse (expansion)
    # are scored on the same scale (w * calibrated similarity)
    dense_weight: float | None = None
    # memory filters (issue 11): the URIs they select, or None when the request has none
    allowed: frozenset[str] | None = None
    keyword_top: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    # the account generation the request read before gathering seeds (docs/derived_indexes.md), for BM25
    generation: int | None = None
