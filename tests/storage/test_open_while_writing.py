"""Opening a home while another process holds its SQLite write lock (an attack pass, 2026-12-07): a store whose
schema is current is only read when opened, so a read-only command (``ls``, ``stats``, ``search``) works beside a
writer (one whose schema must be written still takes the write lock: ``migrate.ensure_current``)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from tests.serve_process import CLI


@contextmanager
def write_lock(db: Path) -> Iterator[None]:
    """Another process's writer, as SQLite sees it: a connection holding ``BEGIN IMMEDIATE``."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def test_a_current_store_opens_and_reads_while_another_process_writes(tmp_path: Path) -> None:
    """Failed at 26bb900: the open ran its schema check in a write transaction, so it waited out the busy timeout
    and failed with ``WRT-5032``."""
    db = tmp_path / "metadata.db"
    SqlMetadataStore.sqlite(db).close()  # created, schema current
    with write_lock(db):
        store = SqlMetadataStore(f"sqlite:///{db}", busy_timeout_s=1.0)
        try:
            assert store.schema_status().current
            assert store.get_node("default", "ctx://resources/x.md") is None
        finally:
            store.close()


@pytest.mark.slow
def test_read_only_cli_commands_answer_beside_a_writer(tmp_path: Path) -> None:
    """Failed at 26bb900 (rc 4, ``WRT-5032`` after ``ingest.write_wait_s``)."""
    home = tmp_path / "home"
    env = {**os.environ, "CE_INGEST__WRITE_WAIT_S": "3"}
    me = ["--home", str(home), "--as", "default:user:kim:helper"]
    subprocess.run(
        [*CLI, *me, "add-memory", "I drink rooibos in the evening."], check=True, env=env, capture_output=True
    )
    with write_lock(home / "metadata.db"):
        listed = subprocess.run([*CLI, *me, "--json", "ls", "ctx://user/kim/memories/"], env=env, capture_output=True)
        found = subprocess.run([*CLI, *me, "--json", "search", "rooibos"], env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert found.returncode == 0 and "rooibos" in found.stdout, found.stderr
