"""The write protocol's journal: intents, writer liveness, finishing and recovery (docs/security.md).

Every write (add, re-add, delete, move, and the directory summaries they refresh) goes through
:meth:`WritePipeline._journaled <context_engine.ingest.pipeline.WritePipeline>`:

1. **Intent.** A ``prepared`` row is committed in ``write_journal`` (:mod:`context_engine.storage.journal`), owned by
   this process's liveness token.
2. **One transaction** holds the write lock (:meth:`MetadataStore.lock_writes`) and: undoes what crashed writers
   left (:meth:`WriteJournal.recover_prepared`), changes the content store with undo records under the journal id,
   writes the metadata (nodes ``pending``, vectors, change log) and recomputes the directory summaries from the
   committed children, and marks the row ``committed``. The commit of this transaction is the one point at which the
   write happens: before it a crash leaves a ``prepared`` row whose content changes are rolled back, after it a
   ``committed`` row that is finished.
3. **Finish** (:meth:`WriteJournal.finish`): the vector index follows the metadata rows of the touched ids, the nodes
   are marked ``indexed``, the undo records and the row are dropped.

Liveness: each process that writes holds, for its life, a lock named by its liveness token in the metadata store
(:meth:`~context_engine.storage.metadata.sqlalchemy_store.SqlMetadataStore.hold_writer_lock`: a ``flock`` under
``<home>/journal`` on SQLite, a session advisory lock on PostgreSQL, which works across machines). The lock goes
when the process dies (``kill -9`` included), so a row whose owner's lock is free belongs to a dead writer. Recovery
reads the journal table (one row per write in flight) and the content store's journal folder: O(leftovers), never
O(store).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from context_engine.errors import ContextEngineError
from context_engine.storage.journal import JournalEntry
from context_engine.storage.protocols import ContentStore, MetadataStore, VectorIndex

__all__ = ["RecoveryReport", "WriteJournal"]

_LOG = logging.getLogger("context_engine.ingest")
_SYNC_BATCH = 512  # vector ids read and pushed to the index per step


@dataclass
class RecoveryReport:
    """What a recovery pass found and (unless ``repaired`` is false) repaired.

    Attributes:
        rolled_back: journal ids of writes that crashed before their commit (content changes undone).
        finished: journal ids of committed writes that were finished (vector index synced, nodes marked indexed).
        in_flight: journal ids owned by live writers (left alone).
        orphan_records: content-store undo folders without a journal row (removed).
        vectors_synced: vector ids brought in line with the metadata store.
        nodes_indexed: pending nodes of finished writes marked ``indexed``.
        repaired: whether anything was changed (``reindex --check`` only reports).
    """

    rolled_back: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    orphan_records: list[str] = field(default_factory=list)
    vectors_synced: int = 0
    nodes_indexed: int = 0
    repaired: bool = True

    @property
    def leftovers(self) -> int:
        """How many leftovers of crashed writes were found."""
        return len(self.rolled_back) + len(self.finished) + len(self.orphan_records)


class WriteJournal:
    """Intent rows, the liveness lock and recovery for one process (module docstring).

    Args:
        metadata: the metadata store (holds ``write_journal``, and the liveness and sync locks).
        content: the content store (holds the undo records).
        index: the vector index that follows the metadata store.
        crash_at: testing only (``ingest.crash_at``): ``point`` or ``point:n`` makes this process kill itself with
            SIGKILL the ``n``-th time (default 1) it reaches that point of the protocol.
    """

    def __init__(
        self,
        metadata: MetadataStore,
        content: ContentStore,
        index: VectorIndex,
        *,
        crash_at: str | None = None,
    ) -> None:
        self._metadata = metadata
        self._content = content
        self._index = index
        self.token = uuid.uuid4().hex
        self._holding = False
        point, _, nth = (crash_at or "").partition(":")
        self._crash_point, self._crash_left = point or None, int(nth or 1)

    @property
    def index(self) -> VectorIndex:
        return self._index

    @index.setter
    def index(self, value: VectorIndex) -> None:
        self._index = value

    # ------------------------------------------------------------------------------------------------ writing
    def begin(self, account_id: str, op: str, uris: Sequence[str] = ()) -> int:
        """Commit a ``prepared`` intent owned by this process and return its id (step 1)."""
        self._metadata.hold_writer_lock(self.token)
        self._holding = True
        journal_id = self._metadata.journal_open(account_id, op, self.token, uris)
        self.crash_point("intent_committed")
        return journal_id

    def abandon(self, journal_id: int) -> None:
        """The write failed before its commit (an exception, not a crash): undo its content changes, drop the row."""
        self._content.rollback(str(journal_id))
        self._metadata.journal_delete(journal_id)

    def finish(self, account_id: str, journal_id: int, uris: Sequence[str], sync_ids: Sequence[str]) -> int:
        """Step 3 of a committed write: sync the vector index, mark ``uris`` indexed, drop the records.

        Returns:
            How many of ``uris`` stay ``pending`` (0, or all of them when the vector index failed: the row is then
            released to the next recovery, e.g. ``context-engine reindex``).
        """
        try:
            self.sync(account_id, sync_ids)
        except ContextEngineError as err:
            _LOG.warning("vector index sync failed; the write stays pending: %s", err.message)
            # Nothing half-visible: withdraw whatever part of this write reached the index. Should that fail too, the
            # nodes stay pending, and searches skip pending nodes, so a leftover is never served.
            with contextlib.suppress(ContextEngineError):
                self._index.delete(sorted(set(sync_ids)))
            self._release(journal_id)
            return len(uris)
        self.crash_point("index_synced")
        try:
            self._content.discard(str(journal_id))
        except ContextEngineError as err:  # committed and indexed: the next write anywhere finishes it (released)
            self._leave_pending(journal_id, "drop the undo records of", err)
            return len(uris)
        self.crash_point("records_discarded")
        try:
            with self._metadata.transaction():
                self._metadata.set_index_status(account_id, _live(self._metadata, account_id, uris), "indexed")
                self._metadata.journal_delete(journal_id)
        except ContextEngineError as err:  # the write is committed: leave the rest to the next recovery
            self._leave_pending(journal_id, "mark indexed", err)
            return len(uris)
        self._finish_released()
        return 0

    def _leave_pending(self, journal_id: int, step: str, err: ContextEngineError) -> None:
        """A committed write whose ``step`` failed stays pending: logged, and its row released to the next write."""
        _LOG.warning("could not %s write %s; it stays pending: %s", step, journal_id, err.message)
        self._release(journal_id)

    def _release(self, journal_id: int) -> None:
        """Release the journal row to whichever write or recovery comes next (a failure to do so is logged)."""
        try:
            self._metadata.journal_release(journal_id)
        except ContextEngineError:
            _LOG.exception("could not release journal row %s", journal_id)

    def _finish_released(self) -> None:
        """After a write that reached the index: finish the committed writes that were released after an index
        failure or whose writer died (another replica killed after its commit), so they heal with the next write
        anywhere instead of waiting for ``reindex`` or a restart (one read of the small journal table)."""
        for entry in self._metadata.journal_entries():
            if entry.state == "committed" and not self._alive(entry.owner):
                try:
                    self._finish_orphan(entry, RecoveryReport())
                except ContextEngineError as err:
                    _LOG.warning("could not finish released write %s: %s", entry.id, err.message)
                    return

    def sync(self, account_id: str, ids: Sequence[str]) -> int:
        """Make the vector index hold exactly the metadata rows of ``ids``: upsert the ones present, delete the rest.

        Serialised across processes (the metadata store's index sync lock) and reading the rows after taking the
        lock, so two writers of one node (a shared directory) can never leave an older row in the index. Returns the
        number of ids synced.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the vector index fails.
        """
        unique = sorted(set(ids))
        if not unique:
            return 0
        with self._metadata.index_sync_lock(account_id):
            for start in range(0, len(unique), _SYNC_BATCH):
                chunk = unique[start : start + _SYNC_BATCH]
                rows = self._metadata.get_vector_rows(account_id, chunk)
                gone = [i for i in chunk if i not in rows]
                if gone:
                    self._index.delete(gone)
                    self.crash_point("index_deleted")
                if rows:
                    self._index.upsert(list(rows.values()))
        return len(unique)

    def crash_point(self, name: str) -> None:
        """Testing only: SIGKILL this process at ``name`` when ``ingest.crash_at`` says so (class docstring)."""
        if self._crash_point != name:
            return
        self._crash_left -= 1
        if self._crash_left <= 0:
            os.kill(os.getpid(), signal.SIGKILL)

    # ------------------------------------------------------------------------------------------------ recovery
    def recover_prepared(self) -> list[int]:
        """Inside a write transaction holding the write lock: roll back the content changes of ``prepared`` rows whose
        writer died, and drop those rows (they commit with the caller's transaction). Returns their ids.

        A ``prepared`` row of a live writer has touched nothing yet (content changes happen only under the write
        lock, which the caller holds), so it is left alone.
        """
        done: list[int] = []
        for entry in self._metadata.journal_entries():
            if entry.state == "prepared" and not self._alive(entry.owner):
                self._content.rollback(str(entry.id))
                self._metadata.journal_delete(entry.id)
                done.append(entry.id)
        return done

    def recover(self, *, repair: bool = True) -> RecoveryReport:
        """Find (and with ``repair``, repair) every leftover of a crashed write: O(journal rows + undo folders).

        ``prepared`` rows of dead writers are rolled back (under the write lock); ``committed`` rows of dead writers
        (or released ones) are finished; undo folders without a row are removed. Rows of live writers are reported
        as ``in_flight`` and left alone.

        Raises:
            ContextEngineError: ``WRT-5001`` when a store fails (what was repaired before stays repaired).
        """
        report = RecoveryReport(repaired=repair)
        folders = set(self._content.journal_ids())  # listed before the rows: a folder is created after its row
        entries = self._metadata.journal_entries()
        known = {str(e.id) for e in entries}
        report.orphan_records = sorted(folders - known)
        for entry in entries:
            if self._alive(entry.owner):
                report.in_flight.append(entry.id)
            elif entry.state == "prepared":
                report.rolled_back.append(entry.id)
            else:
                report.finished.append(entry.id)
        if not repair:
            return report
        for name in report.orphan_records:
            self._content.discard(name)
        if report.rolled_back:
            with self._metadata.transaction():
                self._metadata.lock_writes()
                report.rolled_back = self.recover_prepared()
        for entry in entries:
            if entry.id in report.finished:
                self._finish_orphan(entry, report)
        return report

    def _finish_orphan(self, entry: JournalEntry, report: RecoveryReport) -> None:
        report.vectors_synced += self.sync(entry.account_id, entry.sync_ids)
        self._content.discard(str(entry.id))
        with self._metadata.transaction():
            live = _live(self._metadata, entry.account_id, entry.uris)
            self._metadata.set_index_status(entry.account_id, live, "indexed")
            self._metadata.journal_delete(entry.id)
        report.nodes_indexed += len(live)

    # ------------------------------------------------------------------------------------------------ liveness
    def _alive(self, owner: str | None) -> bool:
        """Whether the writer with liveness token ``owner`` still runs (``None``: released, nobody's)."""
        if owner is None:
            return False
        if owner == self.token:
            return self._holding
        return self._metadata.writer_alive(owner)

    def close(self) -> None:
        """Release the liveness lock (the process's rows, if any, become recoverable). Idempotent."""
        if self._holding:
            self._holding = False
            self._metadata.release_writer_lock(self.token)


def _live(metadata: MetadataStore, account_id: str, uris: Sequence[str]) -> list[str]:
    """The ``uris`` that still exist and are ``pending`` (a later delete may have removed some)."""
    if not uris:
        return []
    return [u for u, n in metadata.get_nodes(account_id, uris).items() if n.index_status == "pending"]
