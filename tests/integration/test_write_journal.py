"""The write journal (issue 14, docs/security.md): the failures of the attack pass, each reproduced with a real
writer process killed at the named point, then found by ``reindex --check`` and repaired (by ``--repair`` or by the
startup check) from the journal alone; the in-place schema upgrade; vector-index commit conflicts retried.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.app import app
from context_engine.schema.nodes import Level, VectorRecord
from context_engine.schema.query import SearchMemoryRequest
from context_engine.settings import VectorSettings
from context_engine.storage.metadata.sqlalchemy_store import SCHEMA_VERSION, SqlMetadataStore
from context_engine.storage.vector.lancedb_index import LanceDBVectorIndex
from tests.integration.store_checks import assert_store_consistent, file_texts
from tests.integration.test_crash_safety import ADMIN, BASE, ROOT, _doc, _open, _run_writer

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path, default_embedder) -> Path:
    home = tmp_path / "home"
    with _open(home, default_embedder) as engine:
        for uri, text in BASE.items():
            engine.add_text(text, uri, ADMIN)
    return home


def _cli(home: Path, monkeypatch, default_embedder, *args: str):
    for target in ("context_engine.providers.embedder.build_embedder", "context_engine.service.build_embedder"):
        monkeypatch.setattr(target, lambda settings, **kw: default_embedder, raising=True)
    monkeypatch.setenv("CE_EMBEDDING__BACKEND", "use-multilingual")
    return CliRunner().invoke(app, ["--home", str(home), "--json", "reindex", *args])


def test_kill_between_the_content_write_and_the_commit_of_a_readd_is_undone(home, default_embedder, monkeypatch):
    uri = f"{ROOT}a/doc0.md"
    new = _doc("heron", sections=2)
    assert not _run_writer(home, {"op": "readd", "uri": uri, "text": new, "point": "content_written"})

    # what the attack pass saw: the new L2 on disk, the old metadata (the journal's row: the commit never came)
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    settings = load_settings(home, embedding={"backend": "use-multilingual"})
    with ContextEngineService(settings, embedder=default_embedder, recover_writes=False) as engine:
        assert engine.content.read_level("default", uri, Level.L2) == new  # half-written, as the attack found it
        assert [e.state for e in engine.metadata.journal_entries()] == ["prepared"]
    report = _cli(home, monkeypatch, default_embedder, "--check")
    body = json.loads(report.output)
    assert report.exit_code == 1 and len(body["rolled_back"]) == 1 and not body["repaired"]
    report = _cli(home, monkeypatch, default_embedder, "--check", "--repair")
    assert report.exit_code == 0 and json.loads(report.output)["leftovers"] == 1
    with _open(home, default_embedder) as engine:
        assert file_texts(engine) == BASE  # the old text is back: metadata, content and vectors agree
        assert_store_consistent(engine, home)
        assert engine.add_text(new, uri, ADMIN).nodes == 1  # and the re-add is not taken for "unchanged"
        assert file_texts(engine)[uri] == new
        assert_store_consistent(engine, home)


@pytest.mark.parametrize(
    "op",
    [
        {"op": "delete", "uri": f"{ROOT}b/", "recursive": True},
        {"op": "move", "src": f"{ROOT}b/", "dst": f"{ROOT}moved/"},
    ],
    ids=["recursive-delete", "move"],
)
def test_kill_after_the_commit_of_a_delete_or_move_is_finished(home, default_embedder, monkeypatch, op):
    # killed after the index lost the old rows, before the new ones were written and the nodes marked indexed
    assert not _run_writer(home, {**op, "point": "index_deleted"})
    report = _cli(home, monkeypatch, default_embedder, "--check")
    body = json.loads(report.output)
    assert report.exit_code == 1 and len(body["finished"]) == 1
    with _open(home, default_embedder) as engine:  # the startup check finishes it
        after = {u.replace(f"{ROOT}b/", f"{ROOT}moved/"): t for u, t in BASE.items()} if op["op"] == "move" else {
            u: t for u, t in BASE.items() if not u.startswith(f"{ROOT}b/")
        }
        assert file_texts(engine) == after
        assert_store_consistent(engine, home)  # no node indexed without its vectors, no orphan content


class _SpyMetadata:
    """The real store, recording calls that read the whole store."""

    WHOLE = ("list_all_nodes", "iter_vectors", "load_vector_matrix", "accounts", "pending_nodes", "count_vectors")

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        if name in self.WHOLE:
            self.calls.append(name)
        return getattr(self.inner, name)


def test_recovery_reads_the_journal_not_the_store(home, default_embedder):
    assert not _run_writer(home, {"op": "add", "uri": f"{ROOT}a/x.md", "text": _doc("egret"), "point": "committed"})
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    settings = load_settings(home, embedding={"backend": "use-multilingual"})
    with ContextEngineService(settings, embedder=default_embedder, recover_writes=False) as engine:
        spy = _SpyMetadata(engine.metadata)
        engine.journal._metadata = spy
        found = engine.journal.recover(repair=True)
        assert len(found.finished) == 1 and found.nodes_indexed >= 1
        assert spy.calls == []  # O(leftovers): no read of every node or vector
        engine.journal._metadata = engine.metadata
        assert_store_consistent(engine, home)


def test_a_version_3_database_is_upgraded_in_place(tmp_path):
    path = tmp_path / "metadata.db"
    SqlMetadataStore.sqlite(path).close()
    with sqlite3.connect(path) as con:
        con.execute("UPDATE schema_version SET version = 3")
        con.execute("DROP TABLE write_journal")
    store = SqlMetadataStore.sqlite(path)
    assert store.journal_entries() == []
    journal_id = store.journal_open("default", "write", None, ["ctx://resources/x.md"])
    assert [(e.id, e.state, e.uris) for e in store.journal_entries()] == [(journal_id, "prepared", ["ctx://resources/x.md"])]
    store.close()
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,) == (7,)


class _ConflictingTable:
    """LanceDB's table, whose next ``failures`` deletes raise the error LanceDB raises on a commit conflict."""

    def __init__(self, inner, failures: int, message: str):
        self.inner, self.failures, self.message = inner, failures, message

    def delete(self, predicate):
        if self.failures:
            self.failures -= 1
            raise RuntimeError(self.message)
        return self.inner.delete(predicate)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _record(i: int) -> VectorRecord:
    v = np.zeros(8, dtype=np.float32)
    v[i % 8] = 1.0
    return VectorRecord(
        id=f"id{i}", vector=v, uri=f"ctx://resources/d{i}.md", parent_uri="ctx://resources/", account_id="a",
        owner_space="", context_type="resource", category="", level=0, doc_id=f"d{i}", chunk_index=0, text="t",
        breadcrumb="",
    )  # fmt: skip


def test_vector_index_commit_conflicts_are_retried_and_counted(tmp_path):
    seen: list[str] = []
    index = LanceDBVectorIndex(tmp_path / "v", 8, VectorSettings(), on_retry=seen.append)
    index.upsert([_record(i) for i in range(4)])
    conflict = "lance error: Retryable commit conflict for version 9: preempted by concurrent transaction Rewrite"
    index._table = _ConflictingTable(index._table, failures=2, message=conflict)
    index.delete(["id1"])
    assert (index.count(), index.commit_retries, seen) == (3, 2, ["delete", "delete"])

    index._table = _ConflictingTable(index._table.inner, failures=1, message="lance error: disk on fire")
    with pytest.raises(ContextEngineError) as info:  # any other error: not retried, translated
        index.delete(["id2"])
    assert info.value.code is ErrorCode.STORAGE_FAILED and index.commit_retries == 2 and index.count() == 3

    index._table = _ConflictingTable(index._table.inner, failures=100, message=conflict)
    with pytest.raises(ContextEngineError):  # bounded: gives up after a few attempts
        index.delete(["id2"])
    assert index.commit_retries == 2 + 5


def test_the_service_counts_commit_retries_in_its_metrics(tmp_path, default_embedder):
    with _open(tmp_path / "home", default_embedder) as engine:
        engine.add_text(_doc("tern"), f"{ROOT}t.md", ADMIN)
        lance = engine.index._get()  # the LanceDB index behind the lazy handle
        lance._table = _ConflictingTable(lance._table, failures=1, message="Commit conflict for version 3")
        engine.delete(f"{ROOT}t.md", ADMIN)
        value = engine.metrics.registry.get_sample_value("ce_vector_commit_retries_total", {"operation": "delete"})
        assert value == 1.0
        assert_store_consistent(engine, tmp_path / "home")


def test_reindex_full_removes_content_and_vectors_that_no_node_owns(home, default_embedder):
    with _open(home, default_embedder) as engine:
        # what a version before the journal could leave: a deleted node's folder, and a dead directory's levels
        engine.content.write_levels("default", f"{ROOT}gone.md", {Level.L0: "old", Level.L2: "old text"})
        engine.content.write_levels("default", f"{ROOT}ghost/x.md", {Level.L0: "old", Level.L2: "old text"})
        engine.content.write_levels("default", f"{ROOT}ghost/", {Level.L0: "old dir"})
        assert f"{ROOT}gone.md" in engine.content.node_uris("default")
        stray = engine.metadata.get_vectors("default", [f"{ROOT}doc5.md"])[0]
        engine.index.upsert([stray.model_copy(update={"id": "0" * 32, "uri": f"{ROOT}gone.md"})])  # an orphan row
        assert "0" * 32 in engine.index.ids("default")
        engine.reindex(ADMIN, full=True)
        assert "0" * 32 not in engine.index.ids("default")
        assert_store_consistent(engine, home)
        assert file_texts(engine) == BASE


def test_a_write_left_pending_by_an_index_failure_heals_with_the_next_write(tmp_path, default_embedder):
    from tests.integration.test_write_path import ExplodingIndex

    home = tmp_path / "home"
    with _open(home, default_embedder) as engine:
        boom = ExplodingIndex(engine.index)
        engine.pipeline._index = boom
        assert engine.add_text(_doc("kestrel"), f"{ROOT}k.md", ADMIN).pending > 0
        assert engine.metadata.get_node("default", f"{ROOT}k.md").index_status == "pending"
        assert [e.owner for e in engine.metadata.journal_entries()] == [None]  # released to whoever comes next
        boom.fail = False
        assert engine.add_text(_doc("plover"), f"{ROOT}p.md", ADMIN).pending == 0
        assert_store_consistent(engine, home)  # the first write finished too: indexed, in the vector index
        hits = engine.search_memory(SearchMemoryRequest(query="kestrel runbook", top_k=3), ADMIN).hits
        assert f"{ROOT}k.md" in [h.uri for h in hits]
