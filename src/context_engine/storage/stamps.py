"""The stamps a home's stores carry, checked when an engine opens (DESIGN.md §3; docs/deployment.md, "Scale-out").

* The embedding model: the metadata database records the model (and its dimension) that built the index; an engine
  configured with another model is refused (``IDX-4091``), so models never mix in one index.
* The deployment's identity: the metadata database holds a ``store_id``, stamped on the content store (and a shared
  vector index: Milvus) on first use; a store stamped by another database is refused (``CFG-4001``) before anything
  is written to it or deleted from it.

A read-only home is checked and never stamped. Split out of ``service.py`` (issue 28).
"""

from __future__ import annotations

import uuid

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.storage.protocols import ContentStore, Embedder, MetadataStore, VectorIndex

__all__ = ["STAMP_DIM", "STAMP_MODEL", "STORE_ID", "check_model_stamp", "check_store_owner"]

STAMP_MODEL = "embedding_model"
STAMP_DIM = "embedding_dim"
STORE_ID = "store_id"  # the deployment's identity, shared by its metadata database and its content store


def check_model_stamp(metadata: MetadataStore, embedder: Embedder, *, read_only: bool) -> None:
    """The index records the model that built it; refuse to mix models (DESIGN §3). Stamps an unstamped writable
    home with ``embedder``'s model and dimension.

    Raises:
        ContextEngineError: ``IDX-4091`` when the home was indexed with another model or dimension.
    """
    model, dim = metadata.get_meta(STAMP_MODEL), metadata.get_meta(STAMP_DIM)
    if model is None and read_only:
        return  # nothing was indexed yet, and nothing may be stamped
    if model is None:
        metadata.set_meta(STAMP_MODEL, embedder.model_name)
        metadata.set_meta(STAMP_DIM, str(embedder.dim))
        return
    if model != embedder.model_name or dim != str(embedder.dim):
        raise ContextEngineError(
            ErrorCode.INDEX_MODEL_MISMATCH,
            f"this data directory was indexed with {model} ({dim} dimensions) but the engine is configured with "
            f"{embedder.model_name} ({embedder.dim}); use the same model or another --home",
            {"index_model": model, "index_dim": dim, "configured_model": embedder.model_name},
        )


def check_store_owner(metadata: MetadataStore, content: ContentStore, index: VectorIndex, *, read_only: bool) -> None:
    """The content store (and a shared vector index: Milvus) belong to this metadata database (docs/deployment.md,
    "Scale-out"): each carries the deployment's identity, stamped on first use. A store stamped by another
    database (a wrong or missing ``metadata.url`` beside a shared bucket or collection) is refused before
    anything is written to it, or deleted from it.

    Raises:
        ContextEngineError: ``CFG-4001`` naming the setting whose store belongs to another deployment.
    """
    if read_only:
        store_id = metadata.get_meta(STORE_ID)
        if store_id is None:
            return  # never stamped: nothing was written to the stores by this database, and nothing may be now
    else:
        store_id = metadata.ensure_meta(STORE_ID, uuid.uuid4().hex)
    # a vector index that is a home's own (LanceDB, opened lazily or not; matrix; exact) reads None and records
    # nothing: only a shared one (Milvus) carries a stamp
    shared: list[tuple[str, ContentStore | VectorIndex]] = [
        ("content.url", content),
        ("vector.milvus.collection_prefix", index),
    ]
    for setting, store in shared:
        stamp = store.read_stamp()
        if stamp is None:
            if not read_only:
                store.write_stamp(store_id)
        elif stamp != store_id:
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"{setting} names a store of another deployment (another metadata database): check metadata.url "
                f"and {setting}, they must name the stores of one deployment",
                {"setting": setting, "store_stamp": stamp, "metadata_store_id": store_id},
            )
