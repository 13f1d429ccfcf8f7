"""The sync and async clients against a real server (uvicorn, real model, the four runbooks of conftest.py)."""

from __future__ import annotations

import asyncio

import pytest

from context_engine.client import ApiError, AsyncClient, Client
from context_engine.errors import ErrorCode
from context_engine.schema.compact import LookupCompact, SearchMemoryCompact
from context_engine.schema.knowledge import LookupResult, RelevanceLevel, ToolInvocation
from context_engine.schema.query import SearchMemoryResponse
from tests.client.conftest import CERT_URI, DISK_URI, DOCS

pytestmark = pytest.mark.slow

DISK_QUERY = "the node ran out of disk space"
CERT_QUERY = "TLS certificate expires in 3 days on the ingress"


def test_operations(alice: Client) -> None:
    assert alice.health().status == "ok"
    ready = alice.ready()
    assert ready.status == "ready" and ready.embedding_model.endswith("all-MiniLM-L6-v2")


def test_search_read_and_browse(alice: Client) -> None:
    res = alice.search_memory(DISK_QUERY, top_k=3)
    assert isinstance(res, SearchMemoryResponse)
    assert res.hits[0].uri == DISK_URI and res.hits[0].level_hit == "L0"
    assert res.hits[0].abstract and "disk" in res.hits[0].abstract.lower()
    assert len(res.hits) <= 3 and res.hits[0].score >= res.hits[-1].score
    l1 = alice.read_memory(DISK_URI, "L1").block
    assert l1.level_hit == "L1" and l1.overview and "crictl rmi --prune" in l1.overview
    l2 = alice.read_memory(DISK_URI, "L2").block
    assert l2.level_hit == "L2" and l2.content_excerpt == DOCS[DISK_URI]
    assert {n.uri for n in alice.ls("ctx://resources/ops/").nodes} == set(DOCS)
    tree = alice.tree("ctx://resources/", max_depth=2).root
    assert tree is not None and [c.uri for c in tree.children or []] == ["ctx://resources/ops/"]


def test_lookup_audit_and_evidence(alice: Client) -> None:
    res = alice.lookup_knowledge(CERT_QUERY, session_id="client-diag", top_k=2)
    assert isinstance(res, LookupResult) and res.evidence_status == "found"
    first = res.evidence_blocks[0]
    assert first.doc_id == CERT_URI and first.relevance_level is RelevanceLevel.PRECISE
    assert len(res.evidence_blocks) == 2
    check = alice.verify_evidence(res.invocation_id, "Renew the certificate with cert-manager")
    assert check.verified and check.doc_id == CERT_URI
    assert not alice.verify_evidence(res.invocation_id, "this sentence is in no runbook at all").verified
    rows = alice.list_tool_invocations(session_id="client-diag").items
    assert [r.invocation_id for r in rows] == [res.invocation_id]
    summary = alice.session_trace_summary("client-diag")
    assert summary.invocation_count == 1 and summary.documents[0] == CERT_URI


def test_compact_answers(alice: Client) -> None:
    full = alice.search_memory(DISK_QUERY, top_k=3)
    compact = alice.search_memory_compact(DISK_QUERY, top_k=3)
    assert isinstance(compact, SearchMemoryCompact) and compact.debug is None
    assert [h.uri for h in compact.hits] == [h.uri for h in full.hits] and compact.hits[0].uri == DISK_URI
    assert compact.hits[0].score == round(full.hits[0].score, 3)
    assert compact.match_quality == full.match_quality in ("strong", "weak")  # the label, on both forms
    off_topic = alice.search_memory_compact("What is the capital of France?", top_k=2)
    assert off_topic.match_quality == "none" and len(off_topic.hits) == 2
    assert full.hits[0].abstract.startswith(compact.hits[0].abstract.removesuffix("…"))  # cut for agents
    debug = alice.search_memory_compact(DISK_QUERY, top_k=3, include_debug=True).debug
    assert debug is not None and debug.next_actions == full.next_actions
    lookup = alice.lookup_knowledge_compact(CERT_QUERY, top_k=2)
    assert isinstance(lookup, LookupCompact) and lookup.debug is None and lookup.evidence_status == "found"
    assert lookup.evidence[0].uri == CERT_URI and lookup.evidence[0].relevance_level is RelevanceLevel.PRECISE
    assert alice.verify_evidence(lookup.invocation_id, "Renew the certificate with cert-manager").verified
    debugged = alice.lookup_knowledge_compact(CERT_QUERY, top_k=2, include_debug=True)
    assert debugged.debug is not None and debugged.debug.context_pack.entries
    with pytest.raises(ApiError) as err:
        alice.search_memory(DISK_QUERY, response_format="compact")
    assert err.value.code is ErrorCode.QUERY_INVALID and err.value.status_code is None  # refused before sending


def test_get_tool_invocation(world, alice: Client) -> None:
    res = alice.lookup_knowledge(CERT_QUERY, session_id="client-audit", top_k=1)
    row = alice.get_tool_invocation(res.invocation_id)
    assert isinstance(row, ToolInvocation)
    assert (row.invocation_id, row.account_id, row.session_id, row.tool_name) == (
        res.invocation_id,
        "acme",
        "client-audit",
        "lookup_knowledge",
    )
    assert row.caller["user_space"] == "alice" and row.relevance_level == "PRECISE"
    with Client(world.url, world.admin_key) as admin:  # an admin sees its account's rows
        assert admin.get_tool_invocation(res.invocation_id).invocation_id == res.invocation_id
    with Client(world.url, world.carol_key) as carol:  # another user of acme: as if it did not exist
        for invocation_id in (res.invocation_id, "0" * 32):
            with pytest.raises(ApiError) as err:
                carol.get_tool_invocation(invocation_id)
            assert err.value.code is ErrorCode.TARGET_NOT_FOUND and err.value.status_code == 404


def test_memory_lifecycle(alice: Client) -> None:
    added = alice.add_memory("I prefer short answers with one code sample.", category="preference")
    assert added.nodes == 1 and len(added.uris) == 1
    uri = added.uris[0]
    assert uri.startswith("ctx://user/alice/memories/preference/")
    assert alice.add_memory("I prefer short answers with one code sample.", category="preference").unchanged == 1
    batch = alice.add_memories([{"text": "Alice works on the payments team.", "category": "profile"}])
    assert [i.status for i in batch.items] == ["added"]
    msgs = alice.add_messages([{"role": "user", "content": "I visited Lisbon last May."}], "trip-1")
    assert msgs.items[0].uri.endswith("/memories/sessions/trip-1/000001.md")
    page = alice.list_memories(category="preference", limit=10)
    assert [m.uri for m in page.items] == [uri] and page.next_offset is None
    updated = alice.update_memory(uri, "I prefer short answers with two code samples.")
    assert updated.items[0].status == "updated" and updated.items[0].version == 2
    detail = alice.get_memory(uri)
    assert detail.text == "I prefer short answers with two code samples." and detail.version == 2
    assert [v.text for v in detail.history] == ["I prefer short answers with one code sample."]
    hits = alice.search_memory("short answers with code samples", top_k=3).hits
    assert hits[0].uri == uri
    assert alice.delete_memory(uri).nodes == 1
    with pytest.raises(ApiError) as err:
        alice.get_memory(uri)
    assert err.value.code is ErrorCode.TARGET_NOT_FOUND and err.value.status_code == 404  # her own, deleted
    events = alice.list_memory_events(uri=uri)  # its history outlives it (issue 29 item 5)
    assert [(e.event, e.version_before, e.version_after) for e in events.items] == [
        ("DELETE", 2, None),
        ("UPDATE", 1, 2),
        ("ADD", None, 1),
    ]
    assert events.items[0].abstract_before == "I prefer short answers with two code samples."
    assert alice.list_memory_events(limit=200).total >= 5  # the batch's and the message's ADDs too
    with pytest.raises(ApiError) as err:
        alice.list_memory_events(limit=0)
    assert err.value.code is ErrorCode.REQUEST_INVALID


def test_error_envelopes(world, alice: Client) -> None:
    with Client(world.url, world.bob_key) as bob:  # another account: acme's URI is not visible
        with pytest.raises(ApiError) as err:
            bob.read_memory(DISK_URI, "L2")
        assert err.value.code is ErrorCode.URI_FORBIDDEN and err.value.status_code == 403
        assert err.value.request_id and err.value.details == {"uri": DISK_URI}
        assert bob.search_memory(DISK_QUERY).hits == []  # sees nothing of acme
    with pytest.raises(ApiError) as err:
        alice.search_memory(DISK_QUERY, top_k=0)
    assert err.value.code is ErrorCode.TOP_K_OUT_OF_RANGE and err.value.status_code == 400
    assert not err.value.retryable
    with pytest.raises(ApiError) as err:
        alice.lookup_knowledge(CERT_QUERY, top_k=51)
    assert err.value.code is ErrorCode.TOP_K_OUT_OF_RANGE
    with pytest.raises(ApiError) as err:
        alice.add_memory("   ")
    assert err.value.code is ErrorCode.CONTENT_INVALID and err.value.status_code == 422
    with Client(world.url, "ce_nope_nope") as stranger:
        with pytest.raises(ApiError) as err:
            stranger.search_memory(DISK_QUERY)
        assert err.value.code is ErrorCode.UNAUTHENTICATED and err.value.status_code == 401


def test_async_client(world) -> None:
    async def run() -> None:
        async with AsyncClient(world.url, world.alice_key) as client:
            assert (await client.ready()).status == "ready"
            res, lookup, compact = await asyncio.gather(
                client.search_memory(DISK_QUERY, top_k=2),
                client.lookup_knowledge(CERT_QUERY, top_k=1),
                client.lookup_knowledge_compact(CERT_QUERY, top_k=1),
            )
            assert res.hits[0].uri == DISK_URI and res.match_quality in ("strong", "weak")
            assert lookup.evidence_blocks[0].doc_id == CERT_URI
            assert compact.evidence[0].uri == CERT_URI
            row = await client.get_tool_invocation(compact.invocation_id)
            assert row.invocation_id == compact.invocation_id and row.tool_name == "lookup_knowledge"
            block = (await client.read_memory(CERT_URI, "L2")).block
            assert block.content_excerpt == DOCS[CERT_URI]
            with pytest.raises(ApiError) as err:
                await client.search_memory(DISK_QUERY, top_k=99)
            assert err.value.code is ErrorCode.TOP_K_OUT_OF_RANGE
        async with AsyncClient(world.url, world.bob_key) as bob:
            with pytest.raises(ApiError) as err:
                await bob.read_memory(CERT_URI)
            assert err.value.code is ErrorCode.URI_FORBIDDEN and err.value.status_code == 403

    asyncio.run(run())
