"""``GET /api/v1/memories/events`` (issue 29 item 5): a user's ADD/UPDATE/DELETE history over HTTP, with the tenancy
of ``GET /api/v1/memories``: a user reads its own, an admin of the account names the user, another account reads
nothing, and a memory the caller may not see is one 403 whether it exists or not."""

from __future__ import annotations

import pytest

from tests.http.conftest import ALICE

EVENTS = "/api/v1/memories/events"


@pytest.fixture(scope="module")
def history(service, client, tenants):
    """Over HTTP as alice: an add, an update and a delete of one memory."""
    r = client.post("/api/v1/memories", json={"text": "Alice's locker code is on the blue card.", "category": "facts"},
                    headers=tenants.alice)
    uri = r.json()["uris"][0]
    r = client.post("/api/v1/memories/update", json={"uri": uri, "text": "Alice's locker code is on the red card."},
                    headers=tenants.alice)
    assert r.status_code == 200, r.text
    r = client.post("/api/v1/memories/delete", json={"uri": uri}, headers=tenants.alice)
    assert r.status_code == 200, r.text
    return uri


def test_an_add_an_update_and_a_delete_in_order(client, tenants, history):
    r = client.get(EVENTS, headers=tenants.alice)
    assert r.status_code == 200, r.text
    body = r.json()
    mine = [e for e in body["items"] if e["uri"] == history]
    assert [e["event"] for e in mine] == ["DELETE", "UPDATE", "ADD"]
    delete, update, add = mine
    assert (add["version_before"], add["version_after"], add["abstract_before"]) == (None, 1, None)
    assert add["abstract_after"] == "Alice's locker code is on the blue card." and add["category"] == "facts"
    assert (update["version_before"], update["version_after"]) == (1, 2)
    assert update["abstract_before"] == "Alice's locker code is on the blue card."
    assert update["abstract_after"] == "Alice's locker code is on the red card."
    assert (delete["version_before"], delete["version_after"], delete["abstract_after"]) == (2, None, None)
    assert delete["abstract_before"] == "Alice's locker code is on the red card."
    assert add["id"] < update["id"] < delete["id"] and add["created_at"] <= delete["created_at"]
    # the conftest's memory came first: its ADD is the oldest event
    assert body["items"][-1]["event"] == "ADD" and body["total"] == len(body["items"]) == 4
    assert body["next_offset"] is None
    one = client.get(EVENTS, params={"uri": history}, headers=tenants.alice).json()
    assert [e["event"] for e in one["items"]] == ["DELETE", "UPDATE", "ADD"] and one["total"] == 3


def test_paging(client, tenants, history):
    first = client.get(EVENTS, params={"limit": 2}, headers=tenants.alice).json()
    rest = client.get(EVENTS, params={"limit": 2, "offset": first["next_offset"]}, headers=tenants.alice).json()
    assert (first["total"], first["next_offset"], rest["next_offset"]) == (4, 2, None)
    assert [e["id"] for e in first["items"] + rest["items"]] == sorted(
        (e["id"] for e in first["items"] + rest["items"]), reverse=True
    )


def test_an_admin_names_the_user_and_another_account_sees_nothing(service, client, tenants, history):
    as_alice = client.get(EVENTS, headers=tenants.alice).json()["items"]
    r = client.get(EVENTS, params={"user_space": "alice"}, headers=tenants.admin)
    assert r.status_code == 200 and r.json()["items"] == as_alice
    r = client.get(EVENTS, params={"uri": history}, headers=tenants.admin)
    assert [e["event"] for e in r.json()["items"]] == ["DELETE", "UPDATE", "ADD"]
    # bob (account globex) naming his own space, or the same user name through his account's view: none of acme's
    r = client.get(EVENTS, headers=tenants.bob)
    assert r.status_code == 200 and r.json()["items"] == [] and r.json()["total"] == 0
    assert service.list_memory_events(ALICE.model_copy(update={"account_id": "globex"})).items == []


def test_another_users_events_are_refused_without_telling_whether_they_exist(client, tenants, history):
    r = client.get(EVENTS, params={"user_space": "carol"}, headers=tenants.alice)
    assert r.status_code == 403 and r.json()["code"] == "RET-4031"
    bodies = []
    for uri in ("ctx://user/carol/memories/x.md", "ctx://user/dave/memories/never.md"):
        r = client.get(EVENTS, params={"uri": uri}, headers=tenants.bob)
        assert r.status_code == 403 and r.json()["code"] == "RET-4032"
        bodies.append(r.json()["message"])
    # alice's deleted memory, asked by another account's user: the same answer as one that never existed
    r = client.get(EVENTS, params={"uri": history}, headers=tenants.bob)
    assert r.status_code == 403 and r.json()["message"] == bodies[0] == bodies[1]


def test_bad_paging_values(client, tenants):
    for params in ({"limit": 0}, {"limit": 201}, {"offset": -1}):
        r = client.get(EVENTS, params=params, headers=tenants.alice)
        assert r.status_code == 400 and r.json()["code"] == "WRT-4002", (params, r.text)
    r = client.get(EVENTS, params={"uri": "ctx://user/alice/memories/../x.md"}, headers=tenants.alice)
    assert r.status_code == 400 and r.json()["code"] == "WRT-4001"
