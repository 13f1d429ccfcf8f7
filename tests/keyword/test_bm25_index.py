from pathlib import Path

import pytest

from context_engine.schema.nodes import VectorFilter
from context_engine.settings import KeywordSettings
from context_engine.storage.keyword import BM25Index, KeywordDoc

DOCS = [
    ("d1", "Pod is crash looping and restarting", "acc", 2, "shared", "ctx://resources/k8s/a.md"),
    ("d2", "Node is not ready", "acc", 2, "shared", "ctx://resources/k8s/b.md"),
    ("d3", "Disk is almost full on the node", "acc", 2, "user:u1", "ctx://user/u1/memories/c.md"),
    ("d4", "Pod crash looping in another tenant", "other", 2, "shared", "ctx://resources/k8s/a.md"),
    ("d5", "crash loop abstract", "acc", 0, "shared", "ctx://resources/k8s/a.md"),
]


def make_index() -> BM25Index:
    index = BM25Index(KeywordSettings())
    index.upsert(
        KeywordDoc(id=i, text=t, account_id=a, level=lv, owner_space=o, uri=u, doc_id=u, context_type="resource")
        for i, t, a, lv, o, u in DOCS
    )
    return index


def test_search_ranks_by_bm25_within_the_account_and_level():
    index = make_index()
    hits = index.search("pod crash", 10, VectorFilter(account_id="acc", levels=[2]))
    assert [h.id for h in hits] == ["d1"]
    assert hits[0].score > 0 and hits[0].score_label == "bm25"


def test_tenants_never_mix():
    index = make_index()
    hits = index.search("tenant", 10, VectorFilter(account_id="acc"))
    assert hits == []
    assert [h.id for h in index.search("tenant", 10, VectorFilter(account_id="other"))] == ["d4"]


def test_filters_narrow_owner_space_and_uri_prefix():
    index = make_index()
    flt = VectorFilter(account_id="acc", levels=[2], owner_spaces=["shared"])
    assert {h.id for h in index.search("node", 10, flt)} == {"d2"}
    flt = VectorFilter(account_id="acc", uri_prefix="ctx://user/u1/")
    assert [h.id for h in index.search("node disk", 10, flt)] == ["d3"]
    assert index.search("node", 10, VectorFilter(account_id="acc", owner_spaces=[])) == []


def test_levels_none_searches_every_level():
    ids = {h.id for h in make_index().search("crash", 10, VectorFilter(account_id="acc"))}
    assert ids == {"d1", "d5"}


def test_ties_break_by_id_and_top_k_cuts():
    index = BM25Index()
    index.upsert(KeywordDoc(id=i, text="same words here", account_id="a") for i in ("c", "a", "b"))
    hits = index.search("words", 2, VectorFilter(account_id="a"))
    assert [h.id for h in hits] == ["a", "b"]
    assert index.search("words", 0, VectorFilter(account_id="a")) == []


def test_upsert_replaces_and_delete_removes():
    index = make_index()
    index.upsert([KeywordDoc(id="d2", text="etcd leader changes", account_id="acc", uri="ctx://resources/k8s/b.md")])
    flt = VectorFilter(account_id="acc")
    assert index.search("ready", 10, flt) == []
    assert [h.id for h in index.search("etcd", 10, flt)] == ["d2"]
    index.delete("acc", ["d2"])
    assert index.search("etcd", 10, flt) == []
    assert index.count("acc") == 3


def test_unknown_query_terms_return_nothing():
    assert make_index().search("zzzz qqqq", 10, VectorFilter(account_id="acc")) == []
    assert make_index().search("the", 10, VectorFilter(account_id="acc")) == []


def test_save_and_load_round_trip(tmp_path: Path):
    index = make_index()
    index.save(tmp_path / "bm25.jsonl")
    loaded = BM25Index.load(tmp_path / "bm25.jsonl")
    flt = VectorFilter(account_id="acc")
    assert [(h.id, round(h.score, 6)) for h in loaded.search("pod crash node", 10, flt)] == [
        (h.id, round(h.score, 6)) for h in index.search("pod crash node", 10, flt)
    ]


def test_load_rejects_other_files(tmp_path: Path):
    from context_engine.errors import ContextEngineError

    (tmp_path / "x.jsonl").write_text('{"format": "other"}\n')
    with pytest.raises(ContextEngineError):
        BM25Index.load(tmp_path / "x.jsonl")


def test_chinese_documents_are_found_by_chinese_queries():
    index = BM25Index()
    index.upsert(
        [
            KeywordDoc(id="zh", text="容器频繁重启的排查：检查 Pod 日志", account_id="a"),
            KeywordDoc(id="en", text="Node disk pressure", account_id="a"),
        ]
    )
    assert [h.id for h in index.search("容器为什么频繁重启", 5, VectorFilter(account_id="a"))] == ["zh"]


@pytest.mark.slow
def test_listener_keeps_the_index_in_sync_with_writes_and_deletes(make_engine):
    engine = make_engine()
    index = BM25Index()
    engine.pipeline.add_listener(index)
    engine.add_text("# Etcd leader\n\nThe etcd cluster changes leader too often.\n", "ctx://resources/ops/etcd.md")
    engine.add_text("# Disk\n\nThe disk is almost full.\n", "ctx://resources/ops/disk.md")
    flt = VectorFilter(account_id="default", levels=[2])
    hits = index.search("etcd leader", 5, flt)
    assert hits and hits[0].uri == "ctx://resources/ops/etcd.md" and hits[0].level == 2
    # replacing a document replaces its records
    engine.add_text("# Etcd\n\nCompaction of the etcd database.\n", "ctx://resources/ops/etcd.md")
    assert [h.uri for h in index.search("leader", 5, flt)] == []
    assert [h.uri for h in index.search("compaction", 5, flt)] == ["ctx://resources/ops/etcd.md"]
    engine.delete("ctx://resources/ops/etcd.md")
    assert index.search("etcd", 5, VectorFilter(account_id="default")) == []
    # rebuilding from the metadata store gives the same answers
    rebuilt = BM25Index()
    rebuilt.rebuild(engine.metadata, "default")
    assert [h.id for h in rebuilt.search("disk full", 5, flt)] == [h.id for h in index.search("disk full", 5, flt)]


@pytest.mark.slow
def test_lazy_source_loads_an_account_on_first_search(make_engine):
    engine = make_engine()
    engine.add_text("# Disk\n\nThe disk is almost full.\n", "ctx://resources/ops/disk.md")
    index = BM25Index(source=engine.metadata)
    engine.pipeline.add_listener(index)
    assert index.count() == 0  # nothing loaded before a search
    flt = VectorFilter(account_id="default", levels=[2])
    assert [h.uri for h in index.search("disk", 5, flt)] == ["ctx://resources/ops/disk.md"]
    engine.add_text("# Certs\n\nThe certificate expires soon.\n", "ctx://resources/ops/cert.md")
    assert [h.uri for h in index.search("certificate", 5, flt)] == ["ctx://resources/ops/cert.md"]
    engine.delete("ctx://resources/ops/disk.md")
    assert index.search("disk", 5, flt) == []


def test_every_filter_field_agrees_with_a_plain_python_filter():
    # The vectorised masks (integer codes, a bisected URI range) must select exactly what a naive filter selects.
    index = BM25Index(KeywordSettings())
    docs = [
        KeywordDoc(
            id=f"r{i:03d}",
            text=f"disk pressure node {i % 7} pod",
            account_id="acc",
            uri=f"ctx://resources/{'ops' if i % 3 else 'ops2'}/{i % 5}/f{i}.md",
            parent_uri=f"ctx://resources/{'ops' if i % 3 else 'ops2'}/{i % 5}/",
            owner_space=("shared", "user:u1", "agent:a")[i % 3],
            category=("", "preference", "event")[i % 3],
            doc_id=f"doc{i % 11}",
        )
        for i in range(120)
    ]
    index.upsert(docs)
    filters = [
        VectorFilter(account_id="acc", uri_prefix="ctx://resources/ops/"),
        VectorFilter(account_id="acc", uri_prefix="ctx://resources/ops/3/"),
        VectorFilter(account_id="acc", parent_uris=["ctx://resources/ops2/1/", "ctx://nowhere/"]),
        VectorFilter(account_id="acc", owner_spaces=["user:u1"], categories=["preference", "event"]),
        VectorFilter(account_id="acc", doc_ids=["doc3", "doc4"], uri_prefix="ctx://resources/ops"),
        VectorFilter(account_id="acc", categories=["missing"]),
    ]
    for flt in filters:
        expected = {
            d.id
            for d in docs
            if (flt.uri_prefix is None or d.uri.startswith(flt.uri_prefix))
            and (flt.parent_uris is None or d.parent_uri in flt.parent_uris)
            and (flt.owner_spaces is None or d.owner_space in flt.owner_spaces)
            and (flt.categories is None or d.category in flt.categories)
            and (flt.doc_ids is None or d.doc_id in flt.doc_ids)
        }
        assert {h.id for h in index.search("disk pod", 1000, flt)} == expected, flt


def test_coverage_is_the_score_over_its_upper_bound():
    index = BM25Index(KeywordSettings())
    index.upsert(
        [
            KeywordDoc(id="full", text="disk full on the node", account_id="a"),
            KeywordDoc(id="many", text="disk " * 60, account_id="a"),
            KeywordDoc(id="other", text="certificate expires soon", account_id="a"),
        ]
    )
    flt = VectorFilter(account_id="a")
    hits = index.search("disk full", 10, flt)
    # within one query coverage orders exactly like the score; always in (0, 1)
    assert [h.id for h in hits] == sorted((h.id for h in hits), key=lambda i: -next(x.score for x in hits if x.id == i))
    assert all(0 < h.coverage < 1 for h in hits)
    ratio = {h.id: h.coverage / h.score for h in hits}
    assert ratio["full"] == pytest.approx(ratio["many"])  # one bound per query
    # a record repeating the only query token approaches the bound; an unknown token lowers every coverage
    (many,) = [h for h in index.search("disk", 10, flt) if h.id == "many"]
    assert many.coverage > 0.95
    (with_oov,) = [h for h in index.search("disk full zzzunknown", 10, flt) if h.id == "full"]
    assert with_oov.coverage < next(h.coverage for h in hits if h.id == "full")


def test_matched_is_the_share_of_the_query_information_a_record_holds():
    import math

    index = BM25Index(KeywordSettings())
    long_text = "the disk on the node is full " + "and the logs say so again " * 20
    index.upsert(
        [
            KeywordDoc(id="short", text="disk full", account_id="a"),
            KeywordDoc(id="long", text=long_text, account_id="a"),
            KeywordDoc(id="disk", text="disk " * 5, account_id="a"),
            KeywordDoc(id="other", text="certificate expires soon", account_id="a"),
        ]
    )
    flt = VectorFilter(account_id="a")
    hits = {h.id: h for h in index.search("disk full", 10, flt, with_text=False)}
    # every query token held: 1, whatever the record's length or term frequency (coverage falls with length)
    assert hits["short"].matched == pytest.approx(1.0)
    assert hits["long"].matched == pytest.approx(1.0)
    assert hits["long"].coverage < hits["short"].coverage
    # one token of two: its Lucene idf over the sum of both (live rows 4; disk in 3 rows, full in 2)
    idf = {df: math.log(1.0 + (4 - df + 0.5) / (df + 0.5)) for df in (2, 3)}
    assert hits["disk"].matched == pytest.approx(idf[3] / (idf[3] + idf[2]))
    # a token no record holds counts in the sum: nothing holds the whole query
    hits = index.search("disk full zzzunknown", 10, flt, with_text=False)
    assert max(h.matched for h in hits) < 1.0
