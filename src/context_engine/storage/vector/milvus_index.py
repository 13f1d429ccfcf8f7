"""The scale-out vector index: one Milvus collection per model and dimension (DESIGN §3, §14; docs/deployment.md).

Layout: the collection ``<collection_prefix>_<model>_<dim>`` holds one entity per :class:`VectorRecord`: the primary
key ``id``, the float32 ``vector``, and as scalar fields every field a :class:`VectorFilter` narrows on (``uri``,
``parent_uri`` (nullable), ``account_id``, ``owner_space``, ``context_type``, ``category``, ``level``, ``doc_id``) plus
what a hit shows (``chunk_index``, ``text``, ``breadcrumb``). ``account_id`` is the partition key: Milvus hashes each
account to one of the collection's partitions, and a search restricted to one account (every search is) visits only
that partition.

Search: the filter becomes a Milvus boolean expression (:mod:`.milvus_filter`); the vector index type and metric come
from ``vector.milvus`` (``FLAT`` + ``COSINE`` by default: exact; Milvus Lite's HNSW recall was poor under narrow
filters). Hits come back with their stored vectors and are re-scored here as exact cosine similarities (float64 dot
products of the unit vectors), whatever the metric or index, then ordered by score descending and id ascending; a tie
reaching the last fetched row fetches more (Milvus orders equal distances arbitrarily). :meth:`optimize` flushes,
so that rows are searched through the index (Milvus Lite scans unflushed rows slowly).

Consistency: every read is issued at ``vector.milvus.consistency_level`` (``Strong`` by default: a search sees every
write acknowledged before it, by any process or replica).

Failures: a Milvus error is retried a few times when transient (unavailable, deadline, rate limit; bounded by
``timeout_s``, tenacity, each retry counted through ``on_retry``), then raised as :class:`ContextEngineError`:
``RET-5001`` for searches and counts, ``WRT-5001`` for writes, both retryable. Milvus applies each call atomically per
row, not per call: a failed multi-batch upsert may have written its first batches (the write protocol re-syncs the
ids from the metadata store, ingest/journal.py). Messages never carry the token.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import numpy as np
from pymilvus import DataType, MilvusClient, MilvusException
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorHit, VectorRecord
from context_engine.settings import MilvusSettings
from context_engine.storage.vector.milvus_filter import milvus_expression, milvus_string
from context_engine.storage.vector.query import query_vector

__all__ = ["MilvusVectorIndex", "collection_name", "milvus_address"]

_LOG = logging.getLogger(__name__)
_STAMP_PROPERTY = "context_engine.store_id"  # the collection property naming its deployment (service._check_owner)

# pymilvus installs plain-text stderr handlers on its loggers at import; route its records through the engine's
# structured logging instead (one JSON line each, redacted like every log line) and keep its per-call tracebacks out:
# the adapter reports each failure itself, as a ContextEngineError naming the action.
for _name in ("pymilvus", "pymilvus.milvus_client", "pymilvus.bulk_writer"):
    _vendor = logging.getLogger(_name)
    _vendor.handlers.clear()
    _vendor.propagate = True
    _vendor.setLevel(logging.CRITICAL if _name == "pymilvus.milvus_client" else logging.WARNING)

_VARCHAR_MAX = 65_535  # Milvus's largest VARCHAR (bytes)
# Filterable string fields: a value longer than a VARCHAR is refused (truncating it would change what filters see).
_KEY_FIELDS = ("id", "uri", "parent_uri", "account_id", "owner_space", "context_type", "category", "doc_id")
# Payload shown in hits: cut to a VARCHAR at a character boundary (the full text lives in the content store).
_PAYLOAD_FIELDS = ("text", "breadcrumb")
_OUTPUT_FIELDS = [
    "vector",
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
_MAX_TOPK = 16_384  # Milvus's limit on one search's (offset +) limit
_TIE_SLACK = 8  # rows fetched beyond top_k so that equal scores at the cut are ordered by id
_ROWS_PER_UPSERT = 2_000
_BYTES_PER_UPSERT = 16 * 1024 * 1024  # well under the 64 MB insert limit of a Milvus proxy
_IDS_PER_DELETE = 1_000  # ids per `id in [...]` expression
_FLUSH_EVERY_ROWS = 10_000  # rows upserted by this process between two flushes (optimize())
_ATTEMPTS = 3
_TRANSIENT_GRPC = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
}
_RATE_LIMIT = 8  # Milvus's legacy RateLimit error code (common.ErrorCode)
_NOT_LOADED = 101  # CollectionNotLoaded


def collection_name(settings: MilvusSettings, model_name: str, dim: int) -> str:
    """``<collection_prefix>_<model>_<dim>``: the model name lower-cased with every run of characters outside
    ``[a-z0-9]`` made one ``_`` (Milvus names allow letters, digits and underscores), cut to keep the name within
    Milvus's 255 characters; ``<collection_prefix>_<dim>`` without a model name."""
    slug = re.sub(r"[^a-z0-9]+", "_", model_name.lower()).strip("_")
    room = 255 - len(settings.collection_prefix) - len(str(dim)) - 2
    return "_".join(p for p in (settings.collection_prefix, slug[: max(room - 1, 0)].rstrip("_"), str(dim)) if p)


def milvus_address(uri: str) -> str:
    """``uri`` as it may be shown: scheme, host, port and path, without user, password or query."""
    parts = urlsplit(uri)
    if not parts.hostname:
        return uri.split("?", 1)[0].rsplit("@", 1)[-1]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _is_transient(err: BaseException) -> bool:
    if isinstance(err, grpc.RpcError):
        return err.code() in _TRANSIENT_GRPC
    if isinstance(err, MilvusException):
        code = err.code
        return code in _TRANSIENT_GRPC or code == _RATE_LIMIT or getattr(err, "compatible_code", None) == _RATE_LIMIT
    return False


class MilvusVectorIndex:
    """:class:`~context_engine.storage.protocols.VectorIndex` over one Milvus collection (module docstring).

    Connects, then opens the collection of ``(model_name, dim)`` or creates it (schema, vector index, loaded). Safe to
    share between threads (one gRPC channel); any number of processes may open the same collection.

    Args:
        settings: the ``vector.milvus`` section (address, token, database, prefix, consistency, index, timeout).
        dim: the embedding dimension.
        model_name: the embedder's model, part of the collection name.
        on_retry: called with the operation name each time a transient Milvus error is retried (metrics).

    Raises:
        ContextEngineError: ``CFG-4001`` when Milvus cannot be reached or refuses the credentials or database (naming
            ``vector.milvus.uri`` and the address, never the token); ``IDX-4091`` when the collection exists with
            another dimension or lacks fields; ``WRT-5001`` (retryable) when creating or loading it fails.
    """

    name = "milvus"

    def __init__(
        self,
        settings: MilvusSettings,
        dim: int,
        model_name: str = "",
        *,
        on_retry: Callable[[str], None] | None = None,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        if dim < 1:
            raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"Vector dimension must be positive, got {dim}.")
        self._settings = settings
        self._dim = dim
        self._timeout = settings.timeout_s
        self._token = settings.token.get_secret_value() if settings.token else ""
        self._address = milvus_address(settings.uri)
        self.collection = collection_name(settings, model_name, dim)
        self._on_retry = on_retry
        self._on_failure = on_failure  # called with the action of each call that failed after its retries (metrics)
        self._lock = threading.Lock()
        #: Calls retried after a transient Milvus error.
        self.retries = 0
        self._rows_since_flush = 0
        #: Flushes after writes that failed (logged, not raised: the rows they followed were written).
        self.maintenance_failures = 0
        self._client = self._connect()
        try:
            with self._write_errors("open the collection"):
                self._open_collection()
        except BaseException:
            self.close()
            raise

    @property
    def dim(self) -> int:
        """The embedding dimension of every vector in the collection."""
        return self._dim

    # ------------------------------------------------------------------ writes

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by ``id``; a repeated ``id`` keeps its last record.

        Sent in batches of at most 2,000 rows and 16 MB; each batch is one Milvus upsert (atomic per row).

        Raises:
            ContextEngineError: ``IDX-4091`` when a vector's shape is not ``(dim,)``; ``WRT-4002`` when a vector is
                not finite or a filter field is longer than 65,535 bytes; ``WRT-5001`` (retryable) when Milvus fails
                (earlier batches stay written).
        """
        if not records:
            return
        rows = self._rows({r.id: r for r in records}.values())
        batch: list[dict[str, Any]] = []
        size = 0
        for row, row_bytes in rows:
            if batch and (len(batch) >= _ROWS_PER_UPSERT or size + row_bytes > _BYTES_PER_UPSERT):
                self._upsert_batch(batch)
                batch, size = [], 0
            batch.append(row)
            size += row_bytes
        self._upsert_batch(batch)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records by ``id``; unknown ids are ignored. One Milvus delete per 1,000 ids.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when Milvus fails; batches already deleted stay deleted.
        """
        unique = list(dict.fromkeys(ids))
        with self._write_errors("delete vectors"):
            for start in range(0, len(unique), _IDS_PER_DELETE):
                expr = f"id in [{', '.join(milvus_string(i) for i in unique[start : start + _IDS_PER_DELETE])}]"
                self._call("delete", self._client.delete, self.collection, filter=expr)

    def optimize(self) -> None:
        """Seal the rows written since the last flush into indexed segments (a Milvus ``flush``).

        A Milvus server seals and indexes segments by itself; this only hastens it. Milvus Lite keeps unflushed rows
        in a memtable, searched without the index, until 128 MB accumulate: at 20k rows of 512 dimensions a search took
        about 1 s before a flush and 20 ms after. Writes therefore also flush once 10,000 rows accumulated in
        this process (a failure of that flush is logged and counted in :attr:`maintenance_failures`).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when Milvus fails.
        """
        with self._lock:
            self._rows_since_flush = 0
        with self._write_errors("flush the collection"):
            self._call("flush", self._client.flush, self.collection)

    # ------------------------------------------------------------------ reads

    def search(self, vector: np.ndarray, top_k: int, flt: VectorFilter) -> list[VectorHit]:
        """The ``top_k`` records passing ``flt`` nearest to ``vector``, pre-filtered in Milvus.

        Args:
            vector: the query, float, shape ``(dim,)``, L2-normalised.
            top_k: maximum number of hits (at most 16,384, Milvus's limit); ``< 1`` returns no hits.
            flt: the pre-filter; ``account_id`` always applies; an empty list in any field matches nothing.

        Returns:
            At most ``top_k`` hits ordered by ``score`` descending, then ``id`` ascending; ``score`` is the exact
            cosine similarity of the stored vector, in ``[-1, 1]``. Which rows are found is exact with ``FLAT``,
            approximate with an ANN ``index_type``.

        Raises:
            ContextEngineError: ``IDX-4091`` when ``vector`` is not of shape ``(dim,)``; ``RET-5001`` when it is not
                finite (not retryable) or when Milvus fails (retryable).
        """
        if top_k < 1:
            return []
        query = query_vector(vector, self._dim)
        expr = milvus_expression(flt)
        if expr is None:
            return []
        top_k = min(top_k, _MAX_TOPK)
        limit = min(top_k + _TIE_SLACK, _MAX_TOPK)
        with self._search_errors("search vectors"):
            while True:
                hits = self._search(query, expr, limit)
                # A tie that reaches the last fetched row may continue past it: fetch more to order it by id.
                if len(hits) < limit or limit >= _MAX_TOPK or hits[-1].score != hits[top_k - 1].score:
                    break
                limit = min(limit * 2, _MAX_TOPK)
        return hits[:top_k]

    def count(self) -> int:
        """Number of records in the collection (every account).

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when Milvus fails.
        """
        with self._search_errors("count vectors"):
            rows = self._call(
                "count",
                self._client.query,
                self.collection,
                filter="",
                output_fields=["count(*)"],
                consistency_level=self._settings.consistency_level,
            )
        return int(rows[0]["count(*)"]) if rows else 0

    def ids(self, account_id: str) -> list[str]:
        """Every record id of ``account_id``, sorted: a scan of the account's partition (``reindex --full``).

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when Milvus fails.
        """

        def scan(timeout: float) -> list[str]:
            found: list[str] = []
            iterator = self._client.query_iterator(
                self.collection,
                batch_size=4_096,
                filter=f"account_id == {milvus_string(account_id)}",
                output_fields=["id"],
                timeout=timeout,
                consistency_level=self._settings.consistency_level,
            )
            try:
                while batch := iterator.next():
                    found.extend(str(row["id"]) for row in batch)
            finally:
                iterator.close()
            return found

        with self._search_errors("list vector ids"):
            found = self._call("ids", scan)
        return sorted(found)

    def read_stamp(self) -> str | None:
        """The identity of the deployment (metadata database) this collection belongs to, from its properties.

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when Milvus fails.
        """
        with self._search_errors("read the collection's owner"):
            info = self._call("describe", self._client.describe_collection, self.collection)
        return (info.get("properties") or {}).get(_STAMP_PROPERTY) or None

    def write_stamp(self, store_id: str) -> None:
        """Record ``store_id`` as the collection's owner (a collection property).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when Milvus fails.
        """
        with self._write_errors("stamp the collection's owner"):
            self._call(
                "alter",
                self._client.alter_collection_properties,
                self.collection,
                properties={_STAMP_PROPERTY: store_id},
            )

    def drop(self) -> bool:
        """Drop the collection (tests, ``reindex --full`` of a damaged index, moving a deployment off a model);
        ``True``: it is gone (a missing collection is ignored).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when Milvus fails.
        """
        with self._write_errors("drop the collection"):
            self._call("drop", self._client.drop_collection, self.collection)
        return True

    def check(self) -> None:
        """Nothing to check here: the server keeps the collection's files (``count`` fails when it cannot serve)."""

    def close(self) -> None:
        """Release the connection; idempotent."""
        client = self.__dict__.pop("_client", None)
        if client is not None:
            try:
                client.close()
            except Exception as err:  # noqa: BLE001 - closing a broken channel must not hide the caller's error
                _LOG.debug("closing the Milvus client failed: %s", err)

    def __repr__(self) -> str:
        return f"MilvusVectorIndex(address={self._address!r}, collection={self.collection!r})"

    # ------------------------------------------------------------------ internals

    def _connect(self) -> MilvusClient:
        """The client, after one round trip (so that start-up fails here, not at the first request).

        pymilvus shares one gRPC channel per address in a process and keeps it after its clients close; a channel
        the server has since closed (a GOAWAY, e.g. "too_many_pings" from Milvus Lite) can fail the next connect.
        Then one more attempt is made on a channel of this index's own before the start is refused.
        """
        failure: BaseException | None = None
        for dedicated in (False, True):
            client: MilvusClient | None = None
            try:
                client = MilvusClient(
                    uri=self._settings.uri,
                    token=self._token,
                    db_name=self._settings.db_name,
                    timeout=self._timeout,
                    dedicated=dedicated,
                )
                client.list_collections(timeout=self._timeout)
                return client
            except Exception as err:  # noqa: BLE001 - every way of not reaching it: refused, timeout, bad token, no db
                failure = err
                if client is not None:
                    with suppress(Exception):  # the connection error below is what matters
                        client.close()
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            f"vector.milvus.uri: cannot use Milvus at {self._address} (database {self._settings.db_name!r}): "
            f"{self._describe(failure) if failure else 'no answer'}",
            {"setting": "vector.milvus.uri", "address": self._address, "db_name": self._settings.db_name},
        ) from None  # the vendor exception is not chained: its text is already scrubbed into the message

    def _open_collection(self) -> None:
        name = self.collection
        if not self._call("open", self._client.has_collection, name):
            try:
                self._create_collection()
            except MilvusException:
                if not self._call("open", self._client.has_collection, name):  # not a concurrent creator's doing
                    raise
        self._check_schema(self._call("open", self._client.describe_collection, name))
        self._call("open", self._client.load_collection, name)

    def _create_collection(self) -> None:
        s = self._settings
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=_VARCHAR_MAX)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self._dim)
        schema.add_field("account_id", DataType.VARCHAR, max_length=_VARCHAR_MAX, is_partition_key=True)
        for field in ("uri", "owner_space", "context_type", "category", "doc_id", "text", "breadcrumb"):
            schema.add_field(field, DataType.VARCHAR, max_length=_VARCHAR_MAX)
        schema.add_field("parent_uri", DataType.VARCHAR, max_length=_VARCHAR_MAX, nullable=True)
        schema.add_field("level", DataType.INT32)
        schema.add_field("chunk_index", DataType.INT32)
        index_params = self._client.prepare_index_params()
        index_params.add_index("vector", index_type=s.index_type, metric_type=s.metric_type)
        self._call(
            "create",
            self._client.create_collection,
            self.collection,
            schema=schema,
            index_params=index_params,
            consistency_level=s.consistency_level,
        )
        _LOG.info("created Milvus collection %s (%s, %s)", self.collection, s.index_type, s.metric_type)

    def _check_schema(self, described: dict[str, Any]) -> None:
        fields = {f["name"]: f for f in described.get("fields", [])}
        found = (fields.get("vector") or {}).get("params", {}).get("dim")
        if found is None or int(found) != self._dim:
            raise ContextEngineError(
                ErrorCode.INDEX_MODEL_MISMATCH,
                f"The Milvus collection {self.collection} holds {found}-dimensional vectors but the embedder produces "
                f"{self._dim}; drop the collection and run `context-engine reindex --full`, or use another "
                "vector.milvus.collection_prefix.",
                {"index_dim": found, "embedder_dim": self._dim, "collection": self.collection},
            )
        missing = [f for f in (*_KEY_FIELDS, *_PAYLOAD_FIELDS, "level", "chunk_index") if f not in fields]
        if missing:
            raise ContextEngineError(
                ErrorCode.INDEX_MODEL_MISMATCH,
                f"The Milvus collection {self.collection} lacks fields {missing} (written by another version); it is "
                "derived from the metadata database: drop it and run `context-engine reindex --full`.",
                {"missing_fields": missing, "collection": self.collection},
            )

    def _rows(self, given: Iterable[VectorRecord]) -> list[tuple[dict[str, Any], int]]:
        records = list(given)
        try:
            vectors = np.stack([np.asarray(r.vector, dtype=np.float32) for r in records])
        except ValueError as err:  # ragged shapes
            raise self._dim_error([np.shape(r.vector) for r in records]) from err
        if vectors.shape != (len(records), self._dim):
            raise self._dim_error([vectors.shape[1:]])
        finite = np.isfinite(vectors).all(axis=1)
        if not finite.all():
            bad = [records[i].id for i in np.flatnonzero(~finite)[:5]]
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID, "Vectors must be finite (no NaN or infinity).", {"ids": bad}
            )
        out = []
        for r, v in zip(records, vectors, strict=True):
            row: dict[str, Any] = {"vector": v, "level": int(r.level), "chunk_index": int(r.chunk_index)}
            size = 4 * self._dim + 64
            for field in _KEY_FIELDS:
                value = getattr(r, field)
                if value is not None and len(value.encode()) > _VARCHAR_MAX:
                    raise ContextEngineError(
                        ErrorCode.REQUEST_INVALID,
                        f"{field} of vector row {r.id[:200]!r} is longer than Milvus's {_VARCHAR_MAX} bytes.",
                        {"field": field},
                    )
                row[field] = value
                size += len(value or "")
            for field in _PAYLOAD_FIELDS:
                row[field] = _cut(getattr(r, field))
                size += len(row[field])
            out.append((row, size))
        return out

    def _upsert_batch(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        with self._write_errors("upsert vectors"):
            self._call("upsert", self._client.upsert, self.collection, rows)
        with self._lock:
            self._rows_since_flush += len(rows)
            due = self._rows_since_flush >= _FLUSH_EVERY_ROWS
        if due:
            try:
                self.optimize()
            except ContextEngineError as err:  # the rows are written; the next write or optimize() flushes
                self.maintenance_failures += 1
                _LOG.warning("Milvus flush after writes failed: %s", err.message)

    def _search(self, query: np.ndarray, expr: str, limit: int) -> list[VectorHit]:
        result = self._call(
            "search",
            self._client.search,
            self.collection,
            data=[query],
            filter=expr,
            limit=limit,
            output_fields=_OUTPUT_FIELDS,
            anns_field="vector",
            search_params={"metric_type": self._settings.metric_type},
            consistency_level=self._settings.consistency_level,
        )
        rows = list(result[0]) if result else []
        if not rows:
            return []
        stored = np.asarray([row["entity"]["vector"] for row in rows], dtype=np.float32)
        scores = np.clip(stored.astype(np.float64) @ query.astype(np.float64), -1.0, 1.0)
        hits = []
        for row, score in zip(rows, scores.tolist(), strict=True):
            e = row["entity"]
            hits.append(
                VectorHit(
                    id=str(row["id"]),
                    score=score,
                    uri=e["uri"],
                    parent_uri=e.get("parent_uri"),
                    owner_space=e["owner_space"],
                    context_type=e["context_type"],
                    category=e["category"],
                    level=int(e["level"]),
                    doc_id=e["doc_id"],
                    chunk_index=int(e["chunk_index"]),
                    text=e["text"],
                    breadcrumb=e["breadcrumb"],
                )
            )
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits

    def _call(self, operation: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, timeout=timeout_s, **kwargs)``, retried on transient errors within ``timeout_s`` overall."""

        def count(_state: RetryCallState) -> None:
            with self._lock:
                self.retries += 1
            if self._on_retry is not None:
                self._on_retry(operation)
            _LOG.info("Milvus %s hit a transient error; retrying", operation)

        retrying = Retrying(
            retry=retry_if_exception(_is_transient),
            stop=stop_after_attempt(_ATTEMPTS) | stop_after_delay(self._timeout),
            wait=wait_exponential_jitter(multiplier=0.1, max=1.0, jitter=0.1),
            before_sleep=count,
            reraise=True,
        )
        try:
            return retrying(fn, *args, timeout=self._timeout, **kwargs)
        except MilvusException as err:
            if err.code != _NOT_LOADED or operation in ("open", "drop"):
                raise
        # Released (a Milvus Lite restart forgets which collections were loaded; an operator may release one):
        # load it again, then repeat the call once.
        _LOG.warning("Milvus collection %s was not loaded; loading it", self.collection)
        retrying(self._client.load_collection, self.collection, timeout=self._timeout)
        return retrying(fn, *args, timeout=self._timeout, **kwargs)

    def _dim_error(self, shapes: list[Any]) -> ContextEngineError:
        got = sorted({str(tuple(s)) for s in shapes if tuple(s) != (self._dim,)})
        return ContextEngineError(
            ErrorCode.INDEX_MODEL_MISMATCH,
            f"Vectors must have shape ({self._dim},) to match the index; got {', '.join(got)}.",
            {"expected_dim": self._dim, "got_shapes": got[:5]},
        )

    def _describe(self, err: BaseException) -> str:
        """``Type: message`` of a vendor error, the token blanked out, cut to 300 characters."""
        message = getattr(err, "message", None) or str(err)
        text = f"{type(err).__name__}: {message}"
        if self._token:
            text = text.replace(self._token, "***")
        return text if len(text) <= 300 else text[:297] + "..."

    def _write_errors(self, action: str) -> AbstractContextManager[None]:
        """Vendor errors of a write as ``WRT-5001`` (retryable), counted through ``on_failure``."""
        return self._errors(action, ErrorCode.STORAGE_FAILED)

    def _search_errors(self, action: str) -> AbstractContextManager[None]:
        """Vendor errors of a read as ``RET-5001`` (retryable), counted through ``on_failure``."""
        return self._errors(action, ErrorCode.VECTOR_SEARCH_FAILED)

    @contextmanager
    def _errors(self, action: str, code: ErrorCode) -> Iterator[None]:
        try:
            yield
        except ContextEngineError:
            raise
        except Exception as err:  # every vendor error (pymilvus, gRPC) is translated, never swallowed
            if self._on_failure is not None:
                self._on_failure(action)
            raise ContextEngineError(
                code,
                f"Could not {action} in Milvus at {self._address}: {self._describe(err)}",
                {"backend": self.name, "collection": self.collection},
                retryable=True,
            ) from err


def _cut(text: str) -> str:
    """``text`` cut to at most 65,535 UTF-8 bytes at a character boundary."""
    data = text.encode()
    return text if len(data) <= _VARCHAR_MAX else data[:_VARCHAR_MAX].decode(errors="ignore")
