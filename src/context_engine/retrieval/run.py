"""What the search_memory stages of one request read in common: the query's level-0 scorer, a metadata cache, the
trace; and what the level-0 recall hands the later stages.

A :class:`SearchRun` is created once per request by the pipeline (``retrieval/search_memory.py``) and passed to
each stage, so the query is embedded once, its similarities are computed once, and every node's metadata row is
fetched at most once, in batches. It is frozen: no stage leaves its results in it. What a stage finds is its return
value; the level-0 recall's (:class:`SeedRound`: the seeds and the hybrid first round's :class:`FirstRound`) is
passed by the pipeline to the expansion and the merge that read it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from context_engine.observability.trace import TraceRecorder
from context_engine.schema.hits import SeedHit
from context_engine.schema.nodes import NodeHead
from context_engine.storage.changes import AccountState
from context_engine.storage.protocols import MetadataStore
from context_engine.storage.vector.scoring import L0Scorer


class RequestNodes:
    """Metadata rows of one account, fetched in batches (one ``get_node_heads`` call per batch: the columns a search
    reads, :class:`~context_engine.schema.nodes.NodeHead`) and kept for the request.

    Thread-safe. A URI that was fetched and is absent is remembered as absent.
    """

    def __init__(self, metadata: MetadataStore, account_id: str) -> None:
        self._metadata = metadata
        self._account = account_id
        self._rows: dict[str, NodeHead | None] = {}
        self._lock = threading.Lock()
        self.fetches = 0

    def fetch(self, uris: Iterable[str]) -> dict[str, NodeHead | None]:
        """Rows for ``uris`` (``None`` for missing nodes); only URIs not seen before are queried."""
        wanted = list(dict.fromkeys(uris))
        with self._lock:
            missing = [u for u in wanted if u not in self._rows]
        if missing:
            found = self._metadata.get_node_heads(self._account, missing)
            with self._lock:
                self.fetches += 1
                for u in missing:
                    self._rows[u] = found.get(u)
        with self._lock:
            return {u: self._rows[u] for u in wanted}

    def roles(self, uris: Iterable[str]) -> dict[str, str]:
        """The ``role`` a conversation message was stored with (its metadata; ``schema.memory.Message``), by URI, for
        those of ``uris`` that have one. One ``get_nodes`` read of the full rows (their JSON metadata): only for the
        rules that need the role (``L0Retriever``'s user reference), never on every search."""
        records = self._metadata.get_nodes(self._account, list(dict.fromkeys(uris)))
        out: dict[str, str] = {}
        for uri, record in records.items():
            role = (record.metadata or {}).get("role")
            if isinstance(role, str):
                out[uri] = role
        return out

    def get(self, uri: str) -> NodeHead | None:
        """The row for ``uri`` if it was fetched and exists."""
        with self._lock:
            return self._rows.get(uri)


def unusable_reason(node: NodeHead | None) -> str | None:
    """Why a vector hit must not be returned, or ``None`` when it may be (DESIGN §3: never a searchable orphan).

    ``missing``: no metadata row any more (deleted after indexing); ``pending``: its index write has not finished.
    Whether the caller may see it is the tenant filter's question (every search runs under it) and the recheck's
    (``CandidateRechecker``, the one stage that checks each candidate's visibility).
    """
    if node is None:
        return "missing"
    if node.index_status != "indexed":
        return "pending"
    return None


@dataclass(frozen=True)
class SearchRun:
    """What one search_memory request's stages read in common (frozen: no stage writes to it).

    Attributes:
        scorer: similarities of the request's query vector to the account's level-0 records.
        nodes: the request's metadata cache.
        trace: the request's trace recorder.
        generation: the account state (generation and token) the request read before gathering seeds
            (docs/derived_indexes.md), for BM25 and a second scorer; an ``int`` is a generation alone (the structures
            then read the token themselves).
        query_vector: the vector ``scorer`` scores against (``(dim,)`` float32, unit norm: the query's, or in a
            search again without the speakers' names the name-less text's), ``None`` when not known.
    """

    scorer: L0Scorer
    nodes: RequestNodes
    trace: TraceRecorder = field(default_factory=TraceRecorder)
    generation: AccountState | int | None = None
    query_vector: np.ndarray | None = None
    dated: frozenset[str] | None = None


_NO_SCORES: Mapping[str, float] = MappingProxyType({})
_NO_TOPS: Mapping[str, Sequence[tuple[str, float]]] = MappingProxyType({})


@dataclass(frozen=True)
class FirstRound:
    """What the hybrid first round found besides the seeds, read by the expansion and the merge.

    Attributes:
        lexical: ``convex`` fusion only: the fused score (calibrated similarity + BM25 coverage, 0..1, absolute) by
            URI; a node's vector score is lifted to it when higher (``HierarchicalSearcher``).
        dense_weight: ``convex`` fusion only: the dense weight ``w`` of the fusion, so candidates the first round did
            not fuse (expansion) are scored on the same scale (``w * calibrated similarity``); ``None`` otherwise.
        keyword_top: per context type, the first two BM25 hits ``(uri, bm25 score)``, for the threshold protection
            of a clear BM25 first (``Scorer.merge``).
        speakers: the speakers of the candidate conversation messages that the query names
            (:func:`~context_engine.retrieval.speakers.named_speakers`), whose turns got ``speaker_boost``.
        gap_weights: context type -> the raised dense weight its typed query was fused with (the lexical-gap rule
            of ``L0Retriever``: memories only); a type not named here used ``dense_weight``.
        user_names: the names the query calls the user by that only the assistant's greetings say ("Where does Priya
            work?" over "assistant: Hi Priya, ..."; ``speakers`` then holds the user's speakers), as written in the
            query: the second search puts them in the first person like "the user"
            (:func:`~context_engine.retrieval.query_transform.without_speakers`).
    """

    lexical: Mapping[str, float] = field(default_factory=lambda: _NO_SCORES)
    dense_weight: float | None = None
    keyword_top: Mapping[str, Sequence[tuple[str, float]]] = field(default_factory=lambda: _NO_TOPS)
    speakers: frozenset[str] = frozenset()
    gap_weights: Mapping[str, float] = field(default_factory=lambda: _NO_SCORES)
    user_names: frozenset[str] = frozenset()

    def weight_for(self, context_type: str) -> float | None:
        """The dense weight the fusion of ``context_type``'s typed query used: ``gap_weights`` where the lexical-gap
        rule raised it (``L0Retriever``), else ``dense_weight``; ``None`` without ``convex`` fusion."""
        if self.dense_weight is None:
            return None
        return self.gap_weights.get(context_type, self.dense_weight)


DENSE_ONLY = FirstRound()
"""The first round of a request without hybrid fusion (or whose fusion failed everywhere)."""


@dataclass(frozen=True)
class SeedRound:
    """What the level-0 recall returns: each typed query's seeds, in plan order, and the :class:`FirstRound`."""

    seeds: list[list[SeedHit]]
    first_round: FirstRound = DENSE_ONLY
