"""The embedded vector index: one LanceDB table in a local directory (DESIGN.md §3, §14).

Search is cosine similarity with a mandatory SQL pre-filter built from :class:`VectorFilter` (the account is always
part of it). Below ``VectorSettings.ann_index_min_rows`` rows the search is exact (flat over the pre-filtered rows);
from there on :meth:`LanceDBVectorIndex.optimize` builds an IVF_SQ index, and searches probe at least ``nprobes``
partitions (at most half as many again, unless the filter leaves fewer rows than requested there: then as many
as it takes) and re-rank ``refine_factor`` times the requested rows on the stored float32 vectors, so returned scores
are always exact cosine similarities. Rows written after the index was built are searched flat until the next
:meth:`~LanceDBVectorIndex.optimize` folds them in: nothing written is ever invisible.

Choices measured with ``bench/vector_index.py`` (100k x 384, 20 accounts, filter ``account + level=0``, 2 CPUs):

- IVF_SQ over IVF_PQ and IVF_HNSW_SQ: it builds in ~2 s at 100k (PQ: 20-90 s, HNSW_SQ: ~70 s), and keeps recall@10 at
  1.0 under selective pre-filters where IVF_PQ with ``refine_factor=4`` fell to 0.45-0.93 (fewer sub-vectors, worse)
  and IVF_HNSW_SQ to 0.79 (graph search loses recall under a narrow filter, as DESIGN §14 warns for Milvus).
- LanceDB's own partition sizing (about 8k rows per partition): an explicit sqrt(n) count is merged back into a few
  large partitions by ``Table.optimize()`` anyway, which also cost IVF_PQ much recall.
- BITMAP scalar indexes on ``account_id, level, owner_space, context_type`` from 10k rows: they halve flat pre-filtered
  latency at 100k (p50 56 -> 31 ms, p95 112 -> 37 ms); the ANN path uses them for its pre-filter too.
- A BTREE scalar index on ``id`` from 10k rows (issue 26): ``merge_insert`` on ``id``, every upsert, joins through it
  instead of scanning the table's ids. 100 new rows into 105k: 34 -> 9 ms (``bench/memory_ingest.py --preexisting``);
  the index builds in 0.1 s there and takes new rows in at each :meth:`LanceDBVectorIndex.optimize`.

Every LanceDB or Arrow failure is translated here into :class:`ContextEngineError`: ``RET-5001`` for searches and
counts, ``WRT-5001`` for writes and maintenance, both retryable.

Commit conflicts (two processes committing table versions at once, e.g. a delete racing a compaction) are retried
with bounded exponential backoff and jitter (tenacity; :data:`_COMMIT_ATTEMPTS` attempts, 50 ms doubling up to 1 s),
each retry counted (:attr:`LanceDBVectorIndex.commit_retries`, and ``on_retry`` for the service's metrics).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import Bitmap, BTree, IvfSq
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorHit, VectorRecord
from context_engine.settings import VectorSettings
from context_engine.storage.vector.query import query_vector

__all__ = [
    "LanceDBVectorIndex",
    "build_predicate",
    "drop_table",
    "max_nprobes",
    "sql_string",
    "table_path",
    "vector_schema",
]

_LOG = logging.getLogger(__name__)

# Filterable string columns (``parent_uri`` is the only nullable one); ``text`` and ``breadcrumb`` are payload.
_TEXT_COLUMNS = ("uri", "parent_uri", "account_id", "owner_space", "context_type", "category", "doc_id")
# Columns a search returns (everything but the vector; ``_distance`` is added by LanceDB).
_RESULT_COLUMNS = [
    "id",
    "uri",
    "parent_uri",
    "owner_space",
    "context_type",
    "category",
    "level",
    "doc_id",
    "chunk_index",
    "text",
    "breadcrumb",
]
# Ids per ``DELETE ... WHERE id IN (...)`` statement: keeps the SQL text small and the parse cheap.
_DELETE_BATCH = 1_000
# Extra rows fetched beyond ``top_k`` so that equal scores at the cut are ordered by id, not by storage order.
_TIE_SLACK = 8
# Scalar indexes built once the table holds _SCALAR_INDEX_MIN_ROWS rows: BITMAP for the low-cardinality filter
# columns, BTREE for ``id`` (the key of every upsert's merge_insert; see the module docstring).
_SCALAR_INDEXES: dict[str, Callable[[], Any]] = {
    "account_id": Bitmap,
    "level": Bitmap,
    "owner_space": Bitmap,
    "context_type": Bitmap,
    "id": BTree,
}
_SCALAR_INDEX_MIN_ROWS = 10_000
_VECTOR_INDEX_NAME = "vector_idx"
# Each optimize() that finds unindexed rows adds a delta to the vector index; past this many, rebuild it in one piece.
_MAX_VECTOR_INDEX_DELTAS = 16
# Attempts of one commit that conflicts with another writer's (LanceDB retries some conflicts itself first).
_COMMIT_ATTEMPTS = 6
# LanceDB raises commit conflicts as plain OSError/RuntimeError; its messages are the only mark ("Commit conflict for
# version ...", "Retryable commit conflict ...", "TooMuchWriteContention").
_CONFLICT_MARKS = ("commit conflict", "too much write contention", "toomuchwritecontention")


def _is_commit_conflict(err: BaseException) -> bool:
    text = str(err).lower()
    return any(mark in text for mark in _CONFLICT_MARKS)


def vector_schema(dim: int) -> pa.Schema:
    """The Arrow schema of the vector table (DESIGN §3).

    Args:
        dim: embedding dimension; ``vector`` is ``fixed_size_list<float32>[dim]``.
    """
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
            pa.field("uri", pa.string(), nullable=False),
            pa.field("parent_uri", pa.string(), nullable=True),
            pa.field("account_id", pa.string(), nullable=False),
            pa.field("owner_space", pa.string(), nullable=False),
            pa.field("context_type", pa.string(), nullable=False),
            pa.field("category", pa.string(), nullable=False),
            pa.field("level", pa.int32(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("chunk_index", pa.int32(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("breadcrumb", pa.string(), nullable=False),
        ]
    )


def sql_string(value: str) -> str:
    """A SQL string literal for LanceDB/DataFusion: single quotes doubled, nothing else needs escaping.

    DataFusion reads backslashes, ``%`` and ``_`` literally inside ``'...'`` (checked in the conformance tests).
    """
    return "'" + value.replace("'", "''") + "'"


def _in_list(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(sql_string(str(v)) for v in values)})"


def build_predicate(flt: VectorFilter) -> str | None:
    """The SQL ``WHERE`` text for a filter, or ``None`` when the filter can match nothing (an empty list).

    Fields are ANDed; a list becomes ``IN (...)``; ``uri_prefix`` becomes ``starts_with(uri, '...')``, which (unlike
    ``LIKE``) has no wildcard characters to escape. The account restriction is always present.
    """
    lists: list[tuple[str, list[Any] | None]] = [
        ("owner_space", flt.owner_spaces),
        ("level", flt.levels),
        ("context_type", flt.context_types),
        ("category", flt.categories),
        ("parent_uri", flt.parent_uris),
        ("doc_id", flt.doc_ids),
    ]
    clauses = [f"account_id = {sql_string(flt.account_id)}"]
    for column, values in lists:
        if values is None:
            continue
        if not values:
            return None
        if column == "level":
            clauses.append(f"level IN ({', '.join(str(int(v)) for v in values)})")
        else:
            clauses.append(_in_list(column, values))
    if flt.uri_prefix is not None:
        clauses.append(f"starts_with(uri, {sql_string(flt.uri_prefix)})")
    return " AND ".join(clauses)


def max_nprobes(nprobes: int) -> int:
    """The partitions a search probes at most while the filter leaves enough rows: half as many again as ``nprobes``
    (at least one more). Measured at 1,000,000 nodes (242 partitions; the lookup's filter, a quarter of the rows; 100
    queries against the uncapped search, which probed every partition in 80 ms p50): a cap of 32 = ``nprobes``
    33 ms p50, recall@10 0.986; 48 35 ms, recall@10 0.999 and recall@100 0.995; 64 42 ms, 1.0 and 0.999
    (docs/lookup_knowledge.md)."""
    return max(nprobes + 1, nprobes * 3 // 2)


class LanceDBVectorIndex:
    """:class:`~context_engine.storage.protocols.VectorIndex` over one LanceDB table (DESIGN §3).

    Opens the table ``settings.table_name`` under ``path``, creating it (empty, with :func:`vector_schema`) when
    missing. Safe to share between threads of one process; LanceDB serialises the commits of concurrent writers, and
    every read sees the latest committed version, also one written by another process.

    Args:
        path: the LanceDB directory (``<home>/vectors``); created if missing.
        dim: the embedding dimension the caller writes and queries with.
        settings: the ``vector`` settings section.

    Raises:
        ContextEngineError: ``IDX-4091`` when the existing table was built with another dimension (rebuild it with
            ``context-engine reindex``); ``IDX-5031`` when its files are damaged (:meth:`check`); ``WRT-5001``
            (retryable) when the directory cannot be opened.
    """

    name = "lancedb"

    def __init__(
        self, path: Path, dim: int, settings: VectorSettings, *, on_retry: Callable[[str], None] | None = None
    ) -> None:
        if dim < 1:
            raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"Vector dimension must be positive, got {dim}.")
        self._path = Path(path)
        self._dim = dim
        self._settings = settings
        self._schema = vector_schema(dim)
        self._lock = threading.Lock()  # guards the write counter
        self._maintenance_lock = threading.Lock()  # one optimize() at a time
        self._writes_since_optimize = 0
        self._has_vector_index = False
        self._has_scalar_indexes = False
        #: Background maintenance failures (logged, not raised: the write that triggered them had succeeded).
        self.maintenance_failures = 0
        #: Commits retried after a conflict with another writer, and the hook that counts them in the metrics.
        self.commit_retries = 0
        self._on_retry = on_retry
        with self._write_errors("open the vector index"):
            self._path.mkdir(parents=True, exist_ok=True)
            # Strong read consistency: every read checks for a newer table version, so a server sees what a CLI
            # process (or another handle) committed at once; the check is one manifest lookup (~1 ms).
            self._db = lancedb.connect(str(self._path), read_consistency_interval=timedelta(0))
            try:
                self._table = self._db.open_table(settings.table_name)
            except ValueError as err:  # not found; ``exist_ok`` covers a concurrent creator with the same schema
                # committed versions there, but none opens: damaged (a folder without one is a creator's, mid-way)
                if any((table_path(self._path, settings.table_name) / "_versions").glob("*.manifest")):
                    raise self._damaged(err) from err
                self._table = self._db.create_table(settings.table_name, schema=self._schema, exist_ok=True)
        self._check_schema()
        self.check()
        with self._write_errors("list the vector index's indexes"):
            self._refresh_index_flags()
        # Writes of earlier processes count towards the next compaction: each small write leaves a small fragment
        # whose rows the ``id`` index does not cover, and a process making fewer than ``compact_every_writes`` writes
        # (a CLI command, a short-lived worker) would otherwise never compact them. At 1M rows, 132 such fragments
        # (2,807 rows) left by short processes made an upsert's ``merge_insert`` 45 -> 89 ms.
        self._writes_since_optimize = self._small_fragments()

    def _small_fragments(self) -> int:
        """Small data fragments of the table (LanceDB's own count; 0 when it cannot say)."""
        try:
            stats: Any = self._table.stats()  # a dict at run time, typed as a class by lancedb
            return int(stats["fragment_stats"]["num_small_fragments"])
        except Exception:  # noqa: BLE001 - a vendor error or an older stats layout: the counter starts at 0 as before
            return 0

    def check(self) -> None:
        """Read one small column (``level``, int32) of every data file of the table: a file that is missing,
        truncated or not a Lance file fails here, at open and whenever ``stats`` or ``/readyz`` ask, rather than in
        the middle of a search (``count_rows()`` alone reads the manifest only and would report the damaged table's
        records). Costs one scan of 4 bytes a row (about 4 MB at 1M rows).

        Raises:
            ContextEngineError: ``IDX-5031`` naming the table and the way out (``context-engine reindex --full``).
        """
        try:
            self._table.count_rows("level >= 0")
        except Exception as err:  # every vendor error of a read of the table's own files means damage
            raise self._damaged(err) from err

    def close(self) -> None:
        """Nothing to release: an embedded table holds no connection (its files are opened per call)."""

    def drop(self) -> bool:
        """Remove the table's folder (:func:`drop_table`) without reading it; whether there was one. This handle is
        not used after it (the engine's :class:`~context_engine.storage.vector.lazy.LazyVectorIndex` opens anew).

        Raises:
            ContextEngineError: ``WRT-5001`` when the folder cannot be removed.
        """
        return drop_table(self._path, self._settings.table_name)

    def read_stamp(self) -> str | None:
        """``None``: the table is a home's own files, never shared by deployments, so never stamped."""
        return None

    def write_stamp(self, store_id: str) -> None:
        """Nothing to record (:meth:`read_stamp`)."""

    def _damaged(self, err: BaseException) -> ContextEngineError:
        return ContextEngineError(
            ErrorCode.INDEX_DAMAGED,
            f"The vector index at {self._path} is damaged ({_describe(err)}); it is derived from the metadata "
            "database: run `context-engine reindex --full` to rebuild it.",
            {"backend": self.name, "path": str(self._path), "table": self._settings.table_name},
        )

    @property
    def dim(self) -> int:
        """The embedding dimension of every vector in the table."""
        return self._dim

    @property
    def has_ann_index(self) -> bool:
        """Whether this handle has seen an ANN (IVF_SQ) index, i.e. whether searches probe partitions."""
        return self._has_vector_index

    # ------------------------------------------------------------------ writes

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by ``id`` in one LanceDB commit.

        Within one call a repeated ``id`` keeps its last record. An empty table takes a plain append (no join);
        otherwise one ``merge_insert`` on ``id`` updates matches and inserts the rest. Every
        ``compact_every_writes`` writes, and when the table first reaches 10k rows (scalar indexes) or
        ``ann_index_min_rows`` (ANN index), runs :meth:`optimize`; a failure there is logged and counted in
        :attr:`maintenance_failures`, not raised, since the records are written by then.

        Args:
            records: vectors of shape ``(dim,)``, finite, L2-normalised by the caller.

        Raises:
            ContextEngineError: ``IDX-4091`` when a vector's shape is not ``(dim,)``; ``WRT-4002`` when a vector is
                not finite; ``WRT-5001`` (retryable) when LanceDB fails.
        """
        if not records:
            return
        batch = self._to_arrow(_last_per_id(records))
        with self._write_errors("upsert vectors"):
            for attempt in self._retrying("upsert"):
                with attempt:
                    if self._table.count_rows() == 0:
                        self._table.add(batch)
                    else:
                        merge = self._table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
                        merge.execute(batch)
        self._after_write()

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records by ``id``; unknown ids are ignored. One commit per 1,000 ids; counts as one write.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when LanceDB fails; batches already deleted stay deleted.
        """
        unique = list(dict.fromkeys(ids))
        if not unique:
            return
        with self._write_errors("delete vectors"):
            for start in range(0, len(unique), _DELETE_BATCH):
                predicate = _in_list("id", unique[start : start + _DELETE_BATCH])
                for attempt in self._retrying("delete"):
                    with attempt:
                        self._table.delete(predicate)
        self._after_write()

    def ids(self, account_id: str) -> list[str]:
        """Every record id of ``account_id``, sorted: a scan of the account's rows (``reindex --full`` compares them
        with the metadata store to drop orphans).

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when LanceDB fails.
        """
        with self._search_errors("list vector ids"):
            table = (
                self._table.search()
                .where(f"account_id = {sql_string(account_id)}")
                .select(["id"])
                .limit(None)
                .to_arrow()
            )
        return sorted(table.column("id").to_pylist())

    def count(self) -> int:
        """Number of records in the table (every account).

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when LanceDB fails.
        """
        with self._search_errors("count vectors"):
            return int(self._table.count_rows())

    def optimize(self) -> None:
        """Build the indexes that are due, then compact the table and fold new rows into its indexes.

        In order: the scalar indexes (BITMAP on the filter columns, BTREE on ``id``) once the table holds 10k rows (a
        table built before the ``id`` index gets it at its next optimize); the IVF_SQ cosine index once it holds
        ``ann_index_min_rows`` (or a rebuild of it when it has split into more than 16 deltas); then
        ``Table.optimize()``, which merges small fragments, drops deleted rows, adds unindexed rows to every index and
        removes versions older than LanceDB's default retention (7 days). Blocks while another thread optimizes.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when LanceDB fails.
        """
        with self._maintenance_lock:
            with self._lock:
                self._writes_since_optimize = 0
            with self._write_errors("optimize the vector index"):
                self._refresh_index_flags()
                rows = self._table.count_rows()
                if not self._has_scalar_indexes and rows >= _SCALAR_INDEX_MIN_ROWS:
                    self._create_scalar_indexes()
                if not self._has_vector_index and rows >= self._settings.ann_index_min_rows:
                    self._create_vector_index()
                for attempt in self._retrying("optimize"):
                    with attempt:
                        self._table.optimize()
                if self._has_vector_index and self._vector_index_deltas() > _MAX_VECTOR_INDEX_DELTAS:
                    self._create_vector_index()

    # ------------------------------------------------------------------ search

    def search(self, vector: np.ndarray, top_k: int, flt: VectorFilter) -> list[VectorHit]:
        """The ``top_k`` records passing ``flt`` nearest to ``vector``, pre-filtered (DESIGN §3, §5).

        Args:
            vector: the query, float, shape ``(dim,)``, L2-normalised.
            top_k: maximum number of hits; ``< 1`` returns no hits.
            flt: the pre-filter; ``account_id`` always applies; an empty list in any field matches nothing.

        Returns:
            At most ``top_k`` hits ordered by ``score`` descending, then ``id`` ascending. ``score`` is cosine
            similarity ``1 - cosine_distance`` in ``[-1, 1]`` (higher is more similar), computed on the stored float32
            vectors. The ranking is exact while the table has no ANN index; afterwards approximate: IVF_SQ probing
            ``nprobes`` to :func:`max_nprobes` partitions (more, up to all, when the filter leaves fewer rows than
            requested there), then ``refine_factor`` times the requested rows re-ranked exactly.

        Raises:
            ContextEngineError: ``IDX-4091`` when ``vector`` is not of shape ``(dim,)``; ``RET-5001`` when it is
                not finite (not retryable) or when LanceDB fails (retryable).
        """
        if top_k < 1:
            return []
        query = query_vector(vector, self._dim)
        predicate = build_predicate(flt)
        if predicate is None:
            return []
        limit = top_k + _TIE_SLACK
        with self._search_errors("search vectors"):
            while True:
                rows = self._query(query, predicate, limit)
                rows.sort(key=lambda row: (-row["score"], row["id"]))
                # A tie that reaches the last fetched row may continue past it: fetch more to order it by id.
                if len(rows) < limit or rows[-1]["score"] != rows[top_k - 1]["score"]:
                    break
                limit *= 2
        return [VectorHit(**row) for row in rows[:top_k]]

    # ------------------------------------------------------------------ internals

    def _query(self, query: np.ndarray, predicate: str, limit: int) -> list[dict[str, Any]]:
        """At most ``limit`` rows: probing ``nprobes`` to :func:`max_nprobes` partitions, and when the filter leaves
        fewer than ``limit`` rows there, once more with no cap (every partition if need be), so a narrow filter never
        starves the result. Without the cap LanceDB probed every partition even under a wide filter."""
        rows = self._ann_query(query, predicate, limit, max_nprobes(self._settings.nprobes))
        if len(rows) < limit:
            rows = self._ann_query(query, predicate, limit, 0)
        return rows

    def _ann_query(self, query: np.ndarray, predicate: str, limit: int, max_nprobes: int) -> list[dict[str, Any]]:
        """One LanceDB search probing at most ``max_nprobes`` partitions (``0``: no cap); rows with ``score``."""
        # The ANN knobs are set even without an index (LanceDB ignores them then), so a handle that has not seen an
        # index built by another process still probes enough partitions and returns exact, refined distances.
        result = (
            self._table.search(query, vector_column_name="vector")  # a vector query builder (typed as the base)
            .distance_type("cosine")  # type: ignore[attr-defined]
            .where(predicate, prefilter=True)
            .select([*_RESULT_COLUMNS, "_distance"])
            .minimum_nprobes(self._settings.nprobes)
            .maximum_nprobes(max_nprobes)
            .refine_factor(self._settings.refine_factor)
            .limit(limit)
            .to_arrow()
        )
        rows = result.drop_columns(["_distance"]).to_pylist()
        scores = np.clip(1.0 - result.column("_distance").to_numpy().astype(np.float64), -1.0, 1.0)
        for row, score in zip(rows, scores.tolist(), strict=True):
            row["score"] = score
        return rows

    def _to_arrow(self, records: list[VectorRecord]) -> pa.Table:
        n = len(records)
        try:
            vectors = np.stack([np.asarray(r.vector, dtype=np.float32) for r in records])
        except ValueError as err:  # ragged shapes
            raise self._dim_error([np.shape(r.vector) for r in records]) from err
        if vectors.shape != (n, self._dim):
            raise self._dim_error([vectors.shape[1:]])
        if not np.isfinite(vectors).all():
            bad = [records[i].id for i in np.flatnonzero(~np.isfinite(vectors).all(axis=1))[:5]]
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID, "Vectors must be finite (no NaN or infinity).", {"ids": bad}
            )
        columns: dict[str, pa.Array] = {
            "id": pa.array([r.id for r in records], pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), self._dim),
        }
        for column in _TEXT_COLUMNS:
            columns[column] = pa.array([getattr(r, column) for r in records], pa.string())
        columns["level"] = pa.array(np.fromiter((r.level for r in records), np.int32, n))
        columns["chunk_index"] = pa.array(np.fromiter((r.chunk_index for r in records), np.int32, n))
        columns["text"] = pa.array([r.text for r in records], pa.string())
        columns["breadcrumb"] = pa.array([r.breadcrumb for r in records], pa.string())
        return pa.Table.from_pydict({f.name: columns[f.name] for f in self._schema}, schema=self._schema)

    def _retrying(self, operation: str) -> Retrying:
        """Retry ``operation`` on a commit conflict only, with bounded backoff; every retry is counted."""

        def count(_state: RetryCallState) -> None:
            with self._lock:
                self.commit_retries += 1
            if self._on_retry is not None:
                self._on_retry(operation)
            _LOG.info("vector index %s hit a commit conflict; retrying", operation)

        return Retrying(
            retry=retry_if_exception(_is_commit_conflict),
            stop=stop_after_attempt(_COMMIT_ATTEMPTS),
            wait=wait_exponential_jitter(multiplier=0.05, max=1.0, jitter=0.05),
            before_sleep=count,
            reraise=True,
        )

    def _dim_error(self, shapes: list[Any]) -> ContextEngineError:
        got = sorted({str(tuple(s)) for s in shapes if tuple(s) != (self._dim,)})
        return ContextEngineError(
            ErrorCode.INDEX_MODEL_MISMATCH,
            f"Vectors must have shape ({self._dim},) to match the index; got {', '.join(got)}.",
            {"expected_dim": self._dim, "got_shapes": got[:5]},
        )

    def _after_write(self) -> None:
        with self._lock:
            self._writes_since_optimize += 1
            due = self._writes_since_optimize >= self._settings.compact_every_writes
        try:
            if not due and not (self._has_vector_index and self._has_scalar_indexes):
                rows = self._table.count_rows()
                due = (not self._has_scalar_indexes and rows >= _SCALAR_INDEX_MIN_ROWS) or (
                    not self._has_vector_index and rows >= self._settings.ann_index_min_rows
                )
            if due and self._maintenance_lock.locked():
                return  # another thread is optimizing right now; the next trigger catches up
            if due:
                self.optimize()
        except ContextEngineError as err:
            # The write itself committed; maintenance is retried at the next trigger or by an explicit optimize().
            self.maintenance_failures += 1
            _LOG.warning("vector index maintenance failed: %s", err.message, exc_info=err)
        except Exception as err:  # noqa: BLE001 - a vendor error from count_rows, logged and counted as above
            self.maintenance_failures += 1
            _LOG.warning("vector index maintenance failed: %s", err, exc_info=err)

    def _create_vector_index(self) -> None:
        # LanceDB sizes the partitions itself (~8k rows each); see the module docstring for why not sqrt(n).
        self._table.create_index("vector", config=IvfSq(distance_type="cosine"), name=_VECTOR_INDEX_NAME, replace=True)
        self._has_vector_index = True

    def _create_scalar_indexes(self) -> None:
        existing = {column for idx in self._table.list_indices() for column in (idx.columns or [])}
        for column, config in _SCALAR_INDEXES.items():
            if column not in existing:
                self._table.create_index(column, config=config(), replace=True)
        self._has_scalar_indexes = True

    def _refresh_index_flags(self) -> None:
        indexed = {column for idx in self._table.list_indices() for column in (idx.columns or [])}
        self._has_vector_index = "vector" in indexed
        self._has_scalar_indexes = set(_SCALAR_INDEXES) <= indexed

    def _vector_index_deltas(self) -> int:
        stats = self._table.index_stats(_VECTOR_INDEX_NAME)
        return int(stats.num_indices or 1) if stats is not None else 0

    def _check_schema(self) -> None:
        schema = self._table.schema
        if not schema.names:  # a manifest overwritten with zeros opens as an empty table of no columns
            raise self._damaged(ValueError("its manifest holds no schema"))
        field = schema.field("vector") if "vector" in schema.names else None
        found = getattr(field.type, "list_size", None) if field is not None else None
        if found != self._dim:
            raise ContextEngineError(
                ErrorCode.INDEX_MODEL_MISMATCH,
                f"The vector index at {self._path} holds {found}-dimensional vectors but the embedder produces "
                f"{self._dim}; use the model it was built with, or move {self._path} away and run "
                "`context-engine reindex --full`.",
                {"index_dim": found, "embedder_dim": self._dim, "table": self._settings.table_name},
            )
        missing = [name for name in self._schema.names if name not in schema.names]
        if missing:
            raise ContextEngineError(
                ErrorCode.INDEX_MODEL_MISMATCH,
                f"The vector index at {self._path} lacks columns {missing} (written by another version); it is "
                f"derived from the metadata database: move {self._path} away and run `context-engine reindex --full`.",
                {"missing_columns": missing, "table": self._settings.table_name},
            )

    @contextmanager
    def _write_errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except ContextEngineError:
            raise
        except Exception as err:  # every vendor error (lancedb, Arrow, OS) is translated, never swallowed
            raise ContextEngineError(
                ErrorCode.STORAGE_FAILED,
                f"Could not {action}: {_describe(err)}",
                {"backend": self.name, "path": str(self._path)},
                retryable=True,
            ) from err

    @contextmanager
    def _search_errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except ContextEngineError:
            raise
        except Exception as err:  # every vendor error (lancedb, Arrow, OS) is translated, never swallowed
            raise ContextEngineError(
                ErrorCode.VECTOR_SEARCH_FAILED,
                f"Could not {action}: {_describe(err)}",
                {"backend": self.name},
                retryable=True,
            ) from err


def table_path(path: Path, table_name: str) -> Path:
    """The folder of LanceDB table ``table_name`` under the database folder ``path``."""
    return Path(path) / f"{table_name}.lance"


def drop_table(path: Path, table_name: str) -> bool:
    """Remove the table's folder without opening it (a damaged table cannot be opened, so ``drop_table`` of LanceDB
    may fail on it); returns whether there was one. ``reindex --full`` recreates it from the metadata database.

    Raises:
        ContextEngineError: ``WRT-5001`` when the folder cannot be removed (a read-only home).
    """
    import shutil

    folder = table_path(path, table_name)
    if not folder.exists():
        return False
    try:
        shutil.rmtree(folder)
    except OSError as err:
        raise ContextEngineError(
            ErrorCode.STORAGE_FAILED,
            f"Could not remove the damaged vector index {folder}: {err.strerror}",
            {"backend": "lancedb", "path": str(folder)},
        ) from err
    return True


def _last_per_id(records: Sequence[VectorRecord]) -> list[VectorRecord]:
    """Records with unique ids, the last occurrence winning (a merge join rejects duplicate source keys)."""
    latest = {r.id: r for r in records}
    return list(latest.values()) if len(latest) != len(records) else list(records)


def _describe(err: BaseException) -> str:
    """``Type: message`` of a vendor error, cut to 300 characters (messages can quote whole SQL predicates)."""
    text = f"{type(err).__name__}: {err}"
    return text if len(text) <= 300 else text[:297] + "..."
