"""The console's routes without a browser: every fragment goes through the API's authentication and tenancy
checks, the eval reports reader accepts only report folders, and the charts carry no script."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError
from context_engine.interfaces.http import create_app
from context_engine.interfaces.http.console import charts
from context_engine.interfaces.http.console.reports import EvalReports, ReportView
from context_engine.interfaces.http.console.routes import capabilities, report_charts, router
from context_engine.interfaces.http.routes import caller
from context_engine.interfaces.http.validation import reject_invalid_text
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.conftest import shared_data
from tests.http.helpers import LOOPBACK_URL, SAMPLE_CORPUS, bearer

ADMIN = RequestContext(account_id="acme", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice")
BOB = RequestContext(account_id="globex", role="user", user_space="bob")
DOC = "ctx://resources/kubernetes/NodeNotReady.md"
pytestmark = pytest.mark.slow

# Every fragment route, with parameters that make a valid request.
FRAGMENTS = [
    ("GET", "/console/fragments/whoami", None),
    ("GET", "/console/fragments/roots", None),
    ("GET", "/console/fragments/tree?uri=ctx://resources/", None),
    ("GET", f"/console/fragments/node?uri={DOC}", None),
    ("POST", "/console/fragments/search", {"query": "node not ready"}),
    ("POST", "/console/fragments/lookup", {"query": "node not ready"}),
    ("GET", "/console/fragments/sessions", None),
    ("GET", "/console/fragments/memories", None),
    ("POST", "/console/fragments/verify", {"invocation_id": "0" * 32, "excerpt": "kubelet stopped posting"}),
    ("GET", "/console/fragments/eval", None),
    ("GET", "/console/fragments/eval/report?run=x", None),
    ("GET", "/console/fragments/eval/compare?a=x&b=y", None),
    ("GET", "/console/fragments/write", None),
    ("POST", "/console/fragments/write/text", {"uri": "ctx://resources/x.md", "text": "x"}),
    ("POST", "/console/fragments/write/memory", {"text": "x"}),
    ("POST", "/console/fragments/write/delete", {"uri": DOC}),
]


def _dependencies(dependant) -> list:
    out = [dependant.call]
    for sub in dependant.dependencies:
        out += _dependencies(sub)
    return out


def test_every_fragment_route_depends_on_the_api_caller_and_every_route_is_listed_here():
    fragment_paths = set()
    for route in router.routes:
        if "/fragments/" in route.path:
            fragment_paths.add(route.path)
            assert caller in _dependencies(route.dependant), route.path
        else:  # a page: no engine, no caller, no data (only the router-wide invalid-Unicode check)
            assert [d.call for d in route.dependant.dependencies] == [reject_invalid_text], route.path
    assert fragment_paths == {p.split("?")[0] for _, p, _ in FRAGMENTS}


@pytest.fixture(scope="module")
def client_and_keys(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("console-unit")
    service = ContextEngineService(load_settings(home), embedder=embedder)
    service.add_resource(SAMPLE_CORPUS, "ctx://resources/", ADMIN)
    store = ApiKeyStore(service.metadata)
    callers = (("admin", ADMIN), ("alice", ALICE), ("bob", BOB))
    keys = {name: bearer(store.create(ctx, name)[1]) for name, ctx in callers}
    with TestClient(create_app(service=service), base_url=LOOPBACK_URL, client=("127.0.0.1", 40000)) as client:
        yield client, keys, service
    service.close()


def _call(client, method, path, body, headers):
    return client.post(path, json=body, headers=headers) if method == "POST" else client.get(path, headers=headers)


@pytest.mark.parametrize(("method", "path", "body"), FRAGMENTS)
def test_a_fragment_without_a_key_is_refused_like_the_api(client_and_keys, method, path, body):
    client, _, _ = client_and_keys
    resp = _call(client, method, path, body, {})
    assert resp.status_code == 401 and resp.json()["code"] == "AUTH-4011"


def test_pages_carry_no_data_and_load_without_a_key(client_and_keys):
    client, _, _ = client_and_keys
    for path in ("/console/login", "/console/browse", f"/console/node?uri={DOC}", "/console/search", "/console/write"):
        resp = client.get(path)
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
        assert "kubelet" not in resp.text.lower()  # the document's text comes only through a fragment
    assert client.get("/console", follow_redirects=False).headers["location"] == "/console/browse"


def test_another_account_gets_the_same_refusal_as_for_a_missing_uri(client_and_keys):
    client, keys, _ = client_and_keys
    seen = client.get(f"/console/fragments/node?uri={DOC}", headers=keys["admin"])
    assert seen.status_code == 200 and "kubelet" in seen.text.lower()
    other = client.get(f"/console/fragments/node?uri={DOC}", headers=keys["bob"]).json()
    missing = client.get(f"/console/fragments/node?uri={DOC.replace('NodeNotReady', 'Nope')}", headers=keys["admin"])
    assert other["code"] == missing.json()["code"] == "RET-4032" and other["message"] == missing.json()["message"]
    hits = client.post("/console/fragments/search", json={"query": "node not ready"}, headers=keys["bob"])
    assert hits.status_code == 200 and "NodeNotReady" not in hits.text and "No hits" in hits.text
    tree = client.get("/console/fragments/tree?uri=ctx://resources/", headers=keys["bob"])
    assert tree.status_code == 200 and "kubernetes" not in tree.text


def test_the_node_page_redacts_l2_as_read_memory_does(client_and_keys):
    client, keys, service = client_and_keys
    uri = "ctx://resources/ops/db-access.md"
    text = "# DB access\n\n## Steps\n\nConnect with postgres://admin:pa55w0rd@db:5432/app and run the check.\n"
    service.add_text(text, uri, ADMIN)
    page = client.get(f"/console/fragments/node?uri={uri}", headers=keys["admin"])
    assert page.status_code == 200 and "pa55w0rd" not in page.text
    assert page.text.count("[REDACTED:connection_string]") == 5  # L0; L1 and L2 each rendered and as returned
    listing = client.get("/console/fragments/tree?uri=ctx://resources/ops/", headers=keys["admin"])
    assert "[REDACTED:connection_string]" in listing.text and "pa55w0rd" not in listing.text


def test_writes_follow_the_context_rules(client_and_keys):
    client, keys, service = client_and_keys
    text = {"uri": "ctx://resources/a.md", "text": "a"}
    refused = client.post("/console/fragments/write/text", json=text, headers=keys["alice"])
    assert refused.status_code == 403
    added = client.post("/console/fragments/write/memory", json={"text": "Alice likes tea."}, headers=keys["alice"])
    assert added.status_code == 200 and "Added memory" in added.text
    assert [m.abstract for m in service.list_memories(ALICE).items] == ["Alice likes tea."]
    bad = client.post("/console/fragments/write/delete", json={"uri": "not a uri"}, headers=keys["admin"])
    assert bad.status_code == 400 and bad.json()["code"].startswith("WRT-400")


def test_capabilities_of_keys():
    assert capabilities(ADMIN) == {"add_text": True, "add_memory": True, "delete": True, "read_only": False}
    assert capabilities(ALICE) == {"add_text": False, "add_memory": True, "delete": True, "read_only": False}
    reader = RequestContext(account_id="acme", role="agent")
    assert capabilities(reader)["read_only"] is True


@pytest.fixture(scope="module")
def reports_root(tmp_path_factory) -> Path:
    """One real `context-engine eval` run (BM25 only: no model) on 16 runbook queries."""
    from context_engine.interfaces.cli.app import app

    data = shared_data("runbooks")
    tmp = tmp_path_factory.mktemp("console-reports")
    (tmp / "base").mkdir()
    args = ["--home", str(tmp / "h"), "eval", "--dataset", str(data), "--split", "prometheus-operator"]
    args += ["--method", "bm25", "--limit-queries", "16", "--out", str(tmp / "reports" / "bm25-run")]
    res = CliRunner().invoke(app, [*args, "--baselines", str(tmp / "base")])
    assert res.exit_code == 0, res.output
    return tmp / "reports"


def test_reports_are_found_below_every_root_home_first(reports_root, tmp_path):
    extra = tmp_path / "repo-reports"
    nested = extra / "pipelines" / "golden-on"
    nested.mkdir(parents=True)
    src = reports_root / "bm25-run" / "report.json"
    (nested / "report.json").write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    (extra / "bm25-run").mkdir()
    (extra / "bm25-run" / "report.json").write_text("{}", encoding="utf-8")  # hidden by the home's bm25-run
    reports = EvalReports(reports_root, extra, tmp_path / "absent")
    assert sorted(r.name for r in reports.list()) == ["bm25-run", "pipelines/golden-on"]
    assert reports.load("bm25-run").data["results"][0]["method"] == "bm25"
    view = reports.load("pipelines/golden-on")  # no run files beside it: the curve is the report's own R@k
    assert [k for k, _ in view.recall_curves["bm25"]] == [5, 10, 100]


def test_recall_curve_from_the_run_files_matches_the_reported_recall(reports_root):
    reports = EvalReports(reports_root)
    assert [r.name for r in reports.list()] == ["bm25-run"]
    report = reports.load("bm25-run")
    curve = dict(report.recall_curves["bm25"])
    metrics = report.data["results"][0]["metrics"]
    for k in (5, 10, 100):
        assert curve[k] == pytest.approx(metrics[f"R@{k}"], abs=1e-6)
    assert list(curve) == [1, 2, 3, 5, 10, 20, 50, 100] and curve[1] <= curve[5] <= curve[100]
    assert len(report.data["results"][0]["latencies_ms"]) == 16


@pytest.mark.parametrize("name", ["../bm25-run", "bm25-run/../bm25-run", "/etc", "", "nope", ".", "bm25-run/runs"])
def test_a_report_name_outside_the_listing_is_not_found(reports_root, name):
    with pytest.raises(ContextEngineError) as err:
        EvalReports(reports_root).load(name)
    assert err.value.code.value == "WRT-4041"


def test_a_conversation_report_gets_per_category_bars_and_an_old_report_latency_percentiles():
    result = {"method": "bm25", "metrics": {"nDCG@10": 0.5, "R@10": 0.75}, "latency_ms": {"p50": 1.0, "p95": 2.0}}
    data = {
        "measures": ["nDCG@10", "R@10"],
        "results": [result],
        "per_category": {"bm25": {"single-hop": {"nDCG@10": 0.25}, "temporal": {"nDCG@10": 0.5}}},
    }
    view = ReportView("conv", data, {"bm25": [(5, 0.5), (10, 0.75)]})
    made = report_charts(view)
    assert [c.title for c in made] == ["Recall@K", "nDCG@10 per category", "Measures per method", "Latency (ms)"]
    assert made[1].alt == "nDCG@10 per category. bm25: single-hop=0.250, temporal=0.500"
    assert made[3].alt.startswith("Latency (ms). bm25: p50=1.000, p95=2.000, mean=0.000")


def test_charts_are_svg_without_script_and_say_their_values_in_alt():
    chart = charts.recall_curve({"bm25": [(1, 0.25), (10, 0.75)]})
    svg = base64.b64decode(chart.src.split(",", 1)[1]).decode("utf-8")
    assert svg.startswith("<svg") and "<script" not in svg
    assert chart.alt == "Recall@K. bm25: R@1=0.25, R@10=0.75"
    hist = charts.latency_histogram({"a": [1.0, 2.0, 9.0]})
    assert "a: 3 queries, 1.0-9.0 ms" in hist.alt
    assert json.dumps(hist.title) == '"Latency per query (ms)"'


def test_invalid_unicode_in_a_fragment_request_is_the_apis_400_not_a_500(client_and_keys):
    """The console router runs the API's invalid-Unicode check: a lone surrogate in a JSON body or a query parameter
    that is not UTF-8 is refused before any engine call (an attack pass got a 500 from /verify)."""
    client, keys, _ = client_and_keys
    raw = b'{"invocation_id": "\\ud800", "excerpt": "x"}'
    headers = {**keys["admin"], "content-type": "application/json"}
    resp = client.post("/console/fragments/verify", content=raw, headers=headers)
    assert resp.status_code == 400 and resp.json()["code"] == "RET-4001"
    assert resp.json()["details"]["reason"] == "invalid_unicode"
    for path in ("/console/fragments/sessions?session_id=%FF", "/console/fragments/node?uri=%ED%A0%80"):
        resp = client.get(path, headers=keys["admin"])
        assert resp.status_code == 400 and resp.json()["code"] == "RET-4001", path
    write = {**keys["admin"], "content-type": "application/json"}
    raw = b'{"text": "a \\ud800", "uri": "ctx://resources/x.md"}'
    resp = client.post("/console/fragments/write/text", content=raw, headers=write)
    assert resp.status_code == 422 and resp.json()["code"] == "WRT-4221"
