"""Fixtures for the lookup_knowledge unit tests: a real SQLite metadata store (cheap) and builders for records."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest

from context_engine.ingest.pipeline import vector_id
from context_engine.schema.nodes import NodeRecord, VectorRecord
from context_engine.schema.uri import ContextURI
from context_engine.storage.metadata.audit import SqlAuditStore
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore


@pytest.fixture
def metadata(tmp_path) -> Iterator[SqlMetadataStore]:
    store = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    yield store
    store.close()


@pytest.fixture
def audit(metadata) -> SqlAuditStore:
    return SqlAuditStore(metadata)


def node(uri: str, title: str, account: str = "acme", **kw) -> NodeRecord:
    u = ContextURI.parse(uri)
    return NodeRecord(
        account_id=account,
        uri=str(u),
        parent_uri=str(u.parent) if u.parent else None,
        owner_space=u.owner_space,
        context_type=u.context_type,
        category=u.category,
        is_dir=u.is_dir,
        title=title,
        has_content=not u.is_dir,
        created_at=datetime.now(UTC),
        updated_at=datetime.now(UTC),
        **kw,
    )


def chunk(uri: str, index: int, text: str, breadcrumb: str, account: str = "acme", dim: int = 4) -> VectorRecord:
    u = ContextURI.parse(uri)
    vec = np.zeros(dim, dtype=np.float32)
    vec[index % dim] = 1.0
    return VectorRecord(
        id=vector_id(account, str(u), 2, index),
        vector=vec,
        uri=str(u),
        parent_uri=str(u.parent),
        account_id=account,
        owner_space=u.owner_space,
        context_type=u.context_type or "",
        category=u.category or "",
        level=2,
        doc_id=str(u),
        chunk_index=index,
        text=text,
        breadcrumb=breadcrumb,
    )
