"""The metadata store's role protocols (issue 28): every adapter implements each role, each role stays small, and
the union protocol is exactly the roles plus ``transaction`` and ``close``."""

from __future__ import annotations

import pytest

from context_engine.storage.factory import open_api_keys, open_audit
from context_engine.storage.protocols import (
    AuditStore,
    KeyStore,
    MetadataStore,
    MetaStore,
    NodeLedger,
    NodeStore,
    VectorRowStore,
    WriteJournal,
)

ROLES = (NodeStore, NodeLedger, VectorRowStore, WriteJournal, MetaStore)


def _methods(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")}


@pytest.mark.parametrize("role", [*ROLES, AuditStore, KeyStore], ids=lambda r: r.__name__)
def test_each_role_has_at_most_fifteen_methods(role: type) -> None:
    assert 0 < len(_methods(role)) <= 15


def test_the_union_is_the_roles_plus_transaction_and_close() -> None:
    roles = set().union(*(_methods(r) for r in ROLES))
    assert len(roles) == sum(len(_methods(r)) for r in ROLES)  # no method in two roles
    assert _methods(MetadataStore) == {"transaction", "close"}


def test_the_adapters_implement_every_role(metadata_store: MetadataStore) -> None:
    for role in ROLES:
        assert isinstance(metadata_store, role), role.__name__
    assert isinstance(open_audit(metadata_store), AuditStore)
    assert isinstance(open_api_keys(metadata_store), KeyStore)
