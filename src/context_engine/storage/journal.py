"""The intent journal of the write protocol (docs/security.md, "Crash safety and concurrent writers").

One row per write in flight, in the metadata database (table ``write_journal``):

* ``prepared``: written (and committed) before the write touches anything. The write's metadata transaction has not
  committed, so after a crash whatever the write did to the content store is undone (the content store keeps its
  undo records under the journal id) and the row is dropped.
* ``committed``: set inside the write's metadata transaction, so it commits or rolls back with the write. The write
  is durable; what may be left is to finish it: bring the vector index in line with the metadata rows of
  ``sync_ids``, mark ``uris`` indexed, drop the content store's undo records. Every step reads the current state,
  so finishing twice, or after a later write of the same node, is harmless.

``owner`` names the live process that holds the write (its liveness lock, :mod:`context_engine.ingest.journal`);
``None`` hands a committed row to whoever recovers next (its writer could not finish it: the vector index failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

__all__ = ["JournalEntry", "JournalState"]

JournalState = Literal["prepared", "committed"]


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One row of ``write_journal``.

    Attributes:
        id: the journal id (also the name of the content store's undo records).
        account_id: the account written.
        op: ``write``, ``delete`` or ``move`` (for reports).
        state: ``prepared`` or ``committed`` (module docstring).
        owner: the writer's liveness token, or ``None`` when any process may finish the row.
        created_at: when the intent was written (UTC).
        uris: nodes the write creates or replaces (marked ``indexed`` when it finishes).
        sync_ids: vector ids the write wrote or deleted (the vector index follows the metadata rows of these ids).
    """

    id: int
    account_id: str
    op: str
    state: JournalState
    owner: str | None
    created_at: datetime
    uris: list[str] = field(default_factory=list)
    sync_ids: list[str] = field(default_factory=list)
