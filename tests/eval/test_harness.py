"""The harness end to end on a tiny dataset: BM25, dense (a fake bag-of-words embedder), fusion, fixture and live
modes, reports and baselines. The real-model check is test_ci_slice.py."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from context_engine.errors import ContextEngineError
from context_engine.eval import (
    BM25Retriever,
    DenseRetriever,
    EvalOptions,
    FixtureRetriever,
    LiveRetriever,
    load_dataset,
    run_eval,
    run_retriever,
    write_run,
)
from context_engine.eval.report import EvalReport
from context_engine.settings import Settings


class BagOfWordsEmbedder:
    """A deterministic fake: hashed word counts, L2-normalised (no model)."""

    model_name = "fake/bag-of-words"
    dim = 64
    backend = "fake"

    def __init__(self) -> None:
        self.calls = 0

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in re.findall(r"\w+", text.lower()):
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v + 1.0 / np.sqrt(self.dim)

    def embed_documents(self, texts, *, progress=None):
        self.calls += 1
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text):
        return self._vec(text)


def test_bm25_run_scores_and_counts_empty_queries(tiny_beir: Path):
    ds = load_dataset(tiny_beir, "test")
    res = run_retriever(ds, BM25Retriever())
    assert res.method == "bm25" and res.model is None
    assert [d for d, _ in res.run["q1"]][:1] == ["d1"] and res.run["q3"][0][0] == "d4"
    assert res.run["q4"] == [] and res.empty_queries == 1
    assert res.per_query["q4"]["nDCG@10"] == 0.0
    assert res.metrics["RR@10"] == pytest.approx(0.75)  # q1, q2, q3 at rank 1, q4 nothing
    assert res.context_tokens["mean"] > 0 and set(res.latency_ms) == {"p50", "p95", "mean"}


def test_dense_uses_the_vector_index_and_caches_vectors(tiny_beir: Path, tmp_path: Path):
    ds = load_dataset(tiny_beir, "test")
    emb = BagOfWordsEmbedder()
    dense = DenseRetriever(emb, cache_dir=tmp_path / "cache")
    res = run_retriever(ds, dense)
    dense.close()
    assert res.model == "fake:bag-of-words" and res.run["q2"][0][0] == "d2"
    assert -1.0 <= res.run["q2"][0][1] <= 1.0
    assert len(list((tmp_path / "cache").glob("tiny-*.npy"))) == 1
    again = DenseRetriever(emb, cache_dir=tmp_path / "cache")
    run_retriever(ds, again)
    again.close()
    assert emb.calls == 1 and again.cached


def test_run_eval_fuses_and_checks_baselines(tiny_beir: Path, tmp_path: Path):
    ds = load_dataset(tiny_beir, "test")
    settings = Settings(home=tmp_path / "home")
    opts = EvalOptions(embedders=["fake"], cache_dir=tmp_path / "cache")
    report = run_eval(
        ds,
        settings,
        opts,
        embedder_factory=lambda b: BagOfWordsEmbedder(),
        baselines_dir=tmp_path / "baselines",
        update_baselines=True,
        command="test",
    )
    assert [r.method for r in report.results] == ["bm25", "dense", "rrf", "weighted", "convex"]
    convex = next(r for r in report.results if r.method == "convex")
    assert convex.config["normalization"] == "none" and convex.config["scale"] == [0.0, 1.0]
    assert (tmp_path / "baselines" / "tiny-test.json").is_file()
    assert report.checks and all(c.status == "OK" for c in report.checks)
    rrf_res = next(r for r in report.results if r.method == "rrf")
    assert rrf_res.config["rrf_k"] == settings.keyword.rrf_k and rrf_res.model == "fake:bag-of-words"
    # a second run is checked against the recorded file
    again = run_eval(
        ds, settings, opts, embedder_factory=lambda b: BagOfWordsEmbedder(), baselines_dir=tmp_path / "baselines"
    )
    assert again.checks and all(c.status == "OK" for c in again.checks)


def test_report_files(tiny_beir: Path, tmp_path: Path):
    ds = load_dataset(tiny_beir, "test")
    report = run_eval(ds, Settings(home=tmp_path / "h"), EvalOptions(methods=["bm25"]), command="cmd")
    paths = report.write(tmp_path / "out")
    data = json.loads(paths["json"].read_text())
    assert data["dataset"]["hash"] == ds.hash and data["dataset"]["key"] == "tiny/test"
    assert data["results"][0]["config_hash"] and data["results"][0]["metrics"]["nDCG@10"] > 0
    assert "git_sha" in data and data["versions"]["ir-measures"]
    assert data["results"][0]["per_query"]["q4"]["nDCG@10"] == 0.0
    md = paths["markdown"].read_text()
    assert "| bm25 |" in md and ds.hash[:16] in md
    assert (tmp_path / "out" / "runs" / "bm25.trec").is_file()


def test_report_tolerates_no_git(tiny_beir: Path, monkeypatch, tmp_path: Path):
    import context_engine.eval.report as report_mod

    monkeypatch.setattr(report_mod.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(OSError("no git")))
    assert report_mod.git_sha() is None


def test_fixture_mode_scores_stored_candidates_without_an_engine(tiny_beir: Path, tmp_path: Path):
    ds = load_dataset(tiny_beir, "test")
    write_run({"q1": [("d1", 2.0)], "q2": [("d3", 1.0), ("d2", 0.5)]}, tmp_path / "cand.trec")
    res = run_retriever(ds, FixtureRetriever(tmp_path / "cand.trec"))
    assert res.per_query["q1"]["RR@10"] == 1.0 and res.per_query["q2"]["RR@10"] == 0.5
    assert res.per_query["q3"]["RR@10"] == 0.0 and res.config["run_sha256"]
    report = run_eval(ds, Settings(home=tmp_path / "h"), EvalOptions(candidates=tmp_path / "cand.trec"))
    assert report.mode == "offline-fixture" and report.results[0].method == "fixture"


class _Stub(BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, list[dict]]] = {}
    seen: ClassVar[list[dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Stub.seen.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if body["query"] == "boom":
            self.send_response(500)
            self.end_headers()
            return
        payload = json.dumps({"results": _Stub.answers.get(body["query"], [])[: body["top_k"]]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Stub.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_live_client_against_a_stub_server(tiny_beir: Path, stub_server: str, tmp_path: Path):
    _Stub.answers = {
        "why does my pod keep restarting": [
            {"doc_id": "ctx://resources/tiny/d1", "score": 0.9, "uri": "x"},
            {"doc_id": "ctx://resources/tiny/d1", "score": 0.5},
            {"doc_id": "ctx://resources/tiny/d3", "score": 0.4},
        ],
        "node status not ready": [{"doc_id": "ctx://resources/tiny/d2", "score": 0.8}],
    }
    ds = load_dataset(tiny_beir, "test")
    opts = EvalOptions(mode="live", url=stub_server + "/", strip_prefix="ctx://resources/tiny/", api_key="k")
    report = run_eval(ds, Settings(home=tmp_path / "h"), opts)
    res = report.results[0]
    assert res.method == "live" and res.run["q1"] == [("d1", 0.9), ("d3", 0.4)]
    assert res.per_query["q1"]["RR@10"] == 1.0 and res.per_query["q3"]["RR@10"] == 0.0
    assert _Stub.seen[0]["path"] == "/api/search/similar" and _Stub.seen[0]["body"]["top_k"] == 50
    assert _Stub.seen[0]["auth"] == "Bearer k"


def test_live_client_errors_are_retryable_engine_errors(stub_server: str):
    with pytest.raises(ContextEngineError) as err:
        LiveRetriever(stub_server).search("q", "boom", 10)
    assert err.value.retryable and err.value.code.value == "RET-5001"
    with pytest.raises(ContextEngineError):
        LiveRetriever("http://127.0.0.1:9", timeout_s=2).search("q", "x", 10)


def test_live_mode_needs_a_url(tiny_beir: Path, tmp_path: Path):
    with pytest.raises(ContextEngineError):
        run_eval(load_dataset(tiny_beir, "test"), Settings(home=tmp_path), EvalOptions(mode="live"))


def test_table_rows_have_every_measure(tiny_beir: Path, tmp_path: Path):
    report = run_eval(load_dataset(tiny_beir, "test"), Settings(home=tmp_path), EvalOptions(methods=["bm25"]))
    assert len(report.table_rows()[0]) == len(EvalReport.table_header())


def test_default_embedders_are_the_configured_one_then_the_references(tiny_beir: Path, tmp_path: Path):
    asked: list[str] = []

    def factory(name: str):
        asked.append(name)
        return BagOfWordsEmbedder()

    settings = Settings(home=tmp_path / "h", embedding={"backend": "use-multilingual"})
    run_eval(load_dataset(tiny_beir, "test"), settings, EvalOptions(methods=["dense"]), embedder_factory=factory)
    assert asked == ["use-multilingual", "sentence-transformers"]
    asked.clear()
    settings = Settings(home=tmp_path / "h", embedding={"backend": "sentence-transformers"})
    run_eval(load_dataset(tiny_beir, "test"), settings, EvalOptions(methods=["dense"]), embedder_factory=factory)
    assert asked == ["sentence-transformers"]  # no duplicate run
