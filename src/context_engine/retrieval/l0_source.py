"""Where level-0 similarities come from: the vector index, or an in-process matrix (DESIGN.md §3, §5, §12).

Every search_memory stage needs the same thing: the cosine similarity between one query vector and the level-0
(abstract) records of one account, under a tenancy pre-filter. Three questions are asked of it:

* ``top(flt, k)``: the best ``k`` records passing a filter (L0 recall);
* ``children(flt, parents, per_parent)``: the best children of some directories (hierarchical expansion);
* ``lookup(flt, uris)``: the similarity of named records (ancestors, for ``hierarchy_score``).

:class:`IndexL0Scorer` answers through the :class:`~context_engine.storage.protocols.VectorIndex` protocol (one
pre-filtered index search per question: ``parent_uris`` for children, ``doc_ids`` for lookups, since a level-0
record's ``doc_id`` is its URI). :class:`MemoryL0Scorer` answers from :class:`L0MemoryCache`: one matrix-vector
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
from context_engine.schema.nodes import NodeRecord, VectorFilter, VectorHit, VectorRecord
from context_engine.settings import RetrievalSettings
from context_engine.storage.protocols import MetadataStore, VectorIndex

__all__ = ["IndexL0Scorer", "L0Match", "L0MemoryCache", "L0Scorer", "L0Source", "MemoryL0Scorer"]

_LOG = logging.getLogger(__name__)
# Index rows fetched per children() call at most (parent_uris queries with many parents).
_MAX_CHILDREN_ROWS = 2_000
# Generation steps one write of this process may make before the cache applies it (see _mark_current).
_OWN_WRITE_STEPS = 4


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


# ---------------------------------------------------------------------------------------------------- memory path
class _Codes:
    """Dictionary encoding of one string column (context_type or category). Append-only."""

    def __init__(self) -> None:
        self.code_of: dict[str, int] = {}
        self.values: list[str] = []

    def code(self, value: str) -> int:
        found = self.code_of.get(value)
        if found is None:
            found = len(self.values)
            self.values.append(value)
            self.code_of[value] = found
        return found

    def lut(self, wanted: Sequence[str]) -> np.ndarray:
        table = np.zeros(len(self.values) + 1, dtype=bool)
        for value in wanted:
            code = self.code_of.get(value)
            if code is not None:
                table[code] = True
        return table

    def has_any(self, wanted: Sequence[str]) -> bool:
        return any(v in self.code_of for v in wanted)


def space_of(uri: str) -> str:
    """The owner space of a canonical URI, from its text alone: ``shared``, ``user:<s>`` or ``agent:<s>``."""
    body = uri[len("ctx://") :]
    scope, _, rest = body.partition("/")
    if scope == "resources":
        return "shared"
    return f"{scope}:{rest.split('/', 1)[0]}"


class _Segment:
    """The level-0 rows of one owner space of one account: unit vectors plus filter columns, append-only.

    Rows are appended; a replaced or deleted record's row is marked dead (``alive[row] = False``). Readers take
    ``n`` under the cache lock and only look at rows below it, so a concurrent append is never seen half-written.
    Compaction builds a new segment and swaps it in.
    """

    def __init__(self, dim: int, capacity: int = 256) -> None:
        self.dim = dim
        self.vectors = np.zeros((capacity, dim), dtype=np.float32)
        self.alive = np.zeros(capacity, dtype=bool)
        self.ctype = np.zeros(capacity, dtype=np.int32)
        self.category = np.zeros(capacity, dtype=np.int32)
        self.n = 0
        self.dead = 0
        self.uris: list[str] = []
        self.parents: list[str | None] = []
        self.texts: list[str] = []
        self.row_of: dict[str, int] = {}
        self.children: dict[str, list[int]] = {}
        self.codes = {"ctype": _Codes(), "category": _Codes()}

    @property
    def live(self) -> int:
        return self.n - self.dead

    def _grow(self, need: int) -> None:
        capacity = len(self.alive)
        if need <= capacity:
            return
        new_cap = max(need, capacity * 2)
        for name in ("vectors", "alive", "ctype", "category"):
            old = getattr(self, name)
            new = np.zeros((new_cap, *old.shape[1:]), dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def append(
        self,
        vectors: np.ndarray,
        uris: Sequence[str],
        parents: Sequence[str | None],
        ctypes: Sequence[str],
        categories: Sequence[str],
        texts: Sequence[str],
    ) -> None:
        """Add rows (a URI already present is replaced: its old row dies). Caller holds the cache lock."""
        count = len(uris)
        if count == 0:
            return
        for uri in uris:
            self.remove(uri)
        start, end = self.n, self.n + count
        self._grow(end)
        self.vectors[start:end] = vectors
        self.ctype[start:end] = [self.codes["ctype"].code(t) for t in ctypes]
        self.category[start:end] = [self.codes["category"].code(c) for c in categories]
        self.uris.extend(uris)
        self.parents.extend(parents)
        self.texts.extend(texts)
        for offset, (uri, parent) in enumerate(zip(uris, parents, strict=True)):
            self.row_of[uri] = start + offset
            if parent is not None:
                self.children.setdefault(parent, []).append(start + offset)
        self.alive[start:end] = True
        self.n = end  # published last: readers see the new rows only once they are complete

    def remove(self, uri: str) -> None:
        row = self.row_of.pop(uri, None)
        if row is not None and self.alive[row]:
            self.alive[row] = False
            self.dead += 1

    def compacted(self) -> _Segment:
        rows = np.flatnonzero(self.alive[: self.n])
        out = _Segment(self.dim, capacity=max(256, len(rows)))
        ctype, category = self.codes["ctype"].values, self.codes["category"].values
        out.append(
            self.vectors[rows],
            [self.uris[r] for r in rows],
            [self.parents[r] for r in rows],
            [ctype[int(self.ctype[r])] for r in rows],
            [category[int(self.category[r])] for r in rows],
            [self.texts[r] for r in rows],
        )
        return out


class _Account:
    """One account's segments, keyed by owner space, and the store generation they reflect."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.segments: dict[str, _Segment] = {}

    @property
    def rows(self) -> int:
        return sum(seg.live for seg in self.segments.values())

    def segment(self, space: str, dim: int) -> _Segment:
        found = self.segments.get(space)
        if found is None:
            found = self.segments[space] = _Segment(dim)
        return found


class _Snapshot:
    """A consistent read view of one account: each segment with its row count at the time of the snapshot."""

    __slots__ = ("segments",)

    def __init__(self, account: _Account) -> None:
        self.segments = {space: (seg, seg.n) for space, seg in account.segments.items()}


class MemoryL0Scorer:
    """:class:`L0Scorer` over an in-memory snapshot.

    Similarities are computed per owner-space segment, once per request and only for the segments a question
    needs (a user's memory query touches that user's segment, not the shared resources), then answered with boolean
    masks and partial sorts. Thread-safe.
    """

    name = "memory"

    def __init__(self, snapshot: _Snapshot, query_vector: np.ndarray) -> None:
        self._s = snapshot
        self._query = np.asarray(query_vector, dtype=np.float32)
        self._scores: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def scores(self, space: str) -> np.ndarray:
        """Cosine similarity of the query to every row of one segment (below the snapshot's row count)."""
        found = self._scores.get(space)
        if found is not None:
            return found
        with self._lock:
            found = self._scores.get(space)
            if found is None:
                seg, n = self._s.segments[space]
                if n == 0:
                    found = np.zeros(0, dtype=np.float32)
                elif self._query.shape != (seg.dim,):
                    raise ContextEngineError(
                        ErrorCode.VECTOR_SEARCH_FAILED,
                        f"query vector has shape {self._query.shape}, the level-0 matrix holds {seg.dim} dimensions",
                        {"expected_dim": seg.dim},
                    )
                else:
                    # einsum runs in this thread; a BLAS matrix-vector product would wake OpenBLAS's thread pool,
                    # which contends with torch's on a small machine (measured: same median, 2x better p95).
                    found = np.clip(np.einsum("ij,j->i", seg.vectors[:n], self._query), -1.0, 1.0)
                self._scores[space] = found
        return found

    def _spaces(self, flt: VectorFilter) -> list[str]:
        """Segments that can hold rows passing ``flt`` (owner space, context type, level, prefix), sorted."""
        if flt.levels is not None and 0 not in flt.levels:
            return []
        spaces = (
            self._s.segments.keys() if flt.owner_spaces is None else set(flt.owner_spaces) & self._s.segments.keys()
        )
        if flt.uri_prefix is not None:
            spaces = {space_of(flt.uri_prefix)} & set(spaces)
        out = []
        for space in sorted(spaces):
            seg, n = self._s.segments[space]
            if n and (flt.context_types is None or seg.codes["ctype"].has_any(flt.context_types)):
                out.append(space)
        return out

    def _mask(self, space: str, flt: VectorFilter) -> np.ndarray | None:
        """Rows of one segment passing the column restrictions of ``flt`` (``None``: none can)."""
        seg, n = self._s.segments[space]
        mask = seg.alive[:n].copy()
        for column, wanted in (("ctype", flt.context_types), ("category", flt.categories)):
            if wanted is None:
                continue
            if not wanted:
                return None
            mask &= seg.codes[column].lut(wanted)[getattr(seg, column)[:n]]
        return mask

    def _match(self, space: str, row: int) -> L0Match:
        seg, _ = self._s.segments[space]
        return L0Match(
            seg.uris[row],
            seg.parents[row],
            space,
            seg.codes["ctype"].values[int(seg.ctype[row])],
            seg.codes["category"].values[int(seg.category[row])],
            seg.texts[row],
            float(self.scores(space)[row]),
        )

    def top(self, flt: VectorFilter, k: int) -> list[L0Match]:
        if k <= 0 or flt.parent_uris == [] or flt.doc_ids == []:
            return []
        matches: list[L0Match] = []
        for space in self._spaces(flt):
            mask = self._mask(space, flt)
            if mask is not None:
                matches.extend(self._top_in(space, mask, flt, k))
        return _ordered(matches)[:k]

    def _top_in(self, space: str, mask: np.ndarray, flt: VectorFilter, k: int) -> list[L0Match]:
        seg, n = self._s.segments[space]
        if flt.parent_uris is not None or flt.doc_ids is not None:
            allowed: set[int] = set()
            for p in flt.parent_uris or ():
                allowed.update(seg.children.get(p, ()))
            if flt.doc_ids is not None:
                doc_rows = {seg.row_of[u] for u in flt.doc_ids if u in seg.row_of}
                allowed = doc_rows if flt.parent_uris is None else allowed & doc_rows
            rows = np.array(sorted(r for r in allowed if r < n and mask[r]), dtype=np.int64)
        else:
            rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        scores = self.scores(space)[rows]
        picked: list[int] = []
        if flt.uri_prefix is None:
            idx = np.argpartition(-scores, k - 1)[:k] if k < rows.size else np.arange(rows.size)
            picked = [int(rows[i]) for i in idx]
        else:
            # Walk the candidates best-first in growing windows until k of them lie under the prefix.
            window, start = max(4 * k, 256), 0
            while len(picked) < k and start < rows.size:
                if window < rows.size:
                    idx = np.argpartition(-scores, window - 1)[:window]
                    idx = idx[np.lexsort((rows[idx], -scores[idx]))]
                else:
                    idx = np.lexsort((rows, -scores))
                for i in idx[start:]:
                    row = int(rows[i])
                    if seg.uris[row].startswith(flt.uri_prefix):
                        picked.append(row)
                        if len(picked) == k:
                            break
                start, window = len(idx), window * 8
        return [self._match(space, r) for r in picked]

    def children(self, flt: VectorFilter, parent_uris: Sequence[str], per_parent: int) -> dict[str, list[L0Match]]:
        if per_parent <= 0:
            return {}
        allowed = set(self._spaces(flt.model_copy(update={"uri_prefix": None})))
        masks: dict[str, np.ndarray | None] = {}
        out: dict[str, list[L0Match]] = {}
        for parent in sorted(set(parent_uris)):
            space = space_of(parent)
            if space not in allowed:
                continue
            if space not in masks:
                masks[space] = self._mask(space, flt)
            mask = masks[space]
            if mask is None:
                continue
            seg, n = self._s.segments[space]
            rows = [r for r in seg.children.get(parent, ()) if r < n and mask[r]]
            if flt.uri_prefix is not None:
                rows = [r for r in rows if seg.uris[r].startswith(flt.uri_prefix)]
            if not rows:
                continue
            arr = np.asarray(rows, dtype=np.int64)
            scores = self.scores(space)
            best = arr[np.argsort(-scores[arr], kind="stable")][: per_parent + 2]  # +2: URI order on ties
            chosen = sorted(best.tolist(), key=lambda r: (-float(scores[r]), seg.uris[r]))[:per_parent]
            out[parent] = [self._match(space, r) for r in chosen]
        return out

    def lookup(self, flt: VectorFilter, uris: Sequence[str]) -> dict[str, float]:
        plain = flt.model_copy(update={"categories": None, "uri_prefix": None, "parent_uris": None, "doc_ids": None})
        allowed = set(self._spaces(plain))
        masks: dict[str, np.ndarray | None] = {}
        out: dict[str, float] = {}
        for uri in uris:
            space = space_of(uri)
            if space not in allowed:
                continue
            if space not in masks:
                masks[space] = self._mask(space, plain)
            seg, n = self._s.segments[space]
            row = seg.row_of.get(uri)
            mask = masks[space]
            if row is not None and row < n and mask is not None and mask[row]:
                out[uri] = float(self.scores(space)[row])
        return out


class L0MemoryCache:
    """Per-account in-memory matrices of level-0 vectors, one segment per owner space, loaded from the metadata
    store (the source of truth).

    Current when the account's generation equals the store's ``vector_generation()``. Writes made through this
    process's write pipeline are applied in place (it is registered as a ``WriteListener``), so a write does not
    force a reload; a write by another process changes the generation and the account is reloaded. Accounts with more
    than ``memory_max_rows`` level-0 rows are never loaded.

    Staleness can never expose a deleted or foreign node: every hit is hydrated from the metadata store and dropped
    when missing, pending or invisible (``L0Retriever``, ``HierarchicalSearcher``).

    Args:
        metadata: the metadata store holding the vectors.
        settings: the retrieval settings (``memory_max_rows``).
    """

    def __init__(self, metadata: MetadataStore, settings: RetrievalSettings) -> None:
        self._metadata = metadata
        self._settings = settings
        self._lock = threading.Lock()
        self._accounts: dict[str, _Account] = {}
        self._too_large: dict[str, int] = {}  # account -> generation at which it was found too large
        self._load_locks: dict[str, threading.Lock] = {}
        self._loading: set[str] = set()
        self._executor: ThreadPoolExecutor | None = None
        self.loads = 0  # how many times an account matrix was (re)loaded; for tests and the benchmark

    # ---- reads --------------------------------------------------------------------------------------------------
    def snapshot(self, account_id: str, generation: int) -> _Snapshot | None:
        """The account's current view, or ``None`` when it is not loaded or not current."""
        with self._lock:
            account = self._accounts.get(account_id)
            if account is None or account.generation != generation:
                return None
            return _Snapshot(account)

    def too_large(self, account_id: str, generation: int) -> bool:
        with self._lock:
            return self._too_large.get(account_id) == generation

    def load(self, account_id: str) -> _Snapshot | None:
        """Load (or reload) the account now; ``None`` when it has too many rows.

        Raises:
            ContextEngineError: whatever the metadata store raises (``WRT-5001``, ``IDX-4091``).
        """
        with self._lock:
            lock = self._load_locks.setdefault(account_id, threading.Lock())
        with lock:
            generation = self._metadata.vector_generation()
            current = self.snapshot(account_id, generation)
            if current is not None:
                return current
            account = self._read(account_id, generation)
            with self._lock:
                self.loads += 1
                if account is None:
                    self._too_large[account_id] = generation
                    self._accounts.pop(account_id, None)
                    return None
                self._too_large.pop(account_id, None)
                self._accounts[account_id] = account
                return _Snapshot(account)

    def load_in_background(self, account_id: str) -> None:
        """Start :meth:`load` on a background thread unless one is already running for the account."""
        with self._lock:
            if account_id in self._loading:
                return
            self._loading.add(account_id)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ce-l0-cache")
            executor = self._executor

        def run() -> None:
            try:
                self.load(account_id)
            except ContextEngineError as err:  # the index keeps serving; the next search retries the load
                _LOG.warning("level-0 cache load failed for one account: %s", err.message)
            finally:
                with self._lock:
                    self._loading.discard(account_id)

        executor.submit(run)

    def close(self) -> None:
        """Stop the background loader (waits for a running load) and drop every matrix."""
        with self._lock:
            executor, self._executor = self._executor, None
            self._accounts.clear()
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def _read(self, account_id: str, generation: int) -> _Account | None:
        limit = self._settings.memory_max_rows
        counter = getattr(self._metadata, "count_vectors", None)
        if callable(counter) and counter(account_id) > 4 * max(limit, 1):
            return None  # far too large: do not even read it
        loader = getattr(self._metadata, "load_vector_matrix", None)
        if callable(loader):
            vm = loader(account_id)  # rows and generation read in one transaction
            rows = np.flatnonzero(np.asarray(vm.level) == 0) if vm.n else np.zeros(0, dtype=np.int64)
            if len(rows) > limit:
                return None
            account = _Account(vm.generation)
            by_space: dict[str, list[int]] = {}
            for r in rows.tolist():
                by_space.setdefault(vm.owner_space[r], []).append(r)
            for space, idx in by_space.items():
                seg = account.segment(space, vm.dim)
                seg._grow(len(idx))
                seg.append(
                    vm.vectors[idx],
                    [vm.uri[r] for r in idx],
                    [vm.parent_uri[r] for r in idx],
                    [vm.context_type[r] for r in idx],
                    [vm.category[r] for r in idx],
                    [vm.text[r] for r in idx],
                )
            return account
        records = [r for batch in self._metadata.iter_vectors(account_id) for r in batch if r.level == 0]
        if len(records) > limit:
            return None
        account = _Account(generation)
        _append_records(account, records)
        return account

    # ---- WriteListener ------------------------------------------------------------------------------------------
    def nodes_written(self, account_id: str, nodes: Sequence[NodeRecord], vectors: Sequence[VectorRecord]) -> None:
        """Apply written level-0 vectors to a loaded account (``WriteListener``); never raises for ordinary input."""
        level0 = [v for v in vectors if v.level == 0]
        with self._lock:
            account = self._accounts.get(account_id)
            if account is not None:
                try:
                    for node in nodes:
                        seg = account.segments.get(space_of(node.uri))
                        if seg is not None:
                            seg.remove(node.uri)
                    _append_records(account, level0)
                    self._maybe_compact(account)
                except (ValueError, TypeError) as err:  # malformed vector: forget the account, it reloads when used
                    _LOG.warning("level-0 cache update failed, dropping the account's matrix: %s", err)
                    self._accounts.pop(account_id, None)
        self._mark_current()  # also when this account is not loaded: the others stay current

    def nodes_deleted(self, account_id: str, uris: Sequence[str]) -> None:
        """Forget deleted nodes of a loaded account (``WriteListener``)."""
        with self._lock:
            account = self._accounts.get(account_id)
            if account is not None:
                for uri in uris:
                    seg = account.segments.get(space_of(uri))
                    if seg is not None:
                        seg.remove(uri)
                self._maybe_compact(account)
        self._mark_current()

    def _mark_current(self) -> None:
        """After an in-process write, advance accounts to the store's generation.

        The write's own commit moved the counter by a few steps (``delete_vectors`` and ``put_vectors`` each bump it
        once). An account whose generation is within ``_OWN_WRITE_STEPS`` of the new value is taken to be current; a
        larger gap means another process wrote as well, so the account stays stale and is reloaded when next used.
        """
        with self._lock:
            if not self._accounts:
                return
        generation = self._metadata.vector_generation()
        with self._lock:
            for account in self._accounts.values():
                if 0 <= generation - account.generation <= _OWN_WRITE_STEPS:
                    account.generation = generation

    @staticmethod
    def _maybe_compact(account: _Account) -> None:
        for space, seg in list(account.segments.items()):
            if seg.dead > 256 and seg.dead * 3 > seg.n:
                account.segments[space] = seg.compacted()


def _append_records(account: _Account, records: Sequence[VectorRecord]) -> None:
    by_space: dict[str, list[VectorRecord]] = {}
    for r in records:
        by_space.setdefault(r.owner_space, []).append(r)
    for space, group in by_space.items():
        dim = int(np.asarray(group[0].vector).size)
        seg = account.segment(space, dim)
        if seg.dim != dim:
            raise ValueError(f"level-0 vectors of {dim} dimensions do not fit a matrix of {seg.dim}")
        seg.append(
            np.stack([np.asarray(r.vector, dtype=np.float32).reshape(-1) for r in group]),
            [r.uri for r in group],
            [r.parent_uri for r in group],
            [r.context_type for r in group],
            [r.category for r in group],
            [r.text for r in group],
        )


# ---------------------------------------------------------------------------------------------------- chooser
class L0Source:
    """Hands out one :class:`L0Scorer` per request, following ``RetrievalSettings.l0_source``.

    * ``index``: always :class:`IndexL0Scorer`.
    * ``memory``: :class:`MemoryL0Scorer`, loading (or reloading) the account synchronously when needed; accounts
      over ``memory_max_rows`` use the index.
    * ``auto``: the memory scorer when the account's matrix is loaded and current; otherwise the index scorer, and
      after ``memory_warm_after_searches`` searches of the account the matrix is loaded on a background thread. A
      one-shot CLI search therefore never pays for a load; a long-running server soon serves from memory.

    Args:
        index: the vector index.
        cache: the memory cache (``None`` disables the memory path).
        metadata: for the store's vector generation.
        settings: the retrieval settings.
    """

    def __init__(
        self,
        index: VectorIndex,
        cache: L0MemoryCache | None,
        metadata: MetadataStore,
        settings: RetrievalSettings,
    ) -> None:
        self.index = index
        self.cache = cache
        self._metadata = metadata
        self._settings = settings
        self._searches: dict[str, int] = {}
        self._lock = threading.Lock()

    def scorer(self, account_id: str, query_vector: np.ndarray) -> L0Scorer:
        """A scorer for one request of ``account_id``.

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when mode ``memory`` cannot load the matrix.
        """
        mode = self._settings.l0_source
        if mode == "index" or self.cache is None:
            return IndexL0Scorer(self.index, query_vector)
        try:
            generation = self._metadata.vector_generation()
        except Exception as err:  # broad on purpose: translated (memory) or answered by the index (auto)
            if mode == "memory":
                raise _search_failed(err, "cache generation") from err
            return IndexL0Scorer(self.index, query_vector)
        snap = self.cache.snapshot(account_id, generation)
        if snap is not None:
            return MemoryL0Scorer(snap, query_vector)
        if self.cache.too_large(account_id, generation):
            return IndexL0Scorer(self.index, query_vector)
        if mode == "memory":
            try:
                snap = self.cache.load(account_id)
            except Exception as err:  # broad on purpose: the load failed: a failed vector search (RET-5001)
                raise _search_failed(err, "cache load") from err
            return MemoryL0Scorer(snap, query_vector) if snap is not None else IndexL0Scorer(self.index, query_vector)
        with self._lock:
            seen = self._searches[account_id] = self._searches.get(account_id, 0) + 1
        if seen > self._settings.memory_warm_after_searches:
            self.cache.load_in_background(account_id)
        return IndexL0Scorer(self.index, query_vector)
