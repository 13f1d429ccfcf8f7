"""The metadata store's write journal and writer locks (docs/security.md, "Crash safety and concurrent writers"):
the journal rows of writes in flight, the database-wide write turn, writer liveness (:mod:`.writer_locks`) and the
per-account index sync lock. :class:`JournalRows` is one role of
:class:`~context_engine.storage.metadata.sqlalchemy_store.SqlMetadataStore` (the
:class:`~context_engine.storage.protocols.WriteJournal` protocol).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    delete,
    select,
    text,
    update,
)
from sqlalchemy.exc import SQLAlchemyError

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.storage.journal import JournalEntry
from context_engine.storage.metadata import dialects
from context_engine.storage.metadata.engine import SqlDatabase
from context_engine.storage.metadata.tables import (
    JOURNAL,
    META,
    WriteJournalRow,
)

__all__ = ["JournalRows"]

_WRITE_LOCK_KEY = "write_lock"  # the meta row every journaled write updates first (PostgreSQL: a row lock)


class JournalRows(SqlDatabase):
    """The write journal, the write turn and the writer locks (module docstring)."""

    # ---- the intent journal (storage/journal.py) --------------------------------------------------------------------
    def lock_writes(self) -> None:
        """Inside a write transaction: serialise it with every other journaled write until it ends.

        SQLite already holds the database's write lock for the whole transaction (``BEGIN IMMEDIATE``); other
        databases take the row lock of one ``meta`` row, so two writers never change the content store at once.
        PostgreSQL queues the waiters of that lock in arrival order; a wait longer than the busy timeout
        (``ingest.write_wait_s``, the transaction's ``lock_timeout``) fails with the retryable ``WRT-5032``.
        """
        if self.dialect == dialects.SQLITE:
            return
        with self._use(write=True) as s:
            s.execute(text(f"SET LOCAL lock_timeout = {max(1, round(self._busy_timeout_s * 1000))}"))
            s.execute(self._insert_ignore(META).values(key=_WRITE_LOCK_KEY, value="0"))
            s.execute(update(META).where(META.c.key == _WRITE_LOCK_KEY).values(value=META.c.value))

    @contextmanager
    def write_turn(self, timeout_s: float) -> Iterator[None]:
        """Outside any transaction: wait (first come, first served, at most ``timeout_s``) for this home's write
        turn and hold it for the block; every thread and process writing through the journal queues here.

        SQLite: a ticket queue of ``flock`` files beside the journal locks (:class:`.writer_locks.FileWriterLocks`),
        so the server's threads and CLI processes take turns in arrival order instead of racing SQLite's busy wait.
        PostgreSQL: nothing here (:meth:`lock_writes`' row lock queues writers in the server's lock manager).

        Raises:
            ContextEngineError: ``WRT-5032`` (retryable) when the turn did not come within ``timeout_s``;
                ``WRT-5001`` (retryable) when the queue cannot be used.
        """
        if self.dialect != dialects.SQLITE:
            yield
            return
        try:
            turn = self._writer_locks().turn(timeout_s)
            got = turn.__enter__()
        except OSError as err:
            raise self._lock_error(err) from err
        try:
            if not got:
                raise ContextEngineError(
                    ErrorCode.WRITE_BUSY,
                    f"no write turn within {timeout_s:g} s (ingest.write_wait_s): other writers are ahead; retry",
                    {"waited_s": timeout_s},
                    retryable=True,
                )
            yield
        finally:
            turn.__exit__(None, None, None)

    def journal_open(self, account_id: str, op: str, owner: str | None, uris: Sequence[str] = ()) -> int:
        """Write a ``prepared`` intent row and return its id. Call it outside a transaction (it must be committed
        before the write touches anything).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) on a database failure.
        """
        with self._use(write=True) as s:
            row = WriteJournalRow(
                account_id=account_id,
                op=op,
                state="prepared",
                owner=owner,
                created_at=datetime.now(UTC),
                payload={"uris": list(uris), "sync_ids": []},
            )
            s.add(row)
            s.flush()
            return int(row.id)

    def journal_commit(self, journal_id: int, uris: Sequence[str], sync_ids: Sequence[str]) -> None:
        """Inside the write's transaction: mark the row ``committed`` with the nodes written and the vector ids
        touched (it commits or rolls back with the write)."""
        payload = {"uris": sorted(set(uris)), "sync_ids": sorted(set(sync_ids))}
        with self._use(write=True) as s:
            s.execute(update(JOURNAL).where(JOURNAL.c.id == journal_id).values(state="committed", payload=payload))

    def journal_release(self, journal_id: int) -> None:
        """Clear the row's owner: any process may now finish it (its writer could not)."""
        with self._use(write=True) as s:
            s.execute(update(JOURNAL).where(JOURNAL.c.id == journal_id).values(owner=None))

    def journal_delete(self, journal_id: int) -> None:
        """Drop the row (the write is finished, or undone). A missing row is ignored."""
        with self._use(write=True) as s:
            s.execute(delete(JOURNAL).where(JOURNAL.c.id == journal_id))

    def journal_entries(self) -> list[JournalEntry]:
        """Every row, oldest first: the writes in flight or left by a crash (few; a full read of a small table)."""
        with self._use(write=False) as s:
            rows = s.execute(select(JOURNAL).order_by(JOURNAL.c.id)).all()
        return [
            JournalEntry(
                id=int(r.id),
                account_id=r.account_id,
                op=r.op,
                state="committed" if r.state == "committed" else "prepared",
                owner=r.owner,
                created_at=r.created_at,
                uris=list((r.payload or {}).get("uris", [])),
                sync_ids=list((r.payload or {}).get("sync_ids", [])),
            )
            for r in rows
        ]

    # ---- writer liveness and the index sync lock (ingest/journal.py; writer_locks.py) -------------------------------
    def hold_writer_lock(self, token: str) -> None:
        """Hold, for this process's life (or until :meth:`release_writer_lock`), the lock that shows the writer
        ``token`` is alive to every process of this database. Idempotent; checks a held lock is still held.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the lock cannot be taken.
        """
        try:
            self._writer_locks().hold(token)
        except (SQLAlchemyError, OSError, RuntimeError) as err:
            raise self._lock_error(err) from err

    def writer_alive(self, token: str) -> bool:
        """Whether the writer ``token`` holds its lock, in this process or any other (on PostgreSQL: on any machine).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) on a database failure.
        """
        try:
            return bool(self._writer_locks().alive(token))
        except (SQLAlchemyError, OSError) as err:
            raise self._lock_error(err) from err

    def release_writer_lock(self, token: str) -> None:
        """Drop the writer lock of ``token``: the rows it owns become recoverable by others. Idempotent."""
        if self._writers is not None:
            self._writers.release(token)

    @contextmanager
    def index_sync_lock(self, account_id: str) -> Iterator[None]:
        """Serialise, across every process, the syncs of the vector index with this database (SQLite: one lock for
        all accounts; PostgreSQL: one per account).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the lock cannot be taken or is lost.
        """
        in_block = False
        try:
            with self._writer_locks().sync(account_id):
                in_block = True
                yield
                in_block = False
        except (SQLAlchemyError, OSError) as err:
            if in_block:
                raise  # the block's own failure, unchanged
            raise self._lock_error(err) from err

    def _writer_locks(self) -> Any:
        self._check_open()
        with self._writers_guard:
            if self._writers is None:
                from context_engine.storage.metadata import writer_locks

                if self.dialect == dialects.SQLITE:
                    database = self._engine.url.database
                    if database and database != ":memory:":
                        directory = Path(database).parent / "journal"
                    else:
                        import tempfile

                        directory = Path(tempfile.mkdtemp(prefix="ce-journal-"))
                    self._writers = writer_locks.FileWriterLocks(directory)
                else:
                    self._writers = writer_locks.AdvisoryWriterLocks(self._engine)
            return self._writers

    def _lock_error(self, err: BaseException) -> ContextEngineError:
        if isinstance(err, SQLAlchemyError):
            return self._storage_error(err, "writer lock")
        return ContextEngineError(
            ErrorCode.STORAGE_FAILED,
            f"metadata store writer lock failed: {type(err).__name__}: {self._scrub(str(err))[:200]}",
            {"error": type(err).__name__, "operation": "writer lock"},
            retryable=True,
        )
