"""One engine per module for the HTTP tests: the sample corpus in account ``acme``, a memory of alice, and API keys
for three callers (acme admin, acme user alice, globex user bob). Keys exist, so anonymous access is off."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from context_engine.interfaces.http import create_app
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import LOOPBACK_URL, SAMPLE_CORPUS, bearer

ACME_ADMIN = RequestContext(account_id="acme", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="alice-bot")
BOB = RequestContext(account_id="globex", role="user", user_space="bob")


@dataclass
class Tenants:
    admin: dict[str, str]
    alice: dict[str, str]
    bob: dict[str, str]
    alice_token: str


@pytest.fixture(scope="module")
def upload_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("upload-root")
    (root / "ops").mkdir()
    (root / "ops" / "disk.md").write_text(
        "# Disk Pressure\n\n## Meaning\n\nThe node is running out of disk space.\n\n## Fix\n\nDelete old images.\n",
        encoding="utf-8",
    )
    return root


@pytest.fixture(scope="module")
def service(tmp_path_factory, embedder, upload_root):
    settings = load_settings(
        tmp_path_factory.mktemp("http-home"),
        http={"allowed_upload_roots": (upload_root,), "max_request_bytes": 64 * 1024},
    )
    svc = ContextEngineService(settings, embedder=embedder)
    svc.add_resource(SAMPLE_CORPUS, "ctx://resources/", ACME_ADMIN)
    svc.add_memory("I prefer concise answers in English.", ALICE, category="preference")
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def tenants(service) -> Tenants:
    keys = ApiKeyStore(service.metadata)
    _, admin = keys.create(ACME_ADMIN, "admin")
    _, alice = keys.create(ALICE, "alice")
    _, bob = keys.create(BOB, "bob")
    return Tenants(bearer(admin), bearer(alice), bearer(bob), alice)


@pytest.fixture(scope="module")
def client(service, tenants):
    with TestClient(create_app(service=service), base_url=LOOPBACK_URL, client=("127.0.0.1", 40000)) as c:
        yield c
