"""The audit trail of lookup_knowledge: ``ToolInvocationRecorder`` (DESIGN.md §7.6, §9; seed 001 §7).

One ``tool_invocation`` row per call, successful or not, with every field of seed 001 §7 (``retrieval_layer,
l0_match_count, l1_match_count, retrieval_details, relevance_level, dedup_reason, output_preview, duration_ms,
success``). ``retrieval_details`` holds the hint matches, the semantic attempts, the fallback reason, the scores,
the domains, the evidence status, the dedup reason, block summaries, a context-pack summary, the rerank trace
(empty: no reranker yet) and ``evidence_refs``: for each evidence block its ``raw_path`` (``$.evidence_blocks[i]``
in the LookupResult) and the exact text returned there. A call without evidence records one ref with
``raw_path = $.no_evidence``, which proves only that this search found nothing.

:meth:`verify_evidence` is the gatekeeper's check: is a quoted excerpt backed by a recorded ref of an invocation
(exact substring, or substring after NFC and whitespace normalisation)? A ``DEDUPED`` ref is followed to the
earlier invocation of the same session that returned the text.

Scope (docs/security.md "Tenancy model"): every read is limited to the caller's account and, unless the caller is an
``admin``, to the rows its own principal (``role:user_space:agent_space``) made. Another user's invocation reads
exactly like a missing one (``None``, ``invocation_not_found``, an empty session summary).

Secrets (docs/security.md "Secret redaction"): every text field of a row (input parameters, hints, evidence refs,
preview, error message) is redacted by the patterns before it is stored, and again when rows are read back (rows
written before issue 14). The identifiers a row is found by (``invocation_id``, ``account_id``, ``session_id``,
``request_id``, ``caller``, ``tool_name``) are kept as sent.

Rows written later (:meth:`ToolInvocationRecorder.record_later`, search_memory's rows, issue 26): redaction and the
insert run on one background thread, fed by a bounded queue (a full queue makes the caller wait: a row is never
dropped); the rows queued while it writes are written together, in one transaction (``WRITE_BATCH_ROWS`` at most).
Every read of this recorder (get, list, summary, verify) waits for the rows queued before it, and so does
:meth:`~ToolInvocationRecorder.close` (the engine's ``close``) and the end of the process; a row the store refuses is
logged and counted (``ce_audit_write_failures_total{tool}``), the store left as it was (a refused batch is written
again row by row, one transaction each).
"""

from __future__ import annotations

import atexit
import logging
import queue
import re
import threading
import unicodedata
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from context_engine.observability.metrics import Metrics
from context_engine.redaction import Redactor, redact_structure
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import (
    NO_EVIDENCE_PATH,
    EvidenceVerification,
    InvocationSummary,
    SessionTraceSummary,
    ToolInvocation,
)
from context_engine.settings import KnowledgeSettings
from context_engine.storage.metadata.audit import LedgerEntry
from context_engine.storage.protocols import AuditStore

_WS_RE = re.compile(r"\s+")
# Fields a row is looked up by: kept as sent (redacting them would break the lookups).
_KEY_FIELDS = frozenset({"invocation_id", "account_id", "session_id", "request_id", "caller", "tool_name"})
_LOG = logging.getLogger("context_engine.knowledge")
# Rows queued for the background writer at most; a caller finding the queue full waits (backpressure, no loss).
WRITE_QUEUE_ROWS = 1024
# Rows written in one transaction at most (group commit of the rows queued while the writer writes).
WRITE_BATCH_ROWS = 64


#: A row's input parameters keep texts of at most this many characters (the query's own limit: a request that was
#: accepted is kept whole) and lists and objects of at most ``AUDIT_PARAM_ITEMS`` entries, ``AUDIT_PARAM_DEPTH`` levels
#: deep. A request refused for its size (a 1 MB query or session id, answered 400 RET-4001) was stored whole before:
#: a few refused calls grew the database by megabytes and a listing of three rows answered 6 MB.
AUDIT_PARAM_CHARS = 4096
AUDIT_PARAM_ITEMS = 100
AUDIT_PARAM_DEPTH = 8


def bounded_params(value: Any, depth: int = 0) -> Any:
    """``value`` (a row's ``input_params``, JSON-like) with each text cut to :data:`AUDIT_PARAM_CHARS` characters,
    each list and object to :data:`AUDIT_PARAM_ITEMS` entries and nothing deeper than :data:`AUDIT_PARAM_DEPTH`
    levels; what was cut is said in place ("… [1000010 characters]"). A value within the bounds is returned as is."""
    if isinstance(value, str):
        return value if len(value) <= AUDIT_PARAM_CHARS else f"{value[:AUDIT_PARAM_CHARS]}… [{len(value)} characters]"
    if isinstance(value, list | dict) and depth >= AUDIT_PARAM_DEPTH:
        return f"… [{type(value).__name__} nested deeper than {AUDIT_PARAM_DEPTH} levels]"
    if isinstance(value, list):
        items = [bounded_params(v, depth + 1) for v in value[:AUDIT_PARAM_ITEMS]]
        return items + ([f"… [{len(value)} items]"] if len(value) > AUDIT_PARAM_ITEMS else [])
    if isinstance(value, dict):
        out = {
            bounded_params(k, depth + 1) if isinstance(k, str) else k: bounded_params(v, depth + 1)
            for k, v in list(value.items())[:AUDIT_PARAM_ITEMS]
        }
        if len(value) > AUDIT_PARAM_ITEMS:
            out["…"] = f"[{len(value)} entries]"
        return out
    return value


def normalize_whitespace(text: str) -> str:
    """NFC, every whitespace run collapsed to one space, stripped: the ``normalized_whitespace`` match form."""
    return _WS_RE.sub(" ", unicodedata.normalize("NFC", text)).strip()


class ToolInvocationRecorder:
    """Writes and reads ``tool_invocation`` rows; every read is scoped to the caller's account and principal
    (an admin reads every principal of its account).

    Args:
        store: the audit tables.
        settings: the ``knowledge`` section (``verify_min_excerpt_chars``).
        redactor: redacts the rows' text fields when they are read back (``None``: a default redactor); rows are
            always redacted before they are stored.
        metrics: counts the rows :meth:`record_later` could not write (``None``: a private registry).
    """

    def __init__(
        self,
        store: AuditStore,
        settings: KnowledgeSettings,
        redactor: Redactor | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._s = settings
        if redactor is None:
            from context_engine.settings import RedactionSettings

            redactor = Redactor(RedactionSettings())
        self._redactor = redactor
        self._writer = _RowWriter(self._write_rows, metrics or Metrics())

    def redact(self, invocation: ToolInvocation, *, stored: bool = False) -> ToolInvocation:
        """``invocation`` with every text field but the identifiers redacted by the patterns: always when it is
        about to be ``stored``, else (rows read back) as ``retrieval.redaction.enabled`` says."""
        data = invocation.model_dump()
        if stored:  # a request refused for its size is not stored whole (an attack pass: 1 MB rows, 6 MB listings)
            data["input_params"] = bounded_params(data["input_params"])
        redact = redact_structure if stored else self._redactor.redact_value
        update = {k: redact(v) for k, v in data.items() if k not in _KEY_FIELDS}
        redacted = ToolInvocation.model_validate({**data, **update})
        return invocation if redacted == invocation else redacted

    def record(
        self, invocation: ToolInvocation, *, ledger_doc_keys: Sequence[str] = (), ledger_ttl_s: int = 0
    ) -> dict[str, LedgerEntry]:
        """Insert the row and, in the same transaction, mark ``ledger_doc_keys`` as retrieved in its session.

        Returns:
            Ledger entries that another call of the session had written first (a concurrent duplicate).
        """
        return self._store.record_invocation(
            self.redact(invocation, stored=True), ledger_keys=ledger_doc_keys, ledger_ttl_s=ledger_ttl_s
        )

    def record_later(self, invocation: ToolInvocation) -> None:
        """Queue the row for the background writer (module docstring): redacted and inserted off the caller's
        thread, visible to every read of this recorder once this returns (reads flush first). Waits only while the
        queue is full. A row the store refuses is logged and counted, never raised here."""
        self._writer.submit(invocation)

    def flush(self) -> None:
        """Wait until every row queued by :meth:`record_later` so far is written (or its failure counted)."""
        self._writer.flush()

    def close(self) -> None:
        """Write the queued rows and stop the background writer; later rows are written in the caller's thread."""
        self._writer.close()

    @property
    def write_failures(self) -> int:
        """Rows queued by :meth:`record_later` that the store refused (also ``ce_audit_write_failures_total``)."""
        return self._writer.failures

    def _write_rows(self, invocations: Sequence[ToolInvocation]) -> None:
        self._store.record_invocations([self.redact(invocation, stored=True) for invocation in invocations])

    def get(self, invocation_id: str, ctx: RequestContext) -> ToolInvocation | None:
        """The invocation in the caller's scope, or ``None`` (the same for another account's or user's id)."""
        self.flush()
        found = self._store.get_invocation(ctx.account_id, invocation_id, principal=_scope(ctx))
        return None if found is None else self.redact(found)

    def list_invocations(
        self,
        ctx: RequestContext,
        *,
        session_id: str | None = None,
        tool_name: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
        newest_first: bool = True,
    ) -> list[ToolInvocation]:
        """Invocations in the caller's scope by session, tool and time (``since <= created_at < until``)."""
        self.flush()
        rows = self._store.list_invocations(
            ctx.account_id,
            principal=_scope(ctx),
            session_id=session_id,
            tool_name=tool_name,
            since=since,
            until=until,
            limit=limit,
            offset=offset,
            newest_first=newest_first,
        )
        return [self.redact(r) for r in rows]

    def session_summary(self, session_id: str, ctx: RequestContext, *, limit: int = 1000) -> SessionTraceSummary:
        """A verifier's view of a session: counts by tool, level and evidence status, the documents returned,
        dedups and fallbacks, and one line per invocation in chronological order (at most ``limit``)."""
        rows = self.list_invocations(ctx, session_id=session_id, limit=limit, newest_first=False)
        lines: list[InvocationSummary] = []
        documents: dict[str, None] = {}
        dedup = fallback = 0
        for r in rows:
            d = r.retrieval_details
            doc_ids = [b.get("doc_id", "") for b in d.evidence_blocks if b.get("relevance_level") != "DEDUPED"]
            deduped = [x.get("doc_id", "") for x in d.deduped]
            documents.update(dict.fromkeys(doc_ids))
            dedup += len(deduped)
            fallback += 1 if d.fallback_reason else 0
            lines.append(
                InvocationSummary(
                    invocation_id=r.invocation_id,
                    created_at=r.created_at,
                    tool_name=r.tool_name,
                    query_preview=str(r.input_params.get("query", r.input_params.get("query_sha256", "")))[:120],
                    retrieval_layer=r.retrieval_layer,
                    relevance_level=r.relevance_level,
                    evidence_status=d.evidence_status,
                    l0_match_count=r.l0_match_count,
                    l1_match_count=r.l1_match_count,
                    doc_ids=doc_ids,
                    deduped_doc_ids=deduped,
                    fallback_reason=d.fallback_reason,
                    duration_ms=r.duration_ms,
                    success=r.success,
                )
            )
        return SessionTraceSummary(
            session_id=session_id,
            invocation_count=len(rows),
            success_count=sum(1 for r in rows if r.success),
            failure_count=sum(1 for r in rows if not r.success),
            tools=dict(sorted(Counter(r.tool_name for r in rows).items())),
            relevance_levels=dict(sorted(Counter(r.relevance_level for r in rows).items())),
            evidence_statuses=dict(
                sorted(Counter(r.retrieval_details.evidence_status or "none" for r in rows).items())
            ),
            documents=list(documents),
            dedup_count=dedup,
            fallback_count=fallback,
            total_duration_ms=round(sum(r.duration_ms for r in rows), 3),
            first_at=rows[0].created_at if rows else None,
            last_at=rows[-1].created_at if rows else None,
            invocations=lines,
        )

    def verify_evidence(self, invocation_id: str, excerpt: str, ctx: RequestContext) -> EvidenceVerification:
        """Whether ``excerpt`` is backed by an evidence ref recorded for ``invocation_id`` (see the module doc).

        Never raises for a missing or foreign invocation: it is simply not verified (``invocation_not_found``).
        """
        out = EvidenceVerification(invocation_id=invocation_id, verified=False)
        invocation = self.get(invocation_id, ctx)
        if invocation is None:
            out.reason = "invocation_not_found"
            return out
        normalized = normalize_whitespace(excerpt)
        if len(normalized) < self._s.verify_min_excerpt_chars:
            out.reason = "excerpt_too_short"
            return out
        refs = invocation.retrieval_details.evidence_refs
        for ref in refs:
            if ref.status != "evidence":
                continue
            match = _match(excerpt, normalized, ref.text)
            if match:
                return out.model_copy(
                    update={
                        "verified": True,
                        "match": match,
                        "raw_path": ref.raw_path,
                        "doc_id": ref.doc_id,
                        "matched_invocation_id": invocation.invocation_id,
                    }
                )
        for ref in refs:
            if ref.status != "deduped" or not ref.first_invocation_id:
                continue
            first = self.get(ref.first_invocation_id, ctx)
            if first is None or first.session_id != invocation.session_id or first.caller != invocation.caller:
                continue
            for earlier in first.retrieval_details.evidence_refs:
                if earlier.status == "evidence" and earlier.doc_id == ref.doc_id:
                    match = _match(excerpt, normalized, earlier.text)
                    if match:
                        return out.model_copy(
                            update={
                                "verified": True,
                                "match": match,
                                "raw_path": ref.raw_path,
                                "doc_id": ref.doc_id,
                                "matched_invocation_id": first.invocation_id,
                            }
                        )
        out.reason = "no_evidence" if all(r.raw_path == NO_EVIDENCE_PATH for r in refs) else "not_found"
        return out


class _RowWriter:
    """One background thread writing queued rows in order (started at the first row, a daemon flushed at exit).

    The thread takes a row off the queue as soon as it is there and writes it with every row queued behind it
    (``WRITE_BATCH_ROWS`` at most) in one transaction: rows that queue up while it writes (concurrent requests, a
    slow disk) share one commit (a row inserted alone cost 0.45 ms, in a batch of eight 0.24 ms). A batch the store
    refuses is written again row by row (a warning), so that only the refused rows are lost (each logged and
    counted)."""

    def __init__(self, write: Callable[[Sequence[ToolInvocation]], None], metrics: Metrics) -> None:
        self._write = write
        self._metrics = metrics
        self._queue: queue.Queue[ToolInvocation | None] = queue.Queue(maxsize=WRITE_QUEUE_ROWS)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.failures = 0

    def submit(self, row: ToolInvocation) -> None:
        with self._lock:  # held while queueing, so that no row lands behind close()'s end mark
            if not self._closed:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="ce-audit-writer", daemon=True)
                    self._thread.start()
                    atexit.register(_close_at_exit, weakref.ref(self))
                self._queue.put(row)  # waits while the queue is full
                return
        self._write_rows([row])  # after close: written here, as before the writer existed

    def flush(self) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._queue.join()

    def close(self) -> None:
        with self._lock:  # one end mark, by the first caller: a second one would never be taken off the queue
            first, thread, self._closed = not self._closed, self._thread, True
            if first and thread is not None:
                self._queue.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < WRITE_BATCH_ROWS and batch[-1] is not None:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write_rows([row for row in batch if row is not None])
            finally:
                for _ in batch:
                    self._queue.task_done()
            if batch[-1] is None:
                return

    def _write_rows(self, rows: list[ToolInvocation]) -> None:
        if not rows:
            return
        try:
            self._write(rows)
            return
        except Exception as err:  # noqa: BLE001 - written again row by row below: only the refused rows are lost
            if len(rows) == 1:
                self._failed(rows[0])
                return
            _LOG.warning(
                "audit batch not written; writing its rows one by one",
                extra={"ce_event": {"rows": len(rows), "error": f"{type(err).__name__}: {err}"[:300]}},
            )
        for row in rows:
            try:
                self._write([row])
            except Exception:  # noqa: BLE001 - the call this row records has answered; the loss is logged, counted
                self._failed(row)

    def _failed(self, row: ToolInvocation) -> None:
        self.failures += 1
        self._metrics.audit_write_failures.labels(tool=row.tool_name).inc()
        _LOG.error(
            "audit row not written",
            exc_info=True,
            extra={"ce_event": {"invocation_id": row.invocation_id, "tool_name": row.tool_name}},
        )


def _close_at_exit(ref: weakref.ref[_RowWriter]) -> None:
    writer = ref()
    if writer is not None:
        writer.close()


def _scope(ctx: RequestContext) -> str | None:
    """The principal whose rows the caller reads; ``None`` (every principal of the account) for an admin."""
    return None if ctx.is_admin else ctx.principal


def _match(excerpt: str, normalized: str, text: str) -> str | None:
    if excerpt and excerpt in text:
        return "exact"
    if normalized and normalized in normalize_whitespace(text):
        return "normalized_whitespace"
    return None
