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
from tests.storage.conftest import metadata_backend  # noqa: F401  (a fixture: the tests below run on every backend)

ACME = RequestContext(account_id="acme", role="admin")
GLOBEX = RequestContext(account_id="globex", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="bot")
ALICE_OTHER_AGENT = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="other")
CAROL = RequestContext(account_id="acme", role="user", user_space="carol")
P = ACME.principal
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
TEXT = "- Check pod events via `kubectl -n $NAMESPACE describe pod $POD`.\n- Check   pod logs."


def invocation(
    account="acme",
    session="s1",
    at=T0,
    refs=None,
    tool="lookup_knowledge",
    status="found",
    docs=("d1",),
    caller=None,
) -> ToolInvocation:
    return ToolInvocation(
        invocation_id=uuid.uuid4().hex,
        account_id=account,
        session_id=session,
        tool_name=tool,
        request_id="r",
        created_at=at,
        caller=caller or {"role": "admin"},
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
def metadata(metadata_backend):  # noqa: F811  (overrides conftest's SQLite-only store: SQLite and PostgreSQL)
    return metadata_backend.open()


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
    seen = tracker.already_retrieved("acme", P, "s1", ["d1", "d3"], T0 + timedelta(seconds=10))
    assert list(seen) == ["d1"] and seen["d1"].invocation_id == inv.invocation_id
    assert "by invocation" in tracker.dedup_reason("s1", seen["d1"])
    assert tracker.already_retrieved("acme", P, "s2", ["d1"], T0) == {}
    assert tracker.already_retrieved("globex", P, "s1", ["d1"], T0) == {}
    assert tracker.already_retrieved("acme", P, None, ["d1"], T0) == {}
    assert tracker.already_retrieved("acme", P, "s1", ["d1"], T0 + timedelta(seconds=61)) == {}  # expired
    # an expired mark is renewed by the next invocation; a live one keeps its first invocation
    later = invocation(at=T0 + timedelta(seconds=120))
    raced = recorder.record(later, ledger_doc_keys=["d1"], ledger_ttl_s=60)
    assert raced == {}
    assert tracker.already_retrieved("acme", P, "s1", ["d1"], T0 + timedelta(seconds=130))["d1"].invocation_id == (
        later.invocation_id
    )
    assert tracker.purge_expired(T0 + timedelta(hours=1)) == 2


def caller_of(ctx: RequestContext) -> dict:
    return {"role": ctx.role, "user_space": ctx.user_space, "agent_space": ctx.agent_space}


def test_invocations_belong_to_their_principal(recorder):
    mine = invocation(caller=caller_of(ALICE))
    theirs = invocation(caller=caller_of(CAROL), at=T0 + timedelta(minutes=1))
    for r in (mine, theirs):
        recorder.record(r)
    assert ALICE.principal == "user:alice:bot" and CAROL.principal == "user:carol:"
    assert [r.invocation_id for r in recorder.list_invocations(ALICE)] == [mine.invocation_id]
    assert [r.invocation_id for r in recorder.list_invocations(CAROL)] == [theirs.invocation_id]
    assert recorder.list_invocations(ALICE_OTHER_AGENT) == []  # another agent of the same user is another principal
    assert recorder.get(theirs.invocation_id, ALICE) is None
    assert recorder.get(mine.invocation_id, ALICE) == mine
    # the account admin reads every principal's rows
    assert {r.invocation_id for r in recorder.list_invocations(ACME)} == {mine.invocation_id, theirs.invocation_id}
    assert recorder.get(theirs.invocation_id, ACME) == theirs
    assert recorder.session_summary("s1", ALICE).invocation_count == 1
    assert recorder.session_summary("s1", ACME).invocation_count == 2
    # another user's invocation verifies exactly like a missing one
    foreign = recorder.verify_evidence(theirs.invocation_id, "Check pod logs.", ALICE)
    missing = recorder.verify_evidence("0" * 32, "Check pod logs.", ALICE)
    assert foreign.reason == missing.reason == "invocation_not_found" and not foreign.verified
    assert recorder.verify_evidence(mine.invocation_id, "Check pod logs.", ALICE).verified


def test_ledger_sessions_belong_to_their_principal(audit, recorder):
    tracker = RetrievedDocTracker(audit, ttl_s=60)
    recorder.record(invocation(caller=caller_of(ALICE)), ledger_doc_keys=["d1"], ledger_ttl_s=60)
    assert list(tracker.already_retrieved("acme", ALICE.principal, "s1", ["d1"], T0)) == ["d1"]
    assert tracker.already_retrieved("acme", CAROL.principal, "s1", ["d1"], T0) == {}
    assert tracker.already_retrieved("acme", ACME.principal, "s1", ["d1"], T0) == {}
    # carol marking the same document in her own session "s1" is no conflict with alice's mark
    assert recorder.record(invocation(caller=caller_of(CAROL)), ledger_doc_keys=["d1"], ledger_ttl_s=60) == {}
    assert list(tracker.already_retrieved("acme", CAROL.principal, "s1", ["d1"], T0)) == ["d1"]


def test_schema_3_audit_tables_are_upgraded_in_place(tmp_path):
    """A database written before issue 14 (no ``principal``) opens: rows keep their caller's scope, the ledger
    restarts empty, the schema version becomes 4."""
    import sqlite3

    from context_engine.storage.metadata.audit import SqlAuditStore
    from context_engine.storage.metadata.sqlalchemy_store import SCHEMA_VERSION, SqlMetadataStore

    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE schema_version (id INTEGER PRIMARY KEY, version INTEGER NOT NULL);
        INSERT INTO schema_version VALUES (1, 3);
        CREATE TABLE tool_invocations (seq INTEGER PRIMARY KEY AUTOINCREMENT, invocation_id VARCHAR(64),
            account_id VARCHAR(64), session_id VARCHAR(256), tool_name VARCHAR(64), request_id VARCHAR(64),
            created_at TIMESTAMP, caller JSON, input_params JSON, retrieval_layer VARCHAR(32), l0_match_count INTEGER,
            l1_match_count INTEGER, retrieval_details JSON, relevance_level VARCHAR(32), dedup_reason TEXT,
            output_preview TEXT, duration_ms FLOAT, success BOOLEAN, error_code VARCHAR(16), error_message TEXT);
        CREATE TABLE retrieved_docs (id INTEGER PRIMARY KEY AUTOINCREMENT, account_id VARCHAR(64),
            session_id VARCHAR(256), doc_key VARCHAR(1024), invocation_id VARCHAR(64), retrieved_at TIMESTAMP,
            expires_at TIMESTAMP, CONSTRAINT uq_retrieved_docs_key UNIQUE (account_id, session_id, doc_key));
        INSERT INTO retrieved_docs VALUES (1, 'acme', 's1', 'd1', 'x', '2026-01-05 09:00:00', '2099-01-01 00:00:00');
        """
    )
    old = invocation(caller=caller_of(ALICE))
    values = old.model_dump(mode="json")
    import json

    con.execute(
        "INSERT INTO tool_invocations (invocation_id, account_id, session_id, tool_name, request_id, created_at, "
        "caller, input_params, retrieval_layer, l0_match_count, l1_match_count, retrieval_details, relevance_level, "
        "dedup_reason, output_preview, duration_ms, success) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            old.invocation_id,
            "acme",
            "s1",
            old.tool_name,
            "r",
            "2026-01-05 09:00:00.000000",
            json.dumps(values["caller"]),
            json.dumps(values["input_params"]),
            "semantic",
            0,
            1,
            json.dumps(values["retrieval_details"]),
            "REFERENCE",
            None,
            "p",
            1.5,
            1,
        ),
    )
    con.commit()
    con.close()
    metadata = SqlMetadataStore.sqlite(path)
    try:
        audit = SqlAuditStore(metadata)
        rec = ToolInvocationRecorder(audit, KnowledgeSettings())
        assert [r.invocation_id for r in rec.list_invocations(ALICE)] == [old.invocation_id]
        assert rec.list_invocations(CAROL) == []
        assert RetrievedDocTracker(audit, 60).already_retrieved("acme", ALICE.principal, "s1", ["d1"], T0) == {}
        assert rec.record(invocation(caller=caller_of(ALICE)), ledger_doc_keys=["d1"], ledger_ttl_s=60) == {}
    finally:
        metadata.close()
    con = sqlite3.connect(path)
    assert con.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,) == (7,)
    con.close()


def test_rows_are_redacted_before_they_are_stored(audit):
    """Write-time redaction of audit rows is always on, even with read-time redaction switched off."""
    from context_engine.redaction import Redactor
    from context_engine.settings import RedactionSettings

    rec = ToolInvocationRecorder(audit, KnowledgeSettings(), Redactor(RedactionSettings(enabled=False)))
    leaky = invocation(session="token=should-stay-as-sent").model_copy(
        update={
            "input_params": {"query": "login fails with password=Hunter2-FAKE", "top_k": 3},
            "output_preview": "use postgres://app:FakePgPassw0rd@db/app",
            "error_message": "mysql://root:FakeMyPassw0rd@db refused",
        }
    )
    rec.record(leaky)
    stored = audit.get_invocation("acme", leaky.invocation_id)
    assert stored.input_params == {"query": "login fails with password=[REDACTED:credential]", "top_k": 3}
    assert stored.output_preview == "use postgres://app:[REDACTED:connection_string]@db/app"
    assert stored.error_message == "mysql://root:[REDACTED:connection_string]@db refused"
    assert stored.session_id == "token=should-stay-as-sent"  # identifiers are kept as sent
    assert stored.retrieval_details.evidence_refs[0].text == TEXT  # ordinary text untouched


def test_concurrent_calls_of_one_session_mark_each_document_once(audit):
    """Replicas answering two calls of one session at once: each document is marked by exactly one of them, and the
    others see that mark (on PostgreSQL the second insert waits for the first and then finds its row)."""
    import threading

    from context_engine.storage.metadata.audit import SqlAuditStore

    stores = [SqlAuditStore(audit._store) for _ in range(6)]
    start = threading.Barrier(len(stores))
    results: list[tuple[str, dict]] = []
    errors: list[BaseException] = []

    def call(store) -> None:
        inv = invocation()
        start.wait()
        try:
            found = store.record_invocation(inv, ledger_keys=["d1", "d2", "d3"], ledger_ttl_s=60)
            results.append((inv.invocation_id, found))
        except BaseException as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=call, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == len(stores)
    marks = audit.seen_documents("acme", P, "s1", ["d1", "d2", "d3"], T0)
    for key in ("d1", "d2", "d3"):
        winners = [inv for inv, found in results if key not in found]
        assert winners == [marks[key].invocation_id]  # one call marked it, the others were told who did
        assert all(found[key].invocation_id == winners[0] for inv, found in results if inv != winners[0])


def test_record_invocations_inserts_every_row_in_one_transaction_or_none(audit):
    """The background writer's group commit: every row of a batch, or none when one is refused (here a duplicate
    invocation id: the store is left as it was)."""
    from context_engine.errors import ContextEngineError, ErrorCode

    rows = [invocation(session=f"s{i}") for i in range(3)]
    audit.record_invocations(rows)
    assert [audit.get_invocation("acme", r.invocation_id) for r in rows] == rows
    fresh, clash = invocation(session="s9"), rows[1]
    with pytest.raises(ContextEngineError) as err:
        audit.record_invocations([fresh, clash])
    assert err.value.code is ErrorCode.STORAGE_FAILED
    assert audit.get_invocation("acme", fresh.invocation_id) is None
    audit.record_invocations([])  # nothing to write: no transaction, no error
    assert len(audit.list_invocations("acme", limit=10)) == 3
