"""Damaged derived files (issue 27, "Hardening from an attack pass"; docs/derived_indexes.md, "Faults").

The vector index (LanceDB under ``<home>/vectors``) and the saved level-0 matrix and BM25 files
(``<home>/derived``) are derived from the metadata and content stores. An attacker (or a disk) zeroes, truncates or
deletes their files: ``stats`` and ``/readyz`` say so (never the stale record count of the table's manifest), and
``context-engine reindex --full`` rebuilds them, after which search_memory and lookup_knowledge answer exactly as
before the damage. Built with the default model (use-multilingual) on the bundled sample corpus.
"""

from __future__ import annotations

import json
import os
import shutil
from importlib import resources
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from context_engine.interfaces.http.app import create_app
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings

pytestmark = pytest.mark.slow

ADMIN = RequestContext(account_id="default", role="admin")
ALICE = RequestContext(account_id="default", role="user", user_space="alice")
QUERIES = [
    "Pod is crash looping",
    "etcd cluster has no leader",
    "disk is almost full",
    "证书快要过期了",
    "how do I handle a node that is not ready?",
    "what does Alice prefer?",
]
MEMORIES = [
    ("Alice prefers short answers with code samples.", "preference"),
    ("Alice is on call for the payments database this week.", "event"),
    ("Alice works in Lisbon.", "profile"),
]


def _answers(engine: ContextEngineService) -> dict[str, list[tuple[str, float]]]:
    """Per query: search_memory's hits (as ALICE: memories and resources) and lookup_knowledge's evidence, each as
    ``(uri, score)`` in rank order."""
    found: dict[str, list[tuple[str, float]]] = {}
    for q in QUERIES:
        found[f"search:{q}"] = [(h.uri, h.score) for h in engine.search_memory(q, ALICE, top_k=10).hits]
        result = engine.lookup_knowledge(q, ADMIN, mode="primary")
        found[f"lookup:{q}"] = [(b.doc_id, b.raw_score) for b in result.evidence_blocks]
    return found


def _assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert [u for u, _ in got[key]] == [u for u, _ in want[key]], key
        for (_, a), (_, b) in zip(got[key], want[key], strict=True):
            assert a == pytest.approx(b, abs=1e-6), key


@pytest.fixture(scope="module")
def built(tmp_path_factory, default_embedder) -> tuple[Path, dict]:
    """A home with the sample corpus and a few memories, and the answers it gives (module-wide; each test copies it)."""
    home = tmp_path_factory.mktemp("damaged") / "home"
    engine = ContextEngineService(load_settings(home), embedder=default_embedder)
    try:
        corpus = Path(str(resources.files("context_engine") / "sample_corpus"))
        engine.add_resource(corpus, "ctx://resources/runbooks/", ADMIN)
        for text, category in MEMORIES:
            engine.add_memory(text, ALICE, category=category)
        answers = _answers(engine)
        assert all(answers[f"lookup:{q}"] for q in QUERIES[:5]) and answers["search:what does Alice prefer?"]
        assert engine.index_health()["status"] == "ok"
    finally:
        engine.close()  # waits for the derived files' background saves
    return home, answers


@pytest.fixture
def cli(monkeypatch, default_embedder):
    """Runs ``context-engine --json --home HOME <args>`` in this process, on the session's loaded model."""
    for target in ("context_engine.providers.embedder.build_embedder", "context_engine.service.build_embedder"):
        monkeypatch.setattr(target, lambda settings, **kw: default_embedder, raising=True)
    monkeypatch.setenv("CE_EMBEDDING__BACKEND", "use-multilingual")

    def run(home: Path, *args: str):
        return CliRunner().invoke(app, ["--home", str(home), "--json", *args])

    return run


def _lance_data_files(home: Path) -> list[Path]:
    files = sorted((home / "vectors").glob("*.lance/data/*.lance"))
    assert files, "the vector index has no data file"
    return files


def _damage(home: Path, how: str) -> None:
    if how == "zeroed":
        for f in _lance_data_files(home):
            f.write_bytes(b"\0" * f.stat().st_size)
    elif how == "truncated":
        for f in _lance_data_files(home):
            os.truncate(f, f.stat().st_size // 2)
    elif how == "data-file-deleted":
        _lance_data_files(home)[0].unlink()
    elif how == "manifests-zeroed":
        for f in (home / "vectors").glob("*.lance/_versions/*.manifest"):
            f.write_bytes(b"\0" * f.stat().st_size)
    elif how == "table-deleted":
        shutil.rmtree(home / "vectors")
    else:  # pragma: no cover
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["zeroed", "truncated", "data-file-deleted", "manifests-zeroed", "table-deleted"])
def test_reindex_full_on_a_home_whose_vector_files_were_damaged_restores_identical_search_results(
    built, cli, default_embedder, tmp_path, how
):
    source, before = built
    home = tmp_path / "home"
    shutil.copytree(source, home)
    _damage(home, how)
    expected = "missing" if how == "table-deleted" else "damaged"

    # stats says so, instead of the record count the table's manifest still claims
    result = cli(home, "stats")
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["index_status"] == expected, info
    assert info["index_records"] in (None, 0) and "reindex --full" in info["index_problem"]
    assert info["nodes"] > 0

    # /readyz: still serving (reads are answered from the metadata database), degraded with the reason
    engine = ContextEngineService(load_settings(home), embedder=default_embedder)
    try:
        app = create_app(service=engine)
        with TestClient(app, base_url="http://127.0.0.1:8420", client=("127.0.0.1", 40000)) as client:
            ready = client.get("/readyz")
        assert ready.status_code == 200
        body = ready.json()
        assert body["status"] == "degraded" and body["problems"], body
        assert f"vector index {expected}" in body["problems"][0] and "reindex --full" in body["problems"][0]
    finally:
        engine.close()

    result = cli(home, "reindex", "--full")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["vectors"] > 0

    result = cli(home, "stats")
    info = json.loads(result.output)
    assert info["index_status"] == "ok" and info["index_records"] > 0 and "index_problem" not in info, info

    engine = ContextEngineService(load_settings(home), embedder=default_embedder)
    try:
        assert engine.health() == []
        _assert_same(_answers(engine), before)
    finally:
        engine.close()


@pytest.mark.parametrize("how", ["zeroed", "truncated"])
def test_damaged_derived_files_are_reported_by_stats_and_rebuilt(built, cli, default_embedder, tmp_path, how):
    source, before = built
    home = tmp_path / "home"
    shutil.copytree(source, home)
    files = sorted((home / "derived").rglob("*.safetensors"))
    assert {f.parent.name for f in files} == {"l0", "bm25"}, files
    for f in files:
        if how == "zeroed":
            f.write_bytes(b"\0" * f.stat().st_size)
        else:
            os.truncate(f, f.stat().st_size // 2)

    info = json.loads(cli(home, "stats").output)
    assert info["index_status"] == "ok"
    assert set(info["derived_files"]) == {"l0", "bm25"}
    assert all(state.startswith("not used, rebuilt at the next search") for state in info["derived_files"].values())

    engine = ContextEngineService(load_settings(home), embedder=default_embedder)
    try:
        # the first search finds the files damaged, loads from the store instead and writes them anew (in the
        # background: until then /readyz lists them)
        _assert_same(_answers(engine), before)
        assert engine.derived_files.rejected == 2
    finally:
        engine.close()  # the background saves write the files anew

    info = json.loads(cli(home, "stats").output)
    assert info["derived_files"] == {"l0": "ok", "bm25": "ok"}, info


def test_reindex_full_removes_derived_files_that_would_not_be_used(built, cli, tmp_path):
    source, _ = built
    home = tmp_path / "home"
    shutil.copytree(source, home)
    l0 = next((home / "derived" / "l0").glob("*.safetensors"))
    os.truncate(l0, 100)
    assert cli(home, "reindex", "--full").exit_code == 0
    info = json.loads(cli(home, "stats").output)
    assert info["derived_files"] == {"l0": "absent", "bm25": "ok"}, info
