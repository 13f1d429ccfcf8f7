"""The level-0 similarity sources: the in-memory matrix agrees with the vector index, follows writes of this and
other processes from the change log without reloading, and 'auto' loads small accounts at once and serves large ones
from the index until the matrix is loaded."""

from __future__ import annotations

import time

import numpy as np
import pytest

from context_engine.retrieval.scope import base_filter
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import QueryFilters, TypedQuery
from context_engine.storage.vector.matrix_scoring import MemoryL0Scorer
from context_engine.storage.vector.scoring import IndexL0Scorer
from tests.retrieval.conftest import ADMIN, ALICE, BOB, seed_small_store

DISK_URI = "ctx://resources/ops/storage/disk-pressure.md"
QUERIES = ["disk space", "prefers answers", "restart deployment pods", "certificate expires", "payments team Berlin"]


def top_uris(engine, mode: str, ctx, text: str, tq: TypedQuery) -> list[tuple[str, float]]:
    vector = engine.embedder.embed_query(text)
    if mode == "index":
        scorer = IndexL0Scorer(engine.index, vector)
    else:
        scorer = MemoryL0Scorer(engine.l0_matrix.view(ctx.account_id), vector)
    return [(m.uri, round(m.similarity, 5)) for m in scorer.top(base_filter(tq, ctx), 20)]


@pytest.mark.parametrize("backend", ["lancedb", "exact"])
def test_memory_matrix_agrees_with_the_index(hash_engine, backend):
    engine = hash_engine(vector={"backend": backend})
    seed_small_store(engine)
    for ctx in (ADMIN, ALICE, BOB):
        for text in QUERIES:
            for ctype in ("memory", "skill", "resource"):
                targets = [None] if ctype != "resource" else [None, "ctx://resources/ops/", DISK_URI]
                for target in targets:
                    tq = TypedQuery(text=text, context_type=ctype, target_uri=target)
                    assert top_uris(engine, "memory", ctx, text, tq) == top_uris(engine, "index", ctx, text, tq)
    # children and lookups agree as well
    vector = engine.embedder.embed_query("disk")
    flt = VectorFilter(account_id="default", owner_spaces=["shared"], levels=[0], context_types=["resource"])
    index, memory = IndexL0Scorer(engine.index, vector), MemoryL0Scorer(engine.l0_matrix.view("default"), vector)
    parents = ["ctx://resources/", "ctx://resources/ops/"]

    def as_pairs(d):
        return {p: [(m.uri, round(m.similarity, 5)) for m in ms] for p, ms in d.items()}

    assert as_pairs(index.children(flt, parents, 2)) == as_pairs(memory.children(flt, parents, 2))
    uris = ["ctx://resources/ops/", "ctx://resources/", "ctx://resources/nothing/"]
    got_i, got_m = index.lookup(flt, uris), memory.lookup(flt, uris)
    assert got_i.keys() == got_m.keys() == {"ctx://resources/ops/", "ctx://resources/"}
    assert all(abs(got_i[u] - got_m[u]) < 1e-5 for u in got_i)


def test_writes_in_this_process_are_applied_without_reload(hash_engine):
    engine = hash_engine(retrieval={"l0_source": "memory"})
    seed_small_store(engine)
    first = engine.search_memory("Alice likes green tea in the morning", ALICE, score_threshold=0.0)
    loads = engine.l0_matrix.loads
    assert loads == 1
    uri = engine.add_memory("Alice likes green tea in the morning.", ALICE, category="preference").uris[0]
    assert uri not in [h.uri for h in first.hits]
    after = engine.search_memory("Alice likes green tea in the morning", ALICE, score_threshold=0.0)
    assert after.hits[0].uri == uri
    engine.delete(uri, ALICE)
    gone = engine.search_memory("Alice likes green tea in the morning", ALICE, score_threshold=0.0)
    assert uri not in [h.uri for h in gone.hits] + [s.uri for s in gone.seed_hits]
    engine.move("ctx://resources/ops/storage/disk-pressure.md", "ctx://resources/ops/storage/disk-full.md", ADMIN)
    moved = engine.search_memory("node running out of disk space", ADMIN, score_threshold=0.0)
    uris = [h.uri for h in moved.hits]
    assert "ctx://resources/ops/storage/disk-full.md" in uris
    assert "ctx://resources/ops/storage/disk-pressure.md" not in uris
    assert engine.l0_matrix.loads == loads  # never reloaded
    assert engine.l0_matrix.rows_applied > 0


def test_a_foreign_write_is_applied_from_the_change_log(hash_engine):
    engine = hash_engine(retrieval={"l0_source": "memory"})
    seed_small_store(engine)
    engine.search_memory("disk", ADMIN)
    loads, applied = engine.l0_matrix.loads, engine.l0_matrix.rows_applied
    # another process writing: only the metadata store (the change log) knows
    rec = engine.metadata.get_vectors("default", ["ctx://resources/ops/storage/disk-pressure.md"])[0]
    engine.metadata.put_vectors([rec])
    engine.search_memory("disk", ADMIN)
    assert engine.l0_matrix.loads == loads and engine.l0_matrix.rows_applied == applied + 1


def test_auto_loads_a_small_account_at_once(hash_engine):
    engine = hash_engine(retrieval={"l0_source": "auto"})
    seed_small_store(engine)
    vector = engine.embedder.embed_query("disk")
    assert engine.l0_source.scorer("default", vector).name == "memory"


def test_auto_serves_from_the_index_until_the_matrix_is_loaded(hash_engine):
    engine = hash_engine(retrieval={"l0_source": "auto", "memory_warm_after_searches": 1, "memory_load_now_rows": 0})
    seed_small_store(engine)
    vector = engine.embedder.embed_query("disk")
    assert engine.l0_source.scorer("default", vector).name == "index"  # first search: no background load yet
    assert engine.l0_source.scorer("default", vector).name == "index"  # second: starts the background load
    deadline = time.monotonic() + 10
    while engine.l0_source.scorer("default", vector).name != "memory":
        assert time.monotonic() < deadline, "the matrix was never loaded"
        time.sleep(0.01)
    # both answer the same
    r1 = engine.search_memory("disk space", ADMIN, score_threshold=0.0)
    engine.l0_source._settings = engine.settings.retrieval.model_copy(update={"l0_source": "index"})
    r2 = engine.search_memory("disk space", ADMIN, score_threshold=0.0)
    assert [(h.uri, h.score) for h in r1.hits] == [(h.uri, h.score) for h in r2.hits]


def test_accounts_over_the_row_limit_use_the_index(hash_engine):
    engine = hash_engine(retrieval={"l0_source": "memory", "memory_max_rows": 3})
    seed_small_store(engine)
    vector = engine.embedder.embed_query("disk")
    assert engine.l0_source.scorer("default", vector).name == "index"
    assert engine.search_memory("disk space", ADMIN).hits


def test_memory_scorer_filters_match_nothing_on_empty_lists(hash_engine):
    engine = hash_engine(retrieval={"l0_source": "memory"})
    seed_small_store(engine)
    scorer = MemoryL0Scorer(engine.l0_matrix.view("default"), engine.embedder.embed_query("disk"))
    base = VectorFilter(account_id="default", levels=[0])
    assert scorer.top(base, 5)
    for empty in ("owner_spaces", "context_types", "categories", "parent_uris", "doc_ids", "levels"):
        assert scorer.top(base.model_copy(update={empty: []}), 5) == []
    assert scorer.top(base.model_copy(update={"levels": [2]}), 5) == []
    tq = TypedQuery(text="x", context_type="memory", filters=QueryFilters(owner_space="user:nobody"))
    assert scorer.top(base_filter(tq, ADMIN), 5) == []


def test_empty_account_and_dimension_mismatch(hash_engine):
    engine = hash_engine(retrieval={"l0_source": "memory"})
    view = engine.l0_matrix.view("nobody")
    assert MemoryL0Scorer(view, np.ones(64, dtype=np.float32) / 8).top(VectorFilter(account_id="nobody"), 3) == []


def test_a_write_to_another_account_keeps_loaded_accounts_current(hash_engine):
    engine = hash_engine(retrieval={"l0_source": "memory"})
    seed_small_store(engine)
    engine.search_memory("disk", ADMIN)
    loads, applied = engine.l0_matrix.loads, engine.l0_matrix.rows_applied
    other = RequestContext(account_id="other", role="admin")
    engine.add_text("# Other\n\nSomething else entirely.\n", "ctx://resources/other.md", other)
    engine.search_memory("disk", ADMIN)
    assert (engine.l0_matrix.loads, engine.l0_matrix.rows_applied) == (loads, applied)  # 'default' untouched


@pytest.mark.parametrize("layout", ["projected", "half"])
def test_a_compressed_matrix_answers_like_the_exact_one(hash_engine, monkeypatch, layout):
    from context_engine.storage.vector import matrix

    if layout == "half":  # no segment of this small store gets projections
        monkeypatch.setattr(matrix, "PROJECT_MIN_ROWS", 10**9)
    exact = hash_engine(retrieval={"l0_source": "memory"})
    seed_small_store(exact)
    small = hash_engine(
        home=exact.settings.home,
        retrieval={"l0_source": "memory", "memory_compress_rows": 1, "memory_compress_dims": 8},
    )
    assert {seg.layout for seg, _ in small.l0_matrix.view("default").segments.values()} == {layout}
    for ctx in (ADMIN, ALICE, BOB):
        for text in QUERIES:
            tq = TypedQuery(text=text, context_type="resource")
            got, want = top_uris(small, "memory", ctx, text, tq), top_uris(exact, "memory", ctx, text, tq)
            assert [u for u, _ in got] == [u for u, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=5e-4)  # float16 rescoring
    vector = exact.embedder.embed_query("disk")
    flt = VectorFilter(account_id="default", owner_spaces=["shared"], levels=[0], context_types=["resource"])
    parents = ["ctx://resources/", "ctx://resources/ops/"]
    a = MemoryL0Scorer(exact.l0_matrix.view("default"), vector)
    b = MemoryL0Scorer(small.l0_matrix.view("default"), vector)
    want, got = a.children(flt, parents, 2), b.children(flt, parents, 2)
    assert {p: [m.uri for m in ms] for p, ms in got.items()} == {p: [m.uri for m in ms] for p, ms in want.items()}
    for parent, matches in want.items():  # float16 rescoring: similarities within 2**-11
        assert [m.similarity for m in got[parent]] == pytest.approx([m.similarity for m in matches], abs=5e-4)
    assert a.lookup(flt, parents) == pytest.approx(b.lookup(flt, parents), abs=5e-4)


@pytest.mark.parametrize("backend", ["lancedb", "exact"])
def test_matches_give_the_records_with_their_texts_on_both_paths(hash_engine, backend):
    # matches() finds a record among its parent's children (roots have no parent); both scorers agree.
    engine = hash_engine(vector={"backend": backend})
    seed_small_store(engine)
    vector = engine.embedder.embed_query("disk")
    flt = VectorFilter(account_id="default", owner_spaces=["shared", "user:alice"], levels=[0])
    index, memory = IndexL0Scorer(engine.index, vector), MemoryL0Scorer(engine.l0_matrix.view("default"), vector)
    uris = [DISK_URI, "ctx://resources/", "ctx://resources/ops/", "ctx://resources/ops/nothing.md"]
    uris += ["ctx://user/alice/", "ctx://user/alice/memories/", "ctx://user/bob/memories/"]  # bob's: not visible
    got_i, got_m = index.matches(flt, uris), memory.matches(flt, uris)
    want = {DISK_URI, "ctx://resources/", "ctx://resources/ops/", "ctx://user/alice/memories/"}
    assert set(got_i) == set(got_m) == want
    for uri, m in got_m.items():
        assert (m.uri, m.text, m.parent_uri, m.owner_space) == (
            got_i[uri].uri,
            got_i[uri].text,
            got_i[uri].parent_uri,
            got_i[uri].owner_space,
        )
        assert m.similarity == pytest.approx(got_i[uri].similarity, abs=1e-5)
    assert got_m[DISK_URI].text and got_m["ctx://resources/"].parent_uri is None
    assert memory.lookup(flt, uris) == {u: m.similarity for u, m in got_m.items()}
