import json
from pathlib import Path

import pytest

from context_engine.errors import ContextEngineError
from context_engine.eval.datasets import half_of, load_dataset, markdown_document
from tests.conftest import shared_data


def test_beir_loader_keeps_only_judged_queries_and_string_ids(tiny_beir: Path):
    ds = load_dataset(tiny_beir, "test")
    assert ds.key == "tiny/test" and len(ds.corpus) == 5 and set(ds.queries) == {"q1", "q2", "q3", "q4"}
    assert ds.qrels["q3"] == {"d4": 2}
    assert ds.corpus["d1"].content() == "Pod crash looping The pod restarts repeatedly because the container exits."
    assert len(ds.hash) == 64 and ds.hash != ds.corpus_hash


def test_hash_changes_with_the_data(tiny_beir: Path):
    before = load_dataset(tiny_beir, "test")
    with (tiny_beir / "qrels" / "test.tsv").open("a") as fh:
        fh.write("q1\td2\t1\n")
    after = load_dataset(tiny_beir, "test")
    assert after.hash != before.hash and after.corpus_hash == before.corpus_hash


def test_halves_are_deterministic_and_disjoint(tiny_beir: Path):
    ds = load_dataset(tiny_beir, "test")
    dev, test = ds.halved("dev"), ds.halved("test")
    assert set(dev.queries) | set(test.queries) == set(ds.queries)
    assert not set(dev.queries) & set(test.queries)
    assert dev.key.endswith("@dev") and all(half_of(q) == "dev" for q in dev.queries)


def test_missing_split_raises(tiny_beir: Path):
    with pytest.raises(ContextEngineError):
        load_dataset(tiny_beir, "nope")
    with pytest.raises(ContextEngineError):
        load_dataset(tiny_beir / "qrels", "test")


def test_golden_json_with_markdown_corpus(tmp_path: Path):
    docs = tmp_path / "docs" / "k8s"
    docs.mkdir(parents=True)
    (docs / "a.md").write_text("---\ntitle: Pod Crash\n---\n# PodCrash\n\nRestarting pods.\n")
    (docs / "b.md").write_text("# Node\n\nNot ready.\n")
    golden = {
        "name": "mini",
        "corpus": "docs",
        "cases": [
            {"id": "c1", "query": "pod restarts", "expected": [{"doc": "k8s/a.md", "grade": 2}], "tags": ["en"]},
            {"id": "c2", "query": "node", "expected": [{"uri": "ctx://resources/k8s/b.md"}]},
        ],
    }
    (tmp_path / "mini.json").write_text(json.dumps(golden))
    ds = load_dataset(tmp_path / "mini.json")
    assert ds.key == "mini/golden" and set(ds.corpus) == {"k8s/a.md", "k8s/b.md"}
    assert ds.corpus["k8s/a.md"].title == "Pod Crash"
    assert ds.qrels == {"c1": {"k8s/a.md": 2}, "c2": {"ctx://resources/k8s/b.md": 1}}
    assert ds.tags["c1"] == ["en"]


def test_golden_json_rejects_bad_cases(tmp_path: Path):
    (tmp_path / "g.json").write_text(json.dumps([{"id": "1", "query": "x"}]))
    with pytest.raises(ContextEngineError):
        load_dataset(tmp_path / "g.json")
    (tmp_path / "g.json").write_text(json.dumps([{"id": "1", "query": "x", "expected": ["a"]}] * 2))
    with pytest.raises(ContextEngineError):
        load_dataset(tmp_path / "g.json")


def test_markdown_document_title_fallbacks():
    assert markdown_document("x/Alert.md", "# AlertName\n\nbody").title == "AlertName"
    assert markdown_document("x/Alert.md", "no heading").title == "Alert"


@pytest.mark.parametrize(
    ("split", "docs", "queries", "qrels", "field"),
    [
        ("prometheus-operator", 108, 104, 104, "text"),
        ("prometheus-operator+openshift", 380, 104, 138, "description_clean"),
        ("kubesphere-zh", 49, 45, 45, "text"),
    ],
)
def test_runbook_sets(split, docs, queries, qrels, field):
    ds = load_dataset(shared_data("runbooks"), split)
    assert (len(ds.corpus), len(ds.queries), sum(len(v) for v in ds.qrels.values())) == (docs, queries, qrels)
    assert ds.query_field == field
    assert all(d in ds.corpus for rel in ds.qrels.values() for d in rel)


def test_runbook_query_field_override_changes_the_key():
    ds = load_dataset(shared_data("runbooks"), "prometheus-operator", query_field="description_clean")
    assert ds.key == "runbooks/prometheus-operator#description_clean"
    assert ds.queries["AlertmanagerFailedReload"].startswith("Configuration has failed to load")


def test_scifact_counts_match_sources_md():
    ds = load_dataset(shared_data("scifact"), "test")
    assert (len(ds.corpus), len(ds.queries), sum(len(v) for v in ds.qrels.values())) == (5183, 300, 339)


def test_max_docs_keeps_judged_documents_and_changes_the_cache_key(tiny_beir: Path):
    ds = load_dataset(tiny_beir, "test")
    cut = ds.with_max_docs(4)
    assert set(cut.corpus) == {"d1", "d2", "d4", "d5"}  # every judged document, no distractor left
    assert all(d in cut.corpus for rel in cut.qrels.values() for d in rel)
    assert cut.key == "tiny/test~4" and cut.corpus_hash != ds.corpus_hash and cut.hash != ds.hash
    assert load_dataset(tiny_beir, "test", max_docs=4).corpus_hash == cut.corpus_hash
