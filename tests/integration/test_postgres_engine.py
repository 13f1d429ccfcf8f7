"""The engine on PostgreSQL metadata (issue 13): the tools end to end on the hashing embedder, and the write journal:
a writer process killed with SIGKILL mid-write is found dead through its session advisory lock (not a file lock, so
it works across machines) and its write is undone or finished by the next engine, exactly as on SQLite
(tests/integration/test_crash_safety.py runs the SQLite side)."""

from __future__ import annotations

import pytest

from tests.integration.store_checks import assert_store_consistent, file_texts
from tests.integration.test_crash_safety import ADMIN, BASE, ROOT, _doc, _open, _run_writer
from tests.postgres import fresh_postgres_database


@pytest.fixture
def pg_home(tmp_path, default_embedder, monkeypatch):
    """A home whose metadata is a fresh PostgreSQL database (``CE_METADATA__URL``, inherited by the writer
    process), holding the base documents."""
    with fresh_postgres_database() as url:
        monkeypatch.setenv("CE_METADATA__URL", url)
        home = tmp_path / "home"
        with _open(home, default_embedder) as engine:
            assert engine.metadata.dialect == "postgresql"
            for uri, text in BASE.items():
                engine.add_text(text, uri, ADMIN)
        yield home


@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "finished"), [("content_written", False), ("committed", True)], ids=["before-commit", "after-commit"]
)
def test_a_writer_killed_mid_write_is_undone_or_finished_by_the_next_engine(pg_home, default_embedder, point, finished):
    uri = f"{ROOT}a/doc1.md"
    new = _doc("heron", sections=2)
    assert not _run_writer(pg_home, {"op": "readd", "uri": uri, "text": new, "point": point})
    with _open(pg_home, default_embedder) as engine:  # its startup check repairs what the dead writer left
        assert engine.metadata.dialect == "postgresql"
        assert file_texts(engine) == ({**BASE, uri: new} if finished else BASE)
        assert_store_consistent(engine, pg_home)


def test_the_tools_end_to_end_with_the_metadata_on_postgresql(tmp_path):
    from context_engine.schema.query import SearchMemoryRequest
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings
    from tests.retrieval.conftest import HashEmbedder

    with fresh_postgres_database() as url:
        settings = load_settings(tmp_path / "home", metadata={"url": url})
        with ContextEngineService(settings, embedder=HashEmbedder()) as engine:
            for uri, text in BASE.items():
                engine.add_text(text, uri, ADMIN)
            hits = engine.search_memory(SearchMemoryRequest(query="quokka runbook", top_k=3), ADMIN).hits
            assert hits[0].uri == f"{ROOT}a/doc1.md"
            first = engine.lookup_knowledge("quokka runbook steps", ADMIN, session_id="s1")
            assert first.evidence_blocks and first.evidence_blocks[0].doc_id.endswith("doc1.md")
            again = engine.lookup_knowledge("quokka runbook steps", ADMIN, session_id="s1")
            assert again.evidence_blocks[0].relevance_level == "DEDUPED"  # the session ledger, in PostgreSQL
            recorded = engine.get_invocation(first.invocation_id, ADMIN)
            assert recorded.session_id == "s1" and recorded.tool_name == "lookup_knowledge"
            engine.delete(f"{ROOT}b/", ADMIN, recursive=True)
            assert not [u for u in file_texts(engine) if u.startswith(f"{ROOT}b/")]
            assert engine.check_writes(ADMIN).leftovers == 0
            assert_store_consistent(engine, tmp_path / "home")
