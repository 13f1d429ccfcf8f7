"""A real server for the client and retriever tests: uvicorn on a free loopback port over an engine on a temporary
home (the suite's real embedding model), API keys for four callers (two users of one account), and four small
runbooks written here and added through the client itself (``add_resource_text``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from context_engine.client import Client
from context_engine.interfaces.http import create_app
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import LiveServer

DOCS = {
    "ctx://resources/ops/disk-full.md": (
        "# Node Disk Full\n\n## Meaning\n\nThe root filesystem of a Kubernetes node has almost no free disk space "
        "left; pods get evicted and images cannot be pulled.\n\n## Fix\n\nPrune unused container images with "
        "`crictl rmi --prune`, rotate large log files under /var/log, and check for runaway emptyDir volumes.\n"
    ),
    "ctx://resources/ops/certificate-expiry.md": (
        "# TLS Certificate Expiring\n\n## Meaning\n\nThe TLS certificate served by the ingress expires in less than "
        "seven days; clients will reject the connection once it has expired.\n\n## Fix\n\nRenew the certificate "
        "with cert-manager (`cmctl renew`), then check the new expiry date with openssl s_client.\n"
    ),
    "ctx://resources/ops/replica-lag.md": (
        "# Postgres Replica Lag\n\n## Meaning\n\nA PostgreSQL streaming replica is far behind the primary; reads "
        "from it return stale rows.\n\n## Fix\n\nCheck replication slots and network throughput between the "
        "primary and the replica; restart the WAL receiver if it is stuck.\n"
    ),
    "ctx://resources/ops/oom-killed.md": (
        "# Container OOMKilled\n\n## Meaning\n\nA container used more memory than its limit and the kernel killed "
        "it (exit code 137).\n\n## Fix\n\nRaise the memory limit of the deployment or find the leak with a heap "
        "profile.\n"
    ),
}
DISK_URI = "ctx://resources/ops/disk-full.md"
CERT_URI = "ctx://resources/ops/certificate-expiry.md"

ACME_ADMIN = RequestContext(account_id="acme", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="alice-bot")
BOB = RequestContext(account_id="globex", role="user", user_space="bob")
CAROL = RequestContext(account_id="acme", role="user", user_space="carol")


@dataclass(frozen=True)
class World:
    url: str
    admin_key: str
    alice_key: str
    bob_key: str
    carol_key: str


@pytest.fixture(scope="package")
def world(tmp_path_factory, embedder) -> Iterator[World]:
    settings = load_settings(tmp_path_factory.mktemp("client-home"))
    service = ContextEngineService(settings, embedder=embedder)
    keys = ApiKeyStore(service.metadata)
    admin, alice, bob, carol = (
        keys.create(ctx, name)[1]
        for ctx, name in ((ACME_ADMIN, "admin"), (ALICE, "alice"), (BOB, "bob"), (CAROL, "carol"))
    )
    try:
        with LiveServer(create_app(service=service)) as server:
            with Client(server.url, admin) as client:
                for uri, text in DOCS.items():
                    assert client.add_resource_text(text, uri).nodes == 1
            yield World(server.url, admin, alice, bob, carol)
    finally:
        service.close()


@pytest.fixture
def alice(world: World) -> Iterator[Client]:
    with Client(world.url, world.alice_key) as client:
        yield client
