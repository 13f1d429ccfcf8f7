"""The memory event history (issue 29): every ADD, UPDATE and DELETE of a memory, recorded with the write.

:class:`MemoryEventRecorder` is a :class:`~context_engine.ingest.pipeline.WriteListener` of the write pipeline, so it
sees every write and delete of a memory file whatever the call (``add_memory``, ``add_memories``, ``add_messages``,
``update_memory``, ``delete_memory``, ``delete`` of a folder above it, ``move``) and writes its rows inside the
write's metadata transaction: a failed or cancelled write leaves no event, a committed one always has its events.

* A memory written with no earlier event, or whose last event is a ``DELETE``, is an ``ADD`` (``version_after``, the
  new abstract); a memory at version ``n > 1`` that just got its version ``n - 1`` kept (an ``update_memory`` of a
  memory written before the history existed) is an ``UPDATE`` whose old abstract is unknown.
* A memory written again after an ``ADD`` or ``UPDATE`` is an ``UPDATE``: ``version_before`` and ``abstract_before``
  are those of its last event, ``version_after`` and ``abstract_after`` the new ones.
* A deleted memory is a ``DELETE`` with the version and abstract of its last event (``None`` for a memory last
  written before the history existed). A move is a ``DELETE`` at the old URI and an ``ADD`` at the new one.

The abstracts are the L0 as the pipeline stores it (secrets redacted at write time) and are redacted again on read.
Unchanged writes (the same text) and skipped near-duplicates write nothing, so they make no event.

:class:`MemoryEventReader` answers ``list_memory_events`` under the rules of ``list_memories``: a caller reads its
own user space's events; an admin names the user (``user_space``) or asks for one memory of its account (``uri``);
another account's events are never read (every query is scoped by the caller's account).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.memory_events import MemoryEvent, MemoryEventPage
from context_engine.schema.uri import ContextURI, parse_uri
from context_engine.storage.protocols import MetadataStore, utcnow

if TYPE_CHECKING:
    from context_engine.redaction import Redactor
    from context_engine.schema.context import RequestContext
    from context_engine.schema.nodes import NodeRecord, VectorRecord
    from context_engine.storage.metadata.memory_events import EventRow, SqlMemoryEventStore

__all__ = ["MemoryEventReader", "MemoryEventRecorder"]

PAGE_MAX = 200


def _memory_file(uri: ContextURI) -> bool:
    return uri.context_type == "memory" and not uri.is_dir


class MemoryEventRecorder:
    """Records the memory events of each write, inside its transaction (a write listener; module docstring).

    Args:
        events: the ``memory_events`` table.
        metadata: the node store (the kept versions of a memory written before the history existed).
    """

    def __init__(self, events: SqlMemoryEventStore, metadata: MetadataStore) -> None:
        self._events = events
        self._metadata = metadata

    def nodes_written(self, account_id: str, nodes: Sequence[NodeRecord], vectors: Sequence[VectorRecord]) -> None:
        memories = [n for n in nodes if not n.is_dir and n.context_type == "memory"]
        if not memories:
            return
        abstracts = {v.uri: v.text for v in vectors if v.level == 0}
        keys = {n.uri: ContextURI.parse(n.uri).key for n in memories}
        latest = self._events.latest(account_id, list(keys.values()))
        rows: list[dict[str, Any]] = []
        for n in memories:
            prior = latest.get(keys[n.uri])
            before: tuple[int | None, str | None] = (None, None)
            if prior is not None and prior.event != "DELETE":
                kind, before = "UPDATE", (prior.version_after, prior.abstract_after)
            elif prior is None and n.version > 1 and self._version_kept(account_id, n):
                kind, before = "UPDATE", (n.version - 1, None)
            else:
                kind = "ADD"
            rows.append(
                {
                    "owner_space": n.owner_space,
                    "uri": n.uri,
                    "uri_key": keys[n.uri],
                    "event": kind,
                    "category": n.category,
                    "version_before": before[0],
                    "version_after": n.version,
                    "abstract_before": before[1],
                    "abstract_after": abstracts.get(n.uri),
                    "created_at": n.updated_at or utcnow(),
                }
            )
        self._events.record(account_id, rows)

    def _version_kept(self, account_id: str, node: NodeRecord) -> bool:
        """Whether version ``node.version - 1`` of the memory is kept: it was updated, not written anew (a move)."""
        return any(v["version"] == node.version - 1 for v in self._metadata.get_versions(account_id, node.uri))

    def nodes_deleted(self, account_id: str, uris: Sequence[str]) -> None:
        gone = [u for u in map(ContextURI.parse, uris) if _memory_file(u)]
        if not gone:
            return
        latest = self._events.latest(account_id, [u.key for u in gone])
        now = utcnow()
        rows: list[dict[str, Any]] = []
        for u in gone:
            prior = latest.get(u.key)
            last = prior if prior is not None and prior.event != "DELETE" else None
            rows.append(
                {
                    "owner_space": u.owner_space,
                    "uri": str(u),
                    "uri_key": u.key,
                    "event": "DELETE",
                    "category": u.category,
                    "version_before": last.version_after if last else None,
                    "version_after": None,
                    "abstract_before": last.abstract_after if last else None,
                    "abstract_after": None,
                    "created_at": now,
                }
            )
        self._events.record(account_id, rows)


class MemoryEventReader:
    """``list_memory_events`` per caller (module docstring).

    Args:
        events: the ``memory_events`` table.
        redactor: the read-time redactor of stored derived text (the abstracts).
    """

    def __init__(self, events: SqlMemoryEventStore, redactor: Redactor) -> None:
        self._events = events
        self._redactor = redactor

    def page(
        self,
        ctx: RequestContext,
        *,
        user_space: str | None = None,
        uri: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> MemoryEventPage:
        """One page of events, newest first: of one memory (``uri``, deleted or not) or of the caller's user space
        (an admin: the ``user_space`` it names, else ``default``), as ``list_memories`` decides whose they are.

        Raises:
            ContextEngineError: ``WRT-4002`` limit outside 1..200, negative offset or no user space; ``WRT-4001`` a
                malformed URI or user space; ``RET-4031`` another user space named by a non-admin; ``RET-4032`` a URI
                that is no memory file the caller may see (the same whether or not it ever existed).
        """
        if not 1 <= limit <= PAGE_MAX or offset < 0:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, f"limit must be in 1..{PAGE_MAX} and offset >= 0")
        ctx = ctx.for_user(user_space, ErrorCode.URI_INVALID)
        owner: str | None = None
        key: str | None = None
        if uri is not None:
            u = parse_uri(uri)
            if not _memory_file(u) or not ctx.can_see_uri(u):
                # one answer whether or not the memory exists or ever existed (no existence leak)
                raise ContextEngineError(
                    ErrorCode.URI_FORBIDDEN, "the URI is not a memory visible to this caller", {"uri": str(u)}
                )
            key = u.key
        else:
            space = ctx.user_space or ("default" if ctx.is_admin else None)
            if space is None:
                raise ContextEngineError(ErrorCode.REQUEST_INVALID, "the request context has no user_space")
            owner = ContextURI.parse(f"ctx://user/{space}/memories/").owner_space
        rows, total = self._events.page(ctx.account_id, owner_space=owner, uri_key=key, limit=limit, offset=offset)
        items = [self._event(r) for r in rows if ctx.can_see(r.owner_space)]
        nxt = offset + limit if offset + limit < total else None
        return MemoryEventPage(items=items, total=total, offset=offset, limit=limit, next_offset=nxt)

    def _event(self, row: EventRow) -> MemoryEvent:
        return MemoryEvent(
            id=row.seq,
            event=row.event,  # type: ignore[arg-type]  # one of ADD, UPDATE, DELETE (the recorder writes no other)
            uri=row.uri,
            category=row.category,
            created_at=row.created_at,
            version_before=row.version_before,
            version_after=row.version_after,
            abstract_before=self._text(row.abstract_before),
            abstract_after=self._text(row.abstract_after),
        )

    def _text(self, text: str | None) -> str | None:
        return None if text is None else self._redactor.redact(text, library=False).text
