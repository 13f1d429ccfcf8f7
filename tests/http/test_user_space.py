"""Per-call user scope (issue 29): ``user_space`` narrows an admin key's search_memory and list_memories to one
user (that user's space and the shared resources, as that user would see them), and never widens a non-admin key
past its own space. Two accounts: ``acme`` (users alice and carol, an admin) and ``globex``."""

from __future__ import annotations

import anyio
import pytest

from context_engine.errors import ContextEngineError
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.context import RequestContext
from tests.http.conftest import ACME_ADMIN, ALICE

CAROL = RequestContext(account_id="acme", role="user", user_space="carol")
GLOBEX_ADMIN = RequestContext(account_id="globex", role="admin")
QUERY = "which sport is played on weekends"


@pytest.fixture(scope="module")
def memories(service):
    alice = service.add_memory("Alice plays tennis every Saturday morning.", ALICE).uris[0]
    carol = service.add_memory("Carol plays football every Sunday afternoon.", CAROL).uris[0]
    return alice, carol


def _uris(response) -> set[str]:
    return {h.uri for h in response.hits}


def test_admin_search_narrowed_to_one_user(service, memories):
    alice, carol = memories
    everything = _uris(service.search_memory(QUERY, ACME_ADMIN, score_threshold=0.0, top_k=50))
    assert {alice, carol} <= everything  # an admin key sees every user of its account
    as_alice = service.search_memory(QUERY, ACME_ADMIN, score_threshold=0.0, top_k=50, user_space="alice")
    assert alice in _uris(as_alice) and not any(u.startswith("ctx://user/carol/") for u in _uris(as_alice))
    assert _uris(as_alice) == _uris(service.search_memory(QUERY, ALICE, score_threshold=0.0, top_k=50))
    assert any(u.startswith("ctx://resources/") for u in _uris(as_alice))  # the shared resources stay visible
    compact = service.search_memory_compact(QUERY, ACME_ADMIN, score_threshold=0.0, top_k=50, user_space="carol")
    assert carol in {h.uri for h in compact.hits} and alice not in {h.uri for h in compact.hits}


def test_admin_lists_one_users_memories(service, client, tenants, memories):
    alice, carol = memories
    assert [m.uri for m in service.list_memories(ACME_ADMIN, user_space="carol").items] == [carol]
    r = client.get("/api/v1/memories", params={"user_space": "alice", "limit": 200}, headers=tenants.admin)
    assert r.status_code == 200 and alice in [m["uri"] for m in r.json()["items"]]
    assert all(m["uri"].startswith("ctx://user/alice/") for m in r.json()["items"])
    server = build_mcp_server(lambda: service, lambda _r: ACME_ADMIN)
    res = anyio.run(server.call_tool, "list_memories", {"user_space": "carol"})
    assert not res.is_error and [m["uri"] for m in res.structured_content["items"]] == [carol]


def test_a_user_key_is_never_widened(service, client, tenants, memories):
    _, carol = memories
    for call in (
        lambda: service.search_memory(QUERY, ALICE, user_space="carol"),
        lambda: service.list_memories(ALICE, user_space="carol"),
    ):
        with pytest.raises(ContextEngineError) as err:
            call()
        assert err.value.code.value == "RET-4031" and err.value.code.http_status == 403
    r = client.post("/api/v1/search_memory", json={"query": QUERY, "user_space": "carol"}, headers=tenants.alice)
    assert r.status_code == 403 and r.json()["code"] == "RET-4031" and "carol" not in r.text.replace("user_space", "")
    r = client.get("/api/v1/memories", params={"user_space": "carol"}, headers=tenants.alice)
    assert r.status_code == 403 and r.json()["code"] == "RET-4031"
    server = build_mcp_server(lambda: service, lambda _r: ALICE)
    res = anyio.run(server.call_tool, "search_memory", {"query": QUERY, "user_space": "carol"})
    assert res.is_error and res.structured_content["code"] == "RET-4031"
    # naming its own space changes nothing
    own = service.search_memory(QUERY, ALICE, score_threshold=0.0, top_k=50, user_space="alice")
    assert _uris(own) == _uris(service.search_memory(QUERY, ALICE, score_threshold=0.0, top_k=50))
    assert carol not in _uris(own)


def test_another_accounts_admin_sees_nothing_of_the_user(service, client, tenants, memories):
    hits = _uris(service.search_memory(QUERY, GLOBEX_ADMIN, score_threshold=0.0, top_k=50, user_space="alice"))
    assert not any(u.startswith("ctx://user/alice/") or u.startswith("ctx://resources/") for u in hits)
    assert service.list_memories(GLOBEX_ADMIN, user_space="alice").items == []
    r = client.post("/api/v1/search_memory", json={"query": QUERY, "user_space": "alice"}, headers=tenants.bob)
    assert r.status_code == 403 and r.json()["code"] == "RET-4031"  # bob is a user key of globex


@pytest.mark.parametrize("bad", ["..", "a/b", ""])
def test_a_malformed_user_space_is_refused(service, bad):
    with pytest.raises(ContextEngineError) as err:
        service.search_memory(QUERY, ACME_ADMIN, user_space=bad)
    assert err.value.code.value == "RET-4001"
    with pytest.raises(ContextEngineError) as err:
        service.list_memories(ACME_ADMIN, user_space=bad)
    assert err.value.code.value == "WRT-4001"
