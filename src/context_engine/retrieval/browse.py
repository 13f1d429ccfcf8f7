"""Browsing the context tree: ``ls``, ``tree``, ``stat``, ``read`` of one level, and the memory reads (DESIGN.md §6,
§10; issue 11).

:class:`NodeBrowser` answers the service's browse reads (``list_memories`` and ``get_memory`` too, and the ACL lookup
of a memory that its writes start from) over the metadata and content stores, after the read ACL check of every
read: a node the caller may not see and a missing node give the same ``RET-4032`` (no existence leak). Stored
derived text (titles, L0 abstracts) is returned redacted by the patterns, for nodes written before write-time
redaction (docs/security.md). Split out of ``service.py`` (issue 28), whose methods delegate here.
"""

from __future__ import annotations

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.redaction import Redactor
from context_engine.retrieval.memory_read_service import not_found, read_uri
from context_engine.schema.context import RequestContext
from context_engine.schema.memory import MemoryDetail, MemoryListPage, MemoryVersion, MemoryView
from context_engine.schema.nodes import Level, NodeRecord
from context_engine.schema.uri import ContextURI, parse_uri
from context_engine.schema.views import NodeView
from context_engine.storage.protocols import ContentStore, MetadataStore

__all__ = ["SPACE_SCOPES", "NodeBrowser", "read_uri"]

SPACE_SCOPES = {"ctx://user": "user", "ctx://agent": "agent"}
"""Scopes whose root holds one directory per space; ``ls``/``tree`` of the bare scope list the visible spaces."""


class NodeBrowser:
    """The browse reads over one engine's stores. Holds no state of its own: the service builds one per call from
    its current stores.

    Args:
        metadata: the node rows (visibility, children, space roots).
        content: the level texts (L0 abstracts of the views, the levels ``read`` returns).
        redactor: the read-time redactor of stored derived text.
    """

    def __init__(self, metadata: MetadataStore, content: ContentStore, redactor: Redactor) -> None:
        self._metadata = metadata
        self._content = content
        self._redactor = redactor

    def visible_node(self, uri: ContextURI, ctx: RequestContext) -> NodeRecord:
        """The node at ``uri`` if the caller may see it; the same ``RET-4032`` otherwise (no existence leak)."""
        node = self._metadata.get_node(ctx.account_id, str(uri)) if ctx.can_see_uri(uri) else None
        if node is None:
            raise ContextEngineError(
                ErrorCode.URI_FORBIDDEN, "the URI does not exist or is not visible to this caller", {"uri": str(uri)}
            )
        return node

    def stored_text(self, text: str) -> str:
        """Stored derived text (L0, titles) as returned: redacted again by the patterns, for nodes written before
        write-time redaction (docs/security.md)."""
        return self._redactor.redact(text, library=False).text

    def view(self, node: NodeRecord, ctx: RequestContext) -> NodeView:
        """A node as browse returns it: its row's fields, its title and its L0 abstract (redacted), no children."""
        return NodeView(
            uri=node.uri,
            is_dir=node.is_dir,
            context_type=node.context_type,
            category=node.category,
            owner_space=node.owner_space,
            title=self.stored_text(node.title),
            abstract=self.stored_text(self._content.read_level(ctx.account_id, node.uri, Level.L0) or ""),
            has_overview=node.has_overview,
            has_content=node.has_content,
            index_status=node.index_status,
        )

    def stat(self, uri: str, ctx: RequestContext) -> NodeRecord:
        """See :meth:`ContextEngineService.stat <context_engine.service.ContextEngineService.stat>`."""
        return self.visible_node(read_uri(uri), ctx)

    def _space_roots(self, uri: str, ctx: RequestContext) -> list[NodeRecord] | None:
        """For ``ctx://user/`` or ``ctx://agent/`` (a scope without a space): the space roots the caller sees,
        ordered by URI; ``None`` for any other URI."""
        scope = SPACE_SCOPES.get(uri.strip().rstrip("/"))
        if scope is None:
            return None
        return [n for n in self._metadata.list_space_roots(ctx.account_id, scope) if ctx.can_see(n.owner_space)]

    def ls(self, uri: str, ctx: RequestContext) -> list[NodeView]:
        """See :meth:`ContextEngineService.ls <context_engine.service.ContextEngineService.ls>`."""
        roots = self._space_roots(uri, ctx)
        if roots is not None:
            return [self.view(n, ctx) for n in roots]
        parsed = read_uri(uri)
        u = parsed.as_dir() if not parsed.segments else parsed
        if not u.segments and ctx.can_see_uri(u) and self._metadata.get_node(ctx.account_id, str(u)) is None:
            return []
        node = self.visible_node(u, ctx)
        if not node.is_dir:
            return [self.view(node, ctx)]
        return [
            self.view(c, ctx)
            for c in self._metadata.list_children(ctx.account_id, node.uri)
            if ctx.can_see(c.owner_space)
        ]

    def tree(self, uri: str, ctx: RequestContext, *, max_depth: int) -> NodeView | None:
        """See :meth:`ContextEngineService.tree <context_engine.service.ContextEngineService.tree>`."""
        roots = self._space_roots(uri, ctx)
        if roots is not None:
            return self._scope_tree(uri, roots, ctx, max_depth) if roots else None
        u = read_uri(uri)
        if not u.segments and ctx.can_see_uri(u) and self._metadata.get_node(ctx.account_id, str(u.as_dir())) is None:
            return None
        root = self.visible_node(u, ctx)

        def build(node: NodeRecord, depth: int) -> NodeView:
            view = self.view(node, ctx)
            if node.is_dir and depth < max_depth:
                view.children = [build(c, depth + 1) for c in self._metadata.list_children(ctx.account_id, node.uri)]
            return view

        return build(root, 0)

    def _scope_tree(self, uri: str, roots: list[NodeRecord], ctx: RequestContext, max_depth: int) -> NodeView:
        scope = SPACE_SCOPES[uri.strip().rstrip("/")]

        def build(node: NodeRecord, depth: int) -> NodeView:
            view = self.view(node, ctx)
            if node.is_dir and depth < max_depth:
                view.children = [build(c, depth + 1) for c in self._metadata.list_children(ctx.account_id, node.uri)]
            return view

        return NodeView(
            uri=f"ctx://{scope}/",
            is_dir=True,
            context_type=None,
            category=None,
            owner_space=scope,
            title=scope,
            abstract="",
            has_overview=False,
            has_content=False,
            index_status="indexed",
            children=[build(r, 1) for r in roots] if max_depth > 0 else None,
        )

    def read(self, uri: str, level: Level | str, ctx: RequestContext) -> str:
        """See :meth:`ContextEngineService.read <context_engine.service.ContextEngineService.read>`."""
        lv = Level(level)
        node = self.visible_node(read_uri(uri), ctx)
        if lv is Level.L2 and node.is_dir:
            raise ContextEngineError(
                ErrorCode.LEVEL_NOT_AVAILABLE,
                f"{node.uri} is a directory: it has L0 and L1 only; read a file below it for L2",
            )
        text = self._content.read_level(ctx.account_id, node.uri, lv)
        if text is None:
            raise ContextEngineError(ErrorCode.LEVEL_NOT_AVAILABLE, f"{node.uri} has no {lv.value}")
        return text

    # ---- memories (issue 11) -----------------------------------------------------------------------------------
    def memory_node(self, uri: str, ctx: RequestContext, *, write: bool) -> NodeRecord:
        """The memory file at ``uri`` if the caller may see (and, with ``write``, change) it.

        Raises:
            ContextEngineError: ``RET-4041`` (404) when the caller may see and change the space but no memory is
                there (its own memory, deleted: issue 29; decided after a check that reads the context alone, so it
                tells nothing of other spaces); else ``RET-4032`` (403), one body whether the URI is invisible, not
                writable or not a memory file (no existence leak).
        """
        u = parse_uri(uri)
        node = None
        allowed = u.context_type == "memory" and ctx.can_see_uri(u) and (not write or ctx.can_write_uri(u))
        if allowed:
            node = self._metadata.get_node(ctx.account_id, str(u))
            if node is None:
                raise not_found(str(u))
        if node is None or node.is_dir or node.context_type != "memory":
            raise ContextEngineError(
                ErrorCode.URI_FORBIDDEN, "the URI does not exist or is not visible to this caller", {"uri": str(u)}
            )
        return node

    def memory_view(self, node: NodeRecord, ctx: RequestContext) -> MemoryView:
        """A memory as listed: its row's fields and its L0 abstract, redacted, and its metadata with every string in
        it redacted by the patterns (the caller's metadata is stored as given: a connection string or a key put in a
        message's ``speaker`` or any field came back verbatim from the Python API and the CLI)."""
        md = node.metadata or {}
        conversation_id = md.get("session_id")  # the stored key keeps its first name (schema/renames.py)
        return MemoryView(
            uri=node.uri,
            category=node.category,
            abstract=self.stored_text(self._content.read_level(ctx.account_id, node.uri, Level.L0) or ""),
            created_at=node.created_at,
            updated_at=node.updated_at,
            occurred_at=node.occurred_at,
            metadata=self._redactor.redact_value(md) if md else md,
            version=node.version,
            conversation_id=conversation_id if isinstance(conversation_id, str) else None,
        )

    def list_memories(
        self,
        ctx: RequestContext,
        *,
        category: str | None,
        conversation_id: str | None,
        limit: int,
        offset: int,
        user_space: str | None,
    ) -> MemoryListPage:
        """See :meth:`ContextEngineService.list_memories <context_engine.service.ContextEngineService>`."""
        if not 1 <= limit <= 200 or offset < 0:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "limit must be in 1..200 and offset >= 0")
        ctx = ctx.for_user(user_space, ErrorCode.URI_INVALID)
        space = ctx.user_space or ("default" if ctx.is_admin else None)
        if space is None:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "the request context has no user_space")
        root = ContextURI.parse(f"ctx://user/{space}/memories/")
        if conversation_id is not None:  # its messages: .../memories/sessions/<conversation_id>/
            root = root.child("sessions", is_dir=True).child(conversation_id, is_dir=True)
        elif category is not None:
            root = root.child(category, is_dir=True)
        page, total = self._metadata.query_files(
            ctx.account_id,
            uri_prefixes=[str(root)],
            context_type="memory",
            newest_first=True,
            limit=limit,
            offset=offset,
        )
        items = [self.memory_view(n, ctx) for n in page if ctx.can_see(n.owner_space)]
        nxt = offset + limit if offset + limit < total else None
        return MemoryListPage(items=items, total=total, offset=offset, limit=limit, next_offset=nxt)

    def get_memory(self, uri: str, ctx: RequestContext) -> MemoryDetail:
        """See :meth:`ContextEngineService.get_memory <context_engine.service.ContextEngineService>`."""
        node = self.memory_node(uri, ctx, write=False)
        view = self.memory_view(node, ctx)
        text = self._content.read_level(ctx.account_id, node.uri, Level.L2) or ""
        history = [
            MemoryVersion(
                version=v["version"],
                text=self._redactor.redact(v["text"]).text,
                created_at=v["created_at"],
                replaced_at=v["replaced_at"],
            )
            for v in self._metadata.get_versions(ctx.account_id, node.uri)
        ]
        return MemoryDetail(**view.model_dump(), text=self._redactor.redact(text).text, history=history)
