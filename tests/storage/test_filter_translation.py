"""One typed filter, one translation per backend, one visible set (issue 12 acceptance; storage/filters.py).

A :class:`VectorFilter` is translated to SQL for LanceDB (``build_predicate``), to a boolean expression for Milvus
(``milvus_expression``; on the server of ``scripts/services.sh up milvus``, skipped when it is not running) and to a
boolean mask over dictionary-encoded columns for every in-process index (``RowTable.mask``: the matrix index /
level-0 matrix and the BM25 partitions). On the same random corpus, every backend must make exactly the reference's
records visible, for random filters over every field, including empty lists, literal prefixes with SQL-looking
characters, and other accounts.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.settings import VectorSettings
from context_engine.storage.filters import RowTable
from context_engine.storage.keyword.bm25_index import BM25Index
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.vector.lancedb_index import LanceDBVectorIndex
from context_engine.storage.vector.matrix import MatrixVectorIndex
from tests.services import require_service
from tests.storage.conftest import drop_milvus_collections
from tests.storage.test_vector_conformance import passes

DIM = 8
N = 400
ACCOUNTS = ["acc-0", "acc-1", "o'hare"]
SPACES = ["shared", "user:u1", "user:u2", "agent:a1"]
TYPES = ["resource", "memory", "skill"]
CATEGORIES = ["", "kubernetes", "database", "net_work"]
DIRS = ["dir0", "dir1", "dir10", "d%r", "d_r", "it's"]


def corpus() -> list[VectorRecord]:
    rng = np.random.default_rng(97)
    vectors = rng.standard_normal((N, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    records = []
    for i in range(N):
        d = DIRS[int(rng.integers(0, len(DIRS)))]
        records.append(
            VectorRecord(
                id=f"n{i:04d}",
                vector=vectors[i],
                uri=f"ctx://resources/{d}/f{i}.md",
                parent_uri=None if i % 17 == 0 else f"ctx://resources/{d}/",
                account_id=ACCOUNTS[int(rng.integers(0, len(ACCOUNTS)))],
                owner_space=SPACES[int(rng.integers(0, len(SPACES)))],
                context_type=TYPES[int(rng.integers(0, len(TYPES)))],
                category=CATEGORIES[int(rng.integers(0, len(CATEGORIES)))],
                level=int(rng.choice([0, 2])),
                doc_id=f"doc{int(rng.integers(0, 30))}",
                chunk_index=int(rng.integers(0, 5)),
                text=f"common token {i}",
            )
        )
    return records


RECORDS = corpus()


def maybe_list(values: list[str]) -> st.SearchStrategy[list[str] | None]:
    return st.one_of(st.none(), st.lists(st.sampled_from(values), max_size=3, unique=True))


FILTERS = st.builds(
    VectorFilter,
    account_id=st.sampled_from([*ACCOUNTS, "acc-none"]),
    owner_spaces=maybe_list(SPACES + ["user:ghost"]),
    levels=st.one_of(st.none(), st.lists(st.sampled_from([0, 1, 2]), max_size=2, unique=True)),
    context_types=maybe_list(TYPES),
    categories=maybe_list(CATEGORIES),
    uri_prefix=st.one_of(
        st.none(),
        st.sampled_from([f"ctx://resources/{d}" for d in DIRS] + [f"ctx://resources/{d}/" for d in DIRS]),
        st.sampled_from(["ctx://resources/", "ctx://", "ctx://resources/dir1/f1", "nothing"]),
    ),
    parent_uris=maybe_list([f"ctx://resources/{d}/" for d in DIRS]),
    doc_ids=maybe_list([f"doc{i}" for i in range(30)]),
)


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory):
    root: Path = tmp_path_factory.mktemp("filters")
    store = SqlMetadataStore.sqlite(root / "metadata.db")
    store.put_vectors(RECORDS)
    matrix = MatrixVectorIndex(store)
    lance = LanceDBVectorIndex(root / "vectors", DIM, VectorSettings())
    lance.upsert(RECORDS)
    bm25 = BM25Index()
    bm25.upsert(RECORDS)
    tables: dict[str, RowTable] = {}
    for account in ACCOUNTS:
        table = tables[account] = RowTable(account)
        table.publish(table.append([r for r in RECORDS if r.account_id == account]))
    yield {"matrix": matrix, "lancedb": lance, "bm25": bm25, "tables": tables}
    store.close()


@pytest.fixture(scope="module")
def milvus_index():
    """The corpus in a Milvus collection of its own (dropped at the end), or a skip when Milvus is not running."""
    from context_engine.settings import MilvusSettings
    from context_engine.storage.vector.milvus_index import MilvusVectorIndex

    uri = require_service("CE_TEST_MILVUS_URI", "milvus")
    prefix = f"filters{uuid.uuid4().hex[:12]}"
    index = MilvusVectorIndex(MilvusSettings(uri=uri, collection_prefix=prefix, timeout_s=60), DIM, "filters")
    try:
        index.upsert(RECORDS)
        yield index
    finally:
        index.close()
        drop_milvus_collections(uri, f"{prefix}_")


def visible(backends, name: str, flt: VectorFilter) -> set[str]:
    q = RECORDS[0].vector
    if name == "bm25":
        return {h.id for h in backends["bm25"].search("common", N, flt)}
    if name == "rowtable":
        table = backends["tables"].get(flt.account_id)
        if table is None:
            return set()
        return {table.ids[r] for r in np.flatnonzero(table.mask(flt)).tolist()}
    return {h.id for h in backends[name].search(q, N, flt)}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=FILTERS)
def test_every_backend_makes_the_reference_set_visible(backends, flt: VectorFilter) -> None:
    expected = {r.id for r in RECORDS if passes(r, flt)}
    for name in ("rowtable", "matrix", "lancedb", "bm25"):
        assert visible(backends, name, flt) == expected, name


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=FILTERS)
def test_milvus_makes_the_reference_set_visible(milvus_index, flt: VectorFilter) -> None:
    expected = {r.id for r in RECORDS if passes(r, flt)}
    assert {h.id for h in milvus_index.search(RECORDS[0].vector, N, flt)} == expected


def test_the_filters_are_not_trivial(backends) -> None:
    """The corpus makes each field decide: a filter on it alone keeps some records of an account, not all."""
    base = VectorFilter(account_id="acc-0")
    every = {r.id for r in RECORDS if passes(r, base)}
    for update in (
        {"owner_spaces": ["shared"]},
        {"levels": [0]},
        {"context_types": ["memory"]},
        {"categories": ["net_work"]},
        {"uri_prefix": "ctx://resources/d_r/"},
        {"parent_uris": ["ctx://resources/dir1/"]},
        {"doc_ids": ["doc3", "doc4"]},
    ):
        got = visible(backends, "rowtable", base.model_copy(update=update))
        assert got and got < every, update
