"""``ls`` and ``tree`` as MCP tools (issue 29): the hierarchy walked by an agent, compact, at L0 or L1, with the
tenancy of the HTTP routes (403 ``RET-4032`` with one body for a URI of another tenant and for one that exists
nowhere). In process (the SDK's client against the server object) and over streamable HTTP on a live server."""

from __future__ import annotations

import json

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from context_engine.interfaces.http import create_app
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import SAMPLE_CORPUS, LiveServer, bearer

pytestmark = pytest.mark.slow

ADMIN = RequestContext(account_id="acme", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="bot")
CAROL = RequestContext(account_id="acme", role="user", user_space="carol")
BOB = RequestContext(account_id="globex", role="user", user_space="bob")
K8S = "ctx://resources/kubernetes/"
NODE_NOT_READY = "ctx://resources/kubernetes/NodeNotReady.md"


@pytest.fixture(scope="module")
def service(tmp_path_factory, embedder):
    svc = ContextEngineService(load_settings(tmp_path_factory.mktemp("mcp-browse-home")), embedder=embedder)
    svc.add_resource(SAMPLE_CORPUS, "ctx://resources/", ADMIN)
    svc.add_memory("I prefer short answers with one code sample.", ALICE, category="preference")
    yield svc
    svc.close()


def call(service, ctx, name, args):
    async def go():
        async with Client(build_mcp_server(lambda: service, lambda _r: ctx)) as client:
            return await client.call_tool(name, args)

    return anyio.run(go)


def ok(service, ctx, name, args) -> dict:
    res = call(service, ctx, name, args)
    assert not res.is_error, res.content[0].text
    assert json.loads(res.content[0].text) == res.structured_content  # the text is the same JSON, compact
    return res.structured_content


def refused(service, ctx, name, args) -> dict:
    res = call(service, ctx, name, args)
    assert res.is_error
    return {k: v for k, v in res.structured_content.items() if k != "request_id"}


def test_ls_lists_children_with_their_l0_and_what_can_be_read(service):
    out = ok(service, ALICE, "ls", {"uri": K8S})
    full = service.ls(K8S, ALICE)
    assert out["uri"] == K8S and out["total"] == len(full) == 4 and "next_offset" not in out
    assert [n["uri"] for n in out["nodes"]] == [v.uri for v in full]  # URI order, as the HTTP route
    first = out["nodes"][0]
    assert first == {"uri": full[0].uri, "text": full[0].abstract, "levels": ["L1", "L2"]}  # whole L0, no level
    top = ok(service, ALICE, "ls", {})  # default: ctx://resources/
    assert {n["uri"] for n in top["nodes"]} >= {K8S, "ctx://resources/database/"}
    assert all(n["uri"].endswith("/") and "L2" not in n.get("levels", []) for n in top["nodes"])


def test_ls_pages(service):
    first = ok(service, ALICE, "ls", {"uri": K8S, "limit": 3})
    assert len(first["nodes"]) == 3 and first["next_offset"] == 3 and first["total"] == 4
    rest = ok(service, ALICE, "ls", {"uri": K8S, "limit": 3, "offset": first["next_offset"]})
    assert len(rest["nodes"]) == 1 and "next_offset" not in rest
    assert [n["uri"] for n in first["nodes"] + rest["nodes"]] == [v.uri for v in service.ls(K8S, ALICE)]
    assert ok(service, ALICE, "ls", {"uri": K8S, "offset": 9})["nodes"] == []


def test_read_at_l0_and_l1_through_ls(service):
    (l0,) = ok(service, ALICE, "ls", {"uri": NODE_NOT_READY})["nodes"]  # a file URI: that node alone
    assert l0["uri"] == NODE_NOT_READY and l0["text"] == service.ls(NODE_NOT_READY, ALICE)[0].abstract
    (l1,) = ok(service, ALICE, "ls", {"uri": NODE_NOT_READY, "level": "L1"})["nodes"]
    overview = service.read_memory(NODE_NOT_READY, ALICE, level="L1").block.overview
    assert l1 == {"uri": NODE_NOT_READY, "text": overview, "level": "L1", "levels": ["L1", "L2"]}
    children = ok(service, ALICE, "ls", {"uri": K8S, "level": "L1"})["nodes"]
    assert all(n["level"] == "L1" and n["text"] for n in children)


def test_tree_is_compact_and_bounded(service):
    out = ok(service, ALICE, "tree", {"uri": "ctx://resources/", "max_depth": 2})
    root = out["root"]
    assert root["uri"] == "ctx://resources/" and "truncated" not in out
    k8s = next(c for c in root["children"] if c["uri"] == K8S)
    assert len(k8s["children"]) == 4 and all("children" not in leaf for leaf in k8s["children"])
    cut = service.settings.retrieval.compact_abstract_max_chars
    texts = [leaf["text"] for c in root["children"] for leaf in c["children"]]
    assert texts and all(len(t) <= cut for t in texts)
    shallow = ok(service, ALICE, "tree", {"max_depth": 0})["root"]
    assert "children" not in shallow  # not expanded: no children key, never an empty list
    small = ok(service, ALICE, "tree", {"max_nodes": 3})
    assert small["truncated"] is True

    def count(node):
        return 1 + sum(count(c) for c in node.get("children", []))

    assert count(small["root"]) == 3
    assert small["root"]["more"] == len(root["children"]) - 2


def test_bad_arguments_are_ret_4001(service):
    for name, args in [("ls", {"limit": 0}), ("ls", {"level": "L2"}), ("tree", {"max_depth": 11}),
                       ("ls", {"uri": "not a uri"}), ("tree", {"max_nodes": 0})]:  # fmt: skip
        assert refused(service, ALICE, name, args)["code"] == "RET-4001", (name, args)


def test_tenancy_403_without_leaking_existence(service):
    # another account: a directory that exists in acme reads exactly as one that exists nowhere
    for name in ("ls", "tree"):
        there = refused(service, BOB, name, {"uri": K8S})
        nowhere = refused(service, BOB, name, {"uri": "ctx://resources/no-such-dir/"})
        assert there["code"] == "RET-4032" and there["details"] == {"uri": K8S}
        assert there["message"] == nowhere["message"].replace("no-such-dir", "kubernetes")
    assert ok(service, BOB, "ls", {})["nodes"] == [] and ok(service, BOB, "tree", {})["root"] is None
    # another user of the same account: alice's memories read as a space that does not exist
    mine = "ctx://user/alice/memories/"
    assert ok(service, ALICE, "ls", {"uri": mine})["total"] >= 1
    carol = refused(service, CAROL, "ls", {"uri": mine})
    ghost = refused(service, CAROL, "ls", {"uri": "ctx://user/ghost/memories/"})
    assert carol["code"] == ghost["code"] == "RET-4032"
    assert carol["message"] == ghost["message"].replace("ghost", "alice")
    assert refused(service, CAROL, "ls", {"uri": mine, "level": "L1"})["code"] == "RET-4032"
    # the user scope lists only the spaces the caller sees
    spaces = {n["uri"] for n in ok(service, CAROL, "ls", {"uri": "ctx://user/"})["nodes"]}
    assert "ctx://user/alice/" not in spaces


def test_browse_over_http_with_the_keys_context(service):
    keys = ApiKeyStore(service.metadata)
    _, alice_key = keys.create(ALICE, "alice-browse")
    _, bob_key = keys.create(BOB, "bob-browse")

    async def go(url: str, key: str, name: str, args: dict):
        http = httpx2.AsyncClient(headers=bearer(key), timeout=60)
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            return await client.call_tool(name, args)

    with LiveServer(create_app(service=service)) as server:
        mine = anyio.run(go, server.url, alice_key, "ls", {"uri": K8S})
        theirs = anyio.run(go, server.url, bob_key, "tree", {"uri": K8S})
    assert not mine.is_error and mine.structured_content["total"] == 4
    assert theirs.is_error and theirs.structured_content["code"] == "RET-4032"
