"""The write journal on PostgreSQL (issue 13): a writer process killed with SIGKILL mid-write is found dead through
its session advisory lock (not a file lock, so it works across machines) and its write is undone or finished by the
next engine, exactly as on SQLite (tests/integration/test_crash_safety.py runs the SQLite side)."""

from __future__ import annotations

import pytest

from tests.integration.store_checks import assert_store_consistent, file_texts
from tests.integration.test_crash_safety import ADMIN, BASE, ROOT, _doc, _open, _run_writer
from tests.postgres import fresh_postgres_database

pytestmark = pytest.mark.slow


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


@pytest.mark.parametrize(
    ("point", "finished"), [("content_written", False), ("committed", True)], ids=["before-commit", "after-commit"]
)
def test_a_writer_killed_mid_write_is_undone_or_finished_by_the_next_engine(
    pg_home, default_embedder, point, finished
):
    uri = f"{ROOT}a/doc1.md"
    new = _doc("heron", sections=2)
    assert not _run_writer(pg_home, {"op": "readd", "uri": uri, "text": new, "point": point})
    with _open(pg_home, default_embedder) as engine:  # its startup check repairs what the dead writer left
        assert engine.metadata.dialect == "postgresql"
        assert file_texts(engine) == ({**BASE, uri: new} if finished else BASE)
        assert_store_consistent(engine, pg_home)
