"""API keys: stored hashed, bound to a RequestContext, revocable; anonymous access only on loopback."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from context_engine.interfaces.http import create_app
from context_engine.interfaces.http.auth import is_loopback_host
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore, hash_token
from tests.http.helpers import LOOPBACK_URL, bearer


def test_keys_are_stored_hashed(service):
    keys = ApiKeyStore(service.metadata)
    info, token = keys.create(RequestContext(account_id="hashco", role="user", user_space="u"), "t")
    with service.metadata.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT * FROM api_keys WHERE key_id = ?", (info.key_id,)).fetchall()
    assert len(rows) == 1
    raw = " ".join(str(v) for v in rows[0])
    assert token not in raw and token.split("_", 2)[2] not in raw
    assert hash_token(token) in raw
    assert keys.authenticate(token).context == info.context
    assert keys.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B")) is None


def test_key_binds_the_context_not_the_body(client, tenants):
    r = client.post(
        "/api/v1/memories", json={"text": "alice likes tea", "category": "preference"}, headers=tenants.alice
    )
    assert r.status_code == 200, r.text
    assert r.json()["uris"][0].startswith("ctx://user/alice/memories/preference/")
    # no field of any request can choose the account: search_memory rejects unknown fields
    r = client.post("/api/v1/search_memory", json={"query": "tea", "account_id": "globex"}, headers=tenants.alice)
    assert r.status_code == 400


def test_revoked_key_stops_working(client, service):
    keys = client.app.state.engine.keys
    info, token = keys.create(RequestContext(account_id="acme", role="user", user_space="dave"), "dave")
    assert client.get("/api/v1/ls", headers=bearer(token)).status_code == 200
    keys.revoke(info.key_id)
    r = client.get("/api/v1/ls", headers=bearer(token))
    assert r.status_code == 401 and r.json()["code"] == "AUTH-4011"


def test_revocation_by_another_process_within_ttl(client, service):
    app_keys = client.app.state.engine.keys
    info, token = app_keys.create(RequestContext(account_id="acme", role="user", user_space="erin"), "erin")
    assert client.get("/api/v1/ls", headers=bearer(token)).status_code == 200
    ApiKeyStore(service.metadata, cache_ttl_s=0).revoke(info.key_id)  # e.g. `context-engine keys revoke`
    app_keys._cache.clear()
    assert client.get("/api/v1/ls", headers=bearer(token)).status_code == 401


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.10", False),
        ("example.org", False),
        ("", False),
    ],
)
def test_loopback_detection(host, loopback):
    assert is_loopback_host(host) is loopback


@pytest.fixture
def fresh_service(tmp_path, embedder):
    def make(**http):
        svc = ContextEngineService(load_settings(tmp_path / "home", http=http), embedder=embedder)
        made.append(svc)
        return svc

    made: list[ContextEngineService] = []
    yield make
    for s in made:
        s.close()


def test_anonymous_loopback_default_without_keys(fresh_service):
    svc = fresh_service()
    with TestClient(create_app(service=svc), base_url=LOOPBACK_URL, client=("127.0.0.1", 1234)) as c:
        r = c.post("/api/v1/memories", json={"text": "default user note"})
        assert r.status_code == 200, r.text
        assert r.json()["uris"][0].startswith("ctx://user/default/memories/")
        assert "anonymous loopback on while no API key exists" in c.get("/readyz").json()["auth"]
        # once a key exists, keys are required (auto mode)
        c.app.state.engine.keys.create(RequestContext(account_id="default", role="admin"), "first")
        r = c.post("/api/v1/memories", json={"text": "another"})
        assert r.status_code == 401 and r.json()["code"] == "AUTH-4011"


def test_anonymous_never_from_a_remote_client(fresh_service):
    svc = fresh_service()
    with TestClient(create_app(service=svc), base_url=LOOPBACK_URL, client=("10.1.2.3", 1234)) as c:
        r = c.get("/api/v1/ls")
        assert r.status_code == 401 and r.json()["code"] == "AUTH-4011"


def test_anonymous_never_on_a_public_bind(fresh_service):
    svc = fresh_service(host="0.0.0.0")
    with TestClient(create_app(service=svc), base_url=LOOPBACK_URL, client=("127.0.0.1", 1234)) as c:
        assert c.get("/api/v1/ls").status_code == 401
        assert "anonymous loopback off" in c.get("/readyz").json()["auth"]


def test_anonymous_policy_never_and_always(fresh_service, tmp_path):
    svc = fresh_service(anonymous_loopback="never")
    with TestClient(create_app(service=svc), base_url=LOOPBACK_URL, client=("127.0.0.1", 1234)) as c:
        assert c.get("/api/v1/ls").status_code == 401
    svc.close()
    svc2 = ContextEngineService(
        load_settings(tmp_path / "home", http={"anonymous_loopback": "always"}), embedder=svc.embedder
    )
    try:
        with TestClient(create_app(service=svc2), base_url=LOOPBACK_URL, client=("127.0.0.1", 1234)) as c:
            c.app.state.engine.keys.create(RequestContext(account_id="default", role="user", user_space="u"), "k")
            assert c.get("/api/v1/ls").status_code == 200
    finally:
        svc2.close()
