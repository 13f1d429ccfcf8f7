"""Key verification does the same work for an unknown key id as for a known id with a wrong secret (issue 27): one
hash of the token, one constant-time comparison, one database statement of the same shape. A behaviour test, not a
timing threshold: the calls are counted."""

from __future__ import annotations

import hmac
from types import SimpleNamespace

import pytest
from sqlalchemy import event

from context_engine.schema.context import RequestContext
from context_engine.storage.factory import open_api_keys
from context_engine.storage.metadata import keys as keys_module
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore


@pytest.fixture
def store(tmp_path):
    metadata = SqlMetadataStore(f"sqlite:///{tmp_path / 'metadata.db'}")
    yield metadata
    metadata.close()


def _work(store, monkeypatch, keys, token: str) -> dict[str, object]:
    """What one ``authenticate(token)`` did: hashes, constant-time comparisons, SQL statements."""
    calls: dict[str, list] = {"hash": [], "compare": [], "sql": []}
    real_hash = keys_module.hash_token

    def counting_hash(t: str) -> str:
        calls["hash"].append(1)
        return real_hash(t)

    def counting_compare(a, b) -> bool:
        calls["compare"].append((len(a), len(b)))
        return hmac.compare_digest(a, b)

    def on_execute(conn, cursor, statement, parameters, context, executemany):
        calls["sql"].append(statement)

    monkeypatch.setattr(keys_module, "hash_token", counting_hash)
    monkeypatch.setattr(keys_module, "hmac", SimpleNamespace(compare_digest=counting_compare))
    event.listen(store.engine, "before_cursor_execute", on_execute)
    try:
        result = keys.authenticate(token)
    finally:
        event.remove(store.engine, "before_cursor_execute", on_execute)
        monkeypatch.undo()
    return {"result": result, **calls}


def test_unknown_id_and_wrong_secret_do_the_same_work(store, monkeypatch):
    keys = open_api_keys(store, cache_ttl_s=0)
    info, token = keys.create(RequestContext(account_id="acme", role="admin"), "k")
    _, revoked_token = keys.create(RequestContext(account_id="acme", role="user", user_space="u"), "old")
    keys.revoke(revoked_token)
    secret = token.split("_", 2)[2]
    wrong_secret = token[:-1] + ("A" if token[-1] != "A" else "B")
    unknown_id = "ce_0123456789abcdef_" + secret

    unknown = _work(store, monkeypatch, keys, unknown_id)
    wrong = _work(store, monkeypatch, keys, wrong_secret)
    revoked = _work(store, monkeypatch, keys, revoked_token)
    assert unknown["result"] is None and wrong["result"] is None and revoked["result"] is None
    assert unknown["hash"] == wrong["hash"] == revoked["hash"] == [1]
    # the constant-time comparison runs on every path, on digests of the same length (a dummy one for an unknown id)
    assert unknown["compare"] == wrong["compare"] == revoked["compare"] == [(64, 64)]
    selects = [q for q in unknown["sql"] if q.startswith("SELECT")]
    assert len(selects) == 1 and unknown["sql"] == wrong["sql"] == revoked["sql"]

    valid = _work(store, monkeypatch, keys, token)
    assert valid["result"] is not None and valid["result"].key_id == info.key_id
    assert valid["hash"] == [1] and valid["compare"] == [(64, 64)]
    assert valid["sql"][: len(unknown["sql"])] == unknown["sql"]

