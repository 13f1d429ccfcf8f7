"""The memory methods of ``ContextEngineService`` (DESIGN §4; issue 11): ``add_memory``, ``add_memories``,
``add_messages``, ``update_memory``, ``delete_memory``, ``list_memories``, ``get_memory``, ``list_memory_events``.

A mixin of the facade in ``service.py`` (kept apart so that no module of the service layer passes 800 lines, issue
28): each method checks the request once (the caller, a read-only home, the memory space) and delegates to the
memory writer, the write path, browse or the memory event history the service wired.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.requests import memory_doc
from context_engine.schema.context import RequestContext
from context_engine.schema.memory import (
    AddMemoryResult,
    DedupPolicy,
    MemoryDetail,
    MemoryItem,
    MemoryListPage,
    MemoryOutcome,
    MemoryWriteResult,
    Message,
)
from context_engine.schema.memory_events import MemoryEventPage
from context_engine.schema.nodes import IngestReport, NodeRecord
from context_engine.schema.renames import renamed_argument
from context_engine.schema.uri import ContextURI, parse_uri

if TYPE_CHECKING:
    from context_engine.ingest.memory import MemoryWriter
    from context_engine.ingest.memory_events import MemoryEventReader
    from context_engine.ingest.pipeline import WritePipeline
    from context_engine.retrieval.browse import NodeBrowser
    from context_engine.settings import Settings
    from context_engine.storage.protocols import MetadataStore

__all__ = ["MemoryMethods"]


class MemoryMethods:
    """The memory surface of :class:`~context_engine.service.ContextEngineService` (module docstring); the service
    provides the stores and the request checks declared below."""

    if TYPE_CHECKING:
        settings: Settings
        metadata: MetadataStore
        pipeline: WritePipeline
        memory_writer: MemoryWriter
        memory_events: MemoryEventReader

        def _caller(self, ctx: RequestContext | None) -> RequestContext: ...

        def _require_writable(self) -> None: ...

        def _writable(self, uri: str | ContextURI, ctx: RequestContext) -> ContextURI: ...

        def _browser(self) -> NodeBrowser: ...

    def _memory_space(self, ctx: RequestContext) -> str:
        """The user space a memory write of ``ctx`` goes to (an admin without one writes to ``default``)."""
        space = ctx.user_space or ("default" if ctx.is_admin else None)
        if space is None:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "the request context has no user_space")
        root = ContextURI.parse(f"ctx://user/{space}/memories/")
        if not ctx.can_write_uri(root):
            raise ContextEngineError(ErrorCode.URI_FORBIDDEN, "not allowed to write there", {"uri": str(root)})
        return space

    def add_memory(
        self,
        text: str,
        ctx: RequestContext | None = None,
        *,
        uri: str | None = None,
        category: str | None = None,
        metadata: dict[str, Any] | None = None,
        occurred_at: datetime | str | int | float | None = None,
        policy: DedupPolicy | None = None,
    ) -> AddMemoryResult:
        """Store one memory under ``ctx://user/<user_space>/memories/<category>/`` (DESIGN §4; issue 11).

        Without ``uri`` the name is a slug of the text plus a short hash, and the write goes through
        :meth:`add_memories` (same normalised text -> the same node, ``unchanged``; a near-duplicate follows
        ``policy``, default ``memory.dedup_policy``: ``report.duplicates`` is 1 and ``report.uris`` names the existing
        memory). With ``uri`` the memory is written there as given; over a memory stored there it is that memory's
        update (:meth:`update_memory`: version + 1, the previous text kept, metadata and ``occurred_at`` kept unless
        given, a message's own keys kept), outcome ``replaced``. The L0 is the whole text up to
        ``memory.l0_max_chars`` (ingest/memory_abstract.py). The answer has the write's counts and, as
        :meth:`add_memories`, ``items``: the memory's outcome (``added``, ``unchanged``, ``duplicate``, ``replaced``).

        Raises:
            ContextEngineError: ``WRT-4002`` no user space in the context or bad metadata/timestamp; ``WRT-4001``
                bad URI or category; ``WRT-4221`` empty text; ``WRT-4131`` too large.
        """
        ctx = self._caller(ctx)
        if uri is None:
            result = self.add_memories(
                [MemoryItem(text=text, category=category, metadata=metadata, occurred_at=occurred_at)],
                ctx,
                policy=policy,
            )
            report = AddMemoryResult(
                nodes=result.nodes,
                directories=result.directories,
                vectors=result.vectors,
                unchanged=result.unchanged,
                pending=result.pending,
                uris=result.uris,
                items=result.items,
            )
            report.duplicates = result.duplicates
            return report
        target = parse_uri(uri)
        if target.context_type != "memory":
            raise ContextEngineError(ErrorCode.URI_INVALID, f"{target} is not under .../memories/")
        self._writable(target, ctx)
        existing = self.metadata.get_node(ctx.account_id, target)
        if existing is not None and not existing.is_dir and existing.context_type == "memory":
            # over a stored memory: its update (a new version, the previous text kept, a message's keys kept)
            updated = self.memory_writer.update_memory(
                ctx.account_id, existing, text, metadata=metadata, occurred_at=occurred_at
            )
            items = [o.model_copy(update={"status": "replaced"}) if o.status == "updated" else o for o in updated.items]
            counts = updated.model_dump(exclude={"items"})
            return AddMemoryResult(**counts, uris=[o.uri for o in items], items=items)
        doc = memory_doc(
            target, text, self.settings.ingest, self.settings.memory, metadata=metadata, occurred_at=occurred_at
        )
        written = self.pipeline.write_documents(ctx.account_id, [doc])
        outcome = MemoryOutcome(
            uri=str(target), status="unchanged" if written.unchanged and not written.nodes else "added"
        )
        return AddMemoryResult(**written.model_dump(), items=[outcome])

    def add_memories(
        self,
        items: list[MemoryItem | dict[str, Any]],
        ctx: RequestContext | None = None,
        *,
        policy: DedupPolicy | None = None,
    ) -> MemoryWriteResult:
        """Store a batch of memories (``text``, ``category``, ``metadata``, ``occurred_at``) in one write (issue 11).

        All or nothing: every item is validated first; one embedding pass, one transaction, one directory-summary
        refresh. Dedup and ``policy`` as in :meth:`add_memory`; outcomes in input order.

        Raises:
            ContextEngineError: ``WRT-4002`` empty batch, unknown field, bad metadata/timestamp/policy or no user
                space; ``WRT-4131`` batch over ``memory.max_batch_items``, metadata or text too large; ``WRT-4001``
                bad category; ``WRT-4221`` empty or invalid text. Nothing is written then.
        """
        ctx = self._caller(ctx)
        self._require_writable()
        return self.memory_writer.add_memories(ctx.account_id, self._memory_space(ctx), items, policy=policy)

    def add_messages(
        self,
        messages: list[Message | dict[str, Any]],
        conversation_id: str | None = None,
        ctx: RequestContext | None = None,
        *,
        session_id: str | None = None,
    ) -> MemoryWriteResult:
        """Store conversation messages ``{role, content, speaker?, timestamp?, metadata?}`` of one conversation as
        memories under ``ctx://user/<user_space>/memories/sessions/<conversation_id>/`` (issue 11; ingest/memory.py;
        the URI segment ``sessions`` keeps its name).

        One batch is one write (all or nothing); appending to a conversation continues its numbering, and its
        directory gets an extractive L0/L1. ``result.uris`` are the message URIs in input order. ``session_id`` is the
        deprecated name of ``conversation_id`` (issue 29): it warns (``DeprecationWarning``) and is used as
        ``conversation_id``.

        Raises:
            ContextEngineError: ``WRT-4001`` conversation id with ``/``, ``..`` or other invalid segment; ``WRT-4002``
                no conversation id, or ``conversation_id`` and ``session_id`` that differ, empty batch, unknown role
                or field, unparsable timestamp, metadata not a JSON object; ``WRT-4131`` batch over
                ``memory.max_batch_items``, metadata over ``memory.max_metadata_bytes``; ``WRT-4221`` a message
                without content. Nothing of the batch is written then.
        """
        ctx = self._caller(ctx)
        conversation_id = renamed_argument("add_messages", "conversation_id", conversation_id, "session_id", session_id)
        if conversation_id is None:
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID, "add_messages needs a conversation_id", {"field": "conversation_id"}
            )
        self._require_writable()
        return self.memory_writer.add_messages(ctx.account_id, self._memory_space(ctx), messages, conversation_id)

    def _memory_node(self, uri: str, ctx: RequestContext, *, write: bool) -> NodeRecord:
        return self._browser().memory_node(uri, ctx, write=write)

    def update_memory(
        self,
        uri: str,
        text: str,
        ctx: RequestContext | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        occurred_at: datetime | str | int | float | None = None,
    ) -> MemoryWriteResult:
        """Replace a memory's text: re-embedded, ``version`` + 1, the previous text kept (:meth:`get_memory`).

        Raises:
            ContextEngineError: ``RET-4032`` (403) for a URI the caller cannot see or change, the same as a missing
                one; ``WRT-4221`` empty text; ``WRT-4002``/``WRT-4131`` bad metadata or timestamp.
        """
        ctx = self._caller(ctx)
        self._require_writable()
        node = self._memory_node(uri, ctx, write=True)
        return self.memory_writer.update_memory(ctx.account_id, node, text, metadata=metadata, occurred_at=occurred_at)

    def delete_memory(self, uri: str, ctx: RequestContext | None = None) -> IngestReport:
        """Delete one memory (and its versions).

        Raises:
            ContextEngineError: ``RET-4032`` (403) for a URI the caller cannot see or change, or a missing one.
        """
        ctx = self._caller(ctx)
        self._require_writable()
        node = self._memory_node(uri, ctx, write=True)
        return self.pipeline.delete(ctx.account_id, parse_uri(node.uri), recursive=False)

    def list_memories(
        self,
        ctx: RequestContext | None = None,
        *,
        category: str | None = None,
        conversation_id: str | None = None,
        limit: int = 20,
        offset: int = 0,
        user_space: str | None = None,
        session_id: str | None = None,
    ) -> MemoryListPage:
        """The caller's memories, newest first (``updated_at`` descending, then URI), paged by ``limit``/``offset``,
        optionally one category's or one conversation's (``conversation_id`` wins over ``category``). Reads L0 only
        (one file per listed memory). ``user_space`` (issue 29): an admin lists that user's memories
        (:meth:`RequestContext.for_user`); others may only name their own. ``session_id`` is the deprecated name of
        ``conversation_id`` (issue 29): it warns (``DeprecationWarning``) and is used as ``conversation_id``.

        Raises:
            ContextEngineError: ``WRT-4002`` limit outside 1..200 or negative offset, no user space, or
                ``conversation_id`` and ``session_id`` that differ; ``WRT-4001`` a malformed category, conversation
                id or user space; ``RET-4031`` another user space named by a non-admin.
        """
        ctx = self._caller(ctx)
        conversation_id = renamed_argument(
            "list_memories", "conversation_id", conversation_id, "session_id", session_id
        )
        return self._browser().list_memories(
            ctx, category=category, conversation_id=conversation_id, limit=limit, offset=offset, user_space=user_space
        )

    def get_memory(self, uri: str, ctx: RequestContext | None = None) -> MemoryDetail:
        """One memory with its full text (secrets redacted as read_memory redacts) and its earlier versions.

        Raises:
            ContextEngineError: ``RET-4032`` (403) for a URI the caller cannot see, the same as a missing one.
        """
        ctx = self._caller(ctx)
        return self._browser().get_memory(uri, ctx)

    def list_memory_events(
        self,
        ctx: RequestContext | None = None,
        *,
        user_space: str | None = None,
        uri: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> MemoryEventPage:
        """A user's memory events (ADD, UPDATE, DELETE), newest first, paged; ``uri``: one memory's, deleted or not.
        Tenancy as :meth:`list_memories`; abstracts redacted. Rules and codes: ingest/memory_events.py."""
        ctx = self._caller(ctx)
        return self.memory_events.page(ctx, user_space=user_space, uri=uri, limit=limit, offset=offset)
