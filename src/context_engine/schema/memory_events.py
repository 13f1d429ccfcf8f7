"""The memory event history as returned (issue 29): what happened to a user's memories, newest first.

An event is one change of one memory, recorded in the transaction of the write that made it
(:mod:`context_engine.ingest.memory_events`):

* ``ADD``: a memory was created (``add_memory``, ``add_memories``, ``add_messages``; the new side of a ``move``);
* ``UPDATE``: a memory's text was replaced (``update_memory``, a near-duplicate under the ``replace`` policy,
  ``add_memory`` at the URI of an existing memory): ``version_before`` -> ``version_after`` and both abstracts;
* ``DELETE``: a memory was deleted (``delete_memory``, ``delete`` of it or of a folder above it; the old side of a
  ``move``), with the version and abstract it had (``None`` for a memory last written before the history existed).

Pure data.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MemoryEvent", "MemoryEventKind", "MemoryEventPage"]

MemoryEventKind = Literal["ADD", "UPDATE", "DELETE"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MemoryEvent(_Model):
    """One change of one memory. The abstracts are the memory's L0 (secrets redacted)."""

    id: int = Field(description="The event's number: later events have higher numbers.")
    event: MemoryEventKind = Field(description="ADD, UPDATE or DELETE.")
    uri: str = Field(description="The memory's URI.")
    category: str | None = Field(None, description="The memory's category (its folder under memories/).")
    created_at: datetime = Field(description="When the write that made the change committed (UTC).")
    version_before: int | None = Field(None, description="The version it had (UPDATE, DELETE).")
    version_after: int | None = Field(None, description="The version it got (ADD, UPDATE).")
    abstract_before: str | None = Field(None, description="The L0 it had (UPDATE, DELETE), redacted.")
    abstract_after: str | None = Field(None, description="The L0 it got (ADD, UPDATE), redacted.")


class MemoryEventPage(_Model):
    """One page of ``list_memory_events``: newest first; ``next_offset`` is ``None`` on the last page."""

    items: list[MemoryEvent]
    total: int
    offset: int
    limit: int
    next_offset: int | None = None
