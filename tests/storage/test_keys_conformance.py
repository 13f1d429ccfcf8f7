"""API keys in the metadata database, on every backend (storage/metadata/keys.py): stored hashed, bound to one
RequestContext, revocable, visible to every process of the database."""

from __future__ import annotations

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext
from context_engine.storage.factory import open_api_keys
from context_engine.storage.metadata.keys import hash_token

from .conftest import MetadataBackend

ADMIN = RequestContext(account_id="acme", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="bot")
BOB = RequestContext(account_id="globex", role="user", user_space="bob")


def test_create_authenticate_list_and_revoke(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    keys = open_api_keys(store, cache_ttl_s=0)
    info, token = keys.create(ALICE, "alice's laptop")
    _, bob_token = keys.create(BOB)
    assert token.startswith(f"ce_{info.key_id}_") and keys.authenticate(token) == info
    assert keys.authenticate(token).context == ALICE
    assert keys.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B")) is None  # wrong secret
    assert keys.authenticate("ce_0123456789abcdef_" + "x" * 43) is None  # unknown id
    assert [k.key_id for k in keys.list("acme")] == [info.key_id]
    assert {k.account_id for k in keys.list()} == {"acme", "globex"} and keys.active_count() == 2
    with store.session(write=False) as s:  # only the hash is stored
        stored = s.execute(keys_table().select()).all()
    assert {r.secret_hash for r in stored} == {hash_token(token), hash_token(bob_token)}
    assert all(token not in str(tuple(r)) for r in stored)

    revoked = keys.revoke(info.key_id)
    assert revoked.revoked_at is not None and keys.revoke(token).revoked_at == revoked.revoked_at  # idempotent
    assert keys.authenticate(token) is None and keys.active_count() == 1
    assert keys.list("acme") == [] and [k.key_id for k in keys.list("acme", include_revoked=True)] == [info.key_id]
    with pytest.raises(ContextEngineError) as err:
        keys.revoke("ffffffffffffffff")
    assert err.value.code is ErrorCode.NODE_NOT_FOUND


def test_a_key_created_by_one_process_works_in_another_and_its_revocation_too(
    metadata_backend: MetadataBackend,
) -> None:
    cli = open_api_keys(metadata_backend.open(), cache_ttl_s=0)  # `context-engine keys create`
    server = open_api_keys(metadata_backend.open(), cache_ttl_s=0)  # a replica serving requests
    info, token = cli.create(ADMIN, "ops")
    found = server.authenticate(token)
    assert found is not None and found.key_id == info.key_id and found.last_used_at is None
    assert cli.list()[0].last_used_at is not None  # the server recorded the use
    cli.revoke(info.key_id)
    assert server.authenticate(token) is None


def keys_table():
    from context_engine.storage.metadata.keys import ApiKeyRow

    return ApiKeyRow.__table__
