"""Issue 13 acceptance: two ``context-engine serve`` replicas on the shared scale-out stores (PostgreSQL + S3 +
Milvus Lite from ``scripts/services.sh up``), each with a home of its own as on two machines.

- Both answer the same query identically, and a write through one is visible through the other on the next request
  (the per-account generation rule, docs/derived_indexes.md), for search_memory, lookup_knowledge and reads.
- A replica SIGKILLed in the middle of a write (the write protocol's test-only ``ingest.crash_at``, before and after
  its commit) leaves the store consistent: the other keeps serving, never shows half of the write, and after its
  next write ``context-engine reindex --check`` finds nothing to repair.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import httpx
import pytest

from tests.serve_process import CLI, ServeProcess
from tests.services import scale_out_settings, settings_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shared_env():
    """The environment of a replica: the same three stores for all (a fresh namespace per module)."""
    return settings_env(scale_out_settings(f"rep_{uuid.uuid4().hex[:10]}"))


def _home(tmp_path, name: str):
    (tmp_path / name).mkdir(exist_ok=True)
    return tmp_path / name / "home"


def _search(replica: ServeProcess, query: str, top_k: int = 5) -> list[tuple[str, float]]:
    r = httpx.post(f"{replica.url}/api/v1/search_memory", json={"query": query, "top_k": top_k}, timeout=120)
    assert r.status_code == 200, r.text
    return [(h["uri"], round(h["score"], 5)) for h in r.json()["hits"]]


def _lookup(replica: ServeProcess, query: str) -> list[str]:
    r = httpx.post(f"{replica.url}/api/v1/lookup_knowledge", json={"query": query, "top_k": 5}, timeout=120)
    assert r.status_code == 200, r.text
    return [b["doc_id"] for b in r.json()["evidence_blocks"]]


def _add_text(replica: ServeProcess, uri: str, text: str) -> httpx.Response:
    return httpx.post(f"{replica.url}/api/v1/resources/text", json={"uri": uri, "text": text}, timeout=300)


def _check(home, env) -> dict:
    """``context-engine reindex --check`` on the shared stores, from a third home."""
    r = subprocess.run(
        [*CLI, "--home", str(home), "--json", "reindex", "--check"],
        env={**os.environ, **env},
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


DOC = """# Payment gateway timeouts

## Symptom
The checkout service logs `upstream timeout` for the payment gateway and orders stay in PENDING.

## Fix
Raise the gateway client's connect timeout and drain the stuck PENDING orders with the reconcile job.
"""


def test_two_replicas_serve_the_same_results_and_see_each_others_writes(tmp_path, shared_env):
    with (
        ServeProcess(_home(tmp_path, "a"), env=shared_env) as a,
        ServeProcess(_home(tmp_path, "b"), env=shared_env) as b,
    ):
        uri = "ctx://resources/ops/payment-gateway-timeouts.md"
        assert _search(b, "payment gateway upstream timeout") == []  # nothing there yet
        r = _add_text(a, uri, DOC)
        assert r.status_code == 200, r.text
        # the very next request through the other replica sees it: search_memory, lookup_knowledge, read
        hits_b = _search(b, "payment gateway upstream timeout")
        assert hits_b and hits_b[0][0] == uri
        assert _search(a, "payment gateway upstream timeout") == hits_b  # the same answer from both
        assert _lookup(b, "orders stuck in PENDING after a payment gateway timeout")[0] == uri
        r = httpx.post(f"{b.url}/api/v1/read_memory", json={"uri": uri, "level": "L2"}, timeout=60)
        assert r.status_code == 200 and "reconcile job" in r.json()["block"]["content_excerpt"]

        # a memory written through B, read and searched through A
        r = httpx.post(
            f"{b.url}/api/v1/memories", json={"text": "The on-call rotation changes every Tuesday."}, timeout=120
        )
        assert r.status_code == 200, r.text
        memory_uri = r.json()["uris"][0]
        assert memory_uri in [u for u, _ in _search(a, "when does the on-call rotation change")]

        # a delete through B is gone from A at once
        r = httpx.post(f"{b.url}/api/v1/delete", json={"uri": uri}, timeout=120)
        assert r.status_code == 200, r.text
        assert uri not in [u for u, _ in _search(a, "payment gateway upstream timeout")]
        assert uri not in _lookup(a, "orders stuck in PENDING after a payment gateway timeout")
        r = httpx.post(f"{a.url}/api/v1/read_memory", json={"uri": uri, "level": "L2"}, timeout=60)
        assert r.status_code == 403 and r.json()["code"] == "RET-4032"  # as for any URI that does not exist


@pytest.mark.parametrize("point", ["content_written", "committed"])
def test_a_replica_killed_mid_write_leaves_the_store_consistent(tmp_path, shared_env, point):
    uri = f"ctx://resources/ops/killed-{point}.md"
    with ServeProcess(_home(tmp_path, "b"), env=shared_env) as b:
        before = _search(b, "disk pressure eviction on the build nodes", top_k=10)
        killed = ServeProcess(_home(tmp_path, "a"), env={**shared_env, "CE_INGEST__CRASH_AT": point})
        with killed:
            with pytest.raises(httpx.TransportError):  # the replica dies (SIGKILL) in the middle of the write
                _add_text(killed, uri, DOC.replace("Payment gateway timeouts", "Disk pressure eviction on build nodes"))
            deadline = time.monotonic() + 30
            while killed.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert killed.proc.returncode == -9
        # the survivor keeps serving, and never half of the write: before the commit it is not there; after it,
        # it is there whole (its content readable) or not at all
        hits = _search(b, "disk pressure eviction on the build nodes", top_k=10)
        if point == "content_written":
            assert hits == before
        for hit_uri, _ in hits:
            level = "L1" if hit_uri.endswith("/") else "L2"  # a directory has no L2
            r = httpx.post(f"{b.url}/api/v1/read_memory", json={"uri": hit_uri, "level": level}, timeout=60)
            assert r.status_code == 200, (hit_uri, r.text)
        # the survivor's next write takes over what the dead writer left (its liveness lock is gone)
        r = _add_text(b, f"ctx://resources/ops/after-{point}.md", DOC)
        assert r.status_code == 200, r.text
        found = _check(tmp_path / "checker", shared_env)
        assert found["rolled_back"] == [] and found["finished"] == [] and found["orphan_records"] == [], found
        assert found["in_flight"] == []
        # and the write that was killed after its commit is complete and served
        if point == "committed":
            assert uri in [u for u, _ in _search(b, "disk pressure eviction on the build nodes", top_k=10)]
