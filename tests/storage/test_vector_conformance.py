"""Conformance suite for every :class:`VectorIndex` adapter (DESIGN.md §3, §13; STYLE.md, Tests).

Each test runs against every backend through the parametrised ``vector_index`` / ``vector_index_factory`` fixtures
(``tests/storage/conftest.py``). The reference is a NumPy brute-force cosine search over the same records, ordered
by score descending then id ascending.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorHit, VectorRecord
from context_engine.settings import VectorSettings
from context_engine.storage.protocols import VectorIndex
from context_engine.storage.vector.lancedb_index import max_nprobes

SCORE_TOL = 1e-5
VECTOR_DIM = 16
VectorIndexFactory = Any  # tests/storage/conftest.py: open(dim=, settings=), close(index), backend, root, dim


@pytest.fixture
def vector_dim() -> int:
    return VECTOR_DIM


# ---------------------------------------------------------------------------------------------------- helpers


def unit(rng: np.random.Generator, n: int, dim: int = VECTOR_DIM) -> np.ndarray:
    """``n`` random L2-normalised float32 vectors, shape ``(n, dim)``."""
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def rec(
    id: str,
    vector: np.ndarray,
    *,
    account_id: str = "acc-a",
    uri: str | None = None,
    parent_uri: str | None = "ctx://resources/docs/",
    owner_space: str = "shared",
    context_type: str = "resource",
    category: str = "",
    level: int = 0,
    doc_id: str = "",
    chunk_index: int = 0,
    text: str = "",
    breadcrumb: str = "",
) -> VectorRecord:
    return VectorRecord(
        id=id,
        vector=np.asarray(vector, dtype=np.float32),
        uri=uri if uri is not None else f"ctx://resources/docs/{id}",
        parent_uri=parent_uri,
        account_id=account_id,
        owner_space=owner_space,
        context_type=context_type,
        category=category,
        level=level,
        doc_id=doc_id,
        chunk_index=chunk_index,
        text=text,
        breadcrumb=breadcrumb,
    )


def passes(r: VectorRecord, flt: VectorFilter) -> bool:
    """The reference semantics of :class:`VectorFilter`."""
    checks: list[tuple[Sequence[Any] | None, Any]] = [
        (flt.owner_spaces, r.owner_space),
        (flt.levels, r.level),
        (flt.context_types, r.context_type),
        (flt.categories, r.category),
        (flt.parent_uris, r.parent_uri),
        (flt.doc_ids, r.doc_id),
    ]
    if r.account_id != flt.account_id:
        return False
    if any(allowed is not None and value not in allowed for allowed, value in checks):
        return False
    return flt.uri_prefix is None or r.uri.startswith(flt.uri_prefix)


def reference(
    records: Iterable[VectorRecord], query: np.ndarray, top_k: int, flt: VectorFilter
) -> list[tuple[str, float]]:
    """Exact top-k ``(id, cosine similarity)`` by score desc, id asc, computed in float64."""
    q = np.asarray(query, dtype=np.float64)
    scored = [(r.id, float(np.asarray(r.vector, dtype=np.float64) @ q)) for r in records if passes(r, flt)]
    scored.sort(key=lambda x: (-x[1], x[0]))
    return scored[:top_k]


def ids(hits: Sequence[VectorHit]) -> list[str]:
    return [h.id for h in hits]


def assert_same_ranking(hits: Sequence[VectorHit], expected: Sequence[tuple[str, float]]) -> None:
    """Hits equal the reference: same ids in the same order, scores within ``SCORE_TOL``.

    Two ids may swap only when their reference scores differ by less than the tolerance (float32 vs float64).
    """
    assert len(hits) == len(expected), (ids(hits), expected)
    for rank, (hit, (exp_id, exp_score)) in enumerate(zip(hits, expected, strict=True)):
        assert hit.score == pytest.approx(exp_score, abs=SCORE_TOL), (rank, hit.id, exp_id)
        if hit.id != exp_id:
            ref_scores = dict(expected)
            assert hit.id in ref_scores and abs(ref_scores[hit.id] - exp_score) < SCORE_TOL, (rank, hit.id, exp_id)
    # Whatever the near-tie swaps, the output itself is ordered by score desc then id asc.
    assert hits == sorted(hits, key=lambda h: (-h.score, h.id))


# ---------------------------------------------------------------------------------------------------- basics


def test_adapter_satisfies_protocol(vector_index: VectorIndex) -> None:
    assert isinstance(vector_index, VectorIndex)
    assert isinstance(vector_index.name, str) and vector_index.name
    assert vector_index.count() == 0


def test_search_on_empty_index_returns_nothing(vector_index: VectorIndex) -> None:
    q = unit(np.random.default_rng(1), 1)[0]
    assert vector_index.search(q, 5, VectorFilter(account_id="acc-a")) == []


def test_top_k_below_one_returns_nothing(vector_index: VectorIndex) -> None:
    v = unit(np.random.default_rng(2), 1)[0]
    vector_index.upsert([rec("a", v)])
    assert vector_index.search(v, 0, VectorFilter(account_id="acc-a")) == []


def test_query_of_another_dimension_is_a_model_mismatch(vector_index: VectorIndex) -> None:
    vector_index.upsert([rec("a", unit(np.random.default_rng(4), 1)[0])])
    with pytest.raises(ContextEngineError) as info:
        vector_index.search(unit(np.random.default_rng(5), 1, VECTOR_DIM * 2)[0], 3, VectorFilter(account_id="acc-a"))
    assert info.value.code is ErrorCode.INDEX_MODEL_MISMATCH


def test_nearest_first_with_numpy_cosine_scores(vector_index: VectorIndex) -> None:
    rng = np.random.default_rng(7)
    vectors = unit(rng, 60)
    records = [rec(f"r{i:03d}", v, text=f"text {i}", breadcrumb=f"A > B{i}") for i, v in enumerate(vectors)]
    vector_index.upsert(records)
    assert vector_index.count() == 60

    query = vectors[17] * 0.8 + unit(rng, 1)[0] * 0.2
    query /= np.linalg.norm(query)
    flt = VectorFilter(account_id="acc-a")
    hits = vector_index.search(query, 10, flt)
    assert_same_ranking(hits, reference(records, query, 10, flt))
    assert hits[0].id == "r017"
    assert all(-1.0 <= h.score <= 1.0 and h.score_label == "similarity" for h in hits)

    # The record's own vector scores 1 against itself; payload fields come back as written.
    top = vector_index.search(vectors[5], 1, flt)[0]
    assert top.id == "r005" and top.score == pytest.approx(1.0, abs=SCORE_TOL)
    assert (top.uri, top.parent_uri, top.text, top.breadcrumb) == (
        "ctx://resources/docs/r005",
        "ctx://resources/docs/",
        "text 5",
        "A > B5",
    )
    assert (top.owner_space, top.context_type, top.category, top.level, top.doc_id, top.chunk_index) == (
        "shared",
        "resource",
        "",
        0,
        "",
        0,
    )


def test_payload_round_trip_with_null_parent_and_chunk_fields(vector_index: VectorIndex) -> None:
    v = unit(np.random.default_rng(3), 1)[0]
    record = rec(
        "chunk-1",
        v,
        uri="ctx://resources/runbooks/kube.md",
        parent_uri=None,
        category="kubernetes",
        level=2,
        doc_id="doc-9",
        chunk_index=4,
        text="kubectl logs -p",
        breadcrumb="KubePodCrashLooping > Diagnosis > Check logs",
    )
    vector_index.upsert([record])
    (hit,) = vector_index.search(v, 3, VectorFilter(account_id="acc-a"))
    assert hit.model_dump(exclude={"score"}) == {
        "id": "chunk-1",
        "score_label": "similarity",
        "uri": "ctx://resources/runbooks/kube.md",
        "parent_uri": None,
        "owner_space": "shared",
        "context_type": "resource",
        "category": "kubernetes",
        "level": 2,
        "doc_id": "doc-9",
        "chunk_index": 4,
        "text": "kubectl logs -p",
        "breadcrumb": "KubePodCrashLooping > Diagnosis > Check logs",
    }


def test_upsert_replaces_by_id(vector_index: VectorIndex) -> None:
    rng = np.random.default_rng(11)
    v1, v2, other = unit(rng, 3)
    vector_index.upsert([rec("x", v1, text="old"), rec("y", other)])
    vector_index.upsert([rec("x", v2, text="new", category="c2")])
    assert vector_index.count() == 2

    hits = vector_index.search(v2, 10, VectorFilter(account_id="acc-a"))
    assert ids(hits).count("x") == 1
    x = next(h for h in hits if h.id == "x")
    assert (x.text, x.category) == ("new", "c2")
    assert x.score == pytest.approx(1.0, abs=SCORE_TOL)
    # The old payload is gone: only "y" still has the empty category.
    assert ids(vector_index.search(v1, 10, VectorFilter(account_id="acc-a", categories=[""]))) == ["y"]


def test_upsert_repeated_id_in_one_call_keeps_last(vector_index: VectorIndex) -> None:
    rng = np.random.default_rng(12)
    v1, v2 = unit(rng, 2)
    vector_index.upsert([rec("dup", v1, text="first"), rec("dup", v2, text="second")])
    assert vector_index.count() == 1
    (hit,) = vector_index.search(v2, 5, VectorFilter(account_id="acc-a"))
    assert hit.text == "second" and hit.score == pytest.approx(1.0, abs=SCORE_TOL)


def test_upsert_moves_record_between_filters(vector_index: VectorIndex) -> None:
    v = unit(np.random.default_rng(13), 1)[0]
    vector_index.upsert([rec("m", v, uri="ctx://resources/old/m", owner_space="shared")])
    vector_index.upsert([rec("m", v, uri="ctx://resources/new/m", owner_space="user:u1")])
    assert vector_index.search(v, 5, VectorFilter(account_id="acc-a", uri_prefix="ctx://resources/old/")) == []
    assert vector_index.search(v, 5, VectorFilter(account_id="acc-a", owner_spaces=["shared"])) == []
    assert ids(vector_index.search(v, 5, VectorFilter(account_id="acc-a", owner_spaces=["user:u1"]))) == ["m"]


def test_delete(vector_index: VectorIndex) -> None:
    rng = np.random.default_rng(17)
    vectors = unit(rng, 20)
    records = [rec(f"d{i:02d}", v) for i, v in enumerate(vectors)]
    vector_index.upsert(records)
    vector_index.delete(["d03", "d07", "unknown-id", "it's-unknown"])
    assert vector_index.count() == 18
    flt = VectorFilter(account_id="acc-a")
    hits = vector_index.search(vectors[3], 20, flt)
    assert "d03" not in ids(hits) and "d07" not in ids(hits)
    assert_same_ranking(hits, reference([r for r in records if r.id not in {"d03", "d07"}], vectors[3], 20, flt))

    vector_index.delete([])  # no-op
    vector_index.delete(["d03"])  # already gone
    assert vector_index.count() == 18
    vector_index.delete([r.id for r in records])
    assert vector_index.count() == 0
    assert vector_index.search(vectors[0], 5, flt) == []


def test_delete_ids_with_quotes_and_many_ids(vector_index: VectorIndex) -> None:
    rng = np.random.default_rng(19)
    odd_ids = ["it's", "a''b", "back\\slash", "percent%", "under_score", "new\nline", "x') OR ('1'='1", "中文'id"]
    plain = [f"p{i:04d}" for i in range(2_500)]
    vectors = unit(rng, len(odd_ids) + len(plain))
    vector_index.upsert([rec(i, v) for i, v in zip(odd_ids + plain, vectors, strict=True)])
    # More ids than one delete batch, with every odd id: exactly these go, nothing else.
    vector_index.delete(odd_ids[:-1] + plain[:2_000])
    assert vector_index.count() == 501
    remaining = ids(vector_index.search(vectors[0], 50, VectorFilter(account_id="acc-a", doc_ids=[""])))
    assert "中文'id" in ids(vector_index.search(vectors[len(odd_ids) - 1], 1, VectorFilter(account_id="acc-a")))
    assert not set(remaining) & set(odd_ids[:-1])


def test_optimize_is_safe_any_time(vector_index: VectorIndex) -> None:
    vector_index.optimize()  # empty
    rng = np.random.default_rng(23)
    vectors = unit(rng, 30)
    records = [rec(f"o{i:02d}", v) for i, v in enumerate(vectors)]
    for r in records:  # many small writes
        vector_index.upsert([r])
    vector_index.delete(["o00"])
    vector_index.optimize()
    assert vector_index.count() == 29
    flt = VectorFilter(account_id="acc-a")
    assert_same_ranking(vector_index.search(vectors[1], 5, flt), reference(records[1:], vectors[1], 5, flt))


def test_ids_lists_one_accounts_records_sorted(vector_index: VectorIndex) -> None:
    """What ``reindex --gc`` compares with the metadata store's vector rows (issue 28: on the protocol)."""
    rng = np.random.default_rng(29)
    vectors = unit(rng, 12)
    names = [f"i{i:02d}" for i in range(12)]
    accounts = ["acc-a" if i % 3 else "acc-b" for i in range(12)]
    vector_index.upsert([rec(n, v, account_id=a) for n, v, a in zip(names, vectors, accounts, strict=True)])
    vector_index.delete(["i01"])
    assert vector_index.ids("acc-a") == sorted(n for i, n in enumerate(names) if i % 3 and n != "i01")
    assert vector_index.ids("acc-b") == sorted(n for i, n in enumerate(names) if i % 3 == 0)
    assert vector_index.ids("acc-none") == []


# ---------------------------------------------------------------------------------------------------- filters


@dataclass(frozen=True)
class FilterCorpus:
    records: list[VectorRecord]
    query: np.ndarray


@pytest.fixture
def filter_corpus(vector_index: VectorIndex) -> FilterCorpus:
    """Two accounts with the same URIs and identical vectors, spread over every filterable field."""
    rng = np.random.default_rng(29)
    vectors = unit(rng, 48)
    records: list[VectorRecord] = []
    for account in ("acc-a", "acc-b"):
        for i, v in enumerate(vectors):
            ctype = ("resource", "memory", "skill")[i % 3]
            records.append(
                rec(
                    f"{account}:{i:02d}",
                    v,
                    account_id=account,
                    uri=f"ctx://resources/d{i % 4}/f{i:02d}.md",
                    parent_uri=f"ctx://resources/d{i % 4}/",
                    owner_space=("shared", "user:u1", "agent:a1", "user:u2")[i % 4],
                    context_type=ctype,
                    category=("kubernetes", "database", "")[i % 3 if i % 2 else 0],
                    level=(0, 2)[i % 2],
                    doc_id=f"doc{i % 5}",
                    chunk_index=i % 7,
                )
            )
    vector_index.upsert(records)
    return FilterCorpus(records, unit(rng, 1)[0])


FILTERS: dict[str, dict[str, Any]] = {
    "account-only": {},
    "levels-0": {"levels": [0]},
    "levels-2": {"levels": [2]},
    "levels-both": {"levels": [0, 2]},
    "levels-absent": {"levels": [1]},
    "owner-spaces": {"owner_spaces": ["shared", "user:u1"]},
    "owner-space-one": {"owner_spaces": ["agent:a1"]},
    "context-types": {"context_types": ["memory", "skill"]},
    "categories": {"categories": ["kubernetes"]},
    "categories-empty-string": {"categories": [""]},
    "uri-prefix": {"uri_prefix": "ctx://resources/d1/"},
    "uri-prefix-file": {"uri_prefix": "ctx://resources/d2/f06.md"},
    "parent-uris": {"parent_uris": ["ctx://resources/d0/", "ctx://resources/d3/"]},
    "doc-ids": {"doc_ids": ["doc1", "doc4"]},
    "combined": {
        "levels": [0],
        "owner_spaces": ["shared", "agent:a1"],
        "context_types": ["resource", "memory"],
        "uri_prefix": "ctx://resources/d",
        "doc_ids": ["doc0", "doc2", "doc4"],
    },
}


@pytest.mark.parametrize("account", ["acc-a", "acc-b"])
@pytest.mark.parametrize("fields", FILTERS.values(), ids=FILTERS.keys())
def test_every_filter_field_narrows(
    vector_index: VectorIndex, filter_corpus: FilterCorpus, account: str, fields: dict[str, Any]
) -> None:
    flt = VectorFilter(account_id=account, **fields)
    hits = vector_index.search(filter_corpus.query, 100, flt)
    expected = reference(filter_corpus.records, filter_corpus.query, 100, flt)
    assert_same_ranking(hits, expected)
    assert all(h.id.startswith(f"{account}:") for h in hits)
    if fields and fields != {"levels": [0, 2]}:
        assert len(hits) < 48  # the filter really narrowed


@pytest.mark.parametrize("field", ["owner_spaces", "levels", "context_types", "categories", "parent_uris", "doc_ids"])
def test_empty_list_matches_nothing(vector_index: VectorIndex, filter_corpus: FilterCorpus, field: str) -> None:
    flt = VectorFilter(account_id="acc-a", **{field: []})
    assert vector_index.search(filter_corpus.query, 10, flt) == []


def test_account_isolation(vector_index: VectorIndex, filter_corpus: FilterCorpus) -> None:
    by_id = {r.id: r for r in filter_corpus.records}
    b_record = by_id["acc-b:05"]
    # B's record queried with its own vector, from account A: only A's twin comes back, never B's.
    for flt in (
        VectorFilter(account_id="acc-a"),
        VectorFilter(account_id="acc-a", uri_prefix=b_record.uri),
        VectorFilter(account_id="acc-a", parent_uris=[b_record.parent_uri or ""]),
        VectorFilter(account_id="acc-a", doc_ids=[b_record.doc_id], levels=[b_record.level]),
    ):
        hits = vector_index.search(b_record.vector, 100, flt)
        assert hits and all(by_id[h.id].account_id == "acc-a" for h in hits)
    # Unknown accounts and quoting tricks see nothing at all.
    for account in ("acc-c", "", "acc-a' OR '1'='1", "acc-a' OR account_id = 'acc-b", "acc-%", "acc-_", "ACC-A"):
        assert vector_index.search(b_record.vector, 100, VectorFilter(account_id=account)) == []


def test_top_k_larger_than_matches(vector_index: VectorIndex, filter_corpus: FilterCorpus) -> None:
    flt = VectorFilter(account_id="acc-a", owner_spaces=["agent:a1"], levels=[0])
    expected = reference(filter_corpus.records, filter_corpus.query, 1_000, flt)
    assert 0 < len(expected) < 50
    assert_same_ranking(vector_index.search(filter_corpus.query, 50, flt), expected)
    assert len(vector_index.search(filter_corpus.query, 1, flt)) == 1


def test_uri_prefix_is_literal(vector_index: VectorIndex) -> None:
    """``%``, ``_`` and ``'`` in a prefix are plain characters, and ``a/`` never matches ``ab/``."""
    rng = np.random.default_rng(31)
    names = {
        "a": "ctx://resources/a/x.md",
        "ab": "ctx://resources/ab/y.md",
        "pct": "ctx://resources/a%/z.md",
        "pct2": "ctx://resources/a%b/z.md",
        "under": "ctx://resources/a_/w.md",
        "underX": "ctx://resources/aX/w.md",
        "quote": "ctx://resources/it's/v.md",
        "quote2": "ctx://resources/its/v.md",
        "dq": 'ctx://resources/say "hi"/v.md',
    }
    vectors = unit(rng, len(names))
    vector_index.upsert([rec(k, v, uri=u) for (k, u), v in zip(names.items(), vectors, strict=True)])
    q = vectors.mean(axis=0)
    cases = {
        "ctx://resources/a/": ["a"],
        "ctx://resources/a": ["a", "ab", "pct", "pct2", "under", "underX"],
        "ctx://resources/a%/": ["pct"],
        "ctx://resources/a%": ["pct", "pct2"],
        "ctx://resources/a_/": ["under"],
        "ctx://resources/it's/": ["quote"],
        'ctx://resources/say "hi"/': ["dq"],
        "ctx://resources/%": [],
        "ctx://resources/_/": [],
        "%": [],
        "ctx://resources/": sorted(names),
    }
    for prefix, expected in cases.items():
        hits = vector_index.search(q, 50, VectorFilter(account_id="acc-a", uri_prefix=prefix))
        assert sorted(ids(hits)) == sorted(expected), prefix


def test_deterministic_tie_order_by_id(vector_index: VectorIndex) -> None:
    rng = np.random.default_rng(37)
    shared, far = unit(rng, 2)
    tie_ids = [f"t{i:02d}" for i in range(40)]
    order = rng.permutation(len(tie_ids))
    # Inserted shuffled, in several writes, so storage order is not id order.
    for chunk in np.array_split(order, 4):
        vector_index.upsert([rec(tie_ids[i], shared) for i in chunk])
    vector_index.upsert([rec("far", far)])
    flt = VectorFilter(account_id="acc-a")
    for k in (1, 3, 10, 39, 40, 41):
        hits = vector_index.search(shared, k, flt)
        assert ids(hits) == (sorted(tie_ids) + ["far"])[:k], k
        assert len({h.score for h in hits[: min(k, 40)]}) == 1
    # Stable across calls.
    assert ids(vector_index.search(shared, 7, flt)) == ids(vector_index.search(shared, 7, flt))


def test_cjk_text_and_uris_round_trip(vector_index: VectorIndex) -> None:
    rng = np.random.default_rng(41)
    v1, v2 = unit(rng, 2)
    cjk = rec(
        "ctx://resources/运维/告警手册.md#0",
        v1,
        account_id="租户甲",
        uri="ctx://resources/运维/告警手册.md",
        parent_uri="ctx://resources/运维/",
        owner_space="user:张三",
        category="数据库",
        text="当 Pod 反复重启时，先查看日志。",
        breadcrumb="告警 > 诊断 > 查看日志",
    )
    vector_index.upsert([cjk, rec("other", v2, account_id="租户甲", uri="ctx://resources/运维手册/x.md")])
    flt = VectorFilter(
        account_id="租户甲", owner_spaces=["user:张三"], categories=["数据库"], uri_prefix="ctx://resources/运维/"
    )
    (hit,) = vector_index.search(v1, 5, flt)
    assert (hit.id, hit.uri, hit.parent_uri, hit.owner_space, hit.category, hit.text, hit.breadcrumb) == (
        cjk.id,
        cjk.uri,
        cjk.parent_uri,
        cjk.owner_space,
        cjk.category,
        cjk.text,
        cjk.breadcrumb,
    )
    assert vector_index.search(v1, 5, VectorFilter(account_id="租户乙")) == []


# ---------------------------------------------------------------------------------------------------- persistence


def test_reopen_finds_records(vector_index_factory: VectorIndexFactory) -> None:
    rng = np.random.default_rng(43)
    vectors = unit(rng, 25)
    records = [rec(f"p{i:02d}", v, text=f"t{i}") for i, v in enumerate(vectors)]
    first = vector_index_factory.open()
    first.upsert(records)
    first.delete(["p00"])
    vector_index_factory.close(first)

    again = vector_index_factory.open()
    assert again.count() == 24
    flt = VectorFilter(account_id="acc-a")
    assert_same_ranking(again.search(vectors[3], 5, flt), reference(records[1:], vectors[3], 5, flt))
    again.upsert([rec("p00", vectors[0])])
    assert again.count() == 25


def test_second_handle_sees_writes_at_once(vector_index_factory: VectorIndexFactory) -> None:
    """Two handles on one directory (a server and a CLI process): each sees the other's commits immediately."""
    rng = np.random.default_rng(44)
    v1, v2 = unit(rng, 2)
    writer, reader = vector_index_factory.open(), vector_index_factory.open()
    flt = VectorFilter(account_id="acc-a")
    assert reader.search(v1, 3, flt) == []
    writer.upsert([rec("w1", v1), rec("w2", v2)])
    assert reader.count() == 2 and ids(reader.search(v1, 1, flt)) == ["w1"]
    writer.delete(["w1"])
    assert reader.count() == 1 and ids(reader.search(v1, 3, flt)) == ["w2"]
    reader.upsert([rec("w1", v1)])
    assert ids(writer.search(v1, 1, flt)) == ["w1"]


def test_drop_removes_what_the_index_stores(vector_index_factory: VectorIndexFactory) -> None:
    """``reindex --full`` of a damaged index drops it, then writes every account again through a new handle; an
    index whose rows are the metadata store's (exact, matrix) has nothing of its own to drop and says so."""
    rng = np.random.default_rng(45)
    first = vector_index_factory.open()
    first.upsert([rec(f"x{i}", v) for i, v in enumerate(unit(rng, 5))])
    dropped = first.drop()
    vector_index_factory.close(first)
    again = vector_index_factory.open()
    if vector_index_factory.backend in ("exact", "matrix"):
        assert dropped is False and again.count() == 5
    else:
        assert dropped is True and again.count() == 0
        again.upsert([rec("x0", unit(rng, 1)[0])])
        assert again.ids("acc-a") == ["x0"]


def test_only_a_shared_store_carries_a_stamp(vector_index_factory: VectorIndexFactory) -> None:
    """The deployment's identity (storage/stamps.check_store_owner): Milvus, shared by deployments, keeps it on its
    collection; a home's own index (LanceDB, exact, matrix) reads ``None`` and records nothing."""
    index = vector_index_factory.open()
    assert index.read_stamp() is None
    index.write_stamp("0123abcd")
    expected = "0123abcd" if vector_index_factory.backend == "milvus" else None
    assert index.read_stamp() == expected
    other = vector_index_factory.open()
    assert other.read_stamp() == expected


def test_dimension_mismatch_on_reopen(vector_index_factory: VectorIndexFactory) -> None:
    if vector_index_factory.backend == "milvus":
        pytest.skip("Milvus keeps a collection per dimension: another one opens another (test_milvus_index.py)")
    if vector_index_factory.backend != "lancedb":
        pytest.skip("the exact index stores no dimension of its own; the engine's model stamp covers it")
    first = vector_index_factory.open()
    first.upsert([rec("a", unit(np.random.default_rng(47), 1)[0])])
    vector_index_factory.close(first)
    with pytest.raises(ContextEngineError) as info:
        vector_index_factory.open(dim=VECTOR_DIM * 2)
    assert info.value.code is ErrorCode.INDEX_MODEL_MISMATCH
    assert str(VECTOR_DIM) in info.value.message and str(VECTOR_DIM * 2) in info.value.message
    assert vector_index_factory.open().count() == 1  # the table is untouched


# ---------------------------------------------------------------------------------------------------- randomised


def random_corpus(seed: int, n: int, dim: int, clusters: int = 0) -> list[VectorRecord]:
    """``n`` records over 3 accounts with random payloads; vectors uniform or from ``clusters`` Gaussian blobs."""
    rng = np.random.default_rng(seed)
    if clusters:
        centres = unit(rng, clusters, dim)
        vectors = centres[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    else:
        vectors = unit(rng, n, dim)
    records = []
    for i in range(n):
        d = int(rng.integers(0, 6))
        records.append(
            rec(
                f"n{i:05d}",
                vectors[i],
                account_id=f"acc-{int(rng.integers(0, 3))}",
                uri=f"ctx://resources/dir{d}/f{i}.md",
                parent_uri=f"ctx://resources/dir{d}/",
                owner_space=str(rng.choice(["shared", "user:u1", "user:u2", "agent:a1"])),
                context_type=str(rng.choice(["resource", "memory", "skill"])),
                category=str(rng.choice(["", "kubernetes", "database", "network"])),
                level=int(rng.choice([0, 2])),
                doc_id=f"doc{int(rng.integers(0, 40))}",
                chunk_index=int(rng.integers(0, 10)),
            )
        )
    return records


def random_filter(rng: np.random.Generator) -> VectorFilter:
    fields: dict[str, Any] = {"account_id": f"acc-{int(rng.integers(0, 3))}"}
    if rng.random() < 0.5:
        fields["levels"] = [int(rng.choice([0, 2]))]
    if rng.random() < 0.3:
        fields["owner_spaces"] = list(rng.choice(["shared", "user:u1", "user:u2", "agent:a1"], 2, replace=False))
    if rng.random() < 0.3:
        fields["context_types"] = [str(rng.choice(["resource", "memory", "skill"]))]
    if rng.random() < 0.3:
        fields["categories"] = list(rng.choice(["", "kubernetes", "database", "network"], 2, replace=False))
    if rng.random() < 0.3:
        fields["uri_prefix"] = f"ctx://resources/dir{int(rng.integers(0, 6))}/"
    if rng.random() < 0.1:
        fields["doc_ids"] = [f"doc{int(x)}" for x in rng.integers(0, 40, 5)]
    return VectorFilter(**fields)


def test_randomised_top10_equals_exact_reference(vector_index: VectorIndex) -> None:
    dim = VECTOR_DIM
    records = random_corpus(53, 2_000, dim)
    for start in range(0, len(records), 500):
        vector_index.upsert(records[start : start + 500])
    assert vector_index.count() == 2_000
    rng = np.random.default_rng(59)
    queries = unit(rng, 50, dim)
    for q in queries:
        flt = random_filter(rng)
        assert_same_ranking(vector_index.search(q, 10, flt), reference(records, q, 10, flt))


def test_ann_path_recall_and_filtering(vector_index_factory: VectorIndexFactory) -> None:
    """With an ANN index forced (small ``ann_index_min_rows``), recall@10 vs exact >= 0.9 and filters still hold."""
    settings = VectorSettings(ann_index_min_rows=256, compact_every_writes=1_000, nprobes=1)
    index = vector_index_factory.open(settings=settings)
    records = random_corpus(61, 3_000, VECTOR_DIM, clusters=24)
    index.upsert(records)
    index.optimize()
    if vector_index_factory.backend == "lancedb":
        assert index.has_ann_index is True
    by_id = {r.id: r for r in records}

    rng = np.random.default_rng(67)
    found = expected_total = 0
    for _ in range(50):
        q = records[int(rng.integers(0, len(records)))].vector + 0.2 * rng.standard_normal(VECTOR_DIM)
        q = (q / np.linalg.norm(q)).astype(np.float32)
        flt = random_filter(rng)
        hits = index.search(q, 10, flt)
        expected = {i for i, _ in reference(records, q, 10, flt)}
        assert all(passes(by_id[h.id], flt) for h in hits), flt
        # Scores are exact cosine similarities even on the ANN path (re-ranked on the stored vectors).
        assert all(abs(h.score - float(by_id[h.id].vector @ q)) < SCORE_TOL for h in hits)
        assert hits == sorted(hits, key=lambda h: (-h.score, h.id))
        assert len(hits) == len(expected)  # a narrow filter never starves the result
        found += len(expected & set(ids(hits)))
        expected_total += len(expected)
    assert found / expected_total >= 0.9

    # Rows written after the index was built are searched too (flat over unindexed rows).
    fresh = rec("fresh", records[0].vector, account_id=records[0].account_id, level=records[0].level)
    index.upsert([fresh])
    top = index.search(records[0].vector, 2, VectorFilter(account_id=records[0].account_id))
    assert {h.id for h in top} == {"fresh", records[0].id}


def test_lancedb_counts_small_writes_of_earlier_processes_towards_compaction(
    vector_index_factory: VectorIndexFactory,
) -> None:
    """Each handle making fewer writes than ``compact_every_writes`` (a CLI command) never compacted: the small
    fragments piled up across processes. A new handle starts its count at the table's small fragments."""
    if vector_index_factory.backend != "lancedb":
        pytest.skip("LanceDB adapter specifics")
    settings = VectorSettings(compact_every_writes=4)
    records = random_corpus(97, 12, VECTOR_DIM)

    def small_fragments(index: Any) -> int:
        return int(index._table.stats()["fragment_stats"]["num_small_fragments"])

    index = vector_index_factory.open(settings=settings)  # a "process" making three single writes: no compaction
    for r in records[:3]:
        index.upsert([r])
    assert small_fragments(index) == 3
    vector_index_factory.close(index)
    index = vector_index_factory.open(settings=settings)  # the next one counts them
    assert index._writes_since_optimize == 3
    index.upsert([records[3]])  # the fourth small write in all: it compacts
    assert small_fragments(index) <= 1 and index._writes_since_optimize == 0
    assert index.count() == 4


def test_lancedb_ann_search_probes_a_bounded_number_of_partitions(vector_index_factory: VectorIndexFactory) -> None:
    """A wide filter probes ``nprobes`` to ``max_nprobes(nprobes)`` partitions (2 for 1, 48 for the default 32;
    LanceDB's own plan says how many), one query; a filter that leaves fewer rows than requested there is searched
    once more without the cap and returns every row it lets through."""
    assert (max_nprobes(1), max_nprobes(32)) == (2, 48)
    if vector_index_factory.backend != "lancedb":
        pytest.skip("LanceDB adapter specifics")
    settings = VectorSettings(ann_index_min_rows=256, compact_every_writes=1_000, nprobes=1)
    index = vector_index_factory.open(settings=settings)
    records = random_corpus(61, 40_000, VECTOR_DIM, clusters=24)  # LanceDB makes a partition per ~8k rows
    index.upsert(records)
    index.optimize()
    assert index.has_ann_index
    query = records[3].vector

    def partitions_searched(max_nprobes: int) -> int:
        plan = (
            index._table.search(query, vector_column_name="vector")
            .distance_type("cosine")
            .minimum_nprobes(1)
            .maximum_nprobes(max_nprobes)
            .limit(10)
            .analyze_plan()
        )
        return int(re.search(r"partitions_searched=(\d+)", plan).group(1))

    assert partitions_searched(0) > 2  # uncapped, LanceDB probes every partition, more than the cap
    assert partitions_searched(2) <= 2

    caps: list[int] = []
    real = index._ann_query

    def spy(q: np.ndarray, predicate: str, limit: int, max_nprobes: int) -> list[dict[str, Any]]:
        caps.append(max_nprobes)
        return real(q, predicate, limit, max_nprobes)

    index._ann_query = spy  # type: ignore[method-assign]
    wide = VectorFilter(account_id=records[3].account_id)
    hits = index.search(query, 10, wide)
    assert caps == [2] and len(hits) == 10 and hits[0].id == records[3].id  # its own partition is probed first

    caps.clear()
    narrow = VectorFilter(account_id=records[3].account_id, doc_ids=["doc3"], uri_prefix="ctx://resources/dir0/")
    expected = reference(records, query, 200, narrow)
    assert 0 < len(expected) < 200
    hits = index.search(query, 200, narrow)
    assert caps[0] == 2 and caps[-1] == 0  # too few rows within two partitions: searched on without the cap
    assert sorted(ids(hits)) == sorted(i for i, _ in expected)


# ---------------------------------------------------------------------------------------------------- property


ODD_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
TENANTS = ["acc", "acc'", "acc''", "a%", "a_c", "acc\\", "租户", "acc b", ""]


@pytest.fixture
def tenant_index(vector_index: VectorIndex) -> tuple[VectorIndex, list[VectorRecord]]:
    rng = np.random.default_rng(71)
    vectors = unit(rng, len(TENANTS) * 3)
    records = [
        rec(f"{t}|{j}", vectors[i * 3 + j], account_id=t, uri=f"ctx://resources/{t or 'x'}/{j}")
        for i, t in enumerate(TENANTS)
        for j in range(3)
    ]
    vector_index.upsert(records)
    return vector_index, records


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    account=st.one_of(st.sampled_from(TENANTS), ODD_TEXT),
    prefix=st.one_of(st.none(), ODD_TEXT.map(lambda s: "ctx://resources/" + s), st.sampled_from(TENANTS)),
)
def test_property_tenant_isolation(
    tenant_index: tuple[VectorIndex, list[VectorRecord]], account: str, prefix: str | None
) -> None:
    """For any account and uri_prefix text, hits are exactly the reference's: that account's matching records."""
    index, records = tenant_index
    flt = VectorFilter(account_id=account, uri_prefix=prefix)
    q = records[0].vector
    hits = index.search(q, 50, flt)
    assert_same_ranking(hits, reference(records, q, 50, flt))


# ---------------------------------------------------------------------------------------------------- lancedb only


@pytest.fixture
def lancedb_index(vector_index_factory: VectorIndexFactory) -> Any:
    if vector_index_factory.backend != "lancedb":
        pytest.skip("LanceDB adapter specifics")
    return vector_index_factory.open()


def _boom(*_: Any, **__: Any) -> Any:
    raise RuntimeError("disk on fire")


def test_lancedb_search_failure_is_retryable_ret_5001(lancedb_index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    v = unit(np.random.default_rng(73), 1)[0]
    lancedb_index.upsert([rec("a", v)])
    monkeypatch.setattr(lancedb_index._table, "search", _boom)
    with pytest.raises(ContextEngineError) as info:
        lancedb_index.search(v, 3, VectorFilter(account_id="acc-a"))
    assert info.value.code is ErrorCode.VECTOR_SEARCH_FAILED and info.value.retryable
    assert isinstance(info.value.__cause__, RuntimeError)


@pytest.mark.parametrize("method", ["add", "merge_insert", "delete"])
def test_lancedb_write_failure_is_retryable_wrt_5001(
    lancedb_index: Any, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    v = unit(np.random.default_rng(79), 1)[0]
    if method != "add":
        lancedb_index.upsert([rec("a", v)])
    monkeypatch.setattr(lancedb_index._table, method, _boom)
    with pytest.raises(ContextEngineError) as info:
        if method == "delete":
            lancedb_index.delete(["a"])
        else:
            lancedb_index.upsert([rec("b", v)])
    assert info.value.code is ErrorCode.STORAGE_FAILED and info.value.retryable
    assert isinstance(info.value.__cause__, RuntimeError)


def test_lancedb_rejects_bad_vectors_on_write(lancedb_index: Any) -> None:
    with pytest.raises(ContextEngineError) as info:
        lancedb_index.upsert([rec("a", np.ones(VECTOR_DIM + 1, np.float32))])
    assert info.value.code is ErrorCode.INDEX_MODEL_MISMATCH
    bad = np.full(VECTOR_DIM, np.nan, np.float32)
    with pytest.raises(ContextEngineError) as info:
        lancedb_index.upsert([rec("nan", bad)])
    assert info.value.code is ErrorCode.REQUEST_INVALID
    assert lancedb_index.count() == 0


def test_lancedb_builds_indexes_when_thresholds_are_crossed(vector_index_factory: VectorIndexFactory) -> None:
    if vector_index_factory.backend != "lancedb":
        pytest.skip("LanceDB adapter specifics")
    index = vector_index_factory.open(settings=VectorSettings(ann_index_min_rows=12_000, compact_every_writes=1_000))
    records = random_corpus(89, 13_000, VECTOR_DIM)
    index.upsert(records[:9_000])
    assert not index.has_ann_index and not list(index._table.list_indices())
    index.upsert(records[9_000:11_000])  # past 10k rows: the BITMAP indexes and the id BTREE, no ANN yet
    indexes = {i.columns[0]: i.index_type for i in index._table.list_indices()}
    assert indexes == {"account_id": "Bitmap", "level": "Bitmap", "owner_space": "Bitmap", "context_type": "Bitmap",
                       "id": "BTree"}
    assert not index.has_ann_index
    # upserts join on id through the BTREE: an indexed row and a row newer than the index are replaced, not doubled
    moved = [records[7].model_copy(update={"vector": records[8].vector}),
             records[10_500].model_copy(update={"vector": records[8].vector})]
    index.upsert([*moved, records[11_000]])
    assert index.count() == 11_001
    for kept in moved:
        near = [h.id for h in index.search(records[8].vector, 20, VectorFilter(account_id=kept.account_id))]
        assert kept.id in near[:2] and near.count(kept.id) == 1, near
    # a table written before the id index existed gets it at its next optimize
    index._table.drop_index("id_idx")
    assert "id" not in {i.columns[0] for i in index._table.list_indices()}
    index.optimize()
    assert "id" in {i.columns[0] for i in index._table.list_indices()}
    index.upsert(records[11_001:])  # past ann_index_min_rows: the ANN index, without an explicit optimize()
    assert index.has_ann_index and index.maintenance_failures == 0
    flt = VectorFilter(account_id="acc-1", levels=[0])
    hits = index.search(records[5].vector, 10, flt)
    expected = reference(records, records[5].vector, 10, flt)
    assert len({h.id for h in hits} & {i for i, _ in expected}) >= 9
    # A second handle (as another process would open) sees the index too.
    assert vector_index_factory.open().has_ann_index


def test_lancedb_compacts_every_n_writes(
    vector_index_factory: VectorIndexFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    if vector_index_factory.backend != "lancedb":
        pytest.skip("LanceDB adapter specifics")
    index = vector_index_factory.open(settings=VectorSettings(compact_every_writes=3))
    calls: list[int] = []
    original = index._table.optimize
    monkeypatch.setattr(index._table, "optimize", lambda **kw: calls.append(1) or original(**kw))
    rng = np.random.default_rng(83)
    for i, v in enumerate(unit(rng, 7)):
        index.upsert([rec(f"c{i}", v)])
    index.delete(["c0", "c1"])
    assert len(calls) == 2  # after writes 3 and 6 of 8
    assert index.count() == 5
    assert index._table.stats()["fragment_stats"]["num_fragments"] <= 2  # compacted at write 6, then one append
