"""Your own deleted memory is not found; another user's memory is still forbidden (issue 29).

A memory URI in a space the caller may see (its own; an admin's account) that holds nothing answers ``404
RET-4041`` on get_memory, update_memory, delete_memory and read_memory, over Python, HTTP and MCP. The visibility
check reads the request context alone, so the 404 says nothing about spaces the caller cannot see: another user of
the account, or a key of another account, gets the one ``403 RET-4032`` body for the same URI whether it exists or
not, before and after the delete."""

from __future__ import annotations

import anyio
import pytest

from context_engine.errors import ContextEngineError
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.context import RequestContext
from tests.http.conftest import ACME_ADMIN, ALICE, BOB

CAROL = RequestContext(account_id="acme", role="user", user_space="carol")


def _python(service, ctx, call: str, uri: str) -> dict:
    calls = {
        "get_memory": lambda: service.get_memory(uri, ctx),
        "update_memory": lambda: service.update_memory(uri, "changed", ctx),
        "delete_memory": lambda: service.delete_memory(uri, ctx),
        "read_memory": lambda: service.read_memory(uri, ctx, level="L2"),
    }
    with pytest.raises(ContextEngineError) as err:
        calls[call]()
    return err.value.envelope()


HTTP = {
    "get_memory": ("get", "/api/v1/memories/item", lambda u: {"params": {"uri": u}}),
    "update_memory": ("post", "/api/v1/memories/update", lambda u: {"json": {"uri": u, "text": "changed"}}),
    "delete_memory": ("post", "/api/v1/memories/delete", lambda u: {"json": {"uri": u}}),
    "read_memory": ("post", "/api/v1/read_memory", lambda u: {"json": {"uri": u, "level": "L2"}}),
}
MCP_ARGS = {"update_memory": {"text": "changed"}, "read_memory": {"level": "L2"}}


def _mcp(service, ctx, tool: str, uri: str) -> dict:
    server = build_mcp_server(lambda: service, lambda _r: ctx)
    result = anyio.run(server.call_tool, tool, {"uri": uri, **MCP_ARGS.get(tool, {})})
    assert result.is_error
    return result.structured_content


@pytest.fixture
def deleted(service) -> str:
    """A memory of alice's that alice deleted."""
    uri = service.add_memory("Alice keeps a spare key under the blue flower pot.", ALICE).uris[0]
    service.delete_memory(uri, ALICE)
    return uri


@pytest.mark.parametrize("call", list(HTTP))
def test_own_deleted_memory_is_404_on_every_surface(service, client, tenants, deleted, call):
    env = _python(service, ALICE, call, deleted)
    assert env["code"] == "RET-4041" and env["details"] == {"uri": deleted}
    method, path, kw = HTTP[call]
    r = getattr(client, method)(path, headers=tenants.alice, **kw(deleted))
    assert r.status_code == 404 and r.json()["code"] == "RET-4041", r.text
    assert _mcp(service, ALICE, call, deleted)["code"] == "RET-4041"
    assert _python(service, ACME_ADMIN, call, deleted)["code"] == "RET-4041"  # the account's admin sees alice's space


@pytest.mark.parametrize("call", list(HTTP))
@pytest.mark.parametrize("other", [CAROL, BOB], ids=["same-account", "other-account"])
def test_another_users_memory_stays_403_existing_or_deleted(service, client, tenants, call, other):
    live = service.add_memory(f"Alice's locker code is 4471 ({call}, {other.account_id}).", ALICE).uris[0]
    gone = service.add_memory(f"Alice's old locker code was 1174 ({call}, {other.account_id}).", ALICE).uris[0]
    service.delete_memory(gone, ALICE)
    bodies = []
    for uri in (live, gone):
        env = _python(service, other, call, uri)
        assert env["code"] == "RET-4032"
        bodies.append({**env, "details": {}, "request_id": None})
        assert _mcp(service, other, call, uri)["code"] == "RET-4032"
    assert bodies[0] == bodies[1]
    if other is BOB:  # over HTTP with the other account's key: the same body byte for byte, URI aside
        method, path, kw = HTTP[call]
        answers = [getattr(client, method)(path, headers=tenants.bob, **kw(u)) for u in (live, gone)]
        assert [a.status_code for a in answers] == [403, 403]
        assert {a.json()["code"] for a in answers} == {"RET-4032"}
        assert answers[0].json()["message"] == answers[1].json()["message"]
    assert service.get_memory(live, ALICE).version == 1  # nothing changed
