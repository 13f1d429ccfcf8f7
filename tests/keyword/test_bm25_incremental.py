"""The incremental BM25 index (issue 12): scores equal a fresh bm25s build after any sequence of writes, merges keep
results, and an index with a source catches up from the change log of another handle on the same database."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from unittest import mock

import bm25s
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.settings import KeywordSettings
from context_engine.storage.derived import base as derived_base
from context_engine.storage.keyword import BM25Index, KeywordDoc, bm25_partition
from context_engine.storage.keyword.bm25_index import keyword_text
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore

WORDS = ["pod", "node", "disk", "crash", "etcd", "leader", "cert", "quota", "kernel", "proxy", "ingress", "cache"]
METHODS = ["lucene", "robertson", "atire", "bm25l", "bm25+"]
ACC = "acc"


def expected_scores(index: BM25Index, live: dict[str, str], query: str) -> dict[str, float]:
    """What a bm25s build of exactly the live documents scores, for the records sharing a token with the query.

    A record with no token is no document of the statistics (bm25_index module docstring: N counts the rows with a
    token), so it is left out of the bm25s build."""
    ids = sorted(i for i in live if index.tokenizer(live[i]))
    if not ids:
        return {}
    tokens = [index.tokenizer(live[i]) for i in ids]
    q_tokens = index.tokenizer(query)
    if not q_tokens or not any(tokens):
        return {}
    s = index.settings
    model = bm25s.BM25(k1=s.k1, b=s.b, method=s.method)
    model.index(tokens, show_progress=False)
    scores = model.get_scores(q_tokens)
    wanted = set(q_tokens)
    return {i: float(scores[r]) for r, i in enumerate(ids) if wanted & set(tokens[r]) and scores[r] > 0}


def assert_matches_bm25s(index: BM25Index, live: dict[str, str], query: str) -> None:
    hits = index.search(query, 10_000, VectorFilter(account_id=ACC))
    expected = expected_scores(index, live, query)
    got = {h.id: h.score for h in hits}
    assert set(got) == set(expected), query
    for rid, score in expected.items():
        assert got[rid] == pytest.approx(score, rel=1e-5), (query, rid)
    assert [h.id for h in hits] == [h.id for h in sorted(hits, key=lambda h: (-h.score, h.id))]


texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.integers(0, 14), texts),
        st.tuples(st.just("delete"), st.integers(0, 14), st.just("")),
        st.tuples(st.just("optimize"), st.just(0), st.just("")),
    ),
    min_size=1,
    max_size=40,
)


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, queries=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join), max_size=3))
def test_scores_equal_a_fresh_bm25s_build_after_any_writes(method, ops, queries):
    # Tiny thresholds so that merges and compactions happen inside short sequences.
    with (
        mock.patch.object(bm25_partition, "_MERGE_MIN_ROWS", 3),
        mock.patch.object(bm25_partition, "_COMPACT_MIN_DEAD", 2),
    ):
        index = BM25Index(KeywordSettings(method=method, k1=1.2, b=0.75))
        live: dict[str, str] = {}
        for op, key, text in ops:
            rid = f"r{key:02d}"
            if op == "upsert":
                index.upsert([KeywordDoc(id=rid, text=text, account_id=ACC)])
                live[rid] = text
            elif op == "delete":
                index.delete(ACC, [rid])
                live.pop(rid, None)
            else:
                index.optimize()
        assert index.count(ACC) == len(live)
        for query in [*queries, "pod node disk"]:
            assert_matches_bm25s(index, live, query)


def test_batches_with_duplicate_ids_keep_the_last_and_match_bm25s():
    index = BM25Index()
    index.upsert(
        [
            KeywordDoc(id="a", text="pod crash", account_id=ACC),
            KeywordDoc(id="b", text="node disk", account_id=ACC),
            KeywordDoc(id="a", text="etcd leader", account_id=ACC),
        ]
    )
    assert index.count(ACC) == 2
    assert_matches_bm25s(index, {"a": "etcd leader", "b": "node disk"}, "pod etcd disk")


def corpus(n: int, seed: int = 7) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"d{i:06d}", " ".join(rng.choices(WORDS, k=rng.randint(1, 9)))) for i in range(n)]


def test_merging_keeps_results_identical():
    docs = corpus(1500)
    index = BM25Index()
    index.upsert(KeywordDoc(id=i, text=t, account_id=ACC) for i, t in docs)
    flt = VectorFilter(account_id=ACC)
    queries = ["pod crash", "etcd leader cache", "kernel", "proxy ingress quota node"]
    before = {q: [(h.id, h.score, h.coverage) for h in index.search(q, 50, flt)] for q in queries}
    assert index.merges == 0  # 1500 rows sit in the append segment
    index.optimize()
    assert index.merges == 1
    for q in queries:
        after = [(h.id, h.score, h.coverage) for h in index.search(q, 50, flt)]
        assert [a[0] for a in after] == [b[0] for b in before[q]]
        assert [a[1] for a in after] == pytest.approx([b[1] for b in before[q]], rel=1e-12)
    # writes past the threshold merge by themselves, deletes past a third compact; scores stay those of bm25s
    more = corpus(2600, seed=8)
    index.upsert(KeywordDoc(id=f"m{i}", text=t, account_id=ACC) for i, t in more)
    assert index.merges == 2
    live = {i: t for i, t in docs} | {f"m{i}": t for i, t in more}
    gone = sorted(live)[::2]
    index.delete(ACC, gone)
    for rid in gone:
        del live[rid]
    assert index.merges == 3
    for q in queries:
        assert_matches_bm25s(index, live, q)


def test_concurrent_searches_see_consistent_partitions_while_writes_merge():
    index = BM25Index()
    docs = corpus(3000)
    index.upsert(KeywordDoc(id=i, text=t, account_id=ACC) for i, t in docs[:1000])
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                hits = index.search("pod crash etcd", 20, VectorFilter(account_id=ACC))
                assert all(h.score > 0 for h in hits)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for start in range(1000, 3000, 250):
            index.upsert(KeywordDoc(id=i, text=t, account_id=ACC) for i, t in docs[start : start + 250])
            index.delete(ACC, [docs[j][0] for j in range(start - 1000, start - 900)])
    finally:
        stop.set()
        thread.join()
    assert not errors
    live = {i: t for i, t in docs}
    for j in range(2000):
        if j % 250 < 100:
            live.pop(docs[j][0], None)
    assert_matches_bm25s(index, live, "pod crash etcd")


# ---- catch-up from the change log --------------------------------------------------------------------------------
def vec(i: int) -> np.ndarray:
    v = np.zeros(4, dtype=np.float32)
    v[i % 4] = 1.0
    return v


def record(rid: str, text: str, *, level: int = 2, account: str = ACC, space: str = "shared") -> VectorRecord:
    uri = f"ctx://resources/ops/{rid}.md"
    return VectorRecord(
        id=rid,
        vector=vec(len(rid)),
        uri=uri,
        parent_uri="ctx://resources/ops/",
        account_id=account,
        owner_space=space,
        context_type="resource",
        level=level,
        doc_id=uri,
        text=text,
        breadcrumb=f"Ops > {rid}",
        context="",
    )


@pytest.fixture
def two_handles(tmp_path: Path):
    """Two store handles on one SQLite file: the second plays another process."""
    first = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    second = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    yield first, second
    first.close()
    second.close()


def test_writes_of_another_handle_are_seen_at_the_next_search(two_handles):
    mine, other = two_handles
    other.put_vectors([record(f"r{i:02d}", f"{WORDS[i % len(WORDS)]} runbook {i}") for i in range(40)])
    other.put_vectors([record("abs", "crash loop abstract", level=0)])
    index = BM25Index(source=mine)
    assert index.count() == 0  # nothing read before a search
    flt = VectorFilter(account_id=ACC, levels=[2])
    assert {h.id for h in index.search("etcd", 10, flt)} == {"r04", "r16", "r28"}
    assert (index.loads, index.docs_indexed) == (1, 41)
    # another process writes one new record, replaces two and deletes two
    other.put_vectors([record("new", "etcd leader election"), record("r04", "disk pressure"), record("r05", "etcd")])
    other.delete_vectors(["r16", "r28"])
    hits = index.search("etcd", 10, flt)
    assert [h.id for h in hits] == ["r05", "new"]
    assert (index.loads, index.docs_indexed) == (1, 44)  # exactly the three changed records were tokenised
    # the level-0 partition keeps its own statistics; writes of another account change nothing here
    assert [h.id for h in index.search("crash", 10, VectorFilter(account_id=ACC, levels=[0]))] == ["abs"]
    other.put_vectors([record("x", "etcd", account="other")])
    index.search("etcd", 10, flt)
    assert (index.loads, index.docs_indexed) == (1, 44)
    # listener calls are no-ops with a source: the change log is the one rule
    index.nodes_deleted(ACC, ["ctx://resources/ops/new.md"])
    assert [h.id for h in index.search("etcd", 10, flt)] == ["r05", "new"]


def test_hit_texts_come_from_the_store(two_handles):
    mine, other = two_handles
    rec = record("r1", "certificate expires soon")
    other.put_vectors([rec, record("r2", "disk almost full")])
    index = BM25Index(source=mine)
    calls: list[int] = []
    real = mine.get_vector_texts

    def counting(account_id, ids):
        calls.append(len(ids))
        return real(account_id, ids)

    with mock.patch.object(mine, "get_vector_texts", counting):
        (hit,) = index.search("certificate", 5, VectorFilter(account_id=ACC))
    assert calls == [1]  # one read for the top-k
    assert hit.text == keyword_text(rec) and hit.breadcrumb == rec.breadcrumb
    assert not any(p.texts for p in index._accounts[ACC].parts.values())  # no text held in memory


def test_filters_apply_to_records_from_the_store(two_handles):
    mine, other = two_handles
    other.put_vectors([record("s1", "disk full"), record("u1", "disk full too", space="user:u1")])
    index = BM25Index(source=mine)
    assert [h.id for h in index.search("disk", 5, VectorFilter(account_id=ACC, owner_spaces=["user:u1"]))] == ["u1"]
    assert index.search("disk", 5, VectorFilter(account_id=ACC, levels=[0])) == []


def test_a_change_log_too_long_to_apply_reloads(two_handles):
    mine, other = two_handles
    other.put_vectors([record(f"r{i:02d}", "pod crash") for i in range(20)])
    index = BM25Index(source=mine)
    index.search("pod", 5, VectorFilter(account_id=ACC))
    with mock.patch.object(derived_base, "MAX_CHANGES", 2):
        other.put_vectors([record(f"r{i:02d}", "etcd leader") for i in range(15)])
        assert len(index.search("etcd", 50, VectorFilter(account_id=ACC))) == 15
    assert index.loads == 2


def test_rebuild_reloads_from_the_store(two_handles):
    mine, other = two_handles
    other.put_vectors([record("r1", "pod crash")])
    index = BM25Index(source=mine)
    index.upsert([KeywordDoc(id="stray", text="pod", account_id=ACC)])  # not in the store
    assert index.rebuild(mine, ACC) == 1
    assert [h.id for h in index.search("pod", 5, VectorFilter(account_id=ACC))] == ["r1"]
    assert index.loads == 1


@pytest.mark.slow
def test_adding_one_record_to_a_large_account_indexes_one_document(two_handles):
    mine, other = two_handles
    docs = corpus(20_000)
    other.put_vectors([record(i, t) for i, t in docs])
    index = BM25Index(source=mine)
    flt = VectorFilter(account_id=ACC)
    index.search("pod", 5, flt)
    assert (index.loads, index.docs_indexed) == (1, 20_000)
    other.put_vectors([record("zz-new", "pod kernel zebra")])
    assert [h.id for h in index.search("zebra", 5, flt)] == ["zz-new"]
    assert (index.loads, index.docs_indexed) == (1, 20_001)
    assert index.merges == 0  # one row in the append segment, far below the merge threshold


filters = st.builds(
    lambda spaces, types, levels: VectorFilter(account_id=ACC, owner_spaces=spaces, context_types=types, levels=levels),
    st.none() | st.lists(st.sampled_from(["shared", "user:a", "agent:b"]), max_size=2, unique=True),
    st.none() | st.lists(st.sampled_from(["resource", "memory", "skill"]), max_size=2, unique=True),
    st.none() | st.lists(st.sampled_from([0, 2]), min_size=1, max_size=2, unique=True),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flts=st.lists(filters, min_size=1, max_size=4), query=texts, top_k=st.integers(1, 30))
def test_search_many_returns_what_each_search_returns(flts, query, top_k):
    rng = random.Random(3)
    index = BM25Index()
    spaces = {"shared": "resource", "user:a": "memory", "agent:b": "skill"}
    docs = []
    for i, (rid, text) in enumerate(corpus(200)):
        space = rng.choice(sorted(spaces))
        docs.append(
            KeywordDoc(
                id=rid, text=text, account_id=ACC, owner_space=space, context_type=spaces[space], level=i % 2 * 2
            )
        )
    index.upsert(docs)
    many = index.search_many(query, top_k, flts)
    bare = index.search_many(query, top_k, flts, with_text=False)
    scores = index.scores_many(query, top_k, flts)
    assert len(many) == len(bare) == len(scores) == len(flts)
    for flt, got, without, scored in zip(flts, many, bare, scores, strict=True):
        alone = index.search(query, top_k, flt)
        assert [(h.id, h.score, h.text) for h in got] == [(h.id, h.score, h.text) for h in alone]
        assert [(h.id, h.score, h.coverage) for h in without] == [(h.id, h.score, h.coverage) for h in alone]
        assert all(h.text == "" for h in without)
        # the fusion's reduced hits: the same records, order and scores
        assert [tuple(h) for h in scored] == [(h.id, h.uri, h.score, h.coverage, h.matched) for h in alone]


def test_search_many_rejects_filters_of_two_accounts():
    index = BM25Index()
    with pytest.raises(ValueError, match="same account"):
        index.search_many("pod", 5, [VectorFilter(account_id="a"), VectorFilter(account_id="b")])


SPACES = ["shared", "user:a", "user:b", "user:c", "agent:x", "agent:y"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    placed=st.lists(st.tuples(st.integers(0, 59), st.sampled_from(SPACES), texts), min_size=1, max_size=60),
    deleted=st.lists(st.integers(0, 59), max_size=10),
    merge_first=st.booleans(),
    wanted=st.lists(
        st.lists(st.sampled_from([*SPACES, "user:unknown"]), max_size=3, unique=True), min_size=1, max_size=3
    ),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
)
def test_filters_naming_owner_spaces_score_only_theirs_and_find_what_a_full_scoring_finds(
    placed, deleted, merge_first, wanted, query
):
    """Main segments group a term's postings by owner space, and a search whose filters name spaces reads only
    theirs (issue 26): the hits, scores and ties are those of an unfiltered search filtered afterwards, whether the
    rows sit in the main segment, the append segment or both, with tombstones."""
    with mock.patch.object(bm25_partition, "_MERGE_MIN_ROWS", 3):
        index = BM25Index()
        for key, space, text in placed:
            index.upsert([KeywordDoc(id=f"r{key:02d}", text=text, account_id=ACC, owner_space=space)])
        if merge_first:
            index.optimize()
        index.delete(ACC, [f"r{k:02d}" for k in deleted])
        index.upsert([KeywordDoc(id="late", text=query, account_id=ACC, owner_space="user:b")])  # in the tail
    everything = index.search(query, 10_000, VectorFilter(account_id=ACC))
    flts = [VectorFilter(account_id=ACC, owner_spaces=spaces) for spaces in wanted]
    for flt, got in zip(flts, index.search_many(query, 10_000, flts), strict=True):
        assert flt.owner_spaces is not None
        expected = [(h.id, h.score) for h in everything if h.owner_space in flt.owner_spaces]
        assert [(h.id, h.score) for h in got] == expected


def test_a_search_naming_spaces_reads_only_their_postings_from_the_main_segment():
    index = BM25Index()
    index.upsert(
        KeywordDoc(id=f"d{i:03d}", text="disk pressure", account_id=ACC, owner_space=SPACES[i % len(SPACES)])
        for i in range(120)
    )
    index.optimize()
    (part,) = index._account(ACC, create=False).parts.values()
    assert part.tail_rows == 0
    view = part.capture(index.tokenizer("disk"), [VectorFilter(account_id=ACC, owner_spaces=["user:a", "shared"])])
    assert view is not None
    rows, _scores, _matched = view._scored(index.settings)
    assert sorted({part.value("owner_space", r) for r in rows.tolist()}) == ["shared", "user:a"]
    assert rows.size == 40  # 20 rows in each of the two spaces, none of the other 80
    everyone = part.capture(index.tokenizer("disk"), [VectorFilter(account_id=ACC)])
    assert everyone is not None and everyone._scored(index.settings)[0].size == 120
    every = part.capture(index.tokenizer("disk"), [VectorFilter(account_id=ACC, owner_spaces=[*SPACES, "user:none"])])
    assert every is not None and every.spaces is None  # every space named: whole postings, no slice per space
