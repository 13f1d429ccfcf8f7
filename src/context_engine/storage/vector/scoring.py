"""A request's level-0 scoring view: the similarities of one query vector to one account's level-0 records
(DESIGN.md §3, §5, §12).

Every search_memory stage needs the same thing: the cosine similarity between one query vector and the level-0
(abstract) records of one account, under a tenancy pre-filter. Four questions are asked of it (:class:`L0Scorer`):

* ``top(flt, k)``: the best ``k`` records passing a filter (L0 recall);
* ``children(flt, parents, per_parent)``: the best children of some directories (hierarchical expansion);
* ``lookup(flt, uris)``: the similarity of named records (ancestors, for ``hierarchy_score``); ``matches`` gives
  them with their texts (records only BM25 found).

Two implementations: :class:`IndexL0Scorer` here, generic over any
:class:`~context_engine.storage.protocols.VectorIndex` (one pre-filtered index search per question: ``parent_uris``
for children, ``doc_ids`` for lookups, since a level-0 record's ``doc_id`` is its URI), and
:class:`~context_engine.storage.vector.matrix_scoring.MemoryL0Scorer` over the level-0 matrix.
:class:`~context_engine.storage.vector.l0_source.L0Source` hands out one per request.

Scores are cosine similarity in [-1, 1], higher is better, identical in meaning on both paths (the matrix holds the
same unit vectors the index holds). Neither path ever reads L1 or L2 text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorHit
from context_engine.storage.protocols import VectorIndex

__all__ = ["IndexL0Scorer", "L0Match", "L0Scorer", "ordered", "parent_of", "search_failed", "space_of"]

# Index rows fetched per children() call at most (parent_uris queries with many parents).
_MAX_CHILDREN_ROWS = 2_000


@dataclass(frozen=True, slots=True)
class L0Match:
    """One level-0 record and its similarity to the query (cosine, [-1, 1], higher is better)."""

    uri: str
    parent_uri: str | None
    owner_space: str
    context_type: str
    category: str
    text: str
    similarity: float

    @property
    def is_dir(self) -> bool:
        return self.uri.endswith("/")


class L0Scorer(Protocol):
    """A request's scoring view: similarities of one query vector to one account's level-0 records. Every method
    applies ``flt`` in full (``flt.account_id`` must be the scorer's account); an empty list in a filter field
    matches nothing.

    Attributes:
        name: ``index`` or ``memory`` (recorded in the trace).
        concurrent: whether a request's questions are best asked concurrently (they wait on I/O that releases the
            GIL: a vector index), rather than one after the other (CPU-bound Python: the in-memory matrix).
    """

    name: str
    concurrent: bool

    def top(self, flt: VectorFilter, k: int) -> list[L0Match]:
        """The best ``k`` records passing ``flt``, by similarity descending, then URI ascending."""
        ...

    def children(self, flt: VectorFilter, parent_uris: Sequence[str], per_parent: int) -> dict[str, list[L0Match]]:
        """For each directory URI, its best ``per_parent`` children passing ``flt`` (same order as :meth:`top`)."""
        ...

    def lookup(self, flt: VectorFilter, uris: Sequence[str]) -> dict[str, float]:
        """Similarity of each record in ``uris`` that exists and passes ``flt`` (others are absent)."""
        ...

    def matches(self, flt: VectorFilter, uris: Sequence[str]) -> dict[str, L0Match]:
        """As :meth:`lookup`, the whole matches (with their level-0 texts)."""
        ...


def search_failed(err: Exception, where: str) -> ContextEngineError:
    """``RET-5001`` (retryable) for a failed level-0 search, naming where it failed."""
    return ContextEngineError(
        ErrorCode.VECTOR_SEARCH_FAILED,
        f"vector search failed ({where}): {type(err).__name__}",
        {"error": type(err).__name__},
        retryable=True,
    )


def ordered(matches: list[L0Match]) -> list[L0Match]:
    """By similarity descending, then URI ascending."""
    return sorted(matches, key=lambda m: (-m.similarity, m.uri))


class IndexL0Scorer:
    """:class:`L0Scorer` through the vector index: each question is one pre-filtered ``VectorIndex.search``.

    Raises (every method):
        ContextEngineError: ``RET-5001`` (retryable) when the index fails; an adapter error of another kind is
            translated here, at the boundary, so a caller only ever sees ``RET-5001`` for a failed search.
    """

    name = "index"
    concurrent = True  # each question waits on the index

    def __init__(self, index: VectorIndex, query_vector: np.ndarray) -> None:
        self._index = index
        self._query = query_vector

    def _search(self, k: int, flt: VectorFilter, where: str) -> list[VectorHit]:
        try:
            return self._index.search(self._query, k, flt)
        except ContextEngineError as err:
            if err.code is ErrorCode.VECTOR_SEARCH_FAILED:
                raise
            raise search_failed(err, where) from err
        except Exception as err:
            raise search_failed(err, where) from err

    @staticmethod
    def _match(h: VectorHit) -> L0Match:
        return L0Match(h.uri, h.parent_uri, h.owner_space, h.context_type, h.category, h.text, h.score)

    def top(self, flt: VectorFilter, k: int) -> list[L0Match]:
        if k <= 0:
            return []
        return ordered([self._match(h) for h in self._search(k, flt, "top")])

    def children(self, flt: VectorFilter, parent_uris: Sequence[str], per_parent: int) -> dict[str, list[L0Match]]:
        parents = sorted(set(parent_uris))
        if not parents or per_parent <= 0:
            return {}
        wanted = flt.model_copy(update={"parent_uris": parents})
        k = min(per_parent * len(parents), _MAX_CHILDREN_ROWS)
        out: dict[str, list[L0Match]] = {}
        for m in ordered([self._match(h) for h in self._search(k, wanted, "children")]):
            bucket = out.setdefault(m.parent_uri or "", [])
            if len(bucket) < per_parent:
                bucket.append(m)
        return out

    def lookup(self, flt: VectorFilter, uris: Sequence[str]) -> dict[str, float]:
        wanted = sorted(set(uris))
        if not wanted:
            return {}
        # A level-0 record's doc_id is its node URI (ingest/pipeline.py), so doc_ids selects exactly these records.
        sel = flt.model_copy(
            update={"doc_ids": wanted, "levels": [0], "uri_prefix": None, "parent_uris": None, "categories": None}
        )
        return {h.uri: h.score for h in self._search(len(wanted), sel, "lookup")}

    def matches(self, flt: VectorFilter, uris: Sequence[str]) -> dict[str, L0Match]:
        wanted = sorted(set(uris))
        if not wanted:
            return {}
        sel = flt.model_copy(
            update={"doc_ids": wanted, "levels": [0], "uri_prefix": None, "parent_uris": None, "categories": None}
        )
        return {h.uri: self._match(h) for h in self._search(len(wanted), sel, "lookup")}


def space_of(uri: str) -> str:
    """The owner space of a canonical URI, from its text alone: ``shared``, ``user:<s>`` or ``agent:<s>``."""
    body = uri[len("ctx://") :]
    scope, _, rest = body.partition("/")
    if scope == "resources":
        return "shared"
    return f"{scope}:{rest.split('/', 1)[0]}"


def parent_of(uri: str) -> str | None:
    """The ``parent_uri`` of a canonical node URI (``ctx://a/b/c`` and ``ctx://a/b/c/`` -> ``ctx://a/b/``), ``None``
    for a scope or space root (as the ingest pipeline writes it)."""
    parts = uri[len("ctx://") :].rstrip("/").split("/")
    if len(parts) == 1 or (len(parts) == 2 and parts[0] != "resources"):
        return None
    return uri[: uri.rstrip("/").rfind("/") + 1]
