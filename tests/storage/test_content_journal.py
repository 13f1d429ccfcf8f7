"""The content store's undo records (storage/content/local.py, storage/content/s3.py): every journaled change can be
rolled back, also a rollback that was itself cut short, and nothing is left behind once a journal is discarded or
rolled back. Runs on every content backend (tests/storage/conftest.py: ``local``, and ``s3`` when seaweedfs runs)."""

from __future__ import annotations

import json
import os

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import Level
from context_engine.storage.content.local import LocalContentStore

A, B = "ctx://resources/d/a.md", "ctx://resources/d/b.md"


@pytest.fixture
def store(content_backend):
    s = content_backend.open()
    s.write_levels("acc", "ctx://resources/d/", {Level.L0: "dir d"})
    s.write_levels("acc", A, {Level.L0: "a0", Level.L1: "a1", Level.L2: "a2"})
    s.write_levels("acc", B, {Level.L0: "b0", Level.L2: "b2"})
    return s


def _state(s) -> dict[str, dict[Level, str | None]]:
    return {u: {lv: s.read_level("acc", u, lv) for lv in Level} for u in s.node_uris("acc")}


def _journal_files(content_backend) -> list[str]:
    return [p for p in content_backend.raw() if p.startswith("@journal/")]


def test_rollback_restores_overwrites_new_nodes_deletes_and_moves(store, content_backend):
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
    assert store.read_level("acc", A, Level.L2) is None
    assert store.journal_ids() == ["7"]

    store.rollback("7")
    assert _state(store) == before
    assert not store.exists("acc", "ctx://resources/e/")  # folders the write created are gone
    assert not store.exists("acc", "ctx://resources/f/")
    assert store.journal_ids() == [] and _journal_files(content_backend) == []
    store.rollback("7")  # idempotent
    assert _state(store) == before


def test_a_rollback_cut_short_is_run_again(store, content_backend):
    before = _state(store)
    store.stash("3", "acc", A)
    store.write_levels("acc", A, {Level.L0: "A0", Level.L2: "A2"})
    store.delete_journaled("3", "acc", B)
    # the newest record undone by hand (B's objects put back), then a crash: its records are all still there
    if content_backend.name == "local":
        (store.root / "@journal" / "3" / "2").rename(store.root / "acc" / "resources" / "d" / "b.md")
    else:
        store.write_levels("acc", B, {Level.L0: "b0", Level.L2: "b2"})
    assert store.read_level("acc", A, Level.L2) == "A2"
    store.rollback("3")
    assert _state(store) == before


def test_a_rollback_cut_short_after_older_records_were_undone_keeps_them(store, content_backend, monkeypatch):
    """The crash comes after every record was undone, before the records are dropped: running the rollback again must
    not undo the newer records a second time over what the older ones put back (here: A's L1)."""
    before = _state(store)
    store.stash("4", "acc", A)
    store.write_levels("acc", A, {Level.L1: None})
    store.stash("4", "acc", A)  # A's L1 no longer exists: this record says "L1 was absent"
    store.write_levels("acc", A, {Level.L0: "A0"})

    def crash(journal_id: str) -> None:
        raise ContextEngineError(ErrorCode.STORAGE_FAILED, "crash before the records are dropped", retryable=True)

    monkeypatch.setattr(store, "discard", crash)
    with pytest.raises(ContextEngineError):
        store.rollback("4")
    assert _state(store) == before
    monkeypatch.undo()
    store.rollback("4")
    assert _state(store) == before
    assert store.journal_ids() == [] and _journal_files(content_backend) == []


def test_discard_keeps_the_write_and_drops_the_records(store, content_backend):
    store.stash("5", "acc", A)
    store.write_levels("acc", A, {Level.L2: "new"})
    store.delete_journaled("5", "acc", B)
    store.discard("5")
    assert store.read_level("acc", A, Level.L2) == "new" and not store.exists("acc", B)
    assert store.journal_ids() == [] and _journal_files(content_backend) == []
    store.rollback("5")  # nothing left to undo
    assert store.read_level("acc", A, Level.L2) == "new"


def test_records_written_by_another_store_object_continue_its_numbering(content_backend):
    """A second process (or a restart) adding to a journal continues after its records, and one rollback undoes
    both processes' changes, newest first."""
    first = content_backend.open()
    first.write_levels("acc", A, {Level.L2: "v1"})
    first.stash("9", "acc", A)
    first.write_levels("acc", A, {Level.L2: "v2"})
    second = content_backend.open()
    second.stash("9", "acc", A)
    second.write_levels("acc", A, {Level.L2: "v3"})
    second.rollback("9")
    assert first.read_level("acc", A, Level.L2) == "v1"


def test_a_journaled_move_onto_an_existing_node_is_refused(store):
    with pytest.raises(ContextEngineError) as info:
        store.move_journaled("1", "acc", A, B)
    assert info.value.code is ErrorCode.CONFLICT
    assert store.read_level("acc", A, Level.L2) == "a2"


def test_journaled_changes_of_missing_nodes_record_nothing(store, content_backend):
    store.delete_journaled("6", "acc", "ctx://resources/none.md")
    store.move_journaled("6", "acc", "ctx://resources/none/", "ctx://resources/other/")
    assert store.journal_ids() == [] and _journal_files(content_backend) == []


def test_node_uris_lists_every_node_folder(store):
    assert store.node_uris("acc") == ["ctx://resources/d/", A, B]
    assert store.node_uris("other") == []


def test_a_journal_of_per_change_manifests_still_rolls_back(tmp_path):
    """Journals written before issue 26 hold one ``<seq>.json`` manifest per change (local store): a write killed by
    an older version is still undone, and a new record continues their numbering."""
    store = LocalContentStore(tmp_path / "content")
    store.write_levels("acc", A, {Level.L0: "a0", Level.L2: "a2"})
    folder = store.root / "@journal" / "8"
    (folder / "1").mkdir(parents=True)
    node = store.root / "acc" / "resources" / "d" / "a.md"
    for name in (".abstract.md", ".content.md"):
        os.link(node / name, folder / "1" / name)
    record = {"op": "stash", "path": "acc/resources/d/a.md", "existed": [".abstract.md", ".content.md"]}
    (folder / "1.json").write_text(json.dumps(record), encoding="utf-8")
    store.write_levels("acc", A, {Level.L0: "A0", Level.L2: "A2"})
    store.stash("8", "acc", B)  # a new node, recorded as the journal's second change
    store.write_levels("acc", B, {Level.L0: "b0"})
    assert json.loads((folder / "records.jsonl").read_text(encoding="utf-8"))["seq"] == 2
    store.rollback("8")
    assert (store.read_level("acc", A, Level.L0), store.read_level("acc", A, Level.L2)) == ("a0", "a2")
    assert not store.exists("acc", B) and store.journal_ids() == []


def test_a_journal_line_cut_short_is_a_change_never_made(tmp_path):
    """A line that does not parse (its one write never completed) is skipped; the records before it are undone."""
    store = LocalContentStore(tmp_path / "content")
    store.write_levels("acc", A, {Level.L0: "a0"})
    store.stash("6", "acc", A)
    store.write_levels("acc", A, {Level.L0: "A0"})
    with open(store.root / "@journal" / "6" / "records.jsonl", "a", encoding="utf-8") as log:
        log.write('{"seq": 2, "op": "sta')
    store.rollback("6")
    assert store.read_level("acc", A, Level.L0) == "a0" and store.journal_ids() == []


def test_new_nodes_are_written_in_place_and_existing_ones_replaced(tmp_path):
    """A node folder the write creates gets its files directly; an existing node's files are replaced through a
    temporary file (none is left); either way the files are private to the owner, as tempfile made them."""
    store = LocalContentStore(tmp_path / "content")
    store.write_levels("acc", A, {Level.L0: "a0", Level.L1: None, Level.L2: "a2"})
    store.write_levels("acc", A, {Level.L0: "A0", Level.L1: "A1"})
    node = store.root / "acc" / "resources" / "d" / "a.md"
    assert sorted(p.name for p in node.iterdir()) == [".abstract.md", ".content.md", ".overview.md"]
    assert [store.read_level("acc", A, lv) for lv in Level] == ["A0", "A1", "a2"]
    assert {oct(p.stat().st_mode & 0o777) for p in node.iterdir()} == {"0o600"}
    store.write_levels("acc", A, {Level.L1: None})
    assert store.read_level("acc", A, Level.L1) is None
