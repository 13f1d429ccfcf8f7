"""The content store's undo records (storage/content/local.py): every journaled change can be rolled back, also a
rollback that was itself cut short, and nothing is left behind once a journal is discarded or rolled back."""

from __future__ import annotations

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import Level
from context_engine.storage.content.local import LocalContentStore

A, B = "ctx://resources/d/a.md", "ctx://resources/d/b.md"


@pytest.fixture
def store(tmp_path) -> LocalContentStore:
    s = LocalContentStore(tmp_path / "content")
    s.write_levels("acc", "ctx://resources/d/", {Level.L0: "dir d"})
    s.write_levels("acc", A, {Level.L0: "a0", Level.L1: "a1", Level.L2: "a2"})
    s.write_levels("acc", B, {Level.L0: "b0", Level.L2: "b2"})
    return s


def _state(s: LocalContentStore) -> dict[str, dict[Level, str | None]]:
    return {u: {lv: s.read_level("acc", u, lv) for lv in Level} for u in s.node_uris("acc")}


def test_rollback_restores_overwrites_new_nodes_deletes_and_moves(store):
    before = _state(store)
    store.stash("7", "acc", A)
    store.write_levels("acc", A, {Level.L0: "A0", Level.L1: None, Level.L2: "A2"})
    store.stash("7", "acc", "ctx://resources/e/new.md")  # a node that did not exist
    store.write_levels("acc", "ctx://resources/e/new.md", {Level.L0: "n0", Level.L2: "n2"})
    store.stash("7", "acc", A)  # the same node twice in one write
    store.write_levels("acc", A, {Level.L0: "AA0"})
    store.delete_journaled("7", "acc", B)
    store.move_journaled("7", "acc", "ctx://resources/d/", "ctx://resources/f/g/")
    assert store.read_level("acc", B, Level.L2) is None and store.exists("acc", "ctx://resources/f/g/a.md")
    assert store.journal_ids() == ["7"]

    store.rollback("7")
    assert _state(store) == before
    assert not (store.root / "acc" / "resources" / "e").exists()  # folders the write created are gone
    assert not (store.root / "acc" / "resources" / "f").exists()
    assert store.journal_ids() == []
    store.rollback("7")  # idempotent
    assert _state(store) == before


def test_a_rollback_cut_short_is_run_again(store):
    before = _state(store)
    store.stash("3", "acc", A)
    store.write_levels("acc", A, {Level.L0: "A0", Level.L2: "A2"})
    store.delete_journaled("3", "acc", B)
    # the first record undone (the delete), then a crash: its manifest is still there, the rest is not undone
    (store.root / "@journal" / "3" / "2").rename(store.root / "acc" / "resources" / "d" / "b.md")
    assert store.read_level("acc", A, Level.L2) == "A2"
    store.rollback("3")
    assert _state(store) == before


def test_discard_keeps_the_write_and_drops_the_records(store):
    store.stash("5", "acc", A)
    store.write_levels("acc", A, {Level.L2: "new"})
    store.delete_journaled("5", "acc", B)
    store.discard("5")
    assert store.read_level("acc", A, Level.L2) == "new" and not store.exists("acc", B)
    assert store.journal_ids() == [] and list((store.root / "@journal").iterdir()) == []
    store.rollback("5")  # nothing left to undo
    assert store.read_level("acc", A, Level.L2) == "new"


def test_a_journaled_move_onto_an_existing_node_is_refused(store):
    with pytest.raises(ContextEngineError) as info:
        store.move_journaled("1", "acc", A, B)
    assert info.value.code is ErrorCode.CONFLICT
    assert store.read_level("acc", A, Level.L2) == "a2"


def test_node_uris_lists_every_node_folder(store):
    assert store.node_uris("acc") == ["ctx://resources/d/", A, B]
    assert store.node_uris("other") == []
