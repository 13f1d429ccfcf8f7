"""ExactVectorIndex specifics beyond the VectorIndex conformance suite: the generation cache, ties at the top-k
boundary, the path for stores without a bulk loader, and error mapping (DESIGN.md §3)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.protocols import MetadataStore, VectorIndex
from context_engine.storage.vector.exact import ExactVectorIndex, VectorMatrix, VectorMatrixSource

DIM = 8
ALL = VectorFilter(account_id="acc-a")


def unit(seed: int, n: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def rec(id: str, vector: np.ndarray, account_id: str = "acc-a", **fields: object) -> VectorRecord:
    values: dict[str, object] = {
        "id": id,
        "vector": np.asarray(vector, dtype=np.float32),
        "uri": f"ctx://resources/docs/{id}.md",
        "parent_uri": "ctx://resources/docs/",
        "account_id": account_id,
        "owner_space": "shared",
        "context_type": "resource",
        "level": 0,
    }
    values.update(fields)
    return VectorRecord(**values)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlMetadataStore]:
    s = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    yield s
    s.close()


class ProtocolOnly:
    """Exposes only the MetadataStore protocol (no bulk loader), to exercise the iter_vectors path."""

    def __init__(self, inner: MetadataStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("load_vector_matrix", "count_vectors"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_is_a_vector_index(store: SqlMetadataStore) -> None:
    index = ExactVectorIndex(store)
    assert isinstance(index, VectorIndex) and index.name == "exact"
    assert isinstance(store, VectorMatrixSource)
    assert not isinstance(ProtocolOnly(store), VectorMatrixSource)


def test_ties_at_the_top_k_boundary_resolve_by_id(store: SqlMetadataStore) -> None:
    v = unit(1, 3)
    tied = v[0] + 0.5 * v[1]
    tied /= np.linalg.norm(tied)
    index = ExactVectorIndex(store)
    # one exact match, five identical vectors written in reverse id order, one far away
    index.upsert([rec(i, tied) for i in ("e", "d", "c", "b", "a")] + [rec("z-best", v[0]), rec("far", -v[0])])
    hits = index.search(v[0], 3, ALL)
    assert [h.id for h in hits] == ["z-best", "a", "b"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-6) and hits[0].score <= 1.0
    assert hits[1].score == hits[2].score == pytest.approx(float(tied @ v[0]), abs=1e-6)
    assert [h.id for h in index.search(v[0], 7, ALL)] == ["z-best", "a", "b", "c", "d", "e", "far"]
    assert index.search(v[0], 7, ALL)[-1].score == pytest.approx(-1.0, abs=1e-6)


def test_cache_follows_writes_of_this_and_other_store_instances(store: SqlMetadataStore, tmp_path: Path) -> None:
    v = unit(2, 4)
    index = ExactVectorIndex(store)
    index.upsert([rec("a", v[0]), rec("b", v[1])])
    assert [h.id for h in index.search(v[2], 1, ALL)] in (["a"], ["b"])
    index.upsert([rec("c", v[2])])
    assert index.search(v[2], 1, ALL)[0].id == "c"

    other = SqlMetadataStore.sqlite(tmp_path / "metadata.db")  # another process on the same database
    try:
        other.put_vectors([rec("d", v[3])])
        assert index.search(v[3], 1, ALL)[0].id == "d"
        other.delete_vectors(["d", "c"])
        assert {h.id for h in index.search(v[3], 10, ALL)} == {"a", "b"}
    finally:
        other.close()


def test_search_sees_committed_rows_only_and_never_a_rolled_back_cache(store: SqlMetadataStore) -> None:
    v = unit(3, 3)
    index = ExactVectorIndex(store)
    index.upsert([rec("a", v[0])])
    with pytest.raises(RuntimeError), store.transaction():
        index.upsert([rec("tmp", v[1])])
        assert [h.id for h in index.search(v[1], 5, ALL)] == ["a"]  # uncommitted: not searched
        raise RuntimeError("roll back")
    index.upsert([rec("b", v[2])])  # the counter moves past the rolled-back value
    assert [h.id for h in index.search(v[1], 5, ALL)] in (["a", "b"], ["b", "a"])


def test_protocol_only_store_gives_the_same_hits(store: SqlMetadataStore) -> None:
    vectors = unit(4, 200)
    records = [
        rec(f"r{i:03d}", v, account_id=f"acc-{'ab'[i % 2]}", level=(0, 2)[i % 3 == 0], doc_id=f"d{i % 7}")
        for i, v in enumerate(vectors)
    ]
    fast = ExactVectorIndex(store)
    fast.upsert(records)
    slow = ExactVectorIndex(ProtocolOnly(store))  # type: ignore[arg-type]
    assert fast.count() == slow.count() == 200
    queries = unit(5, 10)
    filters = [
        VectorFilter(account_id="acc-a"),
        VectorFilter(account_id="acc-b", levels=[2]),
        VectorFilter(account_id="acc-a", doc_ids=["d1", "d3"], uri_prefix="ctx://resources/docs/r1"),
    ]
    for q in queries:
        for flt in filters:
            assert fast.search(q, 10, flt) == slow.search(q, 10, flt)


def test_lru_keeps_results_right_across_accounts(store: SqlMetadataStore) -> None:
    v = unit(6, 2)
    index = ExactVectorIndex(store, max_cached_accounts=1)
    index.upsert([rec("a1", v[0], account_id="acc-a"), rec("b1", v[1], account_id="acc-b")])
    for _ in range(3):
        assert [h.id for h in index.search(v[0], 5, ALL)] == ["a1"]
        assert [h.id for h in index.search(v[0], 5, VectorFilter(account_id="acc-b"))] == ["b1"]
    index.optimize()
    assert [h.id for h in index.search(v[0], 5, ALL)] == ["a1"]


def test_bad_queries(store: SqlMetadataStore) -> None:
    index = ExactVectorIndex(store)
    index.upsert([rec("a", unit(7, 1)[0])])
    with pytest.raises(ContextEngineError) as info:
        index.search(np.ones(DIM + 1, np.float32), 3, ALL)
    assert info.value.code is ErrorCode.INDEX_MODEL_MISMATCH
    with pytest.raises(ContextEngineError) as info:
        index.search(np.full(DIM, np.nan, np.float32), 3, ALL)
    assert info.value.code is ErrorCode.VECTOR_SEARCH_FAILED
    assert index.search(np.ones(DIM, np.float32), 0, ALL) == []


def test_store_failure_is_retryable_ret_5001(store: SqlMetadataStore) -> None:
    index = ExactVectorIndex(store)
    store.close()
    with pytest.raises(ContextEngineError) as info:
        index.search(np.ones(DIM, np.float32), 3, ALL)
    assert info.value.code is ErrorCode.VECTOR_SEARCH_FAILED and info.value.retryable
    assert isinstance(info.value.__cause__, ContextEngineError)


def test_vector_matrix_from_records_sorts_by_id() -> None:
    v = unit(8, 3)
    records: Sequence[VectorRecord] = [rec("b", v[0]), rec("c", v[1], parent_uri=None), rec("a", v[2], level=2)]
    m = VectorMatrix.from_records(7, records)
    assert (m.generation, m.ids, m.n, m.dim) == (7, ["a", "b", "c"], 3, DIM)
    np.testing.assert_array_equal(m.vectors, v[[2, 0, 1]])
    assert list(m.parent_uri) == ["ctx://resources/docs/", "ctx://resources/docs/", None]
    assert m.level.tolist() == [2, 0, 0]
    assert VectorMatrix.from_records(1, []).n == 0
