"""Exact (brute-force) cosine search over the vectors kept in the metadata store (DESIGN.md §3, §7.2).

The reference implementation that the other vector indexes are tested against, and the ``auto`` fallback path.
Each account's rows are loaded once into a float32 matrix and reused until the store's vector generation changes;
a query is one matrix-vector product, a boolean pre-filter mask and a partial sort.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorHit, VectorRecord
from context_engine.storage.protocols import MetadataStore

_STRING_COLUMNS = ("uri", "parent_uri", "owner_space", "context_type", "category", "doc_id", "text", "breadcrumb")


def _object_array(values: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


@dataclass(frozen=True, slots=True, eq=False)
class VectorMatrix:
    """One account's vector rows as columns, rows sorted by ``id`` ascending (code-point order).

    Attributes:
        generation: the store's vector generation the rows are at least as new as.
        ids: row ids, ascending; row ``i`` of every column belongs to ``ids[i]``.
        vectors: shape ``(n, dim)``, float32, unit-norm rows (``(0, 0)`` when empty).
        uri, parent_uri, owner_space, context_type, category, doc_id, text, breadcrumb: object arrays of shape
            ``(n,)`` holding ``str`` (``parent_uri`` may hold ``None``).
        level, chunk_index: int64 arrays of shape ``(n,)``.
    """

    generation: int
    ids: list[str]
    vectors: np.ndarray
    uri: np.ndarray
    parent_uri: np.ndarray
    owner_space: np.ndarray
    context_type: np.ndarray
    category: np.ndarray
    level: np.ndarray
    doc_id: np.ndarray
    chunk_index: np.ndarray
    text: np.ndarray
    breadcrumb: np.ndarray

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @classmethod
    def empty(cls, generation: int) -> VectorMatrix:
        """A matrix with no rows."""
        columns: dict[str, list[Any]] = {c: [] for c in (*_STRING_COLUMNS, "level", "chunk_index")}
        return cls.from_columns(generation, ids=[], matrix=np.zeros((0, 0), dtype=np.float32), **columns)

    @classmethod
    def from_columns(
        cls, generation: int, *, ids: Sequence[str], matrix: np.ndarray, **columns: Sequence[Any]
    ) -> VectorMatrix:
        """Build from parallel columns in any row order; rows are sorted by id here.

        Args:
            generation: the store's vector generation read before the rows.
            ids: shape ``(n,)``, unique.
            matrix: shape ``(n, dim)``; converted to float32.
            **columns: every other field (see the class attributes), each of length ``n``.
        """
        id_list = list(ids)
        order: np.ndarray | None = None
        if any(a > b for a, b in zip(id_list, id_list[1:], strict=False)):
            order = np.array(sorted(range(len(id_list)), key=id_list.__getitem__), dtype=np.int64)
            id_list = [id_list[i] for i in order]
        vectors = np.asarray(matrix, dtype=np.float32)
        fields: dict[str, np.ndarray] = {}
        for name in _STRING_COLUMNS:
            fields[name] = _object_array(columns[name])
        for name in ("level", "chunk_index"):
            fields[name] = np.asarray(columns[name], dtype=np.int64).reshape(-1)
        if order is not None:
            vectors = vectors[order]
            fields = {k: v[order] for k, v in fields.items()}
        return cls(generation=generation, ids=id_list, vectors=vectors, **fields)

    @classmethod
    def from_records(cls, generation: int, records: Sequence[VectorRecord]) -> VectorMatrix:
        """Build from vector records (the path for stores without a bulk loader)."""
        if not records:
            return cls.empty(generation)
        columns = {name: [getattr(r, name) for r in records] for name in (*_STRING_COLUMNS, "level", "chunk_index")}
        matrix = np.stack([np.asarray(r.vector, dtype=np.float32).reshape(-1) for r in records])
        return cls.from_columns(generation, ids=[r.id for r in records], matrix=matrix, **columns)


@runtime_checkable
class VectorMatrixSource(Protocol):
    """A metadata store with a bulk loader (``SqlMetadataStore``); others are read through ``iter_vectors``."""

    def load_vector_matrix(self, account_id: str) -> VectorMatrix: ...

    def count_vectors(self, account_id: str | None = None) -> int: ...


class _AccountIndex:
    """Search structures for one account's :class:`VectorMatrix`; filter columns are dictionary-encoded lazily."""

    def __init__(self, matrix: VectorMatrix) -> None:
        self.matrix = matrix
        self._codes: dict[str, tuple[dict[Any, int], np.ndarray]] = {}
        self._uri_sorted: tuple[list[str], np.ndarray] | None = None

    def _encoded(self, column: str) -> tuple[dict[Any, int], np.ndarray]:
        found = self._codes.get(column)
        if found is None:
            mapping: dict[Any, int] = {}
            values = getattr(self.matrix, column)
            codes = np.fromiter((mapping.setdefault(v, len(mapping)) for v in values), np.int64, len(values))
            self._codes[column] = found = (mapping, codes)
        return found

    def _in(self, column: str, wanted: Sequence[Any]) -> np.ndarray:
        mapping, codes = self._encoded(column)
        lut = np.zeros(len(mapping) + 1, dtype=bool)
        for value in wanted:
            code = mapping.get(value)
            if code is not None:
                lut[code] = True
        return lut[codes]

    def _prefix(self, prefix: str) -> np.ndarray:
        """Rows whose ``uri`` starts with ``prefix``: a contiguous range of the URIs in sorted order."""
        if self._uri_sorted is None:
            order = np.array(sorted(range(self.matrix.n), key=self.matrix.uri.__getitem__), dtype=np.int64)
            self._uri_sorted = ([self.matrix.uri[i] for i in order], order)
        uris, order = self._uri_sorted
        width = len(prefix)
        lo = bisect_left(uris, prefix, key=lambda u: u[:width])
        hi = bisect_right(uris, prefix, key=lambda u: u[:width])
        mask = np.zeros(self.matrix.n, dtype=bool)
        mask[order[lo:hi]] = True
        return mask

    def mask(self, flt: VectorFilter) -> np.ndarray | None:
        """Boolean mask of shape ``(n,)`` of rows passing ``flt`` (``None`` when nothing is restricted)."""
        mask: np.ndarray | None = None
        parts: list[tuple[str, list[Any] | None]] = [
            ("owner_space", flt.owner_spaces),
            ("context_type", flt.context_types),
            ("category", flt.categories),
            ("parent_uri", flt.parent_uris),
            ("doc_id", flt.doc_ids),
        ]
        for column, wanted in parts:
            if wanted is not None:
                part = self._in(column, wanted)
                mask = part if mask is None else mask & part
        if flt.levels is not None:
            part = np.isin(self.matrix.level, np.asarray(flt.levels, dtype=np.int64))
            mask = part if mask is None else mask & part
        if flt.uri_prefix is not None:
            part = self._prefix(flt.uri_prefix)
            mask = part if mask is None else mask & part
        return mask

    def search(self, query: np.ndarray, top_k: int, flt: VectorFilter) -> list[VectorHit]:
        m = self.matrix
        if m.n == 0:
            return []
        if query.shape != (m.dim,):
            raise ContextEngineError(
                ErrorCode.INDEX_MODEL_MISMATCH,
                f"query vector has shape {tuple(query.shape)} but the index holds vectors of dimension {m.dim}",
                {"query_dim": int(query.size), "index_dim": m.dim},
            )
        mask = self.mask(flt)
        rows = np.arange(m.n) if mask is None else np.flatnonzero(mask)
        if rows.size == 0:
            return []
        scores = (m.vectors @ query)[rows]  # always the full product: a row's score never depends on the filter
        k = min(top_k, rows.size)
        if k < rows.size:
            kth = scores[np.argpartition(-scores, k - 1)[:k]].min()
            keep = np.flatnonzero(scores >= kth)  # every row tied with the k-th, so ties resolve by id below
            rows, scores = rows[keep], scores[keep]
        order = np.lexsort((rows, -scores))[:k]  # score descending, then row (= id) ascending
        return [self._hit(int(rows[i]), float(scores[i])) for i in order]

    def _hit(self, row: int, score: float) -> VectorHit:
        m = self.matrix
        return VectorHit(
            id=m.ids[row],
            score=min(1.0, max(-1.0, score)),
            uri=m.uri[row],
            parent_uri=m.parent_uri[row],
            owner_space=m.owner_space[row],
            context_type=m.context_type[row],
            category=m.category[row],
            level=int(m.level[row]),
            doc_id=m.doc_id[row],
            chunk_index=int(m.chunk_index[row]),
            text=m.text[row],
            breadcrumb=m.breadcrumb[row],
        )


class ExactVectorIndex:
    """:class:`~context_engine.storage.protocols.VectorIndex` by brute force over the metadata store's vectors.

    Writes go to the metadata store (``put_vectors`` / ``delete_vectors``); searches use a per-account matrix cached
    in memory and rebuilt when :meth:`MetadataStore.vector_generation` changes, so they see every committed write,
    also other processes'. Thread-safe.

    Args:
        metadata: the metadata store holding the vectors.
        max_cached_accounts: how many accounts' matrices stay in memory (least recently used are dropped).
    """

    name = "exact"

    def __init__(self, metadata: MetadataStore, *, max_cached_accounts: int = 8) -> None:
        if max_cached_accounts < 1:
            raise ValueError("max_cached_accounts must be at least 1")
        self._metadata = metadata
        self._max_cached = max_cached_accounts
        self._cache: OrderedDict[str, _AccountIndex] = OrderedDict()
        self._lock = threading.Lock()  # guards _cache
        self._build_lock = threading.Lock()  # one matrix load at a time

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by ``id`` (in the metadata store; joins its open transaction)."""
        self._metadata.put_vectors(records)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records by ``id``; unknown ids are ignored."""
        self._metadata.delete_vectors(ids)

    def search(self, vector: np.ndarray, top_k: int, flt: VectorFilter) -> list[VectorHit]:
        """The ``top_k`` committed records of ``flt.account_id`` passing ``flt``, nearest to ``vector``.

        Args:
            vector: the query, shape ``(dim,)``, L2-normalised (not re-normalised here).
            top_k: the number of hits wanted; ``<= 0`` returns none.
            flt: the pre-filter; ``None`` fields do not restrict, empty lists match nothing, ``uri_prefix`` is a
                plain string prefix of ``uri``.

        Returns:
            Hits ordered by score descending, ties by ``id`` ascending. Score: cosine similarity (the dot product of
            unit vectors, float32), clipped to [-1, 1].

        Raises:
            ContextEngineError: ``IDX-4091`` when ``vector`` does not have the index's dimension;
                ``RET-5001`` (retryable) when loading or scoring fails.
        """
        query = np.asarray(vector, dtype=np.float32)
        if query.ndim != 1 or not np.isfinite(query).all():
            raise ContextEngineError(
                ErrorCode.VECTOR_SEARCH_FAILED, "the query vector must be a finite 1-D array", retryable=False
            )
        if top_k <= 0:
            return []
        try:
            return self._account(flt.account_id).search(query, top_k, flt)
        except ContextEngineError as err:
            if err.code is ErrorCode.INDEX_MODEL_MISMATCH:
                raise
            raise _search_failed(err) from err
        except (MemoryError, ValueError, TypeError, IndexError) as err:
            raise _search_failed(err) from err

    def count(self) -> int:
        """Number of vector rows over all accounts."""
        if isinstance(self._metadata, VectorMatrixSource):
            return self._metadata.count_vectors()
        return sum(len(batch) for batch in self._metadata.iter_vectors())

    def optimize(self) -> None:
        """Nothing to compact or train; drops cached matrices (they are rebuilt on the next search)."""
        with self._lock:
            self._cache.clear()

    # ---- cache ----------------------------------------------------------------------------------------------------
    def _account(self, account_id: str) -> _AccountIndex:
        generation = self._metadata.vector_generation()
        cached = self._cached(account_id, generation)
        if cached is not None:
            return cached
        with self._build_lock:
            cached = self._cached(account_id, generation)  # another thread may have just built it
            if cached is not None:
                return cached
            index = _AccountIndex(self._load(account_id))
        with self._lock:
            self._cache[account_id] = index
            self._cache.move_to_end(account_id)
            while len(self._cache) > self._max_cached:
                self._cache.popitem(last=False)
        return index

    def _cached(self, account_id: str, generation: int) -> _AccountIndex | None:
        with self._lock:
            found = self._cache.get(account_id)
            if found is None or found.matrix.generation != generation:
                return None
            self._cache.move_to_end(account_id)
            return found

    def _load(self, account_id: str) -> VectorMatrix:
        if isinstance(self._metadata, VectorMatrixSource):
            return self._metadata.load_vector_matrix(account_id)
        generation = self._metadata.vector_generation()
        records = [r for batch in self._metadata.iter_vectors(account_id) for r in batch]
        return VectorMatrix.from_records(generation, records)


def _search_failed(err: Exception) -> ContextEngineError:
    return ContextEngineError(
        ErrorCode.VECTOR_SEARCH_FAILED,
        f"exact vector search failed: {getattr(err, 'message', None) or f'{type(err).__name__}: {err}'[:200]}",
        {"error": type(err).__name__},
        retryable=True,
    )
