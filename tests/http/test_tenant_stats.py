"""``GET /api/v1/stats`` counts the key's account only (attack pass: ``index_records`` was the shared vector index's
row count, all accounts included, so an admin of any account, one with no node at all, could watch another
account's writes). Through the real app (tests/http/conftest.py's ``client``, ``tenants``, ``service``)."""

from __future__ import annotations

import pytest

from context_engine.schema.context import RequestContext
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import bearer

EVIL_ADMIN = RequestContext(account_id="evil", role="admin")
COUNTS = ("nodes", "files", "directories", "pending", "index_records")


@pytest.fixture(scope="module")
def evil(service) -> dict[str, str]:
    _, token = ApiKeyStore(service.metadata).create(EVIL_ADMIN, "evil")
    return bearer(token)


def _stats(client, headers) -> dict:
    r = client.get("/api/v1/stats", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def test_another_accounts_writes_do_not_change_a_tenants_stats(client, tenants, service, evil):
    before_evil, before_acme = _stats(client, evil), _stats(client, tenants.admin)
    assert before_evil["account_id"] == "evil"
    assert {k: before_evil[k] for k in COUNTS} == dict.fromkeys(COUNTS, 0)  # an account with nothing counts nothing
    assert before_acme["index_records"] == service.metadata.count_vectors("acme") > 0

    body = {
        "conversation_id": "watched",
        "messages": [{"role": "user", "content": f"private note {i}"} for i in range(3)],
    }
    r = client.post("/api/v1/memories/messages", json=body, headers=tenants.alice)
    assert r.status_code == 200, r.text

    after_evil, after_acme = _stats(client, evil), _stats(client, tenants.admin)
    assert after_evil == before_evil  # nothing of acme's write shows
    assert after_acme["files"] == before_acme["files"] + 3
    assert after_acme["index_records"] == service.metadata.count_vectors("acme") > before_acme["index_records"]

    # a third account's write: acme's and evil's counts stay theirs, below the deployment's total
    r = client.post("/api/v1/memories", json={"text": "Bob keeps bees."}, headers=tenants.bob)
    assert r.status_code == 200, r.text
    assert _stats(client, tenants.admin) == after_acme and _stats(client, evil) == before_evil
    assert after_acme["index_records"] < service.metadata.count_vectors()


def test_stats_of_the_python_api_count_the_callers_account(service, evil):
    assert service.stats(EVIL_ADMIN)["index_records"] == 0
    assert service.stats(RequestContext(account_id="acme", role="admin"))["index_records"] == (
        service.metadata.count_vectors("acme")
    )
