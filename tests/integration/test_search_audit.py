"""search_memory leaves a ``tool_invocation`` row per call under lookup_knowledge's audit rules (issue 29 item 5):
per caller, redacted, the query text only with ``knowledge.audit_query_text``, a rejected request recorded with its
error code, and an abstract a hit returned verifiable with ``verify_evidence``."""

from __future__ import annotations

import hashlib

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext

ADMIN = RequestContext(account_id="acme", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice")
CAROL = RequestContext(account_id="acme", role="user", user_space="carol")
GLOBEX = RequestContext(account_id="globex", role="admin")

RUNBOOK = (
    "# etcd has no leader\n\n## Meaning\n\nThe etcd cluster has no leader: writes stall.\n\n## Fix\n\nCheck quorum.\n"
)


@pytest.fixture
def engine(make_engine):
    e = make_engine()
    e.add_text(RUNBOOK, "ctx://resources/runbooks/etcd-no-leader.md", ADMIN)
    e.add_memory("Alice runs the etcd cluster of project apollo.", ALICE, category="profile")
    return e


def test_a_search_is_recorded_for_its_caller_with_its_question_and_parameters(engine):
    resp = engine.search_memory("who runs the etcd cluster?", ALICE, top_k=3, conversation_id="chat-1")
    rows = engine.list_invocations(ALICE, tool_name="search_memory")
    assert len(rows) == 1
    row = rows[0]
    assert row.invocation_id == row.request_id == resp.request_id
    assert row.session_id == "chat-1" and row.success
    assert row.caller == {"role": "user", "user_space": "alice", "agent_space": None}
    assert row.input_params["query"] == "who runs the etcd cluster?"
    assert row.input_params["top_k"] == 3 and row.input_params["conversation_id"] == "chat-1"
    assert row.input_params["query_sha256"] == hashlib.sha256(b"who runs the etcd cluster?").hexdigest()
    assert [b["doc_id"] for b in row.retrieval_details.evidence_blocks] == [h.uri for h in resp.hits]
    assert row.relevance_level == resp.match_quality.upper()
    assert row.retrieval_details.evidence_status == ("found" if resp.hits else "no_evidence")
    # the same scope as lookup rows: another user and another account read nothing; the account's admin reads it
    assert engine.list_invocations(CAROL) == []
    assert engine.list_invocations(GLOBEX) == []
    assert [r.invocation_id for r in engine.list_invocations(ADMIN, tool_name="search_memory")] == [row.invocation_id]
    assert engine.session_trace_summary("chat-1", ALICE).tools == {"search_memory": 1}


def test_an_abstract_a_search_returned_verifies_against_its_row(engine):
    resp = engine.search_memory("etcd cluster has no leader", ADMIN, top_k=5)
    hit = next(h for h in resp.hits if h.abstract)
    verdict = engine.verify_evidence(resp.request_id, hit.abstract[:40], ADMIN)
    assert verdict.verified and verdict.doc_id == hit.uri and verdict.raw_path.startswith("$.hits[")
    assert not engine.verify_evidence(resp.request_id, "restart every node at once and hope", ADMIN).verified


def test_the_query_text_is_kept_only_when_audit_query_text_is_on(make_engine):
    engine = make_engine(knowledge={"audit_query_text": False})
    engine.search_memory("a question that is not kept", ALICE)
    (row,) = engine.list_invocations(ALICE, tool_name="search_memory")
    assert "query" not in row.input_params
    assert row.input_params["query_sha256"] == hashlib.sha256(b"a question that is not kept").hexdigest()


def test_a_rejected_search_is_recorded_with_its_error_code(engine):
    with pytest.raises(ContextEngineError) as err:
        engine.search_memory("etcd", ALICE, top_k=500)
    (row,) = engine.list_invocations(ALICE, tool_name="search_memory")
    assert not row.success and row.error_code == err.value.code.value == "RET-4002"
    assert row.input_params["top_k"] == 500


def test_a_secret_in_the_query_is_redacted_in_the_row(engine):
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"
    engine.search_memory(f"why does key {secret} fail?", ALICE)
    (row,) = engine.list_invocations(ALICE, tool_name="search_memory")
    assert secret not in row.model_dump_json()


def test_the_row_is_written_off_the_request_thread_and_close_writes_what_is_queued(make_engine, tmp_path):
    import sqlite3
    import threading

    engine = make_engine(home=tmp_path / "queued")
    writers: list[tuple[str, int]] = []
    store = engine.audit
    original = store.record_invocations

    def record(rows):
        writers.append((threading.current_thread().name, len(rows)))
        return original(rows)

    store.record_invocations = record  # type: ignore[method-assign]
    answered = [engine.search_memory(f"question {i}", ALICE).request_id for i in range(5)]
    engine.close()  # the rows still queued are written before the stores close
    assert {name for name, _ in writers} == {"ce-audit-writer"}
    assert sum(n for _, n in writers) == 5
    with sqlite3.connect(tmp_path / "queued" / "metadata.db") as con:
        stored = {r[0] for r in con.execute("SELECT invocation_id FROM tool_invocations")}
    assert stored == set(answered)


def test_a_row_the_store_refuses_is_logged_and_counted_and_the_answer_stands(engine, caplog):
    def refuse(rows):
        raise ContextEngineError(ErrorCode.STORAGE_FAILED, "disk full")

    engine.audit.record_invocations = refuse  # type: ignore[method-assign]
    with caplog.at_level("ERROR", logger="context_engine.knowledge"):
        resp = engine.search_memory("who runs the etcd cluster?", ALICE)
        engine.knowledge.recorder.flush()
    assert resp.request_id and engine.list_invocations(ALICE, tool_name="search_memory") == []
    assert engine.knowledge.recorder.write_failures == 1
    failures = engine.metrics.registry.get_sample_value("ce_audit_write_failures_total", {"tool": "search_memory"})
    assert failures == 1.0
    assert any(r.getMessage() == "audit row not written" for r in caplog.records)


def test_a_refused_batch_is_written_again_row_by_row_and_only_the_refused_row_is_lost(engine):
    """Rows queued while the writer writes are written together (group commit); a refused batch is written again
    row by row, so that only the refused row is lost."""
    import threading

    store = engine.audit
    original = store.record_invocations
    recorder = engine.knowledge.recorder
    entered, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def refuse_one(rows):
        calls.append(len(rows))
        entered.set()
        release.wait(10)  # the first write holds the writer while the next two rows queue behind it
        if any(r.input_params.get("query") == "refused" for r in rows):
            raise ContextEngineError(ErrorCode.STORAGE_FAILED, "constraint failed")
        original(rows)

    store.record_invocations = refuse_one  # type: ignore[method-assign]
    kept = [engine.search_memory("first", ALICE).request_id]
    assert entered.wait(10)
    kept += [engine.search_memory(q, ALICE).request_id for q in ("refused", "third")]
    release.set()
    recorder.flush()
    assert calls == [1, 2, 1, 1]  # the first row, the two queued behind it together, then each of those alone
    stored = {r.invocation_id for r in engine.list_invocations(ALICE, tool_name="search_memory")}
    assert stored == {kept[0], kept[2]}
    assert recorder.write_failures == 1
