"""The matrix index (ExactVectorIndex, the level-0 matrix) beyond the VectorIndex conformance suite: catch-up from
the change log in O(changes), reload when the log does not reach back, ties at the top-k boundary, compaction,
levels and row limits, and error mapping (DESIGN.md §3, docs/derived_indexes.md)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.protocols import VectorIndex
from context_engine.storage.vector.exact import ExactVectorIndex, VectorMatrix
from context_engine.storage.vector.matrix import MatrixVectorIndex

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


def test_is_a_vector_index(store: SqlMetadataStore) -> None:
    index = ExactVectorIndex(store)
    assert isinstance(index, VectorIndex) and index.name == "exact"
    assert isinstance(MatrixVectorIndex(store, levels=(0,)), VectorIndex)


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
    # loaded once; every later write was applied from the change log, row by row
    assert (index.loads, index.rows_loaded, index.rows_applied) == (1, 2, 4)


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


def test_adding_one_row_to_a_20k_row_account_applies_one_row(store: SqlMetadataStore) -> None:
    """Catch-up costs O(changes): counted rows, not time (issue 12 acceptance)."""
    vectors = unit(9, 20_001)
    store.put_vectors([rec(f"r{i:05d}", vectors[i]) for i in range(20_000)])
    index = MatrixVectorIndex(store)
    assert index.search(vectors[0], 1, ALL)[0].id == "r00000"
    assert (index.loads, index.rows_loaded, index.rows_applied) == (1, 20_000, 0)
    store.put_vectors([rec("new", vectors[20_000])])
    assert index.search(vectors[20_000], 1, ALL)[0].id == "new"
    assert (index.loads, index.rows_loaded, index.rows_applied) == (1, 20_000, 1)
    store.delete_vectors(["new", "r00000"])
    assert index.search(vectors[0], 1, ALL)[0].id != "r00000"
    assert (index.loads, index.rows_applied) == (1, 3)
    assert index.search(vectors[5], 1, ALL)[0].id == "r00005"  # current: nothing read or applied
    assert (index.loads, index.rows_applied) == (1, 3)


def test_a_pruned_change_log_reloads_the_account(store: SqlMetadataStore) -> None:
    from sqlalchemy import text

    v = unit(10, 3)
    index = MatrixVectorIndex(store)
    store.put_vectors([rec("a", v[0])])
    assert [h.id for h in index.search(v[0], 5, ALL)] == ["a"]
    store.put_vectors([rec("b", v[1])])
    with store.engine.begin() as conn:  # what pruning does: the log no longer reaches back to the held generation
        conn.execute(text("DELETE FROM index_changes"))
        conn.execute(text("UPDATE index_generations SET log_floor = generation"))
    assert next(h.id for h in index.search(v[1], 5, ALL)) == "b"
    assert index.loads == 2 and index.rows_applied == 0


def test_levels_restrict_what_is_held(store: SqlMetadataStore) -> None:
    v = unit(11, 4)
    store.put_vectors([rec("l0", v[0]), rec("l2", v[1], level=2)])
    level0 = MatrixVectorIndex(store, levels=(0,))
    assert [h.id for h in level0.search(v[1], 5, ALL)] == ["l0"]
    store.put_vectors([rec("l2b", v[2], level=2), rec("l0b", v[3])])
    assert {h.id for h in level0.search(v[1], 5, ALL)} == {"l0", "l0b"}
    assert {h.id for h in ExactVectorIndex(store).search(v[1], 5, ALL)} == {"l0", "l2", "l0b", "l2b"}


def test_compaction_keeps_every_live_row(store: SqlMetadataStore) -> None:
    vectors = unit(12, 1_000)
    store.put_vectors([rec(f"r{i:04d}", vectors[i]) for i in range(1_000)])
    index = MatrixVectorIndex(store)
    index.search(vectors[0], 1, ALL)
    store.delete_vectors([f"r{i:04d}" for i in range(0, 1_000, 2)])  # 500 tombstones: compacted on catch-up
    hits = index.search(vectors[1], 1_000, ALL)
    assert sorted(h.id for h in hits) == [f"r{i:04d}" for i in range(1, 1_000, 2)]
    seg = index.view("acc-a").segments["shared"][0]  # type: ignore[union-attr]
    assert seg.dead == 0 and seg.n == 500
    assert hits[0].id == "r0001"


def test_an_account_over_max_rows_is_not_held(store: SqlMetadataStore) -> None:
    v = unit(13, 3)
    store.put_vectors([rec(f"r{i}", v[i]) for i in range(3)])
    index = MatrixVectorIndex(store, max_rows=2)
    assert index.view("acc-a") is None and index.too_large("acc-a")
    with pytest.raises(ContextEngineError) as info:
        index.search(v[0], 1, ALL)
    assert info.value.code is ErrorCode.VECTOR_SEARCH_FAILED
    store.delete_vectors(["r2"])
    assert index.view("acc-a") is not None and not index.too_large("acc-a")


def clustered(seed: int, n: int, dim: int, clusters: int = 40) -> np.ndarray:
    """Unit vectors with a decaying spectrum (variance of component i ~ 1/i), like text embeddings', in clusters."""
    rng = np.random.default_rng(seed)
    scale = (1.0 / np.sqrt(np.arange(1, dim + 1))).astype(np.float32)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32) * scale
    v = centres[rng.integers(0, clusters, n)] + 0.5 * rng.standard_normal((n, dim)).astype(np.float32) * scale
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def compressed_account(store: SqlMetadataStore, seed: int, n: int, dims: int) -> tuple[MatrixVectorIndex, np.ndarray]:
    """``n`` clustered 64-dimensional rows ``r0000``... in the store, and an index compressing them to ``dims``."""
    vectors = clustered(seed, n, 64)
    store.put_vectors([rec(f"r{i:04d}", vectors[i]) for i in range(n)])
    return MatrixVectorIndex(store, compress_rows=1_000, compress_dims=dims), vectors


@pytest.mark.parametrize("layout", ["projected", "half"])
def test_a_compressed_segment_returns_the_exact_top_k_with_float16_scores(store: SqlMetadataStore, layout) -> None:
    dim = 64
    vectors = clustered(14, 3_000, dim)
    store.put_vectors([rec(f"r{i:04d}", vectors[i]) for i in range(3_000)])
    exact = MatrixVectorIndex(store)
    project_rows = 1_000 if layout == "projected" else 10_000  # 3,000 rows: projections only in the first
    small = MatrixVectorIndex(store, compress_rows=1_000, compress_dims=24, project_rows=project_rows)
    seg = small.view("acc-a").segments["shared"][0]  # type: ignore[union-attr]
    assert seg.layout == layout and seg.compressed == (layout == "projected")
    if layout == "half":
        assert seg.vectors is None and seg.tail is None
    else:  # a projection of fewer than 32 coordinates is scanned whole: its tail is empty
        assert seg.vectors.shape == (3_000, 24) and seg.tail is not None and seg.tail.shape == (3_000, 0)
    assert seg.full is not None and seg.full.dtype == np.float16 and seg.full.shape == (3_000, dim)
    queries = clustered(15, 50, dim)
    recall = []
    for q in queries:
        want = exact.search(q, 10, ALL)
        got = small.search(q, 10, ALL)
        recall.append(len({h.id for h in got} & {h.id for h in want}) / 10)
        by_id = {h.id: h.score for h in want}
        assert all(abs(h.score - by_id[h.id]) < 5e-4 for h in got if h.id in by_id)  # float16 rounding: <= 2**-11
    assert np.mean(recall) >= 0.99


@pytest.mark.parametrize(("project_rows", "layout"), [(None, "projected"), (10_000, "half")])
def test_a_segment_that_grows_past_the_limit_is_compressed_at_catch_up(
    store: SqlMetadataStore, project_rows, layout
) -> None:
    vectors = clustered(16, 1_300, DIM * 4)
    store.put_vectors([rec(f"r{i:04d}", vectors[i]) for i in range(900)])
    index = MatrixVectorIndex(store, compress_rows=1_000, compress_dims=8, project_rows=project_rows)
    assert index.view("acc-a").segments["shared"][0].layout == "float32"  # type: ignore[union-attr]
    store.put_vectors([rec(f"r{i:04d}", vectors[i]) for i in range(900, 1_200)])
    seg = index.view("acc-a").segments["shared"][0]  # type: ignore[union-attr]
    assert seg.layout == layout and seg.live == 1_200
    assert index.search(vectors[1_100], 1, ALL)[0].id == "r1100"
    store.put_vectors([rec(f"r{i:04d}", vectors[i]) for i in range(1_200, 1_300)])  # appended in that layout
    seg = index.view("acc-a").segments["shared"][0]  # type: ignore[union-attr]
    assert seg.layout == layout and seg.live == 1_300
    assert index.search(vectors[1_250], 1, ALL)[0].id == "r1250"


def test_an_account_of_many_small_segments_is_compressed_with_one_projection(store: SqlMetadataStore) -> None:
    # 40 users of 30 rows each: every segment is far below the limit, the account is over it
    dim = 64
    vectors = clustered(17, 1_200, dim)
    records = []
    for i in range(1_200):
        user = f"u{i % 40:02d}"
        records.append(
            rec(
                f"m{i:04d}",
                vectors[i],
                uri=f"ctx://user/{user}/memories/m{i:04d}.md",
                parent_uri=f"ctx://user/{user}/memories/",
                owner_space=f"user:{user}",
                context_type="memory",
            )
        )
    store.put_vectors(records)
    index = MatrixVectorIndex(store, compress_rows=1_000, compress_dims=16, project_rows=20)
    view = index.view("acc-a")
    assert view is not None and len(view.segments) == 40
    projections = {id(seg.projection) for seg, _ in view.segments.values()}
    assert len(projections) == 1
    assert all(seg.vectors.shape[1] + seg.tail.shape[1] == 16 for seg, _ in view.segments.values())
    # below project_rows, such small segments keep float16 vectors only
    halves = MatrixVectorIndex(store, compress_rows=1_000, compress_dims=16, project_rows=1_000).view("acc-a")
    assert halves is not None and {seg.layout for seg, _ in halves.segments.values()} == {"half"}
    exact = MatrixVectorIndex(store)
    for i in (3, 517, 1_111):
        flt = VectorFilter(account_id="acc-a", owner_spaces=[f"user:u{i % 40:02d}"])
        want = exact.search(vectors[i], 5, flt)
        got = index.search(vectors[i], 5, flt)
        assert [h.id for h in got] == [h.id for h in want]
        assert all(abs(a.score - b.score) < 5e-4 for a, b in zip(got, want, strict=True))
    # an account below the limit stays exact
    store.put_vectors([rec("b0", vectors[0], account_id="acc-b")])
    small = index.view("acc-b")
    assert small is not None and not any(seg.compressed for seg, _ in small.segments.values())


def test_a_compressed_segment_rescores_a_row_another_writer_changed_from_its_new_vector(
    store: SqlMetadataStore,
) -> None:
    index, vectors = compressed_account(store, 18, 1_500, 16)
    assert index.search(vectors[7], 1, ALL)[0].id == "r0007"
    store.put_vectors([rec("r0007", -vectors[7])])  # another writer moves r0007 to the opposite direction
    hits = {h.id: h.score for h in index.search(vectors[7], 1_500, ALL)}
    assert hits["r0007"] == pytest.approx(-1.0, abs=5e-4)
    assert index.search(vectors[7], 1, ALL)[0].id != "r0007"
    seg = index.view("acc-a").segments["shared"][0]  # type: ignore[union-attr]
    row = seg.row_of.get("r0007")
    assert row is not None
    assert np.allclose(seg.full[row].astype(np.float32), -vectors[7], atol=1e-3)  # type: ignore[index]


@pytest.mark.parametrize("from_file", [False, True])
def test_rows_moving_between_owner_spaces_stay_in_one_segment(
    store: SqlMetadataStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_file: bool
) -> None:
    """The account's id -> space map (hashed, built lazily, a tail of recent ids) finds the segment of each id even
    when every hash collides, in an account loaded from the store or opened from its derived file."""
    from context_engine.storage import strings
    from context_engine.storage.derived_files import DerivedFiles

    monkeypatch.setattr(strings, "_hash", lambda value: hash(value) % 3)
    spaces = ["shared", "user:u1", "user:u2", "agent:a1"]
    v = unit(30, 2_200)
    rng = np.random.default_rng(30)
    where = {f"r{i:04d}": spaces[i % 4] for i in range(300)}
    store.put_vectors([rec(rid, v[i], owner_space=where[rid]) for i, rid in enumerate(where)])
    if from_file:
        first = MatrixVectorIndex(store, files=DerivedFiles(tmp_path / "derived", store))
        first.view("acc-a")
        first.close()
    index = MatrixVectorIndex(store, files=DerivedFiles(tmp_path / "derived", store) if from_file else None)
    index.view("acc-a")
    assert index.file_loads == int(from_file)
    for round_ in range(8):  # > 1024 ids set: the map is dropped and rebuilt from the segments
        moved = rng.choice(sorted(where), size=150, replace=False).tolist()
        for rid in moved:
            where[rid] = spaces[int(rng.integers(0, 4))]
        new = [f"n{round_}-{i}" for i in range(200)]
        where.update({rid: spaces[i % 4] for i, rid in enumerate(new)})
        store.put_vectors(
            [rec(rid, v[300 + round_ * 200 + i], owner_space=where[rid]) for i, rid in enumerate(moved + new)]
        )
        gone = rng.choice(sorted(where), size=20, replace=False).tolist()
        store.delete_vectors(gone)
        for rid in gone:
            del where[rid]
        view = index.view("acc-a")
        assert view is not None
        held = {space: sorted(seg.row_of) for space, (seg, _) in view.segments.items()}
        assert {s: ids for s, ids in held.items() if ids} == {
            s: sorted(r for r, sp in where.items() if sp == s) for s in spaces if s in where.values()
        }
    assert index.loads == int(not from_file)


def test_quantize_keeps_each_component_within_half_a_step() -> None:
    from context_engine.storage.vector.matrix_segment import quantize

    vectors = clustered(19, 700, 64).astype(np.float16)
    vectors[3] = 0  # a zero row gets scale 1 and zero codes
    q, scale = quantize(vectors)
    assert q.dtype == np.int8 and q.shape == (700, 64) and scale.dtype == np.float32 and scale.shape == (700,)
    assert scale[3] == 1.0 and not q[3].any()
    wide = vectors.astype(np.float32)
    assert np.all(np.abs(q.astype(np.float32) * scale[:, None] - wide) <= scale[:, None] / 2 + 1e-7)
    assert np.all(np.abs(q).max(axis=1)[np.arange(700) != 3] == 127)  # the largest component uses the whole range
    chunked = np.concatenate([quantize(vectors[i : i + 300])[0] for i in range(0, 700, 300)])
    np.testing.assert_array_equal(chunked, q)  # row by row: the same codes however the rows are batched


def test_a_compressed_segment_picks_its_rescored_rows_by_int8_scores_close_to_float16(
    store: SqlMetadataStore,
) -> None:
    from context_engine.storage.vector.matrix_segment import refine_depth, rescore_depth

    index, _ = compressed_account(store, 20, 2_000, 16)
    seg = index.view("acc-a").segments["shared"][0]  # type: ignore[union-attr]
    assert seg.q8 is not None and seg.q8.shape[1] == 64
    rows = np.arange(2_000)
    for q in clustered(21, 20, 64):
        fine, exact = seg.fine(rows, q), seg.exact(rows, q)
        bound = seg.q8_scale[rows] / 2 * np.abs(q).sum() + 1e-5  # each component within half a step (float32 sums)
        assert np.all(np.abs(fine - exact) <= bound)
        top = set(np.argsort(-exact)[:10].tolist())  # the float16 top 10 lie within the int8 top refine_depth(10)
        assert top <= set(np.argsort(-fine)[: refine_depth(10)].tolist())
    assert 10 < refine_depth(10) < rescore_depth(10) and refine_depth(1) >= 10


def test_a_compressed_segment_breaks_ties_by_id_past_the_int8_cut(store: SqlMetadataStore) -> None:
    # 100 copies of one vector (one chunk in many documents): more ties than the int8 step keeps by count
    others, dup = clustered(22, 500, 64), clustered(23, 1, 64)[0]
    records = [rec(f"r{i:05d}", others[i]) for i in range(500)]
    records += [rec(f"r{1_000 + i:05d}", dup) for i in range(100)]
    store.put_vectors(records[::-1])
    compressed, exact = MatrixVectorIndex(store, compress_rows=50, compress_dims=16), MatrixVectorIndex(store)
    for k in (1, 3, 8):
        want = [h.id for h in exact.search(dup, k, ALL)]
        assert want == [f"r{1_000 + i:05d}" for i in range(k)]
        assert [h.id for h in compressed.search(dup, k, ALL)] == want


def test_the_int8_cut_keeps_the_float16_top_k_for_vectors_with_one_large_component(store: SqlMetadataStore) -> None:
    # every vector has a component of 0.6, so the int8 step (max |v| / 127) is coarse; the rows lie in a
    # 17-dimensional subspace, so the projection loses nothing and any miss would come from the int8 cut
    rng = np.random.default_rng(6)
    basis = np.linalg.qr(rng.standard_normal((63, 16)))[0].astype(np.float32)
    centre = rng.standard_normal(16).astype(np.float32)
    centre /= np.linalg.norm(centre)

    def make(m: int) -> np.ndarray:
        sub = centre + 0.04 * rng.standard_normal((m, 16)).astype(np.float32)
        sub /= np.linalg.norm(sub, axis=1, keepdims=True)
        v = np.zeros((m, 64), dtype=np.float32)
        v[:, 0], v[:, 1:] = 0.6, 0.8 * (sub @ basis.T)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    vectors = make(6_000)
    store.put_vectors([rec(f"r{i:05d}", vectors[i]) for i in range(6_000)])
    compressed = MatrixVectorIndex(store, compress_rows=50, compress_dims=17)
    half = vectors.astype(np.float16).astype(np.float32)
    for q in make(60):
        got = compressed.search(q, 5, ALL)
        truth = np.sort(half @ q)[::-1][:5]
        assert [round(h.score, 3) for h in got] == [round(float(t), 3) for t in truth]


def test_widen_gives_astypes_float32_for_every_float16_value() -> None:
    from context_engine.storage.vector.matrix_segment import widen

    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(256, 256)
    wide, reference = widen(every), every.astype(np.float32)
    assert wide.dtype == np.float32 and wide.shape == (256, 256)
    finite = ~np.isnan(reference)
    assert finite.sum() == 65_536 - 2_046  # 2 x 1,023 NaN payloads
    assert np.array_equal(wide[finite].view(np.uint32), reference[finite].view(np.uint32))  # -0.0 and infinities too
    assert np.isnan(wide[~finite]).all()
    float32 = np.array([[0.5, -0.25]], dtype=np.float32)
    assert widen(float32) is float32  # float32 is not copied
    rows = every[[3, 7, 200]]  # a gather of rows, as a rescoring reads them
    assert np.array_equal(widen(rows), rows.astype(np.float32), equal_nan=True)


def test_a_projected_segment_scans_the_leading_coordinates_and_adds_the_others_for_its_candidates(
    store: SqlMetadataStore,
) -> None:
    from context_engine.storage.vector.matrix_segment import lead_dims

    assert [lead_dims(r) for r in (8, 16, 31, 32, 40, 128)] == [8, 16, 31, 16, 20, 64]
    index, _ = compressed_account(store, 24, 1_500, 40)
    seg, n = index.view("acc-a").segments["shared"]  # type: ignore[union-attr]
    assert seg.projection is not None and seg.vectors.shape == (n, 20) and seg.tail.shape == (n, 20)
    whole = np.hstack([seg.vectors[:n], seg.tail[:n]])  # the projections, as one (n, 40) array
    rows = np.array([0, 7, 700, 1_499])
    for q in clustered(25, 10, 64):
        projected = seg.project(q)
        np.testing.assert_allclose(projected, q @ seg.projection, rtol=1e-6)
        lead = seg.scan(q, n)
        np.testing.assert_allclose(lead, np.clip(seg.vectors[:n] @ projected[:20], -1, 1), atol=1e-6)
        want = np.clip(whole[rows] @ projected, -1, 1)
        np.testing.assert_allclose(seg.approximate(rows, lead[rows], projected), want, atol=1e-6)
        np.testing.assert_allclose(seg.score_rows(rows, q), want, atol=1e-6)


@pytest.mark.parametrize("spaces", [1, 6])
def test_the_scorer_cascade_finds_the_top_k_of_a_segment_larger_than_its_depth(
    store: SqlMetadataStore, spaces: int
) -> None:
    # 12,000 rows: the partial scan keeps cascade_depth(10) = 4,000 of them for the whole projection to score; the
    # index's own search scores every row on the whole projection: both answer the same top 10. Over six owner
    # spaces (an admin's scope) the scorer cuts with one threshold across the segments, the index per segment.
    from context_engine.storage.vector.matrix_scoring import MemoryL0Scorer
    from context_engine.storage.vector.matrix_segment import cascade_depth

    vectors = clustered(26, 12_000, 64)
    store.put_vectors([rec(f"r{i:05d}", vectors[i], owner_space=f"user:u{i % spaces}") for i in range(12_000)])
    index, exact = MatrixVectorIndex(store, compress_rows=1_000, compress_dims=32), MatrixVectorIndex(store)
    view = index.view("acc-a")
    assert view is not None and len(view.segments) == spaces
    assert sum(n for _, n in view.segments.values()) > cascade_depth(10)
    assert all(seg.compressed for seg, _ in view.segments.values())
    recall, agree = [], 0
    for q in clustered(27, 40, 64):
        got = [m.uri for m in MemoryL0Scorer(view, q).top(ALL, 10)]
        whole = [h.uri for h in index.search(q, 10, ALL)]
        truth = [h.uri for h in exact.search(q, 10, ALL)]
        agree += got == whole
        recall.append(len(set(got) & set(truth)) / 10)
    assert agree == 40 and np.mean(recall) >= 0.99


def test_copies_of_one_vector_tie_by_uri_in_a_compressed_account(store: SqlMetadataStore) -> None:
    # 5,000 copies of one vector among 12,000 rows in three owner spaces: every copy must get the same float16
    # score (a BLAS product rounded copies differently by their position in the batch), so the k best are the
    # copies with the smallest URIs
    from context_engine.storage.vector.matrix_scoring import MemoryL0Scorer

    rng = np.random.default_rng(24)
    dup = clustered(25, 1, 64)[0]
    vectors = np.vstack([clustered(24, 7_000, 64), np.repeat(dup[None], 5_000, axis=0)])[rng.permutation(12_000)]
    spaces = ["shared", "user:u1", "user:u2"]
    store.put_vectors(
        [
            rec(f"r{i:05d}", vectors[i], uri=f"ctx://resources/docs/r{i:05d}.md", owner_space=spaces[i % 3])
            for i in range(12_000)
        ]
    )
    view = MatrixVectorIndex(store, compress_rows=1_000, compress_dims=24).view("acc-a")
    assert view is not None
    copies = sorted(f"ctx://resources/docs/r{i:05d}.md" for i in range(12_000) if vectors[i].tobytes() == dup.tobytes())
    for k in (3, 10):
        got = MemoryL0Scorer(view, dup).top(ALL, k)
        assert [m.uri for m in got] == copies[:k]
        assert len({m.similarity for m in got}) == 1
