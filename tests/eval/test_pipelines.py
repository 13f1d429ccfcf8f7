"""Evaluation through the engine's pipelines (eval/pipelines.py) on the real model, the write path and LanceDB."""

from __future__ import annotations

from pathlib import Path

import pytest

from context_engine.eval import load_dataset
from context_engine.eval.datasets import Document
from context_engine.eval.harness import run_retriever
from context_engine.eval.pipelines import EVAL_CALLER, PipelineRetriever, document_markdown
from context_engine.settings import load_settings


def test_document_markdown_adds_a_title_heading_only_when_needed():
    assert (
        document_markdown(Document("d", "Disk full", "The volume is full.")) == "# Disk full\n\nThe volume is full.\n"
    )
    assert document_markdown(Document("d.md", "T", "# T\n\nbody")) == "# T\n\nbody\n"


@pytest.mark.parametrize("method", ["lookup_knowledge", "search_memory"])
def test_pipeline_answers_through_the_engine_and_reuses_the_ingested_home(tiny_beir: Path, tmp_path, embedder, method):
    ds = load_dataset(tiny_beir, "test")
    settings = load_settings(tmp_path / "h")
    retriever = PipelineRetriever(method, embedder, settings, cache_dir=tmp_path / "cache")
    try:
        res = run_retriever(ds, retriever, top_k=10)
    finally:
        retriever.close()
    assert res.method == method and res.config["model"] == "sentence-transformers:all-MiniLM-L6-v2"
    # English questions find their runbook first; at the defaults no threshold hides a candidate (issue 11), so even
    # the nonsense query gets min(top_k, candidates) documents, which score 0 against its qrels.
    assert res.run["q1"][0][0] == "d1" and res.run["q2"][0][0] == "d2"
    assert len(res.run["q4"]) == min(10, len(ds.corpus))
    assert res.per_query["q1"]["nDCG@10"] == 1.0
    homes = [p for p in (tmp_path / "cache" / "pipelines").iterdir() if p.is_dir()]
    assert len(homes) == 1 and (homes[0] / "docs" / "d1.md").read_text(encoding="utf-8").startswith("# Pod crash")
    # a second run on the same cache reuses the ingested engine: nothing is re-embedded
    again = PipelineRetriever(method, embedder, settings, cache_dir=tmp_path / "cache")
    try:
        again.prepare(ds)
        # the eval's engine comes from build_engine, which binds no default caller: the call names the eval's own
        report = again._engine.add_resource(homes[0] / "docs", "ctx://resources/eval/", EVAL_CALLER)
        assert report.nodes == 0 and report.unchanged == len(ds.corpus)
    finally:
        again.close()
