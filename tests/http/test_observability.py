"""/metrics exposes every seed 000 §8 metric and the lookup_knowledge counters after a few calls; logs are JSON lines
with the seed's fields, the request id, and no query text by default."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from context_engine.observability.logging import configure_logging
from context_engine.settings import LoggingSettings

# seed 000 §8 name -> Prometheus series (docs/interfaces.md, observability/metrics.py)
SEED_METRICS = {
    "retrieval.search_memory.qps": "ce_retrieval_search_memory_requests_total",
    "retrieval.search_memory.p95_ms": "ce_retrieval_search_memory_duration_seconds_bucket",
    "retrieval.search_memory.threshold_filtered.count": "ce_retrieval_search_memory_threshold_filtered_total",
    "retrieval.seed.hit_count": "ce_retrieval_seed_hits_total",
    "retrieval.recheck.input_count": "ce_retrieval_recheck_input_total",
    "retrieval.recheck.pass_count": "ce_retrieval_recheck_pass_total",
    "retrieval.recheck.drop_count": "ce_retrieval_recheck_drop_total",
    "retrieval.read.l1.count": 'ce_retrieval_read_total{level="L1"}',
    "retrieval.read.l2.count": 'ce_retrieval_read_total{level="L2"}',
    "retrieval.fallback.count": "ce_retrieval_fallback_total",
}
LOOKUP_METRICS = [
    "ce_lookup_knowledge_requests_total",
    "ce_lookup_knowledge_duration_seconds_bucket",
    "ce_lookup_knowledge_relevance_total{level=",
    "ce_lookup_knowledge_dedup_total",
]


@pytest.fixture
def log_buffer():
    buf = io.StringIO()
    configure_logging(LoggingSettings(level="INFO"), stream=buf)
    yield buf
    root = logging.getLogger()
    for h in list(root.handlers):
        if h.get_name() == "context-engine":
            root.removeHandler(h)
    structlog.reset_defaults()


def lines(buf: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]


def test_metrics_exposes_the_named_metrics_after_a_few_calls(client, tenants):
    h = tenants.admin
    client.post("/api/v1/search_memory", json={"query": "documentation about kubernetes nodes"}, headers=h)
    client.post(
        "/api/v1/search_memory", json={"query": "kubelet", "planner_hints": {"must_have_terms": ["zzz"]}}, headers=h
    )
    client.post("/api/v1/search_memory", json={"query": "doc", "score_threshold": 0.99}, headers=h)
    client.post("/api/v1/read_memory", json={"uri": "ctx://resources/kubernetes/NodeNotReady.md"}, headers=h)
    client.post(
        "/api/v1/read_memory", json={"uri": "ctx://resources/kubernetes/NodeNotReady.md", "level": "L2"}, headers=h
    )
    client.post("/api/v1/lookup_knowledge", json={"query": "NodeNotReady", "session_id": "m1"}, headers=h)
    client.post("/api/v1/lookup_knowledge", json={"query": "NodeNotReady", "session_id": "m1"}, headers=h)
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    missing = {seed: prom for seed, prom in SEED_METRICS.items() if prom not in text}
    assert missing == {}
    assert [m for m in LOOKUP_METRICS if m not in text] == []
    assert "ce_lookup_knowledge_fallback_total" in text or "# TYPE ce_lookup_knowledge_fallback_total" in text
    assert 'ce_http_requests_total{method="POST",route="/api/v1/search_memory",status="200"}' in text
    assert "ce_http_request_duration_seconds_bucket" in text


def test_logs_are_json_with_the_seed_fields_and_no_query_text(client, tenants, log_buffer):
    query = "documentation: node not ready SECRET-QUERY-TEXT"
    r = client.post("/api/v1/search_memory", json={"query": query}, headers={**tenants.alice, "X-Request-ID": "log-1"})
    assert r.status_code == 200
    client.post("/api/v1/lookup_knowledge", json={"query": query}, headers={**tenants.alice, "X-Request-ID": "log-2"})
    out = lines(log_buffer)
    assert "SECRET-QUERY-TEXT" not in log_buffer.getvalue()
    assert tenants.alice_token not in log_buffer.getvalue()
    search = [e for e in out if e["event"] == "search_memory"]
    assert search, out
    ev = search[-1]
    for field in (
        "request_id",
        "query_hash",
        "typed_query_count",
        "top_k",
        "seed_count",
        "final_count",
        "warnings",
        "account_id",
        "role",
        "effective_owner_spaces",
        "recheck_drop_reasons",
    ):
        assert field in ev, field
    assert ev["request_id"] == "log-1" and ev["account_id"] == "acme" and ev["role"] == "user"
    access = [e for e in out if e["event"] == "http_request" and e.get("request_id") == "log-1"]
    assert access and access[0]["status"] == 200 and access[0]["route"] == "/api/v1/search_memory"
    assert access[0]["level"] == "info" and "timestamp" in access[0]
    lookup = [e for e in out if e["event"] == "lookup_knowledge"]
    assert lookup and lookup[-1]["request_id"] == "log-2" and "query_hash" in lookup[-1]


def test_query_text_is_logged_only_when_enabled(service, tenants, log_buffer):
    from context_engine.api import calls
    from context_engine.api.models import SimilarSearchRequest
    from tests.http.conftest import ACME_ADMIN

    calls.similar_search(service, SimilarSearchRequest(query="VISIBLE-QUERY disk", top_k=1), ACME_ADMIN)
    assert "VISIBLE-QUERY" not in log_buffer.getvalue()
    loud = service.settings.model_copy(update={"logging": LoggingSettings(log_query_text=True)})
    saved, service.settings = service.settings, loud
    try:
        calls.similar_search(service, SimilarSearchRequest(query="VISIBLE-QUERY disk", top_k=1), ACME_ADMIN)
    finally:
        service.settings = saved
    assert "VISIBLE-QUERY" in log_buffer.getvalue()


def test_errors_are_logged_with_the_request_id(client, tenants, service, monkeypatch, log_buffer):
    def boom(*_a, **_k):
        raise RuntimeError("kaput")

    monkeypatch.setattr(service, "tree", boom)
    r = client.get("/api/v1/tree", headers={**tenants.admin, "X-Request-ID": "err-7"})
    assert r.status_code == 500
    crash = [e for e in lines(log_buffer) if e["event"] == "unhandled error"]
    assert crash and crash[0]["request_id"] == "err-7" and "RuntimeError: kaput" in crash[0]["exception"]
