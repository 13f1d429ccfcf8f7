"""Stores selected by settings (DESIGN §2, §14; issue 13; docs/deployment.md): the composition root's one place that
names adapters. ``metadata.url``, ``content.url`` and ``vector.backend`` choose them; the embedded default (SQLite,
local files, LanceDB under ``<home>``) needs no configuration.

Every opener fails fast with ``CFG-4001`` naming the setting and the address (never a credential) when a store is
unreachable or the setting is malformed, and creates nothing half-way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from context_engine.errors import ContextEngineError, ErrorCode

if TYPE_CHECKING:
    from context_engine.settings import Settings
    from context_engine.storage.protocols import ContentStore, MetadataStore, VectorIndex

__all__ = ["metadata_url", "open_content", "open_metadata", "open_vector_index"]


def metadata_url(settings: Settings) -> str:
    """The SQLAlchemy URL of the metadata database: ``metadata.url`` or ``sqlite:///<home>/metadata.db``."""
    if settings.metadata.url:
        return settings.metadata.url
    from sqlalchemy.engine import URL

    return URL.create("sqlite", database=str(settings.home_path / "metadata.db")).render_as_string()


def open_metadata(settings: Settings) -> MetadataStore:
    """The metadata store of ``metadata.url`` (SQLite by default, PostgreSQL with ``postgresql+psycopg://``).

    Raises:
        ContextEngineError: ``CFG-4001`` for a URL of an unsupported dialect or a database that cannot be reached.
    """
    from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore

    if not settings.metadata.url:
        return SqlMetadataStore.sqlite(settings.home_path / "metadata.db")
    return SqlMetadataStore(settings.metadata.url)


def open_content(settings: Settings) -> ContentStore:
    """The content store of ``content.url``: ``file://`` (default ``<home>/content``) or ``s3://bucket/prefix``.

    Raises:
        ContextEngineError: ``CFG-4001`` for another scheme, or an object store that cannot be reached.
    """
    url = settings.content.url
    if not url:
        from context_engine.storage.content.local import LocalContentStore

        return LocalContentStore(settings.home_path / "content")
    scheme = urlsplit(url).scheme.lower()
    if scheme == "file":
        from context_engine.storage.content.local import LocalContentStore

        return LocalContentStore(Path(urlsplit(url).path))
    raise ContextEngineError(
        ErrorCode.CONFIG_INVALID,
        f"content.url: unsupported scheme {scheme!r} in {url!r}; use file:///path or s3://bucket/prefix",
        {"setting": "content.url"},
    )


def open_vector_index(
    settings: Settings,
    metadata: MetadataStore,
    dim: int,
    on_retry: Callable[[str], None] | None = None,
    *,
    model_name: str = "",
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

        # opened on first use: a search served by the level-0 matrix and BM25 never pays for importing LanceDB
        return LazyVectorIndex("lancedb", open_lancedb)
    if backend == "milvus":
        try:
            from context_engine.storage.vector.milvus_index import MilvusVectorIndex
        except ImportError as err:
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"vector.backend 'milvus' needs pymilvus: install context-engine[scale-out] ({err})",
                {"setting": "vector.backend"},
            ) from err
        return MilvusVectorIndex(settings.vector.milvus, dim, model_name, on_retry=on_retry)
    raise ContextEngineError(
        ErrorCode.CONFIG_INVALID, f"vector.backend {backend!r} is not available", {"setting": "vector.backend"}
    )
