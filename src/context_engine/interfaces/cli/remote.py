"""The CLI as a thin client (issue 29): with ``--url`` (``CE_URL``) the read and write commands are sent to a running
``context-engine serve`` through :class:`context_engine.client.Client` instead of opening a home.

:class:`RemoteEngine` has the methods of :class:`~context_engine.service.ContextEngineService` that those commands
call, with the same arguments and answer models, each one HTTP request: ``search_memory``, ``read_memory``,
``read`` (L0: the ``abstract`` of a read), ``ls``, ``tree``, ``lookup_knowledge``, ``add_memory``,
``add_messages``, ``list_memories``, ``get_memory``, ``update_memory``, ``delete_memory`` and ``stats``. Any other
command (``add`` of a local folder, ``reindex``, ``keys``...) works on a home and answers ``WRT-4002`` naming
itself. The caller is the API key's (``--api-key``, ``CE_API_KEY``): ``--as`` is refused with ``--url``.

Only the client is imported (pydantic, httpx, tenacity, the schema models): no store, no model, no FastAPI, so a
command starts in a fraction of a second. The ``ctx`` arguments are accepted and ignored: the server takes the
caller from the key.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from context_engine.errors import ContextEngineError, ErrorCode

if TYPE_CHECKING:
    from context_engine.client import Client
    from context_engine.schema.memory import AddMemoryResult, MemoryDetail, MemoryListPage, MemoryWriteResult
    from context_engine.schema.query import ReadMemoryRequest, ReadMemoryResponse, SearchMemoryRequest

__all__ = ["REMOTE_COMMANDS", "RemoteEngine"]

#: The commands that run against a server with ``--url``.
REMOTE_COMMANDS = (
    "search",
    "read",
    "ls",
    "tree",
    "lookup",
    "add-memory",
    "add-messages",
    "memories",
    "get-memory",
    "update-memory",
    "delete-memory",
    "stats",
)

# What the commands read from ``engine.settings``: the defaults of the server's settings (the server still applies
# its own: a batch over its memory.max_batch_items is refused with WRT-4131).
_SETTINGS = SimpleNamespace(
    retrieval=SimpleNamespace(compact_abstract_max_chars=110),
    memory=SimpleNamespace(max_batch_items=500),
)


def _set(**fields: Any) -> dict[str, Any]:
    """The keyword arguments that were given (``None`` left out: the server applies its defaults)."""
    return {k: v for k, v in fields.items() if v is not None}


class RemoteEngine:
    """The engine methods the CLI's read and write commands use, over HTTP (module docstring).

    Args:
        client: an open client of the server (closed by :meth:`close`).
    """

    settings = _SETTINGS

    def __init__(self, client: Client) -> None:
        self.client = client

    def close(self) -> None:
        self.client.close()

    def __getattr__(self, name: str) -> Any:  # a command that needs the home itself
        raise ContextEngineError(
            ErrorCode.REQUEST_INVALID,
            f"this command works on a home, not through --url ({name}); run it where the home is, without --url "
            f"(with --url: {', '.join(REMOTE_COMMANDS)})",
            {"option": "--url"},
        )

    # ---- reads ------------------------------------------------------------------------------------------------------
    def search_memory(self, request: SearchMemoryRequest, ctx: Any = None) -> Any:
        fields = {k: getattr(request, k) for k in request.model_fields_set if k not in ("query", "response_format")}
        return self.client.search_memory(request.query, **fields)

    def read_memory(self, request: ReadMemoryRequest, ctx: Any = None) -> ReadMemoryResponse:
        fields = {k: getattr(request, k) for k in request.model_fields_set if k not in ("uri", "level")}
        return self.client.read_memory(request.uri, request.level, **fields)

    def read(self, uri: str, level: Any, ctx: Any = None) -> str:
        """The L0 abstract of ``uri``: the ``abstract`` of an L1 read (L2 when the node has no L1)."""
        try:
            block = self.client.read_memory(uri, "L1").block
        except ContextEngineError as err:
            if err.code is not ErrorCode.LEVEL_NOT_AVAILABLE:
                raise
            block = self.client.read_memory(uri, "L2", max_chars=1).block
        return block.abstract or ""

    def ls(self, uri: str, ctx: Any = None) -> list[Any]:
        return self.client.ls(uri).nodes

    def tree(self, uri: str, ctx: Any = None, *, max_depth: int = 3) -> Any:
        return self.client.tree(uri, max_depth).root

    def lookup_knowledge(self, query: str, ctx: Any = None, **fields: Any) -> Any:
        return self.client.lookup_knowledge(query, **_set(**fields))

    def stats(self, ctx: Any = None) -> dict[str, Any]:
        return {"url": self.client.base_url, **self.client.stats().model_dump()}

    # ---- memories ---------------------------------------------------------------------------------------------------
    def add_memory(self, text: str, ctx: Any = None, **fields: Any) -> AddMemoryResult:
        return self.client.add_memory(text, **_set(**fields))

    def add_messages(self, messages: list[Any], session_id: str, ctx: Any = None) -> MemoryWriteResult:
        return self.client.add_messages(messages, session_id)

    def list_memories(self, ctx: Any = None, **fields: Any) -> MemoryListPage:
        return self.client.list_memories(**_set(**fields))

    def get_memory(self, uri: str, ctx: Any = None) -> MemoryDetail:
        return self.client.get_memory(uri)

    def update_memory(self, uri: str, text: str, ctx: Any = None, **fields: Any) -> MemoryWriteResult:
        return self.client.update_memory(uri, text, **_set(**fields))

    def delete_memory(self, uri: str, ctx: Any = None) -> Any:
        return self.client.delete_memory(uri)
