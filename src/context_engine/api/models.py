"""Request and response models of the transport-neutral API (``XRequest`` in, ``XResponse`` out): the HTTP routes,
the MCP tools, the CLI and the client share them.

The retrieval and knowledge endpoints use the engine's own models (``SearchMemoryRequest``, ``LookupRequest``,
``LookupResult``...) unchanged, so every interface returns the same shapes. Range checks that have an error code of
their own (``top_k`` -> ``RET-4002``...) are left to the engine, so callers get the documented code, not a generic
validation error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from context_engine.schema.compact import BrowseLevel
from context_engine.schema.knowledge import SemanticMode, SessionTraceSummary, ToolInvocation
from context_engine.schema.memory import DedupPolicy, message_fields
from context_engine.schema.query import ContextTypeName
from context_engine.schema.renames import CONVERSATION, RenamedFields
from context_engine.schema.views import NodeView


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


_DEPRECATED_CONVERSATION = "use conversation_id (the same value)"
_LIST_MEMORY_FILTERS = ("category", "conversation_id", "session_id", "user_space")


def blank_as_absent(data: Any, fields: tuple[str, ...]) -> Any:
    """``data`` (a request's raw fields) with each of ``fields`` that is an empty string removed, so that an empty
    optional filter (``?user_space=``) means what leaving it out means. Anything but a dict is returned unchanged."""
    if not isinstance(data, dict) or not any(data.get(f) == "" for f in fields):
        return data
    return {k: v for k, v in data.items() if not (k in fields and v == "")}


# ---- raw semantic search (live evaluation) --------------------------------------------------------------------------
class SimilarSearchRequest(_Request):
    """``POST /api/search/similar`` (seed 001 §9 live acceptance): raw semantic search, one result per document.

    ``top_k`` 1..1000 (``RET-4002``); ``level`` 2 searches L2 chunks (lookup_knowledge's corpus), 0 the nodes'
    abstracts (search_memory's first round).
    """

    query: str = Field(description="The query text.")
    top_k: int = Field(10, description="Documents wanted, 1..1000.")
    level: Literal[0, 2] = Field(2, description="2: L2 chunks (best chunk per document); 0: L0 abstracts.")
    mode: SemanticMode | None = Field(None, description="auto (index, exact on error), primary or fallback (exact).")
    context_types: list[ContextTypeName] | None = Field(
        None, description="Restrict to these context types (level 2 default: knowledge.context_types)."
    )
    categories: list[str] | None = Field(None, description="Restrict to these categories.")
    target_uri: str | None = Field(None, description="Restrict to this visible subtree.")


# ---- writes ---------------------------------------------------------------------------------------------------------
class AddResourcePathRequest(_Request):
    """Add a server-side file or directory. ``path`` must lie below one of ``http.allowed_upload_roots`` (a relative
    path is taken relative to the first root); symlinks leading outside the roots are refused."""

    path: str = Field(description="Server-side path of a file or a directory of .md/.markdown/.txt files.")
    target_uri: str = Field("ctx://resources/", description="Target under ctx://resources/ (a directory ends with /).")
    strict: bool = Field(False, description="Fail on the first bad file instead of skipping it.")


class AddResourceTextRequest(_Request):
    """Add one resource document given as text at a file URI under ``ctx://resources/``."""

    text: str = Field(description="The document (markdown or plain text).")
    uri: str = Field(description="File URI under ctx://resources/, e.g. ctx://resources/ops/disk-full.md.")


Timestamp = str | int | float
"""A point in time as JSON gives it: ISO 8601 text (``2023-05-08T13:56:00Z``, a date, or with an offset) or Unix
seconds; parsed by the engine (``schema.memory.parse_timestamp``), ``WRT-4002`` when it does not parse."""


class AddMemoryRequest(_Request):
    """Store a memory in the caller's user space (``ctx://user/<space>/memories/<category>/``).

    Without ``uri`` the same normalised text maps to the same memory (``unchanged``) and a near-duplicate follows
    ``policy`` (default ``memory.dedup_policy``, ``skip``: nothing written, ``duplicates`` 1, ``uris`` names the
    existing memory).
    """

    text: str = Field(description="The memory text.")
    uri: str | None = Field(None, description="Explicit URI under ctx://user/<space>/memories/.")
    category: str | None = Field(None, description="Category, e.g. preference, profile, event.")
    metadata: dict[str, Any] | None = Field(
        None, description="A JSON object kept with the memory (at most memory.max_metadata_bytes, WRT-4131)."
    )
    occurred_at: Timestamp | None = Field(None, description="When it happened: ISO 8601 or Unix seconds.")
    policy: DedupPolicy | None = Field(None, description="Near-duplicate policy: skip, keep or replace.")


class MessageIn(_Request):
    """One conversation message."""

    # The docstring is the schema's description, which MCP clients read on every call: the rules are kept here.
    # A missing or blank content is WRT-4221 (like an empty document), so it defaults to "" and the engine refuses
    # it; an unknown role or a timestamp that does not parse is WRT-4002 (with the message's index).
    # OpenAI and LangChain messages are accepted as they are (schema/memory.py, message_fields): ``name`` is the
    # speaker, ``type`` the role (LangChain), human/ai/developer/function map to our roles, content parts are joined.
    role: str = Field("user", description="user, assistant, system or tool (also human, ai, developer, function).")
    content: str | list[str | dict[str, Any]] = Field(
        "", description="The message text (required, non-blank), or OpenAI content parts (their text is joined)."
    )
    speaker: str | None = Field(None, description="Who said it (a name); default: the role.")
    name: str | None = Field(None, description="OpenAI's speaker name: the speaker when speaker is not given.")
    type: str | None = Field(None, description="LangChain's message type (human, ai, system, tool): the role.")
    timestamp: Timestamp | None = Field(None, description="When it was said: ISO 8601 or Unix seconds.")
    metadata: dict[str, Any] | None = Field(None, description="A JSON object kept with the message.")
    # listed for the schema's readers (OpenAPI, MCP): message_fields has already taken them into content/metadata
    tool_calls: list[dict[str, Any]] | None = Field(None, description="OpenAI tool calls: added to the text.")
    tool_call_id: str | None = Field(None, description="OpenAI: kept in metadata.")

    @model_validator(mode="before")
    @classmethod
    def _formats(cls, raw: Any) -> Any:
        # one mapping for every entry point: name -> speaker, type -> role, LangChain's {"type", "data"} flattened
        return message_fields(raw)


class AddMessagesRequest(_Request, RenamedFields):
    """Store the messages of one conversation as memories under
    ``ctx://user/<space>/memories/sessions/<conversation_id>/<seq>.md`` (numbering continues the conversation; the
    URI segment ``sessions`` keeps its name).

    One request is one write, all or nothing: at most ``memory.max_batch_items`` messages (``WRT-4131``); a
    conversation id with ``/`` or ``..`` is ``WRT-4001``; a bad message fails the whole batch with its index in
    ``details``. ``session_id`` is the deprecated name of ``conversation_id`` (issue 29), still accepted.
    """

    renamed = CONVERSATION

    messages: list[MessageIn] = Field(description="The messages, in conversation order.")
    conversation_id: str = Field(description="The conversation: one URI segment (no '/', not '..').")
    session_id: str | None = Field(
        None, deprecated=_DEPRECATED_CONVERSATION, exclude=True, description="Deprecated: the same as conversation_id."
    )


class MemoryItemIn(_Request):
    """One memory of a batch (the fields of ``add_memory`` without ``uri``)."""

    text: str = Field(description="The memory text.")
    category: str | None = Field(None, description="Category (default general).")
    metadata: dict[str, Any] | None = Field(None, description="A JSON object kept with the memory.")
    occurred_at: Timestamp | None = Field(None, description="When it happened: ISO 8601 or Unix seconds.")


class AddMemoriesRequest(_Request):
    """Store a batch of memories in one write, all or nothing (at most ``memory.max_batch_items``, ``WRT-4131``).
    Dedup and ``policy`` as in ``add_memory``; one outcome per item, in input order."""

    items: list[MemoryItemIn] = Field(description="The memories.")
    policy: DedupPolicy | None = Field(None, description="Near-duplicate policy: skip, keep or replace.")


class UpdateMemoryRequest(_Request):
    """Replace a memory's text: re-embedded, ``version`` + 1, the previous text kept in its ``history``. A URI the
    caller cannot see or change gets the same ``403 RET-4032`` as a missing one."""

    uri: str = Field(description="The memory's URI.")
    text: str = Field(description="The new text.")
    metadata: dict[str, Any] | None = Field(None, description="New metadata object (default: kept).")
    occurred_at: Timestamp | None = Field(None, description="New occurred_at (default: kept).")


class ListMemoriesRequest(_Request, RenamedFields):
    """One page of the caller's memories, newest first (``updated_at`` descending, then URI); at most one of
    ``category`` and ``conversation_id`` narrows it (``conversation_id`` wins). ``session_id`` is the deprecated name
    of ``conversation_id`` (issue 29), still accepted."""

    renamed = CONVERSATION

    category: str | None = Field(None, max_length=255, description="Only this category.")
    conversation_id: str | None = Field(None, max_length=255, description="Only this conversation's messages.")
    limit: int = Field(20, ge=1, le=200, description="Page size, 1..200.")
    offset: int = Field(0, ge=0, le=1_000_000_000, description="Memories to skip.")
    user_space: str | None = Field(
        None, max_length=255, description="An admin key: list this user's memories. Others: only their own."
    )
    session_id: str | None = Field(
        None,
        max_length=255,
        deprecated=_DEPRECATED_CONVERSATION,
        exclude=True,
        description="Deprecated: the same as conversation_id.",
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_filters_are_absent(cls, data: Any) -> Any:
        # `?user_space=` (a form's empty field) narrows nothing: the same page as without it, not WRT-4001
        return blank_as_absent(data, _LIST_MEMORY_FILTERS)


class LsRequest(_Request):
    """``ls`` as an MCP tool (compact, paged): a directory's children, or a file URI's node alone, in URI order."""

    uri: str = Field("ctx://resources/", max_length=4096, description="A ctx:// URI.")
    level: BrowseLevel = Field("L0", description="L0: abstracts; L1: overviews (a node without one gives its L0).")
    limit: int = Field(50, ge=1, le=200, description="Page size, 1..200.")
    offset: int = Field(0, ge=0, le=1_000_000_000, description="Children to skip.")


class TreeRequest(_Request):
    """``tree`` as an MCP tool (compact): the subtree at ``uri``, breadth-first, at most ``max_nodes`` nodes."""

    uri: str = Field("ctx://resources/", max_length=4096, description="Root of the tree.")
    max_depth: int = Field(2, ge=0, le=10, description="Levels below the root.")
    max_nodes: int = Field(100, ge=1, le=1000, description="Most nodes in the answer, the root included.")


class MemoryUriRequest(_Request):
    """One memory by URI (``delete_memory``). Missing or not visible: the same ``403 RET-4032``."""

    uri: str = Field(description="The memory's URI.")


class AddSkillRequest(_Request):
    """Store a skill in the caller's agent space (``ctx://agent/<space>/skills/[<category>/]<name>.md``)."""

    name: str = Field(description="Skill name (a URI segment).")
    description: str = Field(description="One-line description; becomes the L0.")
    content: str = Field("", description="The skill body (markdown).")
    category: str | None = Field(None, description="Tool family.")


class DeleteRequest(_Request):
    uri: str = Field(description="Node to delete.")
    recursive: bool = Field(False, description="Delete a directory and its subtree.")


class MoveRequest(_Request):
    src: str = Field(description="Node to move.")
    dst: str = Field(description="New URI, or an existing directory to move into.")


# ---- browsing and audit ---------------------------------------------------------------------------------------------
class LsResponse(BaseModel):
    uri: str
    nodes: list[NodeView]


class TreeResponse(BaseModel):
    uri: str
    root: NodeView | None = Field(description="The subtree, or null when the scope root is still empty.")


class ToolInvocationList(BaseModel):
    """One page of audit rows, newest first. The rows are ``items``, as in every list answer (``MemoryListPage``,
    ``MemoryWriteResult``); ``invocations`` is the same list under its first name, still sent and accepted but
    deprecated (issue 29: one word per concept). Give either one when building it."""

    items: list[ToolInvocation] = Field(default_factory=list, description="The rows, newest first.")
    invocations: list[ToolInvocation] = Field(
        default_factory=list, deprecated="use items (the same rows)", description="Deprecated: the same as items."
    )
    limit: int
    offset: int

    @model_validator(mode="before")
    @classmethod
    def _one_list_two_names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            rows = data.get("items", data.get("invocations"))
            if rows is not None:
                data = {**data, "items": rows, "invocations": rows}
        return data


class VerifyEvidenceRequest(_Request):
    """Check that a quoted excerpt is backed by an evidence ref recorded for a lookup_knowledge invocation."""

    invocation_id: str = Field(description="The invocation_id of a lookup_knowledge result.")
    excerpt: str = Field(description="The quoted text to verify.")


SessionSummaryResponse = SessionTraceSummary


# ---- operations -----------------------------------------------------------------------------------------------------
class HealthResponse(BaseModel):
    status: Literal["ok"] = "ok"


class StatsResponse(BaseModel):
    """``GET /api/v1/stats``: counts of the key's account and the index's state (``ContextEngineService.stats``); the
    node counts (``nodes``, ``files``, ``directories``, ``pending``...) and, when present, ``index_problem`` and
    ``derived_files`` come as further fields. Every count is of the key's account only; ``index_backend``,
    ``index_status``, ``index_problem`` and the model describe the deployment."""

    model_config = ConfigDict(extra="allow")

    account_id: str
    index_backend: str
    index_records: int | None = Field(
        None,
        description="The account's vector records (not the shared index's total); null when the index is damaged or "
        "unavailable, 0 when it is missing (index_status).",
    )
    index_status: str
    embedding_model: str
    embedding_dim: int


class ReadyResponse(BaseModel):
    status: Literal["ready", "degraded"] = Field(
        "ready",
        description="ready; or degraded: requests are served, but something derived is damaged (see problems).",
    )
    problems: list[str] = Field(
        default_factory=list,
        description="What degrades the engine and how to fix it (e.g. a damaged vector index: run "
        "`context-engine reindex --full`); empty when ready.",
    )
    embedding_model: str
    index_backend: str
    auth: str = Field(description="api_key, or how anonymous loopback access is enabled.")
    pid: int = Field(description="Process id of the server process that answered (one of N with serve --workers N).")
