"""Whole-store consistency checks shared by the crash and concurrency tests (O(store): test use only).

:func:`assert_store_consistent` asserts that content, metadata and vectors agree: no journal leftover, every node
``indexed``, exactly one content folder per node (no orphan content) with the node's levels, exactly the metadata's
vector rows in the vector index (no orphan vector, none missing), each node's level-0 vector row carrying its L0,
and every directory summary equal to a fresh recompute from its committed children (and the last write's files).
"""

from __future__ import annotations

from pathlib import Path

import lancedb

from context_engine.ingest.pipeline import vector_id
from context_engine.schema.nodes import Level
from context_engine.storage.protocols import utcnow


def file_texts(engine, account: str = "default") -> dict[str, str]:
    """``{uri: L2 text}`` of every file node (what the store says is there)."""
    out = {}
    for node in engine.metadata.list_all_nodes(account):
        if not node.is_dir:
            out[node.uri] = engine.content.read_level(account, node.uri, Level.L2)
    return out


def lancedb_rows(home: Path, table_name: str) -> dict[str, str]:
    """``{id: text}`` of every row of the home's LanceDB table, read directly (not through the engine)."""
    table = lancedb.connect(str(home / "vectors")).open_table(table_name).to_arrow()
    return dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))


def assert_store_consistent(engine, home: Path, account: str = "default") -> None:
    md, content = engine.metadata, engine.content
    assert md.journal_entries() == []
    assert content.journal_ids() == []
    nodes = md.list_all_nodes(account)
    uris = sorted(n.uri for n in nodes)
    assert [n.uri for n in nodes if n.index_status != "indexed"] == []
    assert content.node_uris(account) == uris  # one content folder per node: no orphan, none missing
    rows = {v.id: v for batch in md.iter_vectors(account) for v in batch}
    assert sorted({v.uri for v in rows.values()} - set(uris)) == []  # no vector row of a missing node
    for node in nodes:
        l0 = content.read_level(account, node.uri, Level.L0)
        assert l0, node.uri
        if not node.is_dir:
            assert content.read_level(account, node.uri, Level.L2), node.uri
        if node.context_type is not None:
            row = rows.get(vector_id(account, node.uri, 0, 0))
            assert row is not None, node.uri
            assert row.text == l0, node.uri  # the vector is of the text the content store holds
    assert lancedb_rows(home, engine.settings.vector.table_name) == {i: v.text for i, v in rows.items()}
    # A summary names a sample of a large directory's children (the first and last by URI) plus what the last
    # write wrote; `updated_at` is stamped under the write lock, so the newest files are the last write's.
    files = [n for n in nodes if not n.is_dir]
    newest = max((n.updated_at for n in files), default=None)
    last_write = [n for n in files if n.updated_at == newest]
    dirs = [n for n in nodes if n.is_dir]
    fresh = engine.pipeline._prepare_directories(account, {d.uri for d in dirs}, last_write, utcnow())
    for d in fresh:
        stored = {lv: content.read_level(account, d.record.uri, lv) for lv in (Level.L0, Level.L1)}
        assert stored == {Level.L0: d.levels[Level.L0], Level.L1: d.levels[Level.L1]}, d.record.uri
