"""The memory event history in the metadata database (issue 29): ``memory_events`` rows, scoped by ``account_id``.

:class:`SqlMemoryEventStore` works through the metadata store's sessions (same pool, same transactions), so an event
written by :class:`~context_engine.ingest.memory_events.MemoryEventRecorder` inside a write's transaction commits or
rolls back with the write. What an event holds and who may read it: :mod:`context_engine.ingest.memory_events`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from context_engine.storage.metadata.engine import SqlDatabase
from context_engine.storage.metadata.tables import IN_BATCH, MEMORY_EVENTS, chunks

__all__ = ["EventRow", "SqlMemoryEventStore"]


@dataclass(frozen=True, slots=True)
class EventRow:
    """One stored event (the columns of ``memory_events`` but ``account_id`` and ``uri_key``)."""

    seq: int
    owner_space: str
    uri: str
    event: str
    category: str | None
    version_before: int | None
    version_after: int | None
    abstract_before: str | None
    abstract_after: str | None
    created_at: datetime


def _row(r: Any) -> EventRow:
    return EventRow(
        seq=r.seq,
        owner_space=r.owner_space,
        uri=r.uri,
        event=r.event,
        category=r.category,
        version_before=r.version_before,
        version_after=r.version_after,
        abstract_before=r.abstract_before,
        abstract_after=r.abstract_after,
        created_at=r.created_at,
    )


class SqlMemoryEventStore:
    """The ``memory_events`` table.

    Args:
        metadata: the open :class:`SqlDatabase` whose sessions and transactions are shared (a call inside
            ``metadata.transaction()`` joins it). Built by
            :func:`context_engine.storage.factory.open_memory_events`.

    Raises:
        ContextEngineError: ``WRT-5001`` (retryable) on a database failure, from every method.
    """

    def __init__(self, metadata: SqlDatabase) -> None:
        self._store = metadata

    @contextmanager
    def _use(self, *, write: bool) -> Iterator[Session]:
        with self._store.session(write=write) as s:
            yield s

    def record(self, account_id: str, events: Sequence[dict[str, Any]]) -> None:
        """Insert ``events`` (each with the columns of ``memory_events`` but ``seq`` and ``account_id``), in order."""
        if not events:
            return
        with self._use(write=True) as s:
            s.execute(insert(MEMORY_EVENTS), [{**e, "account_id": account_id} for e in events])

    def latest(self, account_id: str, uri_keys: Sequence[str]) -> dict[str, EventRow]:
        """The newest event of each of ``uri_keys`` that has one (inside a transaction: its own writes included)."""
        table = MEMORY_EVENTS
        out: dict[str, EventRow] = {}
        with self._use(write=False) as s:
            for chunk in chunks(sorted(set(uri_keys)), IN_BATCH):
                newest = (
                    select(func.max(table.c.seq))
                    .where(table.c.account_id == account_id, table.c.uri_key.in_(chunk))
                    .group_by(table.c.uri_key)
                )
                for r in s.execute(select(table).where(table.c.seq.in_(newest))):
                    out[r.uri_key] = _row(r)
        return out

    def page(
        self,
        account_id: str,
        *,
        owner_space: str | None = None,
        uri_key: str | None = None,
        limit: int,
        offset: int,
    ) -> tuple[list[EventRow], int]:
        """One page of the account's events, newest first (``seq`` descending), of one owner space and/or one memory,
        and how many there are in all."""
        table = MEMORY_EVENTS
        where = [table.c.account_id == account_id]
        if owner_space is not None:
            where.append(table.c.owner_space == owner_space)
        if uri_key is not None:
            where.append(table.c.uri_key == uri_key)
        with self._use(write=False) as s:
            total = int(s.execute(select(func.count()).select_from(table).where(*where)).scalar() or 0)
            stmt = select(table).where(*where).order_by(table.c.seq.desc()).limit(limit).offset(offset)
            rows = [_row(r) for r in s.execute(stmt)]
        return rows, total
