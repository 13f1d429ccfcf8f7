"""The memory write path (issue 11; DESIGN §1, §4): conversation messages, memory batches, updates, dedup.

Everything here turns memories into :class:`~context_engine.ingest.loader.SourceDoc` and hands them to the one write
path (:class:`~context_engine.ingest.pipeline.WritePipeline`), so a batch is one write: validated completely first
(a bad item fails the whole batch with its index, and nothing is written), embedded in one pass, committed in one
metadata transaction, with one directory-summary refresh per batch.

* ``add_messages(messages, conversation_id)``: message ``i`` becomes
  ``.../memories/sessions/<conversation_id>/<seq>.md``, ``seq`` a zero-padded counter continuing the conversation (the
  URI segment ``sessions`` and the metadata key ``session_id`` keep their first names: schema/renames.py). Its L0 is
  ``"<speaker>: <content>"`` (whole up to ``memory.l0_max_chars``, else
  :func:`~context_engine.ingest.memory_abstract.memory_abstract`); role, speaker, conversation and timestamp go into
  its metadata (:data:`_ENGINE_KEYS`, beside an OpenAI message's ``tool_calls`` / ``tool_call_id``:
  schema/memory.py ``message_fields``) and the timestamp into ``occurred_at``; a caller's metadata under one of
  those keys is replaced by the message's value.
  What a message is indexed with (embedding input and BM25 text, never shown) is role-aware
  (:mod:`context_engine.ingest.conversation`): a user turn with the ``memory.context_messages`` messages before it
  and the assistant's reply after it; an assistant, system or tool message, an acknowledgement or a question back
  alone. Messages are events, so they are never deduplicated.
  Cost per message is constant: the session's tail is read with one indexed query, and directory summaries read a
  bounded window of children.
* ``add_memories(items)``: each item is stored like ``add_memory``. The same normalised text (NFKC, case-folded,
  punctuation removed, whitespace-collapsed) under the same user's memories is the same memory (``unchanged``); a
  near-duplicate (raw cosine of the abstracts >= ``memory.near_duplicate_similarity``, against stored memories and
  earlier items of the batch, *and* the same specifics: numbers, identifiers, dates, amounts, versions, addresses,
  names; :func:`~context_engine.ingest.dedup.same_specifics`) is handled by the policy (``skip``, the default:
  reported with the existing URI, nothing written; ``keep``; ``replace``: the existing memory is updated to the new
  text). A candidate that passes the cosine but differs in a specific ("... XJ-4477 ..." / "... XJ-4488 ...") is not
  a duplicate, the next candidate is tried, and when none is left the item is stored (``added``) under every policy:
  dedup never drops or overwrites a different fact.
* ``update_memory(uri, text)``: re-embeds the memory; the previous text is kept as a version (``node_versions``),
  in the same transaction.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any, get_args

import numpy as np
from pydantic import ValidationError

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.conversation import Line, index_contexts
from context_engine.ingest.dedup import Specifics, specifics
from context_engine.ingest.loader import SourceDoc, content_hash, decode_text
from context_engine.ingest.memory_abstract import memory_abstract
from context_engine.ingest.memory_context import indexed_context, own_text_removed
from context_engine.ingest.memory_text import memory_hash, memory_slug, normalise_memory_text
from context_engine.ingest.parse import collapse_whitespace
from context_engine.ingest.pipeline import WritePipeline
from context_engine.ingest.summarize import truncate_text
from context_engine.schema.memory import (
    DedupPolicy,
    MemoryItem,
    MemoryOutcome,
    MemoryWriteResult,
    Message,
    MessageRole,
    message_fields,
    parse_timestamp,
)
from context_engine.schema.nodes import IngestReport, Level, NodeRecord, VectorFilter
from context_engine.schema.query import MAX_JSON_DEPTH, json_depth
from context_engine.schema.uri import ContextURI
from context_engine.settings import IngestSettings, MemorySettings
from context_engine.storage.protocols import ContentStore, Embedder, MetadataStore, VectorIndex

__all__ = ["METADATA_MAX_DEPTH", "MemoryWriter", "memory_abstract_of", "memory_hash", "normalise_memory_text"]

_ROLES = frozenset(get_args(MessageRole))
_SEQ_DIGITS = 6
_TAIL_EXTRA = 2
_SPEAKER_MAX_CHARS = 128
_METADATA_KEY_MAX_CHARS = 64
#: Deepest nesting of a memory's metadata, the object itself being level 1 (``{"a": {"b": 1}}`` is 2; a list is a
#: level too; :func:`~context_engine.schema.query.json_depth`), the same bound as a search request's JSON. An app's
#: metadata is a few levels deep; a memory whose metadata nested 256 levels (1.5 KB, within
#: ``memory.max_metadata_bytes``) was stored, and then every list and read of its user's memories failed (500: the
#: response serializer stops at 255 levels) until it was deleted. Deeper metadata is refused at write time, WRT-4002.
METADATA_MAX_DEPTH = MAX_JSON_DEPTH
#: Metadata keys the engine sets from a message's fields (``session_id`` is the conversation's stored key)
_ENGINE_KEYS = ("role", "speaker", "session_id", "timestamp")
_RESERVE_TRIES = 8  # reservations of a batch's message numbers before WRT-4091 (each passes the stored nodes met)
_DUPLICATE_CANDIDATES = 8  # stored memories tried as near-duplicates of one item (siblings that differ in specifics)


def memory_abstract_of(
    text: str,
    settings: MemorySettings,
    *,
    metadata: dict[str, Any] | None = None,
    occurred_at: datetime | str | int | float | None = None,
) -> dict[str, Any]:
    """The memory fields of a :class:`SourceDoc` for a memory written at an explicit URI (``add_memory(uri=...)``).

    Raises:
        ContextEngineError: ``WRT-4002``/``WRT-4131`` bad metadata or timestamp.
    """
    md = MemoryWriter._metadata_object(None, metadata)
    if md is not None:
        MemoryWriter._check_size(None, md, settings.max_metadata_bytes)
    abstract = memory_abstract(text, settings.l0_max_chars)
    return {
        "abstract": abstract,
        "title": _title(abstract),
        "metadata": md,
        "occurred_at": MemoryWriter._timestamp(None, occurred_at),
        "whole_text_l0": collapse_whitespace(text) in abstract,
    }


def _line(metadata: dict[str, Any] | None, speaker: str, text: str) -> Line:
    """A message as the indexer sees it (:class:`~context_engine.ingest.conversation.Line`) from its metadata:
    its role, and whether it is an assistant's tool call (``tool_calls`` in its metadata)."""
    md = metadata or {}
    role = str(md.get("role", "user"))
    return Line(role, speaker, collapse_whitespace(text), tool_call=role == "assistant" and bool(md.get("tool_calls")))


def _error(code: ErrorCode, message: str, index: int | None = None, **details: Any) -> ContextEngineError:
    if index is not None:
        details["index"] = index
        message = f"item {index}: {message}"
    return ContextEngineError(code, message, details)


@dataclass(frozen=True, slots=True)
class _Prepared:
    text: str
    abstract: str
    occurred_at: datetime | None
    metadata: dict[str, Any] | None
    speaker: str = ""


class MemoryWriter:
    """Builds memory documents and writes them through the :class:`WritePipeline` (module docstring).

    Args:
        pipeline: the one write path.
        metadata: for the session tail, dedup lookups and versions.
        content: for the previous message's text (context) and a memory's current text (versions).
        index: the vector index (near-duplicate search over the user's memory abstracts).
        embedder: embeds abstracts for the near-duplicate check.
        settings: the ``memory`` section.
        ingest: the ``ingest`` section (size limit of one text).
    """

    def __init__(
        self,
        pipeline: WritePipeline,
        metadata: MetadataStore,
        content: ContentStore,
        index: VectorIndex,
        embedder: Embedder,
        settings: MemorySettings,
        ingest: IngestSettings,
    ) -> None:
        self._pipeline = pipeline
        self._metadata = metadata
        self._content = content
        self._index = index
        self._embedder = embedder
        self._settings = settings
        self._ingest = ingest

    # ------------------------------------------------------------------------------------------------ messages
    def add_messages(
        self, account_id: str, space: str, messages: Sequence[Message | dict[str, Any]], conversation_id: str
    ) -> MemoryWriteResult:
        """Store a batch of conversation messages as memories of one conversation (module docstring).

        Args:
            account_id: the tenant.
            space: the user space the conversation belongs to.
            messages: ``Message`` objects or dicts with their fields, in conversation order.
            conversation_id: one URI segment (no ``/``, not ``.`` or ``..``).

        Returns:
            One ``added`` outcome per message, in input order (``result.uris`` are the message URIs).

        Raises:
            ContextEngineError: ``WRT-4001`` bad conversation id; ``WRT-4002`` empty batch, unknown field or role,
                unparsable timestamp, metadata that is not a JSON object or nests deeper than
                :data:`METADATA_MAX_DEPTH`; ``WRT-4131`` batch over
                ``memory.max_batch_items`` or metadata over ``memory.max_metadata_bytes`` or a text over the size
                limit; ``WRT-4221`` a message without content or with invalid text. Nothing of the batch is written.
        """
        self._check_batch(messages, "messages")
        session_dir = self._session_dir(space, conversation_id)
        parsed = [self._message(i, m, conversation_id) for i, m in enumerate(messages)]
        return self._append(account_id, session_dir, parsed)

    def _append(self, account_id: str, session_dir: ContextURI, parsed: Sequence[_Prepared]) -> MemoryWriteResult:
        floor, tail = self._session_tail(account_id, session_dir)
        # Numbers are reserved atomically (a counter in the metadata database), so concurrent writers to one session
        # never take the same URI; each message's context is the session's tail as this writer saw it.
        start = self._free_numbers(account_id, session_dir, len(parsed), floor)
        lines = [_line(p.metadata, p.speaker, p.text) for p in parsed]
        contexts = index_contexts(tail, lines, self._settings.context_messages, self._settings.context_max_chars)
        docs: list[SourceDoc] = []
        for offset, (p, context) in enumerate(zip(parsed, contexts, strict=True)):
            uri = session_dir.child(f"{start + offset:0{_SEQ_DIGITS}d}.md")
            digest = content_hash(p.text, "message", p.speaker, json.dumps(p.metadata, sort_keys=True, default=str))
            docs.append(
                SourceDoc(
                    uri,
                    p.text,
                    "plain",
                    "message",
                    digest,
                    p.speaker,
                    occurred_at=p.occurred_at,
                    metadata=p.metadata,
                    context=indexed_context(context, p.speaker, p.text, p.abstract),
                    abstract=p.abstract,
                    title=p.speaker,
                    whole_text_l0=collapse_whitespace(p.text) in p.abstract,
                )
            )
        try:
            report = self._pipeline.write_documents(account_id, docs)
        except BaseException:
            self._metadata.release_sequence(account_id, str(session_dir), start, len(parsed))
            raise
        return _result(report, [MemoryOutcome(uri=str(d.uri), status="added") for d in docs])

    def _session_dir(self, space: str, conversation_id: str) -> ContextURI:
        cid = conversation_id
        if not isinstance(cid, str) or not cid.strip() or "/" in cid or "\\" in cid:
            raise _error(ErrorCode.URI_INVALID, "conversation_id must be one non-empty path segment (no '/')")
        try:
            return ContextURI.parse(f"ctx://user/{space}/memories/sessions/").child(cid.strip(), is_dir=True)
        except ContextEngineError as err:
            raise _error(
                ErrorCode.URI_INVALID, f"conversation_id {cid[:60]!r} is not a valid path segment: {err.message}"
            ) from err

    def _message(self, index: int, raw: Message | dict[str, Any], conversation_id: str) -> _Prepared:
        try:
            raw = message_fields(raw)  # OpenAI and LangChain formats (schema/memory.py)
        except ValueError as err:  # a malformed tool call
            raise _error(ErrorCode.REQUEST_INVALID, f"not a message: {err}", index) from err
        if isinstance(raw, dict) and (raw.get("content") is None or raw.get("content") == ""):
            raise _error(ErrorCode.CONTENT_INVALID, "the message has no content", index, field="content")
        try:
            msg = raw if isinstance(raw, Message) else Message.model_validate(raw)
        except ValidationError as err:
            fields = [".".join(map(str, e["loc"])) for e in err.errors()]
            raise _error(
                ErrorCode.REQUEST_INVALID, f"not a message ({', '.join(fields)})", index, fields=fields
            ) from err
        if msg.role not in _ROLES:
            raise _error(
                ErrorCode.REQUEST_INVALID,
                f"unknown role {msg.role[:40]!r}; use one of {', '.join(sorted(_ROLES))}",
                index,
                field="role",
            )
        text = self._text(index, msg.content)
        speaker = self._speaker(index, msg.speaker) or msg.role
        if speaker.casefold() in _ROLES and speaker.casefold() != msg.role:
            # an assistant's message shown as "user: ..." would pass for the user's words (ranking and labels read it)
            raise _error(
                ErrorCode.REQUEST_INVALID,
                f"speaker {speaker!r} names another role than the message's ({msg.role})",
                index,
                field="speaker",
            )
        occurred_at = self._timestamp(index, msg.timestamp)
        metadata = dict(self._metadata_object(index, msg.metadata) or {})
        # the conversation under its stored key, session_id (existing homes are read as they are)
        stamp = occurred_at.isoformat() if occurred_at is not None else None
        values = (msg.role, speaker, conversation_id.strip(), stamp)
        # the engine's keys say what the message's fields say: a caller's value under one of them is replaced (a
        # message read back from another conversation, an app's own "session_id"), never a reason to refuse a batch
        metadata.update({k: v for k, v in zip(_ENGINE_KEYS, values, strict=True) if v is not None})
        self._check_metadata_size(index, metadata)
        abstract = message_abstract(speaker, text, self._settings.l0_max_chars)
        return _Prepared(text, abstract, occurred_at, metadata, speaker)

    def _free_numbers(self, account_id: str, session_dir: ContextURI, count: int, floor: int) -> int:
        """The first of ``count`` reserved sequence numbers whose message URIs hold no node yet. A node written in
        the session by another route (``add_memory(uri=".../sessions/<id>/000010.md")``) is passed over, never
        overwritten: the numbers are reserved again above it (until 2026-12-07 a session whose greatest name was not a
        number took its floor from the count of its children, and the next messages replaced such a node).

        Raises:
            ContextEngineError: ``WRT-4091`` when :data:`_RESERVE_TRIES` reservations in a row met stored nodes."""
        for _ in range(_RESERVE_TRIES):
            start = self._metadata.reserve_sequence(account_id, str(session_dir), count, floor)
            uris = [str(session_dir.child(f"{n:0{_SEQ_DIGITS}d}.md")) for n in range(start, start + count)]
            taken = self._metadata.get_nodes(account_id, uris)
            if not taken:
                return start
            floor = max(int(ContextURI.parse(u).name.rsplit(".", 1)[0]) for u in taken)
        raise _error(
            ErrorCode.CONFLICT,
            f"the conversation's next message numbers are taken by other nodes ({_RESERVE_TRIES} tries)",
            uri=str(session_dir),
        )

    def _session_tail(self, account_id: str, session_dir: ContextURI) -> tuple[int, list[Line]]:
        """The highest sequence number the session's stored messages use and its last ``context_messages`` messages
        (oldest first)."""
        last = self._metadata.last_child_uri(account_id, str(session_dir))
        if last is None:
            return 0, []
        name = ContextURI.parse(last).name.rsplit(".", 1)[0]
        start = int(name) if name.isdigit() else self._metadata.count_children(account_id, str(session_dir))
        k = self._settings.context_messages
        if k == 0:
            return start, []
        # a few more than k, so an acknowledgement among the last messages can be skipped (ingest/conversation.py)
        window = k + _TAIL_EXTRA
        sample, _total = self._metadata.children_window(account_id, str(session_dir), window)
        lines = []
        for node in [n for n in sample if not n.is_dir][-window:]:
            body = self._content.read_level(account_id, node.uri, Level.L2) or ""
            lines.append(_line(node.metadata, (node.metadata or {}).get("speaker") or node.title, body))
        return start, lines

    # ------------------------------------------------------------------------------------------------ memories
    def _batch_item(
        self, i: int, raw: MemoryItem | dict[str, Any], root: ContextURI
    ) -> tuple[_Prepared, ContextURI, str]:
        """Item ``i`` of an ``add_memories`` batch checked and prepared: its document, URI and text hash."""
        try:
            item = raw if isinstance(raw, MemoryItem) else MemoryItem.model_validate(raw)
        except ValidationError as err:
            fields = [".".join(map(str, e["loc"])) for e in err.errors()]
            raise _error(ErrorCode.REQUEST_INVALID, f"not a memory ({', '.join(fields)})", i, fields=fields) from err
        text = self._text(i, item.text)
        try:
            base = root.child(item.category or "general", is_dir=True)
        except ContextEngineError as err:
            raise _error(ErrorCode.URI_INVALID, f"bad category: {err.message}", i, field="category") from err
        metadata = self._metadata_object(i, item.metadata)
        if metadata is not None:
            self._check_metadata_size(i, metadata)
        prepared = _Prepared(
            text, memory_abstract(text, self._settings.l0_max_chars), self._timestamp(i, item.occurred_at), metadata
        )
        return prepared, base.child(memory_slug(text) + ".md"), memory_hash(text)

    def add_memories(
        self,
        account_id: str,
        space: str,
        items: Sequence[MemoryItem | dict[str, Any]],
        *,
        policy: DedupPolicy | None = None,
    ) -> MemoryWriteResult:
        """Store a batch of memories under ``ctx://user/<space>/memories/<category or general>/`` (module docstring).

        Returns:
            One outcome per item, in input order: ``added``, ``unchanged`` (same normalised text already stored),
            ``duplicate`` (near-duplicate, policy ``skip``; ``duplicate_of`` and ``similarity`` say of what) or
            ``replaced`` (policy ``replace``).

        Raises:
            ContextEngineError: ``WRT-4001`` bad category; ``WRT-4002`` empty batch, unknown field, bad timestamp
                or metadata (not an object, bad keys, over :data:`METADATA_MAX_DEPTH` levels), unknown policy;
                ``WRT-4131`` batch or metadata or text too large; ``WRT-4221`` empty text. Nothing of the batch is
                written.
        """
        self._check_batch(items, "items")
        policy = policy or self._settings.dedup_policy
        if policy not in ("skip", "keep", "replace"):
            raise _error(ErrorCode.REQUEST_INVALID, f"unknown dedup policy {str(policy)[:20]!r}: skip, keep or replace")
        root = ContextURI.parse(f"ctx://user/{space}/memories/")
        parsed = [self._batch_item(i, raw, root) for i, raw in enumerate(items)]
        stored = self._metadata.find_by_hash(account_id, [h for _, _, h in parsed], uri_prefix=str(root))
        outcomes, todo = _unchanged(parsed, stored)
        replacements: list[tuple[int, NodeRecord]] = []
        if todo and policy != "keep":
            for i, (uri_of, similarity) in self._near_duplicates(account_id, space, parsed, todo).items():
                todo.remove(i)
                if policy == "skip":
                    outcomes[i] = MemoryOutcome(
                        uri=str(parsed[i][1]), status="duplicate", duplicate_of=uri_of, similarity=similarity
                    )
                else:
                    node = self._metadata.get_node(account_id, uri_of)
                    if node is None:  # an earlier item of this batch: one memory, the earlier item's (docs)
                        outcomes[i] = MemoryOutcome(
                            uri=str(parsed[i][1]), status="duplicate", duplicate_of=uri_of, similarity=similarity
                        )
                        continue
                    replacements.append((i, node))
        docs = [self._memory_doc(parsed[i][0], parsed[i][1], parsed[i][2]) for i in todo]
        versions: list[tuple[NodeRecord, str]] = []
        for i, node in replacements:
            old_text = self._content.read_level(account_id, node.uri, Level.L2) or ""
            p = parsed[i][0]
            merged = p.metadata if p.metadata is not None else node.metadata
            p = replace(p, metadata=merged, occurred_at=p.occurred_at or node.occurred_at)
            docs.append(self._memory_doc(p, ContextURI.parse(node.uri), parsed[i][2], version=node.version + 1))
            versions.append((node, old_text))
        report = (
            self._pipeline.write_documents(account_id, docs, in_transaction=self._version_writer(account_id, versions))
            if docs
            else IngestReport()
        )
        for i in todo:
            outcomes[i] = MemoryOutcome(uri=str(parsed[i][1]), status="added")
        _follow_repeats(outcomes)
        for (i, node), _ in zip(replacements, versions, strict=True):
            outcomes[i] = MemoryOutcome(uri=node.uri, status="replaced", version=node.version + 1)
        done = [o for o in outcomes if o is not None]
        result = _result(report, done)
        result.duplicates = sum(1 for o in done if o.status == "duplicate")
        result.unchanged = sum(1 for o in done if o.status == "unchanged")
        return result

    def update_memory(
        self,
        account_id: str,
        node: NodeRecord,
        text: str,
        *,
        metadata: dict[str, Any] | None = None,
        occurred_at: datetime | str | int | float | None = None,
    ) -> MemoryWriteResult:
        """Replace the text of the memory ``node`` (already checked visible and writable), keeping the previous text
        as version ``node.version``; metadata and ``occurred_at`` are kept unless given.

        Raises:
            ContextEngineError: ``WRT-4221`` empty text; ``WRT-4002``/``WRT-4131`` bad metadata or timestamp.
        """
        body = self._text(None, text)
        is_message = (node.metadata or {}).get("session_id") is not None
        md = self._metadata_object(None, metadata) if metadata is not None else node.metadata
        when = self._timestamp(None, occurred_at) if occurred_at is not None else node.occurred_at
        if is_message:
            md = _message_metadata(md, node.metadata or {}, when if occurred_at is not None else None)
        if md is not None:
            self._check_metadata_size(None, md)
        digest = memory_hash(body)
        current = self._content.read_level(account_id, node.uri, Level.L2) or ""
        # an update names its memory: any change of its text but spacing is written (a code's case, a unit's mark),
        # not only one that makes it another memory by the identity of adds (normalise_memory_text)
        same_text = collapse_whitespace(current) == collapse_whitespace(body)
        if same_text and md == node.metadata and when == node.occurred_at:
            outcome = MemoryOutcome(uri=node.uri, status="unchanged", version=node.version)
            return MemoryWriteResult(items=[outcome], unchanged=1)
        if is_message:
            speaker = (node.metadata or {}).get("speaker") or node.title
            abstract = message_abstract(speaker, body, self._settings.l0_max_chars)
        else:
            abstract = memory_abstract(body, self._settings.l0_max_chars)
        context = ""
        if is_message:
            old = self._metadata.get_vectors(account_id, [node.uri])
            # what the message answers stays; its own old text (indexed_context) is replaced by the new one
            context = own_text_removed(next((v.context for v in old if v.level == 0), ""), speaker, current)
        prepared = _Prepared(body, abstract, when, md, node.title if is_message else "")
        doc = self._memory_doc(prepared, ContextURI.parse(node.uri), digest, version=node.version + 1, context=context)
        old_text = current
        report = self._pipeline.write_documents(
            account_id, [doc], in_transaction=self._version_writer(account_id, [(node, old_text)])
        )
        return _result(report, [MemoryOutcome(uri=node.uri, status="updated", version=node.version + 1)])

    def _memory_doc(
        self, p: _Prepared, uri: ContextURI, digest: str, *, version: int = 1, context: str = ""
    ) -> SourceDoc:
        title = p.speaker or _title(p.abstract)
        return SourceDoc(
            uri,
            p.text,
            "plain",
            "memory",
            digest,
            title,
            occurred_at=p.occurred_at,
            metadata=p.metadata,
            context=indexed_context(context, p.speaker, p.text, p.abstract),
            version=version,
            abstract=p.abstract,
            title=title,
            whole_text_l0=collapse_whitespace(p.text) in p.abstract,
        )

    def _version_writer(self, account_id: str, versions: Sequence[tuple[NodeRecord, str]]) -> Any:
        """The callback that keeps each memory's previous text as a version, run inside the write's transaction.

        It first checks, under the write turn, that each memory is still the one read before it: concurrent updates
        of one memory both read version ``v`` and would both write ``v + 1`` (a unique-key failure, a 500), and an
        update that read the memory before a delete committed would write it back.

        Raises:
            ContextEngineError: ``WRT-4091`` (409, retryable) when another write changed the memory since it was
                read; ``RET-4041`` (404, as for the caller's memory deleted before the update) when it was deleted
                meanwhile. Nothing is written then (the transaction rolls back).
        """
        if not versions:
            return None

        def write() -> None:
            now = self._metadata.get_nodes(account_id, [node.uri for node, _ in versions])
            for node, _ in versions:
                current = now.get(node.uri)
                if current is None or current.is_dir:  # the caller may see it (checked before): as a deleted one
                    message = "no memory at this URI (deleted, or never written)"
                    raise ContextEngineError(ErrorCode.TARGET_NOT_FOUND, message, {"uri": node.uri})
                if current.version != node.version:
                    raise ContextEngineError(
                        ErrorCode.CONFLICT,
                        f"{node.uri} was changed by another write (version {node.version} -> {current.version}); "
                        "read it again and retry",
                        {"uri": node.uri, "version": current.version},
                        retryable=True,
                    )
            for node, old_text in versions:
                when = node.updated_at or node.created_at
                assert when is not None
                self._metadata.add_version(account_id, node.uri, node.version, old_text, when)

        return write

    def _near_duplicates(
        self, account_id: str, space: str, parsed: Sequence[tuple[_Prepared, ContextURI, str]], todo: Sequence[int]
    ) -> dict[int, tuple[str, float]]:
        """Items of ``todo`` that nearly repeat a stored memory of the user or an earlier item: index -> (URI, cosine).

        A candidate (cosine >= ``memory.near_duplicate_similarity``) is a near-duplicate only with the same
        specifics as the item, compared on the full texts (:mod:`context_engine.ingest.dedup`). Candidates are tried
        best cosine first (a stored memory before an earlier item on a tie): the ``_DUPLICATE_CANDIDATES`` nearest
        stored memories and every earlier item of the batch that is not itself a duplicate.
        """
        threshold = self._settings.near_duplicate_similarity
        vectors = self._embedder.embed_documents([parsed[i][0].abstract for i in todo])
        own = _LazySpecifics([parsed[i][0].text for i in todo])  # computed only for items with a candidate
        flt = VectorFilter(account_id=account_id, owner_spaces=[f"user:{space}"], levels=[0], context_types=["memory"])
        found: dict[int, tuple[str, float]] = {}
        kept: list[int] = []  # positions in `todo` of items that are not duplicates
        for pos, i in enumerate(todo):
            candidates: list[tuple[float, int, str, Callable[[], Specifics]]] = [
                (float(hit.score), 0, hit.uri, partial(self._stored_specifics, account_id, hit.uri, hit.text))
                for hit in self._index.search(vectors[pos], _DUPLICATE_CANDIDATES, flt)
                if not hit.uri.endswith("/") and hit.score >= threshold
            ]
            if kept:
                sims = np.asarray([vectors[k] for k in kept]) @ vectors[pos]
                candidates += [
                    (float(sim), 1, str(parsed[todo[k]][1]), partial(own.of, k))
                    for k, sim in zip(kept, sims, strict=True)
                    if sim >= threshold
                ]
            candidates.sort(key=lambda c: (-c[0], c[1]))
            best = next(((uri, sim) for sim, _, uri, theirs in candidates if own.of(pos).same_as(theirs())), None)
            if best is None:
                kept.append(pos)
            else:
                found[i] = (best[0], round(best[1], 6))
        return found

    def _stored_specifics(self, account_id: str, uri: str, l0_text: str) -> Specifics:
        """The specifics of a stored memory's full text (its L2: the L0 may be an extract of a long memory); its L0
        text if the content is missing."""
        return specifics(self._content.read_level(account_id, uri, Level.L2) or l0_text)

    # ------------------------------------------------------------------------------------------------ validation
    def _check_batch(self, items: Any, what: str) -> None:
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise _error(ErrorCode.REQUEST_INVALID, f"{what} must be a list")
        if not items:
            raise _error(ErrorCode.REQUEST_INVALID, f"{what} is empty; nothing to add")
        limit = self._settings.max_batch_items
        if len(items) > limit:
            raise _error(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"{len(items)} {what} in one batch, over the limit of {limit}; split it (CE_MEMORY__MAX_BATCH_ITEMS)",
                count=len(items),
                limit=limit,
            )

    def _text(self, index: int | None, text: Any) -> str:
        if not isinstance(text, str):
            raise _error(ErrorCode.REQUEST_INVALID, "content must be text", index, field="content")
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise _error(ErrorCode.CONTENT_INVALID, "content is not valid Unicode (a lone surrogate)", index) from err
        where = "the message" if index is None else f"item {index}"
        try:
            return decode_text(data, where, self._ingest).strip()
        except ContextEngineError as err:
            if index is not None:
                err.details.setdefault("index", index)
            raise

    @staticmethod
    def _speaker(index: int, speaker: str | None) -> str:
        if speaker is None:
            return ""
        flat = " ".join(speaker.split())
        # ": " ends the speaker in a message's L0 ("Bob: I hate broccoli. Eve" would make Bob say what Eve said)
        if len(flat) > _SPEAKER_MAX_CHARS or ": " in flat or any(unicodedata.category(c)[0] == "C" for c in flat):
            raise _error(
                ErrorCode.REQUEST_INVALID,
                f"speaker must be a name of at most {_SPEAKER_MAX_CHARS} printable characters, without ': '",
                index,
                field="speaker",
            )
        return flat

    @staticmethod
    def _timestamp(index: int | None, value: Any) -> datetime | None:
        try:
            return parse_timestamp(value)
        except (ValueError, OverflowError, OSError) as err:
            raise _error(ErrorCode.REQUEST_INVALID, f"timestamp: {err}", index, field="timestamp") from err

    @staticmethod
    def _metadata_object(index: int | None, metadata: Any) -> dict[str, Any] | None:
        if metadata is None:
            return None
        if not isinstance(metadata, dict):
            raise _error(ErrorCode.REQUEST_INVALID, "metadata must be a JSON object", index, field="metadata")
        for key in metadata:
            if not isinstance(key, str) or not key or len(key) > _METADATA_KEY_MAX_CHARS or not key.isprintable():
                raise _error(
                    ErrorCode.REQUEST_INVALID,
                    f"metadata keys must be printable strings of 1..{_METADATA_KEY_MAX_CHARS} characters",
                    index,
                    field="metadata",
                )
        # before json.dumps, which recurses: 1,000 levels would be a RecursionError there
        if json_depth(metadata, METADATA_MAX_DEPTH) > METADATA_MAX_DEPTH:
            raise _error(
                ErrorCode.REQUEST_INVALID,
                f"metadata nests deeper than {METADATA_MAX_DEPTH} levels",
                index,
                field="metadata",
                max_depth=METADATA_MAX_DEPTH,
            )
        try:
            json.dumps(metadata, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as err:
            raise _error(
                ErrorCode.REQUEST_INVALID, f"metadata is not JSON: {str(err)[:80]}", index, field="metadata"
            ) from err
        if _holds_nul(metadata):  # PostgreSQL reads no NUL out of JSON text: every metadata_filter of the account
            raise _error(  # then failed with a 500 (a helper's review)
                ErrorCode.REQUEST_INVALID, "metadata strings must not contain NUL (U+0000)", index, field="metadata"
            )
        return metadata

    def _check_metadata_size(self, index: int | None, metadata: dict[str, Any]) -> None:
        self._check_size(index, metadata, self._settings.max_metadata_bytes)

    @staticmethod
    def _check_size(index: int | None, metadata: dict[str, Any], limit: int) -> None:
        """``WRT-4002`` for metadata that is not valid Unicode, ``WRT-4131`` over ``limit`` bytes of compact JSON."""
        try:
            size = len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        except UnicodeEncodeError as err:
            raise _error(ErrorCode.REQUEST_INVALID, "metadata is not valid Unicode", index, field="metadata") from err
        if size > limit:
            raise _error(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"metadata is {size} bytes of JSON, over the limit of {limit} (CE_MEMORY__MAX_METADATA_BYTES)",
                index,
                field="metadata",
                size_bytes=size,
                limit_bytes=limit,
            )


def _unchanged(
    parsed: Sequence[tuple[_Prepared, ContextURI, str]], stored: dict[str, NodeRecord]
) -> tuple[list[MemoryOutcome | None], list[int]]:
    """The outcomes of a batch's items whose text is stored already or repeats an earlier item (``unchanged``), and
    the indexes of the others, still to write, in order."""
    outcomes: list[MemoryOutcome | None] = [None] * len(parsed)
    todo: list[int] = []
    seen_hash: dict[str, int] = {}
    for i, (_p, _uri, digest) in enumerate(parsed):
        if digest in stored:
            outcomes[i] = MemoryOutcome(uri=stored[digest].uri, status="unchanged", version=stored[digest].version)
        elif digest in seen_hash:  # the same text twice in one batch: one memory, the first item's
            outcomes[i] = MemoryOutcome(uri=str(parsed[seen_hash[digest]][1]), status="unchanged")
        else:
            seen_hash[digest] = i
            todo.append(i)
    return outcomes, todo


def _message_metadata(metadata: dict[str, Any] | None, stored: dict[str, Any], when: datetime | None) -> dict[str, Any]:
    """A message's metadata after an update: the caller's (or the stored) keys with the engine's keys
    (:data:`_ENGINE_KEYS`) as the message says them: its role, speaker and conversation stay, and ``timestamp`` is
    ``when`` (a new time given to the update; ``None``: as stored). A caller's value under one of them is replaced,
    as ``add_messages`` does (docs/memories.md)."""
    out = dict(metadata or {})
    out.update({k: stored[k] for k in _ENGINE_KEYS if k in stored})
    if when is not None:
        out["timestamp"] = when.isoformat()
    return out


def _holds_nul(value: Any) -> bool:
    """Whether a JSON value (its depth checked already) holds a string or key with NUL."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


def _follow_repeats(outcomes: list[MemoryOutcome | None]) -> None:
    """A batch item that repeats an earlier item's text (``unchanged``, at that item's URI) reports what became of
    the earlier item when that one was not written: a near-duplicate dropped under ``skip`` (or of an earlier item of
    the batch under ``replace``) has no node at its URI, so the repeat is that duplicate too."""
    first = {o.uri: o for o in outcomes if o is not None and o.status != "unchanged"}
    for i, o in enumerate(outcomes):
        if o is not None and o.status == "unchanged":
            earlier = first.get(o.uri)
            if earlier is not None and earlier.status == "duplicate":
                outcomes[i] = earlier


class _LazySpecifics:
    """The :func:`~context_engine.ingest.dedup.specifics` of a batch's texts, each computed on first use (a long
    memory costs a scan, and most items have no near-duplicate candidate)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = texts
        self._done: dict[int, Specifics] = {}

    def of(self, pos: int) -> Specifics:
        if pos not in self._done:
            self._done[pos] = specifics(self._texts[pos])
        return self._done[pos]


def message_abstract(speaker: str, text: str, max_chars: int) -> str:
    """A message's L0, ``"<speaker>: <abstract of text>"``, at most ``max_chars`` characters in all (DESIGN §1: 256).

    The text gets the budget left after the prefix (at least 16 characters); a speaker name too long to leave that
    is cut at a word boundary with ``"…"`` first, so the whole line stays within ``max_chars``.
    """
    room = max_chars - 16 - 2
    if len(speaker) > room:
        speaker = truncate_text(speaker, room)
    return f"{speaker}: {memory_abstract(text, max_chars - len(speaker) - 2)}"


def _title(abstract: str, max_chars: int = 80) -> str:
    """A memory's title: the start of its abstract, cut on a word boundary (shown by ``ls`` and directory L1)."""
    if len(abstract) <= max_chars:
        return abstract
    cut = abstract[:max_chars]
    return cut.rsplit(" ", 1)[0] if " " in cut else cut


def _result(report: IngestReport, outcomes: list[MemoryOutcome]) -> MemoryWriteResult:
    return MemoryWriteResult(
        items=outcomes,
        nodes=report.nodes,
        directories=report.directories,
        vectors=report.vectors,
        unchanged=report.unchanged,
        pending=report.pending,
    )
