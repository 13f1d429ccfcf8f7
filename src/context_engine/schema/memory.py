"""Memory models: conversation messages, batch items, the write outcome and listing rows (issue 11; DESIGN §1, §4).

A *memory* is a file node under ``ctx://user/<space>/memories/``. Besides the node fields every memory carries
``created_at`` / ``updated_at`` (engine clock, UTC), an optional ``occurred_at`` (when the remembered thing happened,
given by the caller: a message's timestamp), a small JSON ``metadata`` object and a ``version`` (1 on creation, +1 per
``update_memory``; earlier versions stay readable).

A conversation message becomes one memory under ``.../memories/sessions/<conversation_id>/<seq>.md`` (``seq`` is a
zero-padded, per-conversation counter), with ``role``, ``speaker``, ``timestamp`` and the conversation (the stored key
``session_id``: the storage keeps its first name, schema/renames.py) kept in its metadata. An OpenAI assistant
message's tool calls are rendered into its text and their names kept under ``tool_calls``, a tool result's
``tool_call_id`` under ``tool_call_id`` (:func:`message_fields`).
Pure data: validation of sizes against settings happens in the service.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from context_engine.schema.nodes import IngestReport
from context_engine.schema.renames import CONVERSATION, RenamedFields
from context_engine.schema.text import has_visible_text

__all__ = [
    "AddMemoryResult",
    "DedupPolicy",
    "MemoryDetail",
    "MemoryItem",
    "MemoryListPage",
    "MemoryOutcome",
    "MemoryVersion",
    "MemoryView",
    "MemoryWriteResult",
    "Message",
    "MessageRole",
    "ROLE_ALIASES",
    "message_fields",
    "parse_timestamp",
]

MessageRole = Literal["user", "assistant", "system", "tool"]
DedupPolicy = Literal["skip", "keep", "replace"]
"""What a near-duplicate memory write does: ``skip`` (default: report the existing URI, write nothing), ``keep``
(write it as a new memory anyway), ``replace`` (update the existing memory to the new text, a new version)."""


def parse_timestamp(value: datetime | str | int | float | None) -> datetime | None:
    """A timestamp as an aware UTC ``datetime``: ISO 8601 text (``2023-05-08T13:56:00Z``, a date alone, or with an
    offset), a ``datetime`` (naive means UTC) or Unix seconds. ``None`` stays ``None``.

    Raises:
        ValueError: text that is not ISO 8601, a non-finite number, or another type.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("a timestamp cannot be a boolean")
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError("a timestamp must be a finite number of seconds")
        dt = datetime.fromtimestamp(float(value), UTC)
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            raise ValueError("empty timestamp")
        try:
            dt = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError as err:
            raise ValueError(f"not an ISO 8601 timestamp: {text[:40]!r}") from err
    else:
        raise ValueError(f"a timestamp must be ISO 8601 text or a datetime, got {type(value).__name__}")
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


#: Roles of other message formats and the role each maps to: LangChain's message types (``human``, ``ai``; its
#: ``system`` and ``tool`` are ours) and OpenAI's ``developer`` and legacy ``function``. Matched case-insensitively.
ROLE_ALIASES: dict[str, MessageRole] = {"human": "user", "ai": "assistant", "developer": "system", "function": "tool"}


_TEXT_PARTS = ("text", "input_text", "output_text")  # Chat Completions' and the Responses API's text parts


def _content_text(content: Any) -> Any:
    # OpenAI's content parts ([{"type": "text", "text": ...}, {"type": "image_url", ...}]) and LangChain's list
    # content: the text parts joined by newlines; a part with no text (an image) is left out.
    if not isinstance(content, list):
        return content
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str) and part.get("type", "text") in _TEXT_PARTS:
            texts.append(part["text"])
    return "\n".join(t for t in texts if has_visible_text(t))


#: Fields of an OpenAI Chat Completions response message (``choices[0].message.model_dump()``) that a memory keeps
#: nothing of: citations into the text that is kept, and the audio whose transcript is used when there is no text.
_OPENAI_DROPPED = ("annotations", "audio")
#: The OpenAI fields :func:`message_fields` reads, and the one role that may carry each when not null or empty
#: (elsewhere such a value is left in place, for validation to refuse as an unknown field).
_OPENAI_FIELDS: dict[str, str] = {
    "tool_calls": "assistant",
    "function_call": "assistant",
    "refusal": "assistant",
    "tool_call_id": "tool",
    **dict.fromkeys(_OPENAI_DROPPED, "assistant"),
}


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _call_line(call: Any) -> tuple[str, str]:
    """One tool call as ``(name, "name(arguments)")``: a Chat Completions tool call (``{"type": "function",
    "function": {"name", "arguments"}}`` or ``{"type": "custom", "custom": {"name", "input"}}``), the legacy
    ``function_call`` (``{"name", "arguments"}``) or a flat ``{"name", "args"}``; arguments are kept as given
    (OpenAI sends JSON text), an object is written as compact JSON.

    Raises:
        ValueError: a call that is not an object, a ``type`` that is not text, a ``function`` (or the ``type``'s
            field) that is not an object, no function name or a name that is not text, arguments that are not
            JSON-like (an object with keys that are not text, a cycle, nesting too deep to write).
    """
    if not isinstance(call, dict):
        raise ValueError("a tool call must be an object ({'function': {'name': ..., 'arguments': ...}})")
    kind = call.get("type")
    if kind is not None and not isinstance(kind, str):
        raise ValueError(f"a tool call's type must be text, got {type(kind).__name__}")
    key = kind or "function"
    nested = call.get(key)
    if nested is not None and not isinstance(nested, dict):
        raise ValueError(f"a tool call's {key[:40]!r} must be an object ({{'name': ..., 'arguments': ...}})")
    body = nested if nested is not None else call
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"a tool call's function name must be text, got {type(name).__name__}")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("a tool call needs a function name ({'function': {'name': ..., 'arguments': ...}})")
    args = body.get("arguments", body.get("input", body.get("args", "")))
    if not isinstance(args, str):
        try:
            args = json.dumps(args, ensure_ascii=False, separators=(",", ":"), default=str)
        except (TypeError, ValueError, RecursionError) as err:  # keys that are not text, a cycle, too deep
            raise ValueError(f"the arguments of tool call {name.strip()[:40]!r} are not JSON: {err}") from err
    return name.strip(), f"{name.strip()}({args})"


def _openai_fields(out: dict[str, Any]) -> None:
    """Read an OpenAI message's ``tool_calls``, ``function_call``, ``refusal``, ``tool_call_id``, ``annotations`` and
    ``audio`` into ``out`` in place (:func:`message_fields`). A null or empty one is dropped whatever the role.

    Raises:
        ValueError: a malformed tool call, a ``tool_call_id`` that is not text.
    """
    for key in [k for k in _OPENAI_FIELDS if k in out and _empty(out[k])]:
        del out[key]
    role = out.get("role")
    taken = {k: out.pop(k) for k in list(_OPENAI_FIELDS) if k in out and _OPENAI_FIELDS[k] == role}
    if not taken:
        return
    text, names = _openai_text(out.get("content"), taken)
    if text is not None or "content" in out:
        out["content"] = text
    derived: dict[str, Any] = {"tool_calls": names} if names else {}
    if "tool_call_id" in taken:
        if not isinstance(taken["tool_call_id"], str):
            raise ValueError("tool_call_id must be text")
        derived["tool_call_id"] = taken["tool_call_id"]
    if derived:
        out["metadata"] = _merged(out.get("metadata"), derived)


def _openai_text(text: Any, taken: dict[str, Any]) -> tuple[Any, list[str]]:
    """An assistant message's text and the names of the functions it calls: its ``content``, else its ``refusal``,
    else its audio's transcript (the SDK sends content null beside them), then one ``name(arguments)`` line per call
    (content that is not text is returned as is, for validation to refuse)."""
    empty = text is None or (isinstance(text, str) and not has_visible_text(text))  # blank or only U+200B...
    audio = taken.get("audio")
    for alternative in (taken.get("refusal"), audio.get("transcript") if isinstance(audio, dict) else None):
        if empty and isinstance(alternative, str) and has_visible_text(alternative):
            text, empty = alternative, False
    calls = taken.get("tool_calls", [])
    if not isinstance(calls, list):
        raise ValueError("tool_calls must be a list of tool calls")
    fields = [f"tool_calls[{i}]" for i in range(len(calls))]
    if "function_call" in taken:
        calls, fields = [*calls, taken["function_call"]], [*fields, "function_call"]
    named = []
    for field, call in zip(fields, calls, strict=True):
        try:
            named.append(_call_line(call))
        except ValueError as err:  # the message names the call: "tool_calls[1]: a tool call's type must be text"
            raise ValueError(f"{field}: {err}") from err
    lines = [line for _, line in named]
    if lines and empty:
        text = "\n".join(lines)  # no text: the calls are what the message says
    elif lines and isinstance(text, str):
        text = "\n".join([text, *lines])
    return text, [name for name, _ in named]


def _merged(metadata: Any, derived: dict[str, Any]) -> Any:
    """The caller's ``metadata`` with ``derived`` set (the message's own fields say what they are, as the engine's
    keys ``role``, ``speaker``... do: ingest/memory.py); metadata that is not an object is returned as is, for
    validation to refuse with its own error."""
    if metadata is None:
        return derived
    if not isinstance(metadata, dict):
        return metadata
    return {**metadata, **derived}


#: LangChain's tool-call fields: ``AIMessage.tool_calls`` (``[{"name", "args", "id", "type": "tool_call"}]``) and
#: ``ToolMessage.tool_call_id``, read as OpenAI's are (a message object's attributes, or its ``data`` form's keys).
_LANGCHAIN_CALLS = ("tool_calls", "tool_call_id")


def _langchain_calls(message: Any) -> dict[str, Any]:
    return {k: v for k in _LANGCHAIN_CALLS if not _empty(v := getattr(message, k, None))}


#: OpenAI Responses API items that are tool traffic: a model's call and the caller's result.
_RESPONSES_CALLS = ("function_call", "function_call_output")
#: Our own fields such an item may carry beside its own.
_OWN_FIELDS = ("speaker", "timestamp", "metadata")


def _responses_call(item: dict[str, Any]) -> dict[str, Any]:
    """A Responses API ``function_call`` item (``{"type", "call_id", "name", "arguments", "id", "status"}``) as an
    assistant message with one tool call, a ``function_call_output`` item (``{"type", "call_id", "output"}``) as a
    tool message with its ``tool_call_id``; the item's ``id`` and ``status`` are dropped, our own fields kept."""
    own = {k: item[k] for k in _OWN_FIELDS if k in item}
    if item["type"] == "function_call":
        call = {"name": item.get("name"), "arguments": item.get("arguments", "")}
        return {"role": "assistant", "content": None, "tool_calls": [call], **own}
    return {"role": "tool", "content": item.get("output"), "tool_call_id": item.get("call_id"), **own}


def message_fields(raw: Any) -> Any:
    """A message in one of the common formats, as the fields of :class:`Message` (anything else is returned as is,
    for validation to refuse). Mapping its own output again changes nothing.

    Accepted besides our own ``{role, content, speaker, timestamp, metadata}``:

    * OpenAI chat messages: ``name`` is the speaker (when ``speaker`` is not given); ``content`` may be a list of
      parts, whose text parts are joined by newlines; roles ``developer`` -> ``system``, ``function`` -> ``tool``.
    * OpenAI tool calls and results, and the SDK's response message (``choices[0].message.model_dump()``):
      an assistant message's ``tool_calls`` (and legacy ``function_call``) become lines of its text,
      ``name(arguments)`` one per call (the whole text when ``content`` is null, after it otherwise), and their
      function names a list under ``metadata["tool_calls"]``; a tool message's ``tool_call_id`` goes to
      ``metadata["tool_call_id"]``; ``refusal`` (or ``audio.transcript``) is the text when ``content`` is empty;
      ``annotations`` and ``audio`` are dropped (citations into the text that is kept; audio data). A null or empty
      one of these fields is dropped on any role; a value on a role that never carries it (``tool_calls`` on a user
      message) is left in place and refused as an unknown field.
    * OpenAI Responses API items: ``{"type": "message", "role", "content"}``, a ``function_call`` item (an
      assistant's tool call) and a ``function_call_output`` item (a tool result, its ``call_id`` the
      ``tool_call_id``).
    * LangChain: ``{"type": "human", "content": ...}`` (``type`` stands for ``role``), the
      ``messages_to_dict`` form ``{"type": "ai", "data": {"content": ..., "name": ...}}``, and message objects
      (anything with ``type`` and ``content`` attributes, e.g. ``HumanMessage``); ``human`` -> ``user``,
      ``ai`` -> ``assistant``.

    A role is matched case-insensitively (:data:`ROLE_ALIASES`). Fields these formats carry that a memory has no
    place for (``id``, ``additional_kwargs``...) are dropped only in the ``data`` form; at the top level they are
    refused as unknown fields, so a typo is never silently lost. LangChain's ``AIMessage.tool_calls`` and
    ``ToolMessage.tool_call_id`` are read as OpenAI's. ``metadata["tool_calls"]`` / ``["tool_call_id"]`` are set from
    the message, as the engine sets ``role`` or ``speaker`` from its fields.

    Raises:
        ValueError: a malformed tool call (no function name; a ``type``, name or ``function`` of the wrong type;
            arguments that cannot be written as JSON), named by its place (``tool_calls[1]: ...``), a
            ``tool_call_id`` that is not text (inside validation: a ``ValidationError``).
    """
    if not isinstance(raw, dict):
        if isinstance(raw, _Model) or not (hasattr(raw, "type") and hasattr(raw, "content")):
            return raw
        raw = {"type": raw.type, "content": raw.content, "name": getattr(raw, "name", None)} | _langchain_calls(raw)
    out = dict(raw)
    data = out.get("data")
    if "type" in out and isinstance(data, dict) and "content" not in out:
        out.pop("data")
        out["content"] = data.get("content")
        if data.get("name") is not None:
            out.setdefault("name", data["name"])
        out.update({k: v for k, v in data.items() if k in _LANGCHAIN_CALLS and not _empty(v)})
    if out.get("type") in _RESPONSES_CALLS and "role" not in out:
        out = _responses_call(out)
    if "type" in out and "role" not in out:
        out["role"] = out.pop("type")
    elif out.get("type") == "message" and "role" in out:
        del out["type"]  # an OpenAI Responses API input item: {"type": "message", "role": ..., "content": ...}
    role = out.get("role")
    if isinstance(role, str):
        folded = role.strip().lower()
        out["role"] = ROLE_ALIASES.get(folded, folded)
    name = out.pop("name", None)
    if name is not None and out.get("speaker") is None:
        out["speaker"] = name
    if "content" in out:
        out["content"] = _content_text(out["content"])
    _openai_fields(out)
    return out


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _no_bool(value: Any) -> Any:
    # pydantic would read true as the number 1 (1970-01-01T00:00:01): a boolean is no timestamp
    if isinstance(value, bool):
        raise ValueError("a timestamp cannot be a boolean")
    return value


class Message(_Model):
    """One conversation message for ``add_messages``. OpenAI and LangChain messages are accepted too
    (:func:`message_fields`: ``name``, ``human``/``ai``, content parts, tool calls and results).

    Attributes:
        role: ``user`` (default), ``assistant``, ``system`` or ``tool`` (or an alias in :data:`ROLE_ALIASES`).
        content: the message text (non-empty after stripping).
        speaker: who said it (a name), shown in the memory's abstract as ``speaker: content``; default: the role.
        timestamp: when it was said (ISO 8601 text, a datetime or Unix seconds): the memory's ``occurred_at``.
        metadata: a JSON object kept with the memory (size-limited by ``memory.max_metadata_bytes``); an OpenAI
            message's ``tool_calls`` names and ``tool_call_id`` are merged into it.
    """

    role: str = "user"
    content: str
    speaker: str | None = None
    timestamp: datetime | str | int | float | None = None
    metadata: dict[str, Any] | None = None

    _timestamp_not_bool = field_validator("timestamp", mode="before")(_no_bool)

    @model_validator(mode="before")
    @classmethod
    def _formats(cls, raw: Any) -> Any:
        return message_fields(raw)


class MemoryItem(_Model):
    """One memory of an ``add_memories`` batch (the same fields as ``add_memory``)."""

    text: str
    category: str | None = None
    metadata: dict[str, Any] | None = None
    occurred_at: datetime | str | int | float | None = None

    _occurred_at_not_bool = field_validator("occurred_at", mode="before")(_no_bool)


class MemoryOutcome(_Model):
    """What happened to one item of a memory write.

    ``status``: ``added`` (a new node), ``unchanged`` (the same normalised text was already stored: the existing
    node), ``duplicate`` (a near-duplicate exists and the policy was ``skip``: nothing written, ``duplicate_of`` names
    it), ``replaced`` (policy ``replace``: ``uri`` is the existing node, now at a new version), ``updated``
    (``update_memory``). ``similarity`` is the cosine similarity to ``duplicate_of`` on the engine's calibrated scale.
    """

    uri: str
    status: Literal["added", "unchanged", "duplicate", "replaced", "updated"]
    duplicate_of: str | None = None
    similarity: float | None = None
    version: int = 1


class MemoryWriteResult(_Model):
    """The result of ``add_messages`` / ``add_memories`` / ``update_memory``: one outcome per item, in input order,
    plus the write's counts (the fields of :class:`~context_engine.schema.nodes.IngestReport`)."""

    items: list[MemoryOutcome]
    nodes: int = 0
    directories: int = 0
    vectors: int = 0
    unchanged: int = 0
    duplicates: int = 0
    pending: int = 0

    @property
    def uris(self) -> list[str]:
        """The URI of each item, in input order (for a ``duplicate``, the existing node it duplicates)."""
        return [o.duplicate_of if o.status == "duplicate" and o.duplicate_of else o.uri for o in self.items]


class AddMemoryResult(IngestReport):
    """The result of ``add_memory``: the write's counts as before (:class:`~context_engine.schema.nodes.IngestReport`:
    ``nodes``, ``unchanged``, ``duplicates``, ``uris``...) and, as the batch calls answer (:class:`MemoryWriteResult`),
    ``items``: the one memory's outcome (``added``, ``unchanged``, ``duplicate`` with ``duplicate_of``,
    ``replaced``). Issue 29: one answer shape for the memory writes; read ``items[0].status`` rather than the
    counters."""

    items: list[MemoryOutcome] = Field(default_factory=list)


class MemoryView(_Model, RenamedFields):
    """A memory as ``list_memories`` returns it: its L0 abstract and lifecycle fields (no L2 read).

    ``conversation_id``: the conversation a message belongs to (``add_messages``), ``None`` for other memories.
    ``session_id`` is its deprecated name (issue 29), still sent with the same value; reading it warns.
    """

    renamed = CONVERSATION

    uri: str
    category: str | None
    abstract: str
    created_at: datetime | None
    updated_at: datetime | None
    occurred_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    version: int = 1
    conversation_id: str | None = None
    session_id: str | None = Field(
        None, deprecated="use conversation_id (the same value)", description="Deprecated: the same as conversation_id."
    )

    @field_validator("metadata", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value


class MemoryVersion(_Model):
    """An earlier version of a memory (``history``): its full text (L2) and when it was written and replaced."""

    version: int
    text: str
    created_at: datetime
    replaced_at: datetime


class MemoryDetail(MemoryView):
    """One memory read whole (``get_memory``): its current text (L2, secrets redacted) and earlier versions, oldest
    first."""

    text: str
    history: list[MemoryVersion] = Field(default_factory=list)


class MemoryListPage(_Model):
    """One page of ``list_memories``: newest first (``updated_at`` descending, then URI); ``next_offset`` is
    ``None`` on the last page."""

    items: list[MemoryView]
    total: int
    offset: int
    limit: int
    next_offset: int | None = None
