"""search_memory's audit row (issue 29 item 5): one ``tool_invocation`` per call, successful or not, under the rules
of lookup_knowledge's row (:mod:`.tool_invocation_recorder`).

The same rules: the row is scoped to the caller's account and principal, redacted before it is stored and when it
is read back, and keeps the query text only when ``knowledge.audit_query_text`` is on (its SHA-256 always). A
read-only home records nothing. A rejected request leaves a row with ``success=false`` and its error code.

What differs from a lookup row, because the call differs:

* the row is written after the answer, on the recorder's background writer (issue 26: redaction and the insert
  cost ~3 ms of a search's thread; 0.8 ms of CPU since URIs no longer trigger the redaction patterns); every read of
  the audit trail through the engine waits for it, and so does the engine's ``close``; a refused row is logged and
  counted (``ce_audit_write_failures_total{tool}``), it does not fail the search that was answered;
* ``invocation_id`` is the response's ``request_id`` (one id to quote for the call);
* ``session_id`` is the request's ``conversation_id`` (the conversation whose memories were asked for; a search has
  no diagnosis session, and the row's column keeps the seed's name);
* ``retrieval_layer`` is ``l0+hierarchical``; ``l0_match_count`` counts the seed hits that passed the recheck and
  ``l1_match_count`` is 0 (search_memory never reads L1 or L2);
* ``relevance_level`` is the answer's ``match_quality`` in capitals (``STRONG``, ``WEAK``, ``NONE``);
* ``retrieval_details.evidence_blocks`` lists the hits (URI as ``doc_id``, final score in 0..1, category, owner
  space) and ``evidence_refs`` their abstracts at ``$.hits[i]``, so ``verify_evidence`` checks a quoted abstract
  as it checks a lookup excerpt; without hits one ``$.no_evidence`` ref says why.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from context_engine.errors import ContextEngineError
from context_engine.knowledge.tool_invocation_recorder import ToolInvocationRecorder
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import (
    NO_EVIDENCE_PATH,
    EvidenceRef,
    EvidenceStatus,
    RetrievalDetails,
    ToolInvocation,
)
from context_engine.schema.query import SearchMemoryRequest, SearchMemoryResponse
from context_engine.settings import KnowledgeSettings

TOOL_NAME = "search_memory"
RETRIEVAL_LAYER = "l0+hierarchical"


class SearchAudit:
    """Writes search_memory's ``tool_invocation`` rows through the lookup's recorder.

    Args:
        recorder: the audit trail shared with lookup_knowledge (scoping, redaction, read-only home).
        settings: the ``knowledge`` section (``audit_query_text``, ``output_preview_chars``).
    """

    def __init__(self, recorder: ToolInvocationRecorder, settings: KnowledgeSettings) -> None:
        self._recorder = recorder
        self._s = settings

    def record(
        self,
        request: SearchMemoryRequest,
        ctx: RequestContext,
        *,
        request_id: str,
        created_at: datetime,
        duration_ms: float,
        response: SearchMemoryResponse | None = None,
        error: ContextEngineError | None = None,
    ) -> None:
        """Store the row of one call: ``response`` for an answered call, ``error`` for a rejected one.

        The row is built here and written by the recorder's background writer
        (:meth:`ToolInvocationRecorder.record_later`: off the request's thread, read back by the recorder's reads as
        soon as this returns); a row the audit store refuses is logged and counted
        (``ce_audit_write_failures_total``), never raised to the search.
        """
        self._recorder.record_later(
            search_invocation(
                request,
                ctx,
                self._s,
                request_id=request_id,
                created_at=created_at,
                duration_ms=duration_ms,
                response=response,
                error=error,
            )
        )


def search_input_params(request: SearchMemoryRequest, settings: KnowledgeSettings) -> dict[str, object]:
    """The request as recorded: its fields (empty lists and ``None`` left out), the query's SHA-256, the query text
    only when ``knowledge.audit_query_text``."""
    dumped = request.model_dump(mode="json", exclude_none=True)
    params: dict[str, object] = {k: v for k, v in dumped.items() if v not in ([], {})}
    params["query_sha256"] = hashlib.sha256(request.query.encode("utf-8", "surrogatepass")).hexdigest()
    if not settings.audit_query_text:
        params.pop("query", None)
    return params


def search_invocation(
    request: SearchMemoryRequest,
    ctx: RequestContext,
    settings: KnowledgeSettings,
    *,
    request_id: str,
    created_at: datetime,
    duration_ms: float,
    response: SearchMemoryResponse | None = None,
    error: ContextEngineError | None = None,
) -> ToolInvocation:
    """The ``tool_invocation`` row of one search_memory call (see the module docstring for its fields)."""
    caller = {"role": ctx.role, "user_space": ctx.user_space, "agent_space": ctx.agent_space}
    base: dict[str, Any] = {
        "invocation_id": request_id,
        "account_id": ctx.account_id,
        "session_id": request.conversation_id,
        "tool_name": TOOL_NAME,
        "request_id": request_id,
        "created_at": created_at,
        "caller": caller,
        "input_params": search_input_params(request, settings),
        "l1_match_count": 0,
        "dedup_reason": None,
        "duration_ms": round(duration_ms, 3),
    }
    limit = settings.output_preview_chars
    if response is None:
        code = error.code.value if error is not None else "unknown"
        message = error.message if error is not None else "no answer"
        return ToolInvocation(
            **base,
            retrieval_layer="none",
            l0_match_count=0,
            retrieval_details=RetrievalDetails(
                evidence_status="no_evidence",
                evidence_refs=[
                    EvidenceRef(
                        raw_path=NO_EVIDENCE_PATH, text=f"request rejected ({code}): {message}", status="no_evidence"
                    )
                ],
            ),
            relevance_level="NONE",
            output_preview=f"error {code}: {message}"[:limit],
            success=False,
            error_code=code,
            error_message=message[:1000],
        )
    hits = response.hits
    status: EvidenceStatus = "found" if hits else ("search_failed" if response.retryable else "no_evidence")
    refs = [EvidenceRef(raw_path=f"$.hits[{i}]", text=h.abstract or "", doc_id=h.uri) for i, h in enumerate(hits)]
    if not refs:
        why = (
            "the search failed; this proves nothing about the memories"
            if status == "search_failed"
            else "no visible node was a hit for this query"
        )
        refs.append(EvidenceRef(raw_path=NO_EVIDENCE_PATH, text=why, status="no_evidence"))
    details = RetrievalDetails(
        evidence_status=status,
        evidence_blocks=[
            {
                "index": i,
                "doc_id": h.uri,
                "score": round(h.score, 6),
                "category": h.category,
                "owner_space": h.owner_space,
                "match_reason": h.match_reason,
            }
            for i, h in enumerate(hits)
        ],
        scores=[{"uri": h.uri, "score": round(h.score, 6)} for h in hits],
        evidence_refs=refs,
        warnings=list(response.trace.warnings),
    )
    preview = "\n".join(f"{h.score:.3f} {h.uri}" for h in hits) or f"{status}: no hits"
    return ToolInvocation(
        **base,
        retrieval_layer=RETRIEVAL_LAYER,
        l0_match_count=len(response.seed_hits),
        retrieval_details=details,
        relevance_level=response.match_quality.upper(),
        output_preview=preview[:limit],
        success=True,
    )
