"""The search_memory derived indexes after the metadata database was rewound (docs/derived_indexes.md, "The rule";
docs/deployment.md): a backup restored into a live home, or a PostgreSQL failover to a replica that missed the last
commits, that later writes carry back to the generation a process (or a derived file) holds, or past it.

The account generation alone did not name a state of the account: a level-0 matrix or BM25 at generation *g* of the
lost history either looked current (the same number) or caught up from *g* with the new history's changes after *g*
only, keeping the lost history's rows and missing the new history's up to *g*, for good. Each generation now has a
random token; a held account, or a file, counts as the store's state only at the same number and token.

Each test builds the rewound home with SQLite's backup API, as ``tests/knowledge/test_hint_catch_up.py`` does for the
hint index, on the real :class:`SqlMetadataStore`, :class:`MatrixVectorIndex` and :class:`BM25Index`.
"""

from __future__ import annotations

import json
import sqlite3
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.storage.derived_files import DerivedFiles
from context_engine.storage.keyword import BM25Index
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.vector.matrix import MatrixVectorIndex

ACC = "acc"
DIM = 8
WORDS = {"kept": "alpha", "lost": "quokka", "new": "zebra", "newer": "walrus"}
FLT = VectorFilter(account_id=ACC)


def _record(rid: str) -> VectorRecord:
    v = np.random.default_rng(len(rid) * 7 + ord(rid[0])).standard_normal(DIM).astype(np.float32)
    return VectorRecord(
        id=rid,
        vector=v / np.linalg.norm(v),
        uri=f"ctx://resources/ops/{rid}.md",
        parent_uri="ctx://resources/ops/",
        account_id=ACC,
        owner_space="shared",
        context_type="resource",
        level=0,
        doc_id=f"ctx://resources/ops/{rid}.md",
        text=f"{WORDS[rid]} runbook",
    )


class _Indexes:
    """The level-0 matrix and BM25 of one process, on its own store (and the home's derived files, when given)."""

    def __init__(self, path: Path, files: Path | None) -> None:
        self.store = SqlMetadataStore.sqlite(path)
        self.files = DerivedFiles(files, self.store) if files is not None else None
        self.l0 = MatrixVectorIndex(self.store, levels=(0,), files=self.files)
        self.bm25 = BM25Index(source=self.store, files=self.files)

    def found(self) -> tuple[set[str], set[str]]:
        """The ids the matrix and BM25 return for every row (the matrix) and every word (BM25)."""
        matrix = {h.id for h in self.l0.search(np.ones(DIM, dtype=np.float32) / DIM**0.5, 100, FLT)}
        words = {h.id for h in self.bm25.search(" ".join(WORDS.values()), 100, FLT)}
        return matrix, words

    def save(self) -> None:
        assert self.l0.save(ACC) and self.bm25.save_files(ACC) == 1

    def close(self) -> None:
        self.l0.close()
        self.bm25.close()
        self.store.close()


@dataclass
class _Home:
    path: Path
    writer: SqlMetadataStore
    reader: _Indexes

    def write(self, *ids: str) -> None:
        for rid in ids:  # one generation each
            self.writer.put_vectors([_record(rid)])

    def fresh(self) -> _Indexes:
        """A new process on the home (its derived files included)."""
        return _Indexes(self.path, self.path.parent / "derived")


@contextmanager
def _restored(tmp_path: Path) -> Iterator[_Home]:
    """A home rewound under a reader: ``kept`` written (generation 1, backed up), ``lost`` written (generation 2,
    held by the reader, and by its derived files), then the backup restored into the live database (generation 1)."""
    path = tmp_path / "metadata.db"
    writer = SqlMetadataStore.sqlite(path)
    reader = _Indexes(path, tmp_path / "derived")
    try:
        writer.put_vectors([_record("kept")])
        assert reader.found() == ({"kept"}, {"kept"})  # writes the files: the database's identity is in the backup
        reader.l0.wait_for_saves(10)
        reader.bm25.wait_for_saves(10)
        backup = sqlite3.connect(tmp_path / "backup.db")
        with sqlite3.connect(path) as live:
            live.backup(backup)  # the home at generation 1
        writer.put_vectors([_record("lost")])  # generation 2, lost by the restore
        assert reader.found() == ({"kept", "lost"}, {"kept", "lost"})
        reader.save()  # the files at generation 2 of the lost history
        assert writer.account_generation(ACC) == 2
        live = sqlite3.connect(path)
        backup.backup(live)  # restored: generation 1 again
        live.close()
        backup.close()
        assert writer.account_generation(ACC) == 1
        yield _Home(path, writer, reader)
    finally:
        writer.close()
        reader.close()


@pytest.mark.parametrize("writes", [("new",), ("new", "newer")], ids=["to-the-same-generation", "past-it"])
def test_a_process_holding_a_lost_generation_searches_the_new_history(tmp_path: Path, writes: tuple[str, ...]) -> None:
    """Failed before generation tokens: after one write (generation 2 again) the reader's matrix and BM25 looked
    current and kept answering ``lost`` and not ``new``; after two (generation 3) they caught up from generation 2
    with ``newer`` alone, keeping ``lost`` and missing ``new`` until a reload, i.e. for good."""
    with _restored(tmp_path) as home:
        home.write(*writes)
        want = {"kept", *writes}
        assert home.reader.found() == (want, want)
        assert home.reader.l0.loads == 2 and home.reader.bm25.loads == 2  # the first load, then the reload
        home.write("lost")  # the lost row's id written again: an ordinary catch-up from here on
        assert home.reader.found() == (want | {"lost"}, want | {"lost"})
        assert home.reader.l0.loads == 2 and home.reader.bm25.loads == 2


@pytest.mark.parametrize("writes", [("new",), ("new", "newer")], ids=["to-the-same-generation", "past-it"])
def test_a_derived_file_of_a_lost_generation_is_reloaded_not_used(tmp_path: Path, writes: tuple[str, ...]) -> None:
    """Failed before generation tokens: a new process (a restart after the restore) opened the files at generation
    2 of the lost history as current (or caught them up from there) and served ``lost``; restarting did not help."""
    with _restored(tmp_path) as home:
        home.write(*writes)
        fresh = home.fresh()
        try:
            want = {"kept", *writes}
            assert fresh.found() == (want, want)
            assert (fresh.l0.loads, fresh.l0.file_loads) == (1, 0) and (fresh.bm25.loads, fresh.bm25.file_loads) == (
                1,
                0,
            )
            assert fresh.files is not None and fresh.files.rejected == 0  # parsed and of this database: its token
        finally:
            fresh.close()


def _strip_token(path: Path) -> None:
    """Rewrite a derived file's stamp as a release before tokens wrote it (no ``token`` key)."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    own = json.loads(header["__metadata__"]["context-engine"])
    assert own.pop("token") is not None
    header["__metadata__"]["context-engine"] = json.dumps(own)
    body = json.dumps(header).encode()
    body += b" " * (-len(body) % 8)
    path.write_bytes(struct.pack("<Q", len(body)) + body + raw[8 + length :])


def test_files_and_rows_written_before_tokens_open_without_a_reload(tmp_path: Path) -> None:
    """An upgrade reloads nothing: a file without a token and a database whose rows have NULL tokens (what the
    migration to revision 0005 leaves) agree at the same generation, and catch up from there after new writes."""
    path = tmp_path / "metadata.db"
    writer = SqlMetadataStore.sqlite(path)
    first = _Indexes(path, tmp_path / "derived")
    try:
        writer.put_vectors([_record("kept")])
        writer.put_vectors([_record("lost")])
        assert first.found() == ({"kept", "lost"}, {"kept", "lost"})
        first.close()
        for kind in ("l0", "bm25"):
            _strip_token(next((tmp_path / "derived" / kind).iterdir()))
        with sqlite3.connect(path) as con:
            con.execute("UPDATE index_generations SET token = NULL, log_floor_token = NULL")
            con.execute("UPDATE index_changes SET token = NULL")
        assert writer.account_state(ACC) == (2, None)
        second = _Indexes(path, tmp_path / "derived")
        try:
            assert second.found() == ({"kept", "lost"}, {"kept", "lost"})
            assert (second.l0.loads, second.l0.file_loads, second.bm25.loads, second.bm25.file_loads) == (0, 1, 0, 1)
            writer.put_vectors([_record("new")])  # the first write with a token: caught up from the legacy state
            assert second.found() == ({"kept", "lost", "new"}, {"kept", "lost", "new"})
            assert (second.l0.loads, second.bm25.loads, second.l0.rows_applied) == (0, 0, 1)
        finally:
            second.close()
    finally:
        writer.close()


def test_a_caller_that_read_the_generation_number_alone_gets_the_new_history(tmp_path: Path) -> None:
    """search_memory reads the generation (a number) once a request and hands it to the level-0 matrix and BM25 to
    save their reads. Failed before generation tokens: at the number they held, both answered from the lost history.
    A bare number now saves nothing (the state is read again); an :class:`AccountState` saves the read."""
    with _restored(tmp_path) as home:
        home.write("new")
        generation = home.writer.account_generation(ACC)
        assert generation == 2  # the number the reader holds, from the lost history
        query = np.ones(DIM, dtype=np.float32) / DIM**0.5
        view = home.reader.l0.view(ACC, generation)
        assert view is not None and {h.id for h in view.search(query, 100, FLT)} == {"kept", "new"}
        scores = home.reader.bm25.scores_many(" ".join(WORDS.values()), 100, [FLT], generation=generation)
        assert {s.id for s in scores[0]} == {"kept", "new"}  # scores_many keeps rows deleted since: none of lost's

        state = home.writer.account_state(ACC)
        reads: list[str] = []
        real = home.reader.store.account_state
        home.reader.store.account_state = lambda a: reads.append(a) or real(a)  # type: ignore[method-assign]
        assert home.reader.l0.view(ACC, state) is not None
        assert home.reader.bm25.scores_many("zebra", 5, [FLT], generation=state)[0][0].id == "new"
        assert reads == []  # a current account, given the state: no store read
        home.reader.l0.view(ACC, generation)
        assert reads == [ACC]
