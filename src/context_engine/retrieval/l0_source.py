"""Where level-0 similarities come from: the vector index, or an in-process matrix (DESIGN.md §3, §5, §12).

Every search_memory stage needs the same thing: the cosine similarity between one query vector and the level-0
(abstract) records of one account, under a tenancy pre-filter. Three questions are asked of it:

* ``top(flt, k)``: the best ``k`` records passing a filter (L0 recall);
* ``children(flt, parents, per_parent)``: the best children of some directories (hierarchical expansion);
* ``lookup(flt, uris)``: the similarity of named records (ancestors, for ``hierarchy_score``); ``matches`` gives
  them with their texts (records only BM25 found).

:class:`IndexL0Scorer` answers through the :class:`~context_engine.storage.protocols.VectorIndex` protocol (one
pre-filtered index search per question: ``parent_uris`` for children, ``doc_ids`` for lookups, since a level-0
record's ``doc_id`` is its URI). :class:`MemoryL0Scorer` answers from the level-0 matrix
(:class:`~context_engine.storage.vector.matrix.MatrixVectorIndex` with ``levels=(0,)``): one matrix-vector
product per owner-space segment the request needs, shared by every question (about 1-2 ms per 30k rows), which is
what keeps a search of a 100k-node store within its latency budget (``bench/search_memory.py``: a LanceDB search
costs 10-20 ms there, and a request asks several questions). :class:`L0Source` picks one per request according to
``RetrievalSettings.l0_source``.

Scores are cosine similarity in [-1, 1], higher is better, identical in meaning on both paths (the matrix holds the
same unit vectors the index holds). Neither path ever reads L1 or L2 text.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorHit
from context_engine.settings import RetrievalSettings
from context_engine.storage.protocols import MetadataStore, VectorIndex
from context_engine.storage.strings import best_by_score
from context_engine.storage.vector.matrix import MatrixVectorIndex, MatrixView, rescore_depth

__all__ = ["IndexL0Scorer", "L0Match", "L0Scorer", "L0Source", "MemoryL0Scorer", "space_of"]

_LOG = logging.getLogger(__name__)
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
    """Similarities of one query vector to one account's level-0 records. Every method applies ``flt`` in full
    (``flt.account_id`` must be the scorer's account); an empty list in a filter field matches nothing."""

    name: str

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


def _search_failed(err: Exception, where: str) -> ContextEngineError:
    return ContextEngineError(
        ErrorCode.VECTOR_SEARCH_FAILED,
        f"vector search failed ({where}): {type(err).__name__}",
        {"error": type(err).__name__},
        retryable=True,
    )


def _ordered(matches: list[L0Match]) -> list[L0Match]:
    return sorted(matches, key=lambda m: (-m.similarity, m.uri))


# ---------------------------------------------------------------------------------------------------- index path
class IndexL0Scorer:
    """:class:`L0Scorer` through the vector index: each question is one pre-filtered ``VectorIndex.search``.

    Raises (every method):
        ContextEngineError: ``RET-5001`` (retryable) when the index fails; an adapter error of another kind is
            translated here, at the boundary, so a caller only ever sees ``RET-5001`` for a failed search.
    """

    name = "index"

    def __init__(self, index: VectorIndex, query_vector: np.ndarray) -> None:
        self._index = index
        self._query = query_vector

    def _search(self, k: int, flt: VectorFilter, where: str) -> list[VectorHit]:
        try:
            return self._index.search(self._query, k, flt)
        except ContextEngineError as err:
            if err.code is ErrorCode.VECTOR_SEARCH_FAILED:
                raise
            raise _search_failed(err, where) from err
        except Exception as err:
            raise _search_failed(err, where) from err

    @staticmethod
    def _match(h: VectorHit) -> L0Match:
        return L0Match(h.uri, h.parent_uri, h.owner_space, h.context_type, h.category, h.text, h.score)

    def top(self, flt: VectorFilter, k: int) -> list[L0Match]:
        if k <= 0:
            return []
        return _ordered([self._match(h) for h in self._search(k, flt, "top")])

    def children(self, flt: VectorFilter, parent_uris: Sequence[str], per_parent: int) -> dict[str, list[L0Match]]:
        parents = sorted(set(parent_uris))
        if not parents or per_parent <= 0:
            return {}
        wanted = flt.model_copy(update={"parent_uris": parents})
        k = min(per_parent * len(parents), _MAX_CHILDREN_ROWS)
        out: dict[str, list[L0Match]] = {}
        for m in _ordered([self._match(h) for h in self._search(k, wanted, "children")]):
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


# ---------------------------------------------------------------------------------------------------- memory path
def space_of(uri: str) -> str:
    """The owner space of a canonical URI, from its text alone: ``shared``, ``user:<s>`` or ``agent:<s>``."""
    body = uri[len("ctx://") :]
    scope, _, rest = body.partition("/")
    if scope == "resources":
        return "shared"
    return f"{scope}:{rest.split('/', 1)[0]}"


class MemoryL0Scorer:
    """:class:`L0Scorer` over a :class:`~context_engine.storage.vector.matrix.MatrixView` of the level-0 matrix.

    Similarities are computed per owner-space segment, once per request and only for the segments a question
    needs (a user's memory query touches that user's segment, not the shared resources), then answered with the
    segment's filter mask (:meth:`RowTable.mask`, the one in-process filter compiler) and partial sorts.
    Thread-safe.
    """

    name = "memory"

    def __init__(self, view: MatrixView, query_vector: np.ndarray) -> None:
        self._view = view
        self._query = np.asarray(query_vector, dtype=np.float32)
        self._scores: dict[str, np.ndarray] = {}
        self._exact: dict[str, dict[int, float]] = {}  # compressed segments: rows rescored so far
        self._masks: dict[tuple, np.ndarray] = {}  # (space, filter key) -> mask: a request asks with few filters
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        """The account generation the view is at."""
        return self._view.generation

    def scores(self, space: str) -> np.ndarray:
        """Cosine similarity of the query to every row of one segment (below the view's row count)."""
        found = self._scores.get(space)
        if found is not None:
            return found
        with self._lock:
            found = self._scores.get(space)
            if found is None:
                seg, n = self._view.segments[space]
                if n == 0:
                    found = np.zeros(0, dtype=np.float32)
                elif self._query.shape != (seg.dim,):
                    raise ContextEngineError(
                        ErrorCode.VECTOR_SEARCH_FAILED,
                        f"query vector has shape {self._query.shape}, the level-0 matrix holds {seg.dim} dimensions",
                        {"expected_dim": seg.dim},
                    )
                else:
                    found = seg.scan(self._query, n)
                self._scores[space] = found
        return found

    def _similarity(self, space: str, rows: Sequence[int]) -> dict[int, float]:
        """Similarities of ``rows``: the matrix's scores, or for a compressed segment the scores of its float16
        vectors (:meth:`MatrixSegment.exact`; once per row and request)."""
        seg, _ = self._view.segments[space]
        scores = self.scores(space)
        if not seg.compressed:
            return {r: float(scores[r]) for r in rows}
        with self._lock:
            known = self._exact.setdefault(space, {})
            missing = [r for r in rows if r not in known]
        if missing:
            fresh = dict(
                zip(missing, seg.exact(np.asarray(missing, dtype=np.int64), self._query).tolist(), strict=True)
            )
            with self._lock:
                known.update(fresh)
        return {r: known[r] for r in rows}

    def _mask(self, space: str, flt: VectorFilter) -> np.ndarray:
        """The segment's filter mask (:meth:`RowTable.mask`), computed once per request and filter."""
        key = (space, _filter_key(flt))
        found = self._masks.get(key)
        if found is None:
            seg, n = self._view.segments[space]
            found = self._masks[key] = seg.mask(flt, n)
        return found

    def _spaces(self, flt: VectorFilter) -> list[str]:
        """Segments that can hold rows passing ``flt`` (owner space, level, prefix), sorted."""
        if flt.levels is not None and 0 not in flt.levels:
            return []
        spaces = self._view.spaces(flt)
        if flt.uri_prefix is not None:
            spaces = [s for s in spaces if s == space_of(flt.uri_prefix)]
        return spaces

    def _match(self, space: str, row: int, similarity: float) -> L0Match:
        seg, _ = self._view.segments[space]
        return L0Match(
            seg.uris[row],
            seg.value("parent_uri", row),
            space,
            seg.value("context_type", row),
            seg.value("category", row),
            seg.texts[row],
            similarity,
        )

    def _candidates(self, space: str, rows: np.ndarray, k: int) -> np.ndarray:
        """The rows :meth:`_best` scores fully for ``k`` wanted: the ``k`` best (a compressed segment: the
        :func:`rescore_depth` best by its approximate scores), with every row tied with the last."""
        seg, _ = self._view.segments[space]
        depth = rescore_depth(k) if seg.compressed else k
        if rows.size > depth:
            sub = self.scores(space)[rows]
            kth = sub[np.argpartition(-sub, depth - 1)[:depth]].min()
            rows = rows[sub >= kth]  # keep every row tied with the k-th: ties resolve by URI below
        return rows

    def _best(self, space: str, rows: np.ndarray, k: int) -> list[L0Match]:
        """The ``k`` best of ``rows`` by similarity descending, then URI ascending (a compressed segment: the
        :func:`rescore_depth` best by its approximate scores, rescored from its float16 vectors)."""
        seg, _ = self._view.segments[space]
        rows = self._candidates(space, rows, k)
        exact = self._similarity(space, rows.tolist())
        best = best_by_score(exact, seg.uris, k)  # similarity descending, then URI ascending
        return [self._match(space, r, exact[r]) for r in best]

    def top(self, flt: VectorFilter, k: int) -> list[L0Match]:
        if k <= 0:
            return []
        picked = [(space, rows) for space in self._spaces(flt) if (rows := np.flatnonzero(self._mask(space, flt))).size]
        layouts = {self._view.segments[space][0].compressed for space, _ in picked}
        if len(picked) > 1 and len(layouts) == 1:  # approximations are compared with approximations only
            # One candidate threshold across the segments (a caller whose scope spans many owner spaces, e.g. an
            # admin's): a row below the depth-th best score of all segments cannot be among the k best, so each
            # segment keeps only the rows at or above it, as if the segments were one (ties kept: >=).
            depth = rescore_depth(k) if layouts == {True} else k
            approx = [self.scores(space)[rows] for space, rows in picked]
            total = sum(a.size for a in approx)
            if total > depth:
                every = np.concatenate(approx)
                kth = every[np.argpartition(-every, depth - 1)[:depth]].min()
                picked = [(space, rows[a >= kth]) for (space, rows), a in zip(picked, approx, strict=True)]
        matches: list[L0Match] = []
        for space, rows in picked:
            if rows.size:
                matches.extend(self._best(space, rows, k))
        return _ordered(matches)[:k]

    def children(self, flt: VectorFilter, parent_uris: Sequence[str], per_parent: int) -> dict[str, list[L0Match]]:
        if per_parent <= 0:
            return {}
        plain = flt.model_copy(update={"parent_uris": None})
        allowed = set(self._spaces(plain.model_copy(update={"uri_prefix": None})))
        picked: list[tuple[str, str, np.ndarray]] = []
        for parent in sorted(set(parent_uris)):
            space = space_of(parent)
            if space not in allowed:
                continue
            seg, n = self._view.segments[space]
            mask = self._mask(space, plain)
            rows = np.asarray(seg.children.get(parent, ()), dtype=np.int64)
            rows = rows[rows < n]
            rows = rows[mask[rows]]
            if rows.size:
                picked.append((parent, space, rows))
        by_space: dict[str, list[np.ndarray]] = {}
        for _, space, rows in picked:
            if self._view.segments[space][0].compressed:
                by_space.setdefault(space, []).append(self._candidates(space, rows, per_parent))
        for space, parts in by_space.items():  # one exact read for every parent's candidates
            self._similarity(space, np.unique(np.concatenate(parts)).tolist())
        return {parent: self._best(space, rows, per_parent) for parent, space, rows in picked}

    def lookup(self, flt: VectorFilter, uris: Sequence[str]) -> dict[str, float]:
        return {uri: m.similarity for uri, m in self.matches(flt, uris).items()}

    def matches(self, flt: VectorFilter, uris: Sequence[str]) -> dict[str, L0Match]:
        """The level-0 records of ``uris`` that exist and pass ``flt`` (as :meth:`lookup`, with their texts)."""
        # A record is found among its parent's children (the URI names the parent), so a lookup reads the few
        # siblings, not the segment; the filter mask is the request's shared one.
        plain = flt.model_copy(update={"categories": None, "uri_prefix": None, "parent_uris": None, "doc_ids": None})
        allowed = set(self._spaces(plain))
        rows_of: dict[str, dict[int, str]] = {}
        for uri in sorted(set(uris)):
            space = space_of(uri)
            if space not in allowed:
                continue
            seg, n = self._view.segments[space]
            mask = self._mask(space, plain)
            siblings = [r for r in seg.children.get(_parent_of(uri), ()).tolist() if r < n and mask[r]]
            for r in seg.uris.find(siblings, uri):  # compares bytes, decodes no sibling
                rows_of.setdefault(space, {})[r] = uri
        out: dict[str, L0Match] = {}
        for space, rows in rows_of.items():
            for r, sim in self._similarity(space, list(rows)).items():
                out[rows[r]] = self._match(space, r, sim)
        return out


def _parent_of(uri: str) -> str | None:
    """The ``parent_uri`` of a canonical node URI (``ctx://a/b/c`` and ``ctx://a/b/c/`` -> ``ctx://a/b/``), ``None``
    for a scope or space root (as the ingest pipeline writes it)."""
    parts = uri[len("ctx://") :].rstrip("/").split("/")
    if len(parts) == 1 or (len(parts) == 2 and parts[0] != "resources"):
        return None
    return uri[: uri.rstrip("/").rfind("/") + 1]


def _filter_key(flt: VectorFilter) -> tuple:
    """A hashable key of a filter's fields (lists as tuples)."""
    return tuple(tuple(v) if isinstance(v, list) else v for v in (getattr(flt, f) for f in _FILTER_KEY_FIELDS))


_FILTER_KEY_FIELDS = tuple(VectorFilter.model_fields)


# ---------------------------------------------------------------------------------------------------- chooser
class L0Source:
    """Hands out one :class:`L0Scorer` per request, following ``RetrievalSettings.l0_source``.

    * ``index``: always :class:`IndexL0Scorer`.
    * ``memory``: :class:`MemoryL0Scorer` over the level-0 matrix, loading the account synchronously when needed;
      accounts over ``memory_max_rows`` use the index.
    * ``auto``: the memory scorer when the account is held, has a derived file, or is small enough to load now (at
      most ``memory_load_now_rows`` vector rows); otherwise the index scorer, and after ``memory_warm_after_searches``
      searches of the account the matrix is loaded on a background thread.

    A held account is brought to the committed account generation before each request (one primary-key read, then
    O(changes) from the change log when it moved: docs/derived_indexes.md), so every process sees every write.

    Args:
        index: the vector index.
        matrix: the level-0 matrix (``None`` disables the memory path).
        metadata: the metadata store (account generations, row counts).
        settings: the retrieval settings.
    """

    def __init__(
        self,
        index: VectorIndex,
        matrix: MatrixVectorIndex | None,
        metadata: MetadataStore,
        settings: RetrievalSettings,
    ) -> None:
        self.index = index
        self.matrix = matrix
        self._metadata = metadata
        self._settings = settings
        self._searches: dict[str, int] = {}
        self._lock = threading.Lock()
        self._loading: set[str] = set()
        self._executor: ThreadPoolExecutor | None = None

    def scorer(self, account_id: str, query_vector: np.ndarray, generation: int | None = None) -> L0Scorer:
        """A scorer for one request of ``account_id`` (``generation``: the committed account generation when the
        caller just read it).

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when mode ``memory`` cannot load the matrix.
        """
        mode = self._settings.l0_source
        matrix = self.matrix
        if mode == "index" or matrix is None:
            return IndexL0Scorer(self.index, query_vector)
        try:
            if generation is None:
                generation = self._metadata.account_generation(account_id)
            if mode == "memory" or matrix.held(account_id) or self._small(account_id):
                view = matrix.view(account_id, generation)
                if view is not None:
                    return MemoryL0Scorer(view, query_vector)
                return IndexL0Scorer(self.index, query_vector)
        except Exception as err:  # broad on purpose: translated (memory) or answered by the index (auto)
            if mode == "memory":
                raise _search_failed(err, "level-0 matrix") from err
            return IndexL0Scorer(self.index, query_vector)
        if not matrix.too_large(account_id):
            with self._lock:
                seen = self._searches[account_id] = self._searches.get(account_id, 0) + 1
            if seen > self._settings.memory_warm_after_searches:
                self._load_in_background(account_id)
        return IndexL0Scorer(self.index, query_vector)

    def _small(self, account_id: str) -> bool:
        assert self.matrix is not None
        if self.matrix.has_file(account_id):
            return True  # opened from its derived file (docs/derived_indexes.md), not read from the store
        limit = self._settings.memory_load_now_rows
        return limit > 0 and self._metadata.count_vectors(account_id) <= limit

    def _load_in_background(self, account_id: str) -> None:
        """Load the account's matrix on a background thread unless one is already loading it."""
        matrix = self.matrix
        assert matrix is not None
        with self._lock:
            if account_id in self._loading:
                return
            self._loading.add(account_id)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ce-l0-matrix")
            executor = self._executor

        def run() -> None:
            try:
                matrix.view(account_id)
            except ContextEngineError as err:  # the index keeps serving; the next search retries the load
                _LOG.warning("level-0 matrix load failed for one account: %s", err.message)
            finally:
                with self._lock:
                    self._loading.discard(account_id)

        executor.submit(run)

    def close(self) -> None:
        """Stop the background loader (waits for a running load)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
