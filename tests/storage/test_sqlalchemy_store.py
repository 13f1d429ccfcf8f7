"""SqlMetadataStore specifics beyond the MetadataStore protocol: SQLite pragmas, error mapping, the bulk loader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorRecord
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore

from .conftest import MetadataBackend


def vrec(id: str, vector: np.ndarray, account_id: str = "acc-a", **fields: object) -> VectorRecord:
    values: dict[str, object] = {
        "id": id,
        "vector": np.asarray(vector, dtype=np.float32),
        "uri": f"ctx://resources/{id}.md",
        "parent_uri": "ctx://resources/",
        "account_id": account_id,
        "owner_space": "shared",
        "context_type": "resource",
        "level": 0,
    }
    values.update(fields)
    return VectorRecord(**values)  # type: ignore[arg-type]


def test_sqlite_runs_in_wal_with_foreign_keys_and_normal_sync(tmp_path: Path) -> None:
    store = SqlMetadataStore.sqlite(tmp_path / "new" / "dir" / "metadata.db")
    try:
        assert (tmp_path / "new" / "dir" / "metadata.db").is_file()
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        assert store.url.startswith("sqlite:///") and store.url.endswith("metadata.db")
    finally:
        store.close()


def test_sqlite_path_with_url_special_characters(tmp_path: Path) -> None:
    path = tmp_path / "a b%20#x?mode=ro 中文" / "metadata.db"
    store = SqlMetadataStore.sqlite(path)
    store.set_meta("k", "v")
    store.close()
    assert path.is_file()
    again = SqlMetadataStore.sqlite(path)
    try:
        assert again.get_meta("k") == "v"
    finally:
        again.close()


@pytest.mark.parametrize("url", ["not a url", "nosuchdialect://x/y"])
def test_unusable_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ContextEngineError) as info:
        SqlMetadataStore(url)
    assert info.value.code is ErrorCode.CONFIG_INVALID


def test_database_failures_become_retryable_storage_errors(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    engine = create_engine(metadata_backend.url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE nodes"))
    finally:
        engine.dispose()
    with pytest.raises(ContextEngineError) as info:
        store.get_node("acc-a", "ctx://resources/a.md")
    assert info.value.code is ErrorCode.STORAGE_FAILED and info.value.retryable
    assert info.value.__cause__ is not None
    assert "nodes" in info.value.message  # the driver's reason, e.g. "no such table: nodes"


def test_load_vector_matrix_columns_sorted_by_id(metadata_store: SqlMetadataStore) -> None:
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((4, 6)).astype(np.float32)
    records = [
        vrec("c", vectors[0], level=2, doc_id="d1", chunk_index=3, text="tc", breadcrumb="H > c", category="k8s"),
        vrec("a", vectors[1], parent_uri=None),
        vrec("b", vectors[2], owner_space="user:u1", context_type="memory"),
        vrec("other", vectors[3], account_id="acc-b"),
    ]
    metadata_store.put_vectors(records)
    m = metadata_store.load_vector_matrix("acc-a")
    assert m.generation == metadata_store.account_generation("acc-a")
    assert m.ids == ["a", "b", "c"] and (m.n, m.dim) == (3, 6)
    assert m.vectors.dtype == np.float32 and m.vectors.shape == (3, 6)
    np.testing.assert_array_equal(m.vectors, vectors[[1, 2, 0]])
    assert list(m.uri) == ["ctx://resources/a.md", "ctx://resources/b.md", "ctx://resources/c.md"]
    assert list(m.parent_uri) == [None, "ctx://resources/", "ctx://resources/"]
    assert list(m.owner_space) == ["shared", "user:u1", "shared"]
    assert list(m.context_type) == ["resource", "memory", "resource"]
    assert list(m.category) == ["", "", "k8s"]
    assert m.level.tolist() == [0, 0, 2] and m.chunk_index.tolist() == [0, 0, 3]
    assert list(m.doc_id) == ["", "", "d1"] and list(m.text) == ["", "", "tc"]
    assert list(m.breadcrumb) == ["", "", "H > c"]

    empty = metadata_store.load_vector_matrix("nobody")
    assert empty.n == 0 and empty.vectors.shape == (0, 0)


def test_load_vector_matrix_refuses_mixed_dimensions(metadata_store: SqlMetadataStore) -> None:
    metadata_store.put_vectors([vrec("a", np.ones(4)), vrec("b", np.ones(8))])
    with pytest.raises(ContextEngineError) as info:
        metadata_store.load_vector_matrix("acc-a")
    assert info.value.code is ErrorCode.INDEX_MODEL_MISMATCH


def test_count_vectors(metadata_store: SqlMetadataStore) -> None:
    metadata_store.put_vectors([vrec("a", np.ones(4)), vrec("b", np.ones(4)), vrec("c", np.ones(4), account_id="x")])
    counts = (metadata_store.count_vectors(), metadata_store.count_vectors("acc-a"), metadata_store.count_vectors("y"))
    assert counts == (3, 2, 0)
