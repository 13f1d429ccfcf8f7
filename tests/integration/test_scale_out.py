"""Issue 13 acceptance: the runbook end-to-end suite on the scale-out stores (PostgreSQL + S3 + Milvus Lite, started
by ``scripts/services.sh up``) passes as on the embedded default and gives the same top 10 on the runbook query set.

Both engines run the default model on the 108 prometheus-operator runbooks; every query of
``runbooks/queries.jsonl`` that has a prometheus-operator judgement goes through search_memory and lookup_knowledge
on both, and the ranked URIs must be equal. Skips (naming the command) when the services are not running.
"""

from __future__ import annotations

import json
import uuid

import pytest

from context_engine.schema.context import RequestContext
from tests.conftest import shared_data
from tests.services import scale_out_settings

ROOT = "ctx://resources/runbooks/"
PO = ROOT + "prometheus-operator/"
ADMIN = RequestContext(account_id="default", role="admin")


def _queries() -> list[str]:
    data = shared_data("runbooks")
    judged = {
        line.split("\t")[0]
        for line in (data / "qrels" / "prometheus-operator.tsv").read_text(encoding="utf-8").splitlines()[1:]
    }
    rows = [json.loads(x) for x in (data / "queries.jsonl").read_text(encoding="utf-8").splitlines() if x]
    return [q["text"] for q in rows if q["_id"] in judged]


@pytest.fixture(scope="module")
def engines(tmp_path_factory, default_embedder):
    """(embedded default, scale-out) engines holding the same 108 runbooks, added the same way."""
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    overrides = scale_out_settings(f"e2e_{uuid.uuid4().hex[:10]}")
    data = shared_data("runbooks", "prometheus-operator")
    opened = []
    for home, extra in ((tmp_path_factory.mktemp("embedded"), {}), (tmp_path_factory.mktemp("scaled"), overrides)):
        engine = ContextEngineService(load_settings(home, **extra), embedder=default_embedder)
        opened.append(engine)
        report = engine.add_resource(data, PO)
        assert report.nodes == 108 and report.failed == 0
    yield tuple(opened)
    for engine in opened:
        engine.close()


def test_the_scale_out_stores_are_the_ones_in_use(engines):
    _, scaled = engines
    assert scaled.metadata.dialect == "postgresql"
    assert type(scaled.content).__name__ == "S3ContentStore"
    assert scaled.index.name == "milvus"


@pytest.mark.slow
def test_every_runbook_query_gets_the_same_top_10_on_both(engines):
    embedded, scaled = engines
    queries = _queries()
    assert len(queries) == 104
    for query in queries:
        a = embedded.search_memory(query, top_k=10)
        b = scaled.search_memory(query, top_k=10)
        assert [h.uri for h in b.hits] == [h.uri for h in a.hits], query
        assert [h.score for h in b.hits] == pytest.approx([h.score for h in a.hits], abs=1e-4), query
        a = embedded.lookup_knowledge(query, top_k=10)
        b = scaled.lookup_knowledge(query, top_k=10)
        assert [x.doc_id for x in b.evidence_blocks] == [x.doc_id for x in a.evidence_blocks], query
        assert len(b.evidence_blocks) == 10


def test_read_lookup_audit_verify_and_delete_on_the_scale_out_stores(engines):
    embedded, scaled = engines
    uri = PO + "kubernetes/KubePodCrashLooping.md"
    hits = scaled.search_memory("Pod is crash looping", top_k=5).hits
    assert hits[0].uri == uri
    for level in ("L1", "L2"):
        assert scaled.read(uri, level) == embedded.read(uri, level)
    assert "kubectl" in scaled.read(uri, "L2")

    result = scaled.lookup_knowledge("KubePodCrashLooping 告警怎么处理", session_id="e2e", top_k=10)
    first = result.evidence_blocks[0]
    assert first.doc_id == uri and result.invocation_id
    row = scaled.get_invocation(result.invocation_id, ADMIN)  # the audit row lives in PostgreSQL
    assert row.invocation_id == result.invocation_id
    assert uri in {b["doc_id"] for b in row.retrieval_details.evidence_blocks}
    excerpt = first.text.strip().splitlines()[-1]
    assert scaled.verify_evidence(result.invocation_id, excerpt, ADMIN).verified
    assert not scaled.verify_evidence(result.invocation_id, "made-up text not in any runbook", ADMIN).verified
    again = scaled.lookup_knowledge("KubePodCrashLooping 告警怎么处理", session_id="e2e", top_k=10)
    assert again.evidence_blocks[0].relevance_level == "DEDUPED"  # the session ledger is shared state too

    report = scaled.delete(uri)
    assert report.nodes >= 1
    assert uri not in [h.uri for h in scaled.search_memory("Pod is crash looping", top_k=10).hits]
    assert uri not in [b.doc_id for b in scaled.lookup_knowledge("KubePodCrashLooping", top_k=10).evidence_blocks]
    assert scaled.content.read_level("default", uri, "L2") is None  # the object is gone from S3
    with pytest.raises(Exception) as err:
        scaled.read(uri, "L2")
    assert getattr(err.value, "code", None) is not None
