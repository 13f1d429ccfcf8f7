"""The engine on Milvus (vector.backend = milvus; issue 13; docs/deployment.md "Milvus").

* The write protocol with Milvus down: the metadata commits first and the index sync fails, so the write's nodes stay
  ``pending`` with the journal row released for recovery, nothing of it is served, and ``reindex`` (or the next write)
  finishes it once Milvus is back. A start with Milvus unreachable fails with CFG-4001.
* The sample corpus gives the same top results through Milvus as through the exact index (lookup_knowledge, and
  search_memory with the level-0 source on the vector index).
"""

from __future__ import annotations

import uuid
from importlib import resources
from pathlib import Path

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import SearchMemoryRequest
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.milvus_lite_server import MilvusLiteServer, free_port, milvus_lite_server  # noqa: F401 - fixture
from tests.retrieval.conftest import HashEmbedder
from tests.services import require_service
from tests.storage.conftest import drop_milvus_collections

ADMIN = RequestContext(account_id="default", role="admin")
DOC = "# Disk pressure\n\nThe node is running out of disk space.\n\n## Fix\n\nDelete old container images.\n"
LATE = "# Quagga stampede\n\nThe quagga herd crossed the ledger.\n\n## Fix\n\nCount the quaggas again.\n"


def _milvus_settings(home: Path, uri: str, **extra):
    return load_settings(home, vector={"backend": "milvus", "milvus": {"uri": uri, "timeout_s": 2, **extra}})


def _milvus_ids(engine: ContextEngineService) -> list[str]:
    return engine.index.ids("default")  # type: ignore[attr-defined]


def test_unreachable_milvus_fails_the_start_with_cfg_4001(tmp_path) -> None:
    port = free_port()
    with pytest.raises(ContextEngineError) as info:
        ContextEngineService(_milvus_settings(tmp_path / "home", f"http://127.0.0.1:{port}"), embedder=HashEmbedder())
    assert info.value.code is ErrorCode.CONFIG_INVALID
    assert "vector.milvus.uri" in info.value.message and f"127.0.0.1:{port}" in info.value.message


def test_a_write_while_milvus_is_down_stays_pending_until_reindex(tmp_path, milvus_lite_server) -> None:  # noqa: F811
    home = tmp_path / "home"
    engine = ContextEngineService(_milvus_settings(home, milvus_lite_server.uri), embedder=HashEmbedder())
    try:
        assert engine.add_text(DOC, "ctx://resources/ops/disk.md", ADMIN).pending == 0
        before = _milvus_ids(engine)
        assert before and sorted(before) == sorted(v.id for b in engine.metadata.iter_vectors("default") for v in b)

        milvus_lite_server.kill()
        report = engine.add_text(LATE, "ctx://resources/ops/quagga.md", ADMIN)
        # the metadata committed first; the index sync failed, so the nodes stay pending for recovery
        assert report.pending >= 1 and report.failed == 0
        node = engine.metadata.get_node("default", "ctx://resources/ops/quagga.md")
        assert node is not None and node.index_status == "pending"
        (entry,) = engine.metadata.journal_entries()
        assert entry.state == "committed" and entry.owner is None  # released to the next recovery
        # nothing half-visible: a search through the index fails as a retryable RET-5001, not a partial answer
        with pytest.raises(ContextEngineError) as info:
            engine.index.search(HashEmbedder().embed_query("quagga"), 5, VectorFilter(account_id="default"))
        assert info.value.code is ErrorCode.VECTOR_SEARCH_FAILED and info.value.retryable
        # lookup_knowledge stays up on the exact fallback (metadata vectors) and never serves the pending document
        lookup = engine.lookup_knowledge("quagga stampede", ADMIN)
        assert [(a.backend, a.error_code) for a in lookup.traces.attempts][:2] == [
            ("milvus", "RET-5001"),
            ("exact", None),
        ]
        assert "ctx://resources/ops/quagga.md" not in [b.doc_id for b in lookup.evidence_blocks]
        # every Milvus call that failed after its retries is counted: ce_storage_failures_total{store="vector"}
        samples = [s for m in engine.metrics.registry.collect() if m.name == "ce_storage_failures" for s in m.samples]
        assert any(s.labels.get("store") == "vector" and s.value >= 1 for s in samples), samples

        milvus_lite_server.start()  # same data, same port
        assert sorted(_milvus_ids(engine)) == sorted(before)  # the failed write left nothing in Milvus
        engine.reindex(ADMIN)
        assert engine.metadata.journal_entries() == []
        assert engine.metadata.get_node("default", "ctx://resources/ops/quagga.md").index_status == "indexed"
        rows = sorted(v.id for b in engine.metadata.iter_vectors("default") for v in b)
        assert sorted(_milvus_ids(engine)) == rows
        hits = engine.index.search(HashEmbedder().embed_query("quagga herd"), 3, VectorFilter(account_id="default"))
        assert hits and hits[0].uri == "ctx://resources/ops/quagga.md"
    finally:
        engine.close()


# ---------------------------------------------------------------------------------------------------- same results

QUERIES = [
    "Pod is crash looping",
    "etcd cluster lost quorum",
    "disk is almost full on a node",
    "DNS resolution fails inside the cluster",
    "database connections exhausted",
]


@pytest.fixture(scope="module")
def twin_engines(tmp_path_factory, embedder):
    """The sample corpus in two homes: one on the exact index, one on Milvus (the shared test server)."""
    uri = require_service("CE_TEST_MILVUS_URI", "milvus")
    prefix = f"smoke{uuid.uuid4().hex[:12]}"
    corpus = Path(str(resources.files("context_engine") / "sample_corpus"))
    engines = {}
    for backend in ("exact", "milvus"):
        settings = load_settings(
            tmp_path_factory.mktemp(backend),
            vector={"backend": backend, "milvus": {"uri": uri, "collection_prefix": prefix, "timeout_s": 60}},
            retrieval={"l0_source": "index"},  # search_memory's level-0 similarities from the vector index too
        )
        engine = engines[backend] = ContextEngineService(settings, embedder=embedder)
        report = engine.add_resource(corpus, "ctx://resources/runbooks/", ADMIN)
        assert report.nodes == 8 and report.failed == 0 and report.pending == 0
    yield engines
    for engine in engines.values():
        engine.close()
    drop_milvus_collections(uri, f"{prefix}_")


@pytest.mark.slow
@pytest.mark.parametrize("query", QUERIES)
def test_milvus_and_exact_give_the_same_top_results(twin_engines, query: str) -> None:
    exact, milvus = twin_engines["exact"], twin_engines["milvus"]
    assert milvus.index.name == "milvus" and milvus.index.count() == exact.index.count() > 0

    def lookup(engine):
        result = engine.lookup_knowledge(query, ADMIN, session_id=f"{engine.index.name}-{uuid.uuid4().hex[:8]}")
        return [(b.doc_id, b.anchor_chunk_index, round(b.raw_score, 4)) for b in result.evidence_blocks]

    def search(engine):
        response = engine.search_memory(SearchMemoryRequest(query=query, top_k=5), ADMIN)
        return [(h.uri, round(h.score, 4)) for h in response.hits]

    assert lookup(milvus) == lookup(exact) and lookup(exact)
    assert search(milvus) == search(exact) and search(exact)
