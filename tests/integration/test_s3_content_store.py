"""The engine on the S3 content store (issue 13; docs/deployment.md "S3 content store"), end to end on the real model:
the sample corpus added, searched, read and deleted with ``content.url = s3://...``; a failed PUT mid-write (an
injected obstore failure, and the real server frozen mid-write) fails the request with WRT-5001 and leaves the store
as it was; ``reindex --gc`` removes what no node owns, on the local and the S3 store.

The S3 tests use the endpoint of ``bash scripts/services.sh up seaweedfs`` and skip when it is not running.
"""

from __future__ import annotations

import json
import os
import signal
from importlib import resources
from pathlib import Path

import numpy as np
import obstore
import pytest
from obstore.store import MemoryStore
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.app import app
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Level, VectorRecord
from context_engine.storage.content.s3 import S3ContentStore
from tests.s3_store import drop_prefix, s3_content_settings, s3_keys

pytestmark = pytest.mark.slow

ADMIN = RequestContext(account_id="default", role="admin")
ROOT = "ctx://resources/runbooks/"
CRASH = f"{ROOT}kubernetes/PodRestartingRepeatedly.md"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def s3_content():
    content = s3_content_settings("engine")
    yield content
    drop_prefix(content)


def _corpus() -> Path:
    return Path(str(resources.files("context_engine") / "sample_corpus"))


def _uris(engine) -> list[str]:
    return sorted(n.uri for n in engine.metadata.list_all_nodes("default"))


# ---- the smoke test ---------------------------------------------------------------------------------------------


def test_the_sample_corpus_on_s3_is_searched_read_and_deleted(make_engine, s3_content, tmp_path):
    engine = make_engine(home=tmp_path / "s3-home", content=s3_content, vector={"backend": "exact"})
    report = engine.add_resource(_corpus(), ROOT, ADMIN)
    assert report.nodes == 8 and report.failed == 0 and report.pending == 0
    store = engine.content
    assert isinstance(store, S3ContentStore)
    assert store.node_uris("default") == _uris(engine)  # one key prefix per node, none missing, no orphan
    assert store.journal_ids() == [] and [k for k in s3_keys(store) if k.startswith("@journal/")] == []

    hits = engine.search_memory("Pod is crash looping", ADMIN).hits
    assert hits[0].uri == CRASH
    l1 = engine.read_memory(CRASH, ADMIN, level="L1").block
    l2 = engine.read_memory(CRASH, ADMIN, level="L2").block
    assert l1.level_hit == "L1" and l2.level_hit == "L2"
    key = store._base + "default/resources/runbooks/kubernetes/PodRestartingRepeatedly.md/"
    raw = {n: bytes(obstore.get(store._store, key + n).bytes()).decode() for n in (".overview.md", ".content.md")}
    assert l1.overview == raw[".overview.md"] and l2.content_excerpt == raw[".content.md"]  # read from the bucket
    assert l2.content_excerpt == (_corpus() / "kubernetes" / "PodRestartingRepeatedly.md").read_text()

    # the same top 10 as the embedded default (local content, same model and index)
    local = make_engine(home=tmp_path / "local-home", vector={"backend": "exact"})
    local.add_resource(_corpus(), ROOT, ADMIN)
    for query in ("Pod is crash looping", "disk almost full on a node", "证书即将过期", "etcd has no leader"):
        assert [h.uri for h in engine.search_memory(query, ADMIN, top_k=10).hits] == [
            h.uri for h in local.search_memory(query, ADMIN, top_k=10).hits
        ], query

    engine.delete(f"{ROOT}kubernetes/", ADMIN, recursive=True)
    assert [k for k in s3_keys(store) if k.startswith("default/resources/runbooks/kubernetes/")] == []
    assert store.node_uris("default") == _uris(engine) and store.journal_ids() == []
    assert [k for k in s3_keys(store) if k.startswith("@journal/")] == []
    with pytest.raises(ContextEngineError):
        engine.read_memory(CRASH, ADMIN, level="L2")


# ---- a failing PUT mid-write --------------------------------------------------------------------------------------


def _snapshot(engine) -> dict:
    store = engine.content
    objects = {
        m["path"]: bytes(obstore.get(store._store, m["path"]).bytes())
        for batch in obstore.list(store._store)
        for m in batch
    }
    nodes = {n.uri: (n.content_hash, n.index_status) for n in engine.metadata.list_all_nodes("default")}
    vectors = sorted(v.id for batch in engine.metadata.iter_vectors("default") for v in batch)
    return {"objects": objects, "nodes": nodes, "vectors": vectors, "journal": engine.metadata.journal_entries()}


class _FailingPut:
    def __init__(self, real, fail_at: int) -> None:
        self.real, self.fail_at, self.calls = real, fail_at, 0

    def __call__(self, store, path, data, **kw):
        self.calls += 1
        if self.calls == self.fail_at:
            raise obstore.exceptions.GenericError(f"Error performing PUT {path}: connection reset by peer")
        return self.real(store, path, data, **kw)


@pytest.mark.parametrize("fail_at", [1, 2, 3, 5, 8, 13])
def test_a_failed_put_fails_the_write_and_leaves_the_store_as_it_was(make_engine, monkeypatch, fail_at):
    """The S3 store on obstore's in-memory store; the ``fail_at``-th PUT of a write (undo records and levels alike)
    fails: the request fails with WRT-5001 (retryable), the metadata did not commit, every object is as before."""
    failures: list[str] = []
    store = S3ContentStore(MemoryStore(), "ce", location="s3://memory/ce", on_failure=failures.append)
    engine = make_engine(parts={"content": store}, vector={"backend": "exact"})
    engine.add_text("# Disk\n\nClean /var/log first.\n", "ctx://resources/ops/disk.md", ADMIN)
    engine.add_text("# CPU\n\nCheck the top consumers.\n", "ctx://resources/ops/cpu.md", ADMIN)
    before = _snapshot(engine)
    failing = _FailingPut(obstore.put, fail_at)
    monkeypatch.setattr(obstore, "put", failing)
    with pytest.raises(ContextEngineError) as info:  # a re-add and a new file in a new folder: one write
        engine.add_resource(_write_folder(engine), "ctx://resources/ops/", ADMIN, strict=True)
    assert info.value.code is ErrorCode.STORAGE_FAILED and info.value.retryable
    assert failing.calls >= fail_at and failures == ["put"]
    assert _snapshot(engine) == before
    monkeypatch.undo()
    engine.add_resource(_write_folder(engine), "ctx://resources/ops/", ADMIN, strict=True)  # the retry succeeds
    assert engine.read("ctx://resources/ops/disk.md", "L2", ADMIN) == "# Disk\n\nClean /var/log and /tmp.\n"
    assert store.node_uris("default") == _uris(engine) and store.journal_ids() == []


def _write_folder(engine) -> Path:
    folder = engine.settings.home_path / "upload"
    (folder / "net").mkdir(parents=True, exist_ok=True)
    (folder / "disk.md").write_text("# Disk\n\nClean /var/log and /tmp.\n")
    (folder / "net" / "dns.md").write_text("# DNS\n\nFlush the resolver cache.\n")
    return folder


def _weed_pid() -> int:
    path = REPO / ".services" / "seaweedfs" / "pid"
    if not path.is_file():
        pytest.skip("the seaweedfs server's pid file is not here (.services/seaweedfs/pid): it runs elsewhere")
    return int(path.read_text())


def test_a_server_that_stops_answering_mid_write_fails_the_request_and_nothing_stays(make_engine, s3_content):
    """The real server is frozen (SIGSTOP) after the first node's levels were written: the next PUT times out, the
    request fails with WRT-5001, the rollback fails too (the server is still frozen); once the server answers again,
    the next write (here: ``reindex --check --repair``) rolls the failed write back, and the store is as before."""
    engine = make_engine(content=dict(s3_content, timeout_s=1), vector={"backend": "exact"})
    engine.add_text("# Disk\n\nClean /var/log first.\n", "ctx://resources/ops/disk.md", ADMIN)
    before = file_state(engine)
    pid = _weed_pid()
    real_write = engine.content.write_levels
    calls = []

    def write_then_freeze(account_id, uri, levels):
        real_write(account_id, uri, levels)
        calls.append(uri)
        if len(calls) == 1:
            os.kill(pid, signal.SIGSTOP)

    engine.content.write_levels = write_then_freeze
    try:
        with pytest.raises(ContextEngineError) as info:
            engine.add_text("# Disk\n\nClean /var/log and /tmp.\n", "ctx://resources/ops/disk.md", ADMIN)
    finally:
        os.kill(pid, signal.SIGCONT)
    del engine.content.write_levels
    assert info.value.code is ErrorCode.STORAGE_FAILED and info.value.retryable
    assert calls == ["ctx://resources/ops/disk.md"]  # the file was written, its directory's summary was not
    counted = {
        s.labels["operation"]: s.value
        for m in engine.metrics.storage_failures.collect()
        for s in m.samples
        if s.name == "ce_storage_failures_total"
    }
    assert sum(counted.values()) >= 2, counted  # the write's call and the rollback's
    # the metadata never committed; the content of the failed write is still there, its row handed over
    assert engine.content.read_level("default", "ctx://resources/ops/disk.md", Level.L2).endswith("and /tmp.\n")
    assert [(e.state, e.owner) for e in engine.metadata.journal_entries()] == [("prepared", None)]
    found = engine.check_writes(ADMIN, repair=True)
    assert len(found.rolled_back) == 1
    assert file_state(engine) == before


def file_state(engine) -> dict:
    store = engine.content
    return {
        "uris": store.node_uris("default"),
        "texts": {u: [store.read_level("default", u, lv) for lv in Level] for u in store.node_uris("default")},
        "nodes": _uris(engine),
        "journal": (engine.metadata.journal_entries(), store.journal_ids()),
    }


# ---- reindex --gc ------------------------------------------------------------------------------------------------


@pytest.fixture(params=["local", "s3"])
def gc_engine(request, make_engine, tmp_path):
    if request.param == "local":
        yield make_engine()  # LanceDB: its rows can be orphans too
        return
    content = s3_content_settings("gc")
    yield make_engine(content=content, vector={"backend": "exact"})
    drop_prefix(content)


def test_reindex_gc_removes_content_and_vector_rows_no_node_owns(gc_engine, embedder, monkeypatch):
    engine = gc_engine
    engine.add_text("# Disk\n\nClean /var/log first.\n", "ctx://resources/ops/disk.md", ADMIN)
    engine.add_text("# CPU\n\nCheck the top consumers.\n", "ctx://resources/ops/cpu.md", ADMIN)
    live = _uris(engine)
    texts = {u: engine.content.read_level("default", u, Level.L0) for u in live}
    # what a lost write leaves: content without nodes (a file, a directory level, another account), a vector row
    engine.content.write_levels("default", "ctx://resources/lost/x.md", {Level.L0: "x", Level.L2: "lost"})
    engine.content.write_levels("default", "ctx://resources/ops/gone/", {Level.L0: "gone"})
    engine.content.write_levels("ghost", "ctx://resources/y.md", {Level.L2: "lost too"})
    has_index_rows = engine.index.name != "exact"  # the exact index's rows are the metadata store's: never orphans
    if has_index_rows:
        vec = np.ones(engine.embedder.dim, dtype=np.float32) / np.sqrt(engine.embedder.dim)
        engine.index.upsert(
            [VectorRecord(id="orphan-row", vector=vec, uri="ctx://resources/lost/x.md", parent_uri="ctx://resources/lost/",
                          account_id="default", owner_space="", context_type="resource", level=0, text="x")]
        )  # fmt: skip

    result = _cli_gc(engine, embedder, monkeypatch)
    assert result == {"accounts": 2, "content_nodes": 3, "vector_rows": 1 if has_index_rows else 0}
    assert engine.content.node_uris("default") == live and engine.content.node_uris("ghost") == []
    assert {u: engine.content.read_level("default", u, Level.L0) for u in live} == texts
    assert engine.search_memory("top consumers", ADMIN).hits[0].uri == "ctx://resources/ops/cpu.md"
    assert _cli_gc(engine, embedder, monkeypatch)["content_nodes"] == 0  # nothing left


def _cli_gc(engine, embedder, monkeypatch) -> dict:
    """``context-engine --json reindex --gc`` on the engine's home and content store (a second process's view)."""
    for target in ("context_engine.providers.embedder.build_embedder", "context_engine.service.build_embedder"):
        monkeypatch.setattr(target, lambda settings, **kw: embedder, raising=True)
    content = engine.settings.content
    env = {"CE_CONTENT__URL": content.url or "", "CE_VECTOR__BACKEND": engine.settings.vector.backend}
    if content.url:
        env |= {
            "CE_CONTENT__S3_ENDPOINT": content.s3_endpoint,
            "CE_CONTENT__S3_ACCESS_KEY_ID": content.s3_access_key_id.get_secret_value(),
            "CE_CONTENT__S3_SECRET_ACCESS_KEY": content.s3_secret_access_key.get_secret_value(),
        }
    for name, value in env.items():
        if value:
            monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["--home", str(engine.settings.home_path), "--json", "reindex", "--gc"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)
