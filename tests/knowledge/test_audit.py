"""The audit store, the session ledger and the recorder's queries and evidence verification."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from context_engine.knowledge.retrieved_doc_tracker import RetrievedDocTracker
from context_engine.knowledge.tool_invocation_recorder import ToolInvocationRecorder
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import EvidenceRef, RetrievalDetails, ToolInvocation
from context_engine.settings import KnowledgeSettings

ACME = RequestContext(account_id="acme", role="admin")
GLOBEX = RequestContext(account_id="globex", role="admin")
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
TEXT = "- Check pod events via `kubectl -n $NAMESPACE describe pod $POD`.\n- Check   pod logs."


def invocation(
    account="acme", session="s1", at=T0, refs=None, tool="lookup_knowledge", status="found", docs=("d1",)
) -> ToolInvocation:
    return ToolInvocation(
        invocation_id=uuid.uuid4().hex,
        account_id=account,
        session_id=session,
        tool_name=tool,
        request_id="r",
        created_at=at,
        caller={"role": "admin"},
        input_params={"query": "q"},
        retrieval_layer="semantic",
        l0_match_count=0,
        l1_match_count=1,
        retrieval_details=RetrievalDetails(
            evidence_status=status,
            evidence_refs=refs
            if refs is not None
            else [EvidenceRef(raw_path="$.evidence_blocks[0]", text=TEXT, doc_id="d1")],
            evidence_blocks=[{"doc_id": d, "relevance_level": "REFERENCE"} for d in docs],
        ),
        relevance_level="REFERENCE",
        dedup_reason=None,
        output_preview="p",
        duration_ms=1.5,
        success=True,
    )


@pytest.fixture
def recorder(audit):
    return ToolInvocationRecorder(audit, KnowledgeSettings())


def test_round_trip_and_account_scope(recorder):
    inv = invocation()
    recorder.record(inv)
    got = recorder.get(inv.invocation_id, ACME)
    assert got == inv
    assert recorder.get(inv.invocation_id, GLOBEX) is None


def test_queries_by_session_tool_and_time(recorder):
    rows = [
        invocation(session="s1", at=T0),
        invocation(session="s1", at=T0 + timedelta(minutes=1)),
        invocation(session="s2", at=T0 + timedelta(minutes=2), tool="other_tool"),
        invocation(account="globex", session="s1", at=T0),
    ]
    for r in rows:
        recorder.record(r)
    assert [r.invocation_id for r in recorder.list_invocations(ACME)] == [
        rows[2].invocation_id,
        rows[1].invocation_id,
        rows[0].invocation_id,
    ]
    assert [r.invocation_id for r in recorder.list_invocations(ACME, session_id="s1", newest_first=False)] == [
        rows[0].invocation_id,
        rows[1].invocation_id,
    ]
    assert [r.invocation_id for r in recorder.list_invocations(ACME, tool_name="other_tool")] == [rows[2].invocation_id]
    window = recorder.list_invocations(ACME, since=T0 + timedelta(seconds=30), until=T0 + timedelta(minutes=2))
    assert [r.invocation_id for r in window] == [rows[1].invocation_id]
    assert len(recorder.list_invocations(GLOBEX)) == 1
    assert len(recorder.list_invocations(ACME, limit=1, offset=1)) == 1


def test_session_summary(recorder):
    recorder.record(invocation(docs=("d1", "d2")))
    recorder.record(invocation(at=T0 + timedelta(minutes=1), docs=("d3",)))
    summary = recorder.session_summary("s1", ACME)
    assert summary.invocation_count == 2 and summary.success_count == 2
    assert summary.documents == ["d1", "d2", "d3"]
    assert summary.first_at == T0 and summary.tools == {"lookup_knowledge": 2}
    assert recorder.session_summary("s1", GLOBEX).invocation_count == 0


def test_verify_evidence(recorder):
    inv = invocation()
    recorder.record(inv)
    check = recorder.verify_evidence(inv.invocation_id, "Check pod events via `kubectl -n $NAMESPACE", ACME)
    assert check.verified and check.match == "exact" and check.raw_path == "$.evidence_blocks[0]"
    check = recorder.verify_evidence(inv.invocation_id, "Check pod\nlogs.", ACME)
    assert check.verified and check.match == "normalized_whitespace"
    assert not recorder.verify_evidence(inv.invocation_id, "Check pod events via `oc describe", ACME).verified
    assert recorder.verify_evidence(inv.invocation_id, "Check", ACME).reason == "excerpt_too_short"
    assert recorder.verify_evidence(inv.invocation_id, "Check pod logs.", GLOBEX).reason == "invocation_not_found"
    assert recorder.verify_evidence("nope", "Check pod logs.", ACME).reason == "invocation_not_found"


def test_verify_follows_a_deduped_ref_to_the_first_invocation(recorder):
    first = invocation()
    recorder.record(first)
    second = invocation(
        at=T0 + timedelta(minutes=1),
        status="all_deduped",
        refs=[
            EvidenceRef(
                raw_path="$.evidence_blocks[0]",
                text="already returned",
                status="deduped",
                doc_id="d1",
                first_invocation_id=first.invocation_id,
            )
        ],
    )
    recorder.record(second)
    check = recorder.verify_evidence(second.invocation_id, "describe pod $POD", ACME)
    assert check.verified and check.matched_invocation_id == first.invocation_id


def test_no_evidence_ref_backs_nothing(recorder):
    inv = invocation(
        status="no_evidence",
        refs=[EvidenceRef(raw_path="$.no_evidence", text="nothing found here", status="no_evidence")],
    )
    recorder.record(inv)
    check = recorder.verify_evidence(inv.invocation_id, "nothing found here", ACME)
    assert not check.verified and check.reason == "no_evidence"


def test_ledger_is_per_session_per_account_and_expires(audit, recorder):
    tracker = RetrievedDocTracker(audit, ttl_s=60)
    inv = invocation()
    recorder.record(inv, ledger_doc_keys=["d1", "d2"], ledger_ttl_s=60)
    seen = tracker.already_retrieved("acme", "s1", ["d1", "d3"], T0 + timedelta(seconds=10))
    assert list(seen) == ["d1"] and seen["d1"].invocation_id == inv.invocation_id
    assert "by invocation" in tracker.dedup_reason("s1", seen["d1"])
    assert tracker.already_retrieved("acme", "s2", ["d1"], T0) == {}
    assert tracker.already_retrieved("globex", "s1", ["d1"], T0) == {}
    assert tracker.already_retrieved("acme", None, ["d1"], T0) == {}
    assert tracker.already_retrieved("acme", "s1", ["d1"], T0 + timedelta(seconds=61)) == {}  # expired
    # an expired mark is renewed by the next invocation; a live one keeps its first invocation
    later = invocation(at=T0 + timedelta(seconds=120))
    raced = recorder.record(later, ledger_doc_keys=["d1"], ledger_ttl_s=60)
    assert raced == {}
    assert tracker.already_retrieved("acme", "s1", ["d1"], T0 + timedelta(seconds=130))["d1"].invocation_id == (
        later.invocation_id
    )
    assert tracker.purge_expired(T0 + timedelta(hours=1)) == 2
