"""Acceptance on real data: the 108 prometheus-operator runbooks through the engine and the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.conftest import shared_data


@pytest.fixture(scope="module")
def runbook_engine(tmp_path_factory, embedder):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    data = shared_data("runbooks", "prometheus-operator")
    engine = ContextEngineService(load_settings(tmp_path_factory.mktemp("rb")), embedder=embedder)
    report = engine.add_resource(data, "ctx://resources/runbooks/prometheus-operator/")
    assert report.nodes == 108 and report.failed == 0
    yield engine
    engine.close()


def test_crash_looping_query_finds_the_runbook_first(runbook_engine):
    hits = runbook_engine.search_memory("Pod is crash looping", top_k=5).hits
    assert hits[0].uri == "ctx://resources/runbooks/prometheus-operator/kubernetes/KubePodCrashLooping.md"
    assert hits[0].score > hits[-1].score


def test_directories_have_abstracts_and_overviews(runbook_engine):
    tree = runbook_engine.tree("ctx://resources/", max_depth=2)
    rb = tree.children[0]
    assert rb.uri == "ctx://resources/runbooks/"
    po = rb.children[0]
    assert po.is_dir and po.abstract
    groups = [c for c in runbook_engine.ls(po.uri) if c.is_dir]
    assert {g.uri.rstrip("/").rsplit("/", 1)[1] for g in groups} >= {"kubernetes", "etcd", "node", "prometheus"}
    assert "KubePodCrashLooping" in runbook_engine.read(
        "ctx://resources/runbooks/prometheus-operator/kubernetes/", "L1"
    )


def test_cli_tree_read_search(runbook_engine):
    from context_engine.interfaces.cli.app import app

    runner = CliRunner()
    home = str(runbook_engine.settings.home_path)
    runbook_engine.close()  # the CLI opens its own engine on the same directory
    r = runner.invoke(app, ["--home", home, "tree", "ctx://resources/"])
    assert r.exit_code == 0, r.output
    assert "ctx://resources/runbooks/prometheus-operator/kubernetes/" in r.output
    uri = "ctx://resources/runbooks/prometheus-operator/kubernetes/KubePodCrashLooping.md"
    r = runner.invoke(app, ["--home", home, "--json", "read", uri, "--level", "L2"])
    assert r.exit_code == 0 and "kubectl" in json.loads(r.output)["text"]
    r = runner.invoke(app, ["--home", home, "read", uri, "--level", "L1"])
    assert r.exit_code == 0 and "Diagnosis" in r.output
    r = runner.invoke(app, ["--home", home, "--json", "read", "ctx://resources/runbooks/", "--level", "L2"])
    assert r.exit_code == 2 and json.loads(r.output)["code"] == "RET-4004"
    r = runner.invoke(app, ["--home", home, "--json", "search", "Pod is crash looping", "-k", "3"])
    assert r.exit_code == 0 and json.loads(r.output)[0]["uri"] == uri
    r = runner.invoke(app, ["--home", home, "--json", "add", "/nonexistent/x.md", "ctx://resources/"])
    assert r.exit_code == 2 and json.loads(r.output)["code"] == "WRT-4041"
