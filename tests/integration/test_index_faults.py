"""Faults around the derived indexes (issue 12, "Bad input and faults"): a process killed with SIGKILL while it
merges BM25 segments and writes leaves a home whose every committed write is searchable by the next process (the
derived indexes are rebuilt from the metadata database, never trusted from a half-written file), and a home whose
metadata or vector index has a format this version cannot use is refused with a clear error that names the way out.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import SearchMemoryRequest
from context_engine.settings import load_settings
from context_engine.storage.metadata.sqlalchemy_store import SCHEMA_VERSION, SqlMetadataStore
from tests.retrieval.conftest import ADMIN, HashEmbedder, seed_small_store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def hash_engine():
    """Factory: a service on ``home`` with the hashing embedder (closed at teardown)."""
    from context_engine.service import ContextEngineService

    opened = []

    def make(home: Path, **overrides):
        engine = ContextEngineService(load_settings(home, **overrides), embedder=HashEmbedder())
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        engine.close()


# Process B: writes documents one by one and merges its BM25 segments after each, forever; it prints the number of
# each document once its write has returned (committed).
_WRITER = """
import sys
from pathlib import Path
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import VectorFilter
from tests.retrieval.conftest import HashEmbedder

engine = ContextEngineService(load_settings(Path(sys.argv[1])), embedder=HashEmbedder())
admin = RequestContext(account_id="default", role="admin")
i = 0
while True:
    text = f"# Doc {i}\\n\\nzebra{i} quagga ledger entry number {i}.\\n"
    engine.add_text(text, f"ctx://resources/k/doc{i}.md", admin)
    print(i, flush=True)
    engine.keyword_index.search("quagga", 5, VectorFilter(account_id="default"))  # catch up, then merge
    engine.keyword_index.optimize()
    i += 1
"""


def test_sigkill_during_merges_and_writes_loses_no_committed_write(hash_engine, tmp_path):
    home = tmp_path / "home"
    seed_small_store(hash_engine(home))
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(home)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)])),
    )
    committed = -1
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while committed < 12 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, f"writer exited with {proc.poll()}"
        committed = int(line)
    proc.send_signal(signal.SIGKILL)  # mid-write or mid-merge, wherever it is
    proc.wait(timeout=30)
    assert committed >= 12

    engine = hash_engine(home)  # a fresh process's view: every index rebuilt from the store
    flt = VectorFilter(account_id="default", levels=[0])
    for i in range(committed + 1):
        hits = engine.keyword_index.search(f"zebra{i}", 3, flt)
        assert [h.uri for h in hits][:1] == [f"ctx://resources/k/doc{i}.md"], i
        response = engine.search_memory(SearchMemoryRequest(query=f"zebra{i} ledger entry", top_k=5), ADMIN)
        assert f"ctx://resources/k/doc{i}.md" in [h.uri for h in response.hits], i
    # a write in flight at the kill is either whole or absent: never a node without its vectors
    for node in engine.metadata.list_all_nodes("default"):
        if not node.is_dir and node.uri.startswith("ctx://resources/k/"):
            assert engine.metadata.get_vectors("default", [node.uri]), node.uri
    assert engine.keyword_index.count("default") == engine.metadata.count_vectors("default")


def test_a_metadata_database_of_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "metadata.db"
    SqlMetadataStore.sqlite(path).close()
    with sqlite3.connect(path) as con:
        con.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(ContextEngineError) as info:
        SqlMetadataStore.sqlite(path)
    assert info.value.code is ErrorCode.CONFIG_INVALID
    assert f"schema version {SCHEMA_VERSION + 1}" in info.value.message
    assert "upgrade context-engine" in info.value.message


def test_a_metadata_database_of_an_older_schema_is_upgraded_in_place(tmp_path):
    path = tmp_path / "metadata.db"
    SqlMetadataStore.sqlite(path).close()
    with sqlite3.connect(path) as con:
        con.execute("UPDATE schema_version SET version = 2")
        con.execute("DROP TABLE index_changes")
        con.execute("DROP TABLE index_generations")
    store = SqlMetadataStore.sqlite(path)
    assert store.account_generation("default") == 0  # the tables of version 3 exist again
    store.close()
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)


def test_a_vector_index_of_another_format_names_the_command_that_rebuilds_it(hash_engine, tmp_path):
    home = tmp_path / "home"
    engine = hash_engine(home, vector={"backend": "lancedb"})
    seed_small_store(engine)
    engine.close()
    import lancedb

    # an index written by a format without the `breadcrumb` column
    db = lancedb.connect(home / "vectors")
    table = db.open_table(load_settings(home).vector.table_name)
    old = table.to_arrow().drop_columns(["breadcrumb"])
    db.drop_table(table.name)
    db.create_table(table.name, data=old, schema=pa.schema([f for f in old.schema]))

    broken = hash_engine(home, vector={"backend": "lancedb"})
    with pytest.raises(ContextEngineError) as info:
        broken.index.count()
    assert info.value.code is ErrorCode.INDEX_MODEL_MISMATCH
    assert "breadcrumb" in info.value.message and "context-engine reindex --full" in info.value.message
    broken.close()

    # what the message says to do works: the index is derived, rebuilt from the metadata database
    import shutil

    shutil.rmtree(home / "vectors")
    fixed = hash_engine(home, vector={"backend": "lancedb"})
    fixed.reindex(ADMIN, full=True)
    assert fixed.index.count() == fixed.metadata.count_vectors("default")
