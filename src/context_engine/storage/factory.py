"""Stores selected by settings (DESIGN §2, §14; issue 13; docs/deployment.md): the composition root's one place that
names adapters. ``metadata.url``, ``content.url`` and ``vector.backend`` choose them; the embedded default (SQLite,
local files, LanceDB under ``<home>``) needs no configuration.

Every opener fails fast with ``CFG-4001`` naming the setting and the address (never a credential) when a store is
unreachable or the setting is malformed, and creates nothing half-way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from context_engine.errors import ContextEngineError, ErrorCode

if TYPE_CHECKING:
    from obstore.store import S3Config  # a TypedDict of the stubs only

    from context_engine.settings import RetrievalSettings, Settings
    from context_engine.storage.content.s3 import S3ContentStore
    from context_engine.storage.derived.base import FileBuilder
    from context_engine.storage.derived_files import DerivedFiles
    from context_engine.storage.metadata.audit import SqlAuditStore
    from context_engine.storage.metadata.engine import SqlDatabase
    from context_engine.storage.metadata.keys import ApiKeyStore
    from context_engine.storage.metadata.memory_events import SqlMemoryEventStore
    from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
    from context_engine.storage.protocols import ContentStore, MetadataStore, VectorIndex
    from context_engine.storage.vector.l0_source import L0Source
    from context_engine.storage.vector.matrix import MatrixVectorIndex

__all__ = [
    "home_read_only",
    "metadata_url",
    "open_api_keys",
    "open_audit",
    "open_content",
    "open_l0_source",
    "open_memory_events",
    "open_metadata",
    "open_vector_index",
]


def metadata_url(settings: Settings) -> str:
    """The SQLAlchemy URL of the metadata database: ``metadata.url`` or ``sqlite:///<home>/metadata.db``."""
    if settings.metadata.url:
        return settings.metadata.url.get_secret_value()
    from sqlalchemy.engine import URL

    return URL.create("sqlite", database=str(settings.home_path / "metadata.db")).render_as_string()


def home_read_only(settings: Settings) -> bool:
    """Whether the home must be opened for reads only: ``read_only`` is set, or the embedded home exists and it (or
    its ``metadata.db``) is not writable by this process (``chmod -R a-w``, a read-only mount or volume)."""
    if settings.read_only:
        return True
    home = settings.home_path
    if not home.is_dir():
        return False
    db = home / "metadata.db"
    return not os.access(home, os.W_OK) or (db.exists() and not os.access(db, os.W_OK) and not settings.metadata.url)


def open_metadata(
    settings: Settings,
    *,
    upgrade: bool = True,
    on_failure: Callable[[str], None] | None = None,
    read_only: bool = False,
) -> SqlMetadataStore:
    """The metadata store of ``metadata.url`` (SQLite by default, PostgreSQL with ``postgresql+psycopg://``), with
    the pool and timeout of the ``metadata`` section; its schema is created or upgraded (``upgrade=False``: left as
    found, for ``context-engine migrate --check``). ``on_failure`` is called with the operation name each time the
    database fails mid-request (metrics).

    ``read_only`` (the embedded SQLite database of a read-only home): opened with ``mode=ro``, so that SQLite
    itself refuses every write, and never upgraded; where the folder cannot be written and the database was closed
    cleanly (no ``-wal`` file), also ``immutable=1`` (SQLite cannot create the ``-shm`` file a WAL reader needs, and
    nothing can change a file nobody may write).

    Raises:
        ContextEngineError: ``CFG-4001`` for a URL of an unsupported dialect, a database that cannot be reached or
            one migrated by a newer release; for a read-only home whose database is missing or needs an upgrade.
    """
    from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore

    section = settings.metadata
    url = metadata_url(settings)
    if read_only and not section.url:
        from urllib.parse import quote

        db = settings.home_path / "metadata.db"
        if not db.exists():
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"the home {settings.home_path} is read-only and holds no metadata database: open it writable once "
                "(or unset read_only) to create it",
                {"setting": "read_only", "home": str(settings.home_path)},
            )
        immutable = not os.access(settings.home_path, os.W_OK) and not db.with_name("metadata.db-wal").exists()
        url = f"sqlite:///file:{quote(str(db))}?mode=ro&uri=true" + ("&immutable=1" if immutable else "")
        upgrade = False
    elif not section.url:
        settings.home_path.mkdir(parents=True, exist_ok=True)
    store = SqlMetadataStore(
        url,
        pool_size=section.pool_size,
        max_overflow=section.max_overflow,
        connect_timeout_s=section.connect_timeout_s,
        statement_timeout_s=section.statement_timeout_s,
        upgrade=upgrade,
        on_failure=on_failure,
        busy_timeout_s=settings.ingest.write_wait_s,  # SQLite: a writer's bounded wait for the write lock
    )
    if read_only and not section.url and not store.schema_status().current:
        store.close()
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            f"the home {settings.home_path} is read-only and its metadata database needs an upgrade: run "
            "`context-engine migrate` on it once writable",
            {"setting": "read_only", "home": str(settings.home_path)},
        )
    return store


def open_audit(metadata: MetadataStore) -> SqlAuditStore:
    """The audit trail, session ledger and hint index (``tool_invocations``, ``retrieved_docs``, hint tables) in the
    metadata store's own database, sharing its pool and transactions.

    Raises:
        ContextEngineError: ``CFG-4001`` when the metadata store keeps no SQL database.
    """
    from context_engine.storage.metadata.audit import SqlAuditStore

    return SqlAuditStore(_sql_database(metadata, "the audit trail"))


def open_api_keys(metadata: MetadataStore, *, cache_ttl_s: float = 5.0) -> ApiKeyStore:
    """The API keys (``api_keys``) in the metadata store's own database, sharing its pool.

    Raises:
        ContextEngineError: ``CFG-4001`` when the metadata store keeps no SQL database.
    """
    from context_engine.storage.metadata.keys import ApiKeyStore

    return ApiKeyStore(_sql_database(metadata, "API keys"), cache_ttl_s=cache_ttl_s)


def open_memory_events(metadata: MetadataStore) -> SqlMemoryEventStore:
    """The memory event history (``memory_events``, issue 29) in the metadata store's own database, sharing its pool
    and transactions.

    Raises:
        ContextEngineError: ``CFG-4001`` when the metadata store keeps no SQL database.
    """
    from context_engine.storage.metadata.memory_events import SqlMemoryEventStore

    return SqlMemoryEventStore(_sql_database(metadata, "the memory event history"))


def open_l0_source(
    settings: RetrievalSettings,
    index: VectorIndex,
    metadata: MetadataStore,
    files: DerivedFiles | None,
    builder: FileBuilder | None = None,
) -> tuple[MatrixVectorIndex, L0Source]:
    """The level-0 matrix (the derived index of every account's level-0 rows, kept current from the change log and
    kept as files under ``files``, a large account's first file written by ``builder``) and the source that gives
    each search_memory request its scoring view: the matrix's or the vector index's, by ``retrieval.l0_source``
    (docs/derived_indexes.md)."""
    from context_engine.storage.vector.l0_source import L0Source

    matrix = level0_matrix(settings, metadata, files, builder)
    return matrix, L0Source(index, matrix, metadata, settings)


def level0_matrix(
    settings: RetrievalSettings,
    metadata: MetadataStore,
    files: DerivedFiles | None,
    builder: FileBuilder | None = None,
) -> MatrixVectorIndex:
    """The level-0 matrix of ``retrieval`` settings (:func:`open_l0_source`; a child process that builds an
    account's file makes the same one, :mod:`context_engine.storage.derived.child`)."""
    from context_engine.storage.vector.matrix import MatrixVectorIndex

    return MatrixVectorIndex(
        metadata,
        levels=(0,),
        max_rows=settings.memory_max_rows,
        compress_rows=settings.memory_compress_rows,
        compress_dims=settings.memory_compress_dims,
        files=files,
        builder=builder,
    )


def _sql_database(metadata: MetadataStore, what: str) -> SqlDatabase:
    from context_engine.storage.metadata.engine import SqlDatabase

    if not isinstance(metadata, SqlDatabase):
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            f"{what} live in the metadata database: {type(metadata).__name__} keeps none (use metadata.url)",
            {"setting": "metadata.url"},
        )
    return metadata


def open_content(settings: Settings, on_failure: Callable[[str], None] | None = None) -> ContentStore:
    """The content store of ``content.url``: ``file://`` (default ``<home>/content``) or ``s3://bucket/prefix``.

    An S3 store is probed once (one LIST under the prefix; nothing is created), so a wrong endpoint, bucket or
    credential fails here rather than on the first write.

    Args:
        settings: the engine settings (``content`` section and ``home``).
        on_failure: called with the operation name each time an object-store call fails mid-request (metrics).

    Raises:
        ContextEngineError: ``CFG-4001`` naming ``content.url`` (and the endpoint, never a credential) for another
            scheme, an S3 URL without a bucket, or an object store that cannot be reached, has no such bucket or
            refuses the credentials.
    """
    url = settings.content.url
    if not url:
        from context_engine.storage.content.local import LocalContentStore

        return LocalContentStore(settings.home_path / "content")
    scheme = urlsplit(url).scheme.lower()
    if scheme == "file":
        from context_engine.storage.content.local import LocalContentStore

        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            # file://relative/path would silently become /path (the first segment is read as a host)
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"content.url: a file URL needs an absolute path, file:///abs/path (got {url!r})",
                {"setting": "content.url"},
            )
        return LocalContentStore(Path(parts.path))
    if scheme == "s3":
        store = _open_s3(settings, on_failure)
        store.probe()
        return store
    raise ContextEngineError(
        ErrorCode.CONFIG_INVALID,
        f"content.url: unsupported scheme {scheme!r} in {url!r}; use file:///path or s3://bucket/prefix",
        {"setting": "content.url"},
    )


def _open_s3(settings: Settings, on_failure: Callable[[str], None] | None) -> S3ContentStore:
    """An :class:`S3ContentStore` on ``content.url`` = ``s3://bucket/prefix`` (not probed).

    Credentials: ``content.s3_access_key_id`` / ``content.s3_secret_access_key`` when set, else obstore reads the
    standard ``AWS_*`` variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ...).
    An ``http://`` endpoint is allowed (a local MinIO or SeaweedFS); one call gets ``content.timeout_s`` and at
    most two quick retries within that time.
    """
    from datetime import timedelta

    from obstore.store import S3Store

    from context_engine.storage.content.s3 import S3ContentStore

    cs = settings.content
    parts = urlsplit(cs.url or "")
    bucket, prefix = parts.netloc, parts.path.strip("/")
    endpoint = cs.s3_endpoint
    location = f"s3://{bucket}/{prefix}" + (f" at {_safe_endpoint(endpoint)}" if endpoint else "")
    if not bucket or "@" in bucket or parts.query or parts.fragment:
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            "content.url: expected s3://bucket/prefix (credentials go in content.s3_access_key_id and "
            "content.s3_secret_access_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
            {"setting": "content.url"},
        )
    config: S3Config = {"region": cs.s3_region}
    if endpoint:
        if urlsplit(endpoint).scheme not in ("http", "https") or urlsplit(endpoint).password:
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                "content.s3_endpoint: expected http(s)://host:port without credentials, got "
                f"{_safe_endpoint(endpoint)}",
                {"setting": "content.s3_endpoint"},
            )
        config["endpoint"] = endpoint
    if cs.s3_access_key_id is not None:
        config["access_key_id"] = cs.s3_access_key_id.get_secret_value()
    if cs.s3_secret_access_key is not None:
        config["secret_access_key"] = cs.s3_secret_access_key.get_secret_value()
    timeout = timedelta(seconds=cs.timeout_s)
    try:
        s3 = S3Store(
            bucket,
            config=config,
            client_options={
                "allow_http": bool(endpoint and endpoint.lower().startswith("http://")),
                "timeout": timeout,
                "connect_timeout": timeout,
            },
            retry_config={
                "max_retries": 2,
                "retry_timeout": timeout,
                "backoff": {
                    "init_backoff": timedelta(milliseconds=100),
                    "max_backoff": timedelta(seconds=1),
                    "base": 2,
                },
            },
        )
    except Exception as err:  # noqa: BLE001 - obstore raises several kinds for a bad configuration; all are CFG-4001
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            f"content.url: cannot configure {location}: {type(err).__name__}",
            {"setting": "content.url", "location": location},
        ) from None  # the cause could quote a configuration value
    return S3ContentStore(s3, prefix, location=location, on_failure=on_failure)


def _safe_endpoint(endpoint: str) -> str:
    """``endpoint`` with any user:password part dropped (it is never shown)."""
    parts = urlsplit(endpoint)
    if parts.username is None and parts.password is None:
        return endpoint
    return parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else "")).geturl()


def open_vector_index(
    settings: Settings,
    metadata: MetadataStore,
    dim: int,
    on_retry: Callable[[str], None] | None = None,
    *,
    model_name: str = "",
    on_failure: Callable[[str], None] | None = None,
) -> VectorIndex:
    """The primary vector index of ``vector.backend``: ``lancedb`` (opened on first use), ``exact`` or ``milvus``
    (connected now, so that an unreachable server fails the start).

    Args:
        settings: the engine settings (``vector`` section and ``home``).
        metadata: the metadata store (the exact index reads its vectors).
        dim: the embedder's dimension.
        on_retry: called with an operation name each time a commit conflict (LanceDB) or a transient error
            (Milvus) is retried (metrics).
        model_name: the embedder's model: Milvus keeps one collection per model and dimension.
        on_failure: called with the action of each Milvus call that failed after its retries (metrics).

    Raises:
        ContextEngineError: ``CFG-4001`` naming ``vector.milvus.uri`` and the address (never the token) when Milvus
            cannot be reached or refuses the credentials; ``IDX-4091`` when its collection has another dimension.
    """
    backend = settings.vector.backend
    if backend == "exact":
        from context_engine.storage.vector.exact import ExactVectorIndex

        return ExactVectorIndex(metadata)
    if backend == "lancedb":
        from context_engine.storage.vector.lazy import LazyVectorIndex

        home = settings.home_path

        def open_lancedb() -> VectorIndex:
            from context_engine.storage.vector.lancedb_index import LanceDBVectorIndex

            return LanceDBVectorIndex(home / "vectors", dim, settings.vector, on_retry=on_retry)

        def drop_lancedb() -> bool:
            from context_engine.storage.vector.lancedb_index import drop_table

            return drop_table(home / "vectors", settings.vector.table_name)

        # opened on first use: a search served by the level-0 matrix and BM25 never pays for importing LanceDB
        return LazyVectorIndex("lancedb", open_lancedb, dropper=drop_lancedb)
    if backend == "milvus":
        try:
            from context_engine.storage.vector.milvus_index import MilvusVectorIndex
        except ImportError as err:
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"vector.backend 'milvus' needs pymilvus: install context-engine[scale-out] ({err})",
                {"setting": "vector.backend"},
            ) from err
        return MilvusVectorIndex(settings.vector.milvus, dim, model_name, on_retry=on_retry, on_failure=on_failure)
    raise ContextEngineError(
        ErrorCode.CONFIG_INVALID, f"vector.backend {backend!r} is not available", {"setting": "vector.backend"}
    )
