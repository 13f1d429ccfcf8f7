"""Bounded work per write request and writers that never fail on a lock (issues 26 and 27; docs/security.md).

* A document that would make more chunks than ``ingest.max_chunks_per_document`` is refused (``413 WRT-4132``)
  before anything is embedded.
* A write whose HTTP client disconnects stops between embedding batches (``WRT-4991``) and writes nothing; the
  server goes on answering searches.
* The HTTP server and CLI processes writing one home at once take turns in one queue: no write fails with a 500; a
  write that cannot get its turn within ``ingest.write_wait_s`` gets the retryable ``503 WRT-5032`` (CLI: exit code
  4 and the same envelope), and every write retried after it lands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext
from tests.serve_process import CLI, ServeProcess

ADMIN = RequestContext(account_id="default", role="admin")


def _doc(chunks: int) -> str:
    """A markdown document that makes ``chunks`` L2 chunks (two short sections each, at the default chunk size)."""
    body = "".join(
        f"## Step {i}\n\nCheck the pod events of replica {i} and the kubelet log on its node before restarting it.\n\n"
        for i in range(2 * chunks)
    )
    return "# Long runbook\n\n" + body


# ---- the chunk limit ------------------------------------------------------------------------------------------------
def test_a_document_over_the_chunk_limit_is_refused_before_any_embedding(make_engine, embedder, monkeypatch):
    engine = make_engine(ingest={"max_chunks_per_document": 20})
    embedded: list[int] = []
    real = embedder.embed_documents
    monkeypatch.setattr(
        embedder, "embed_documents", lambda texts, **kw: embedded.append(len(texts)) or real(texts, **kw)
    )
    engine.add_text(_doc(20), "ctx://resources/ops/at-the-limit.md", ADMIN)  # the limit itself is allowed
    embedded.clear()
    with pytest.raises(ContextEngineError) as err:
        engine.add_text(_doc(40), "ctx://resources/ops/long.md", ADMIN)
    assert err.value.code is ErrorCode.TOO_MANY_CHUNKS and err.value.code.http_status == 413
    assert err.value.details["limit"] == 20 and err.value.details["chunks"] > 20
    assert embedded == []  # refused before the first embedding
    assert engine.metadata.get_node("default", "ctx://resources/ops/long.md") is None
    report = engine.add_text(_doc(10), "ctx://resources/ops/short.md", ADMIN)  # under the limit: written
    assert report.nodes == 1 and report.chunks == 10


def test_a_cancelled_write_stops_between_embedding_batches_and_writes_nothing(make_engine, embedder, monkeypatch):
    engine = make_engine()
    cancel = threading.Event()
    batches: list[int] = []
    real = embedder.embed_documents

    def embed(texts, **kw):
        batches.append(len(texts))
        cancel.set()  # the client goes away during the first batch
        return real(texts, **kw)

    monkeypatch.setattr(embedder, "embed_documents", embed)
    with pytest.raises(ContextEngineError) as err:
        engine.add_text(_doc(200), "ctx://resources/ops/long.md", ADMIN, cancel=cancel)
    assert err.value.code is ErrorCode.WRITE_CANCELLED
    assert len(batches) == 1 and err.value.details["embedded"] < err.value.details["total"]
    assert engine.metadata.get_node("default", "ctx://resources/ops/long.md") is None
    assert engine.metadata.get_node("default", "ctx://resources/ops/") is None  # no directory either
    assert engine.metadata.journal_entries() == []  # no intent was even opened


def test_a_write_cancelled_while_it_waits_for_its_turn_writes_nothing(make_engine, monkeypatch):
    """Failed at 26bb900 (an attack pass): the cancellation was checked until the write queued for its turn, never
    after, so a client that gave up while another writer held the turn (up to ``ingest.write_wait_s``) had its write
    committed once the turn came. It is checked again when the turn comes: ``WRT-4991``, nothing written."""
    engine = make_engine()
    cancel, queued, release = threading.Event(), threading.Event(), threading.Event()
    real_begin = engine.pipeline.journal.begin
    monkeypatch.setattr(engine.pipeline.journal, "begin", lambda *a: queued.set() or real_begin(*a))

    def hold_the_turn() -> None:
        with engine.metadata.write_turn(30):
            taken.set()
            release.wait(30)

    taken = threading.Event()
    holder = threading.Thread(target=hold_the_turn)
    holder.start()
    assert taken.wait(30)
    with ThreadPoolExecutor(1) as pool:
        write = pool.submit(engine.add_text, _doc(2), "ctx://resources/ops/late.md", ADMIN, cancel=cancel)
        assert queued.wait(30)  # the write has embedded its text and queues for the turn
        cancel.set()  # the client goes away while it waits
        release.set()
        with pytest.raises(ContextEngineError) as err:
            write.result(60)
    holder.join(30)
    assert err.value.code is ErrorCode.WRITE_CANCELLED
    assert engine.metadata.get_node("default", "ctx://resources/ops/late.md") is None
    assert engine.metadata.journal_entries() == []
    assert engine.add_text(_doc(2), "ctx://resources/ops/late.md", ADMIN).nodes == 1  # the next write lands


# ---- a real server: the client disconnects --------------------------------------------------------------------------
@pytest.mark.slow
def test_the_server_stops_a_write_whose_client_disconnected(tmp_path):
    home = tmp_path / "home"
    env = {"CE_INGEST__MAX_CHUNKS_PER_DOCUMENT": "3000"}
    with ServeProcess(home, env=env) as srv:
        # over the limit: refused at once with 413, before any embedding
        too_big = httpx.post(
            f"{srv.url}/api/v1/resources/text",
            json={"uri": "ctx://resources/ops/huge.md", "text": _doc(3100)},
            timeout=120,
        )
        assert too_big.status_code == 413 and too_big.json()["code"] == "WRT-4132", too_big.text
        # under the limit but long to embed: the client gives up after a moment and closes the connection
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                f"{srv.url}/api/v1/resources/text",
                json={"uri": "ctx://resources/ops/long.md", "text": _doc(2500)},
                timeout=httpx.Timeout(120, read=3),
            )
        cancelled = _wait_for_log_event(srv, "write_cancelled")
        assert cancelled["embedded"] < cancelled["total"]  # stopped part-way (here before or between batches)
        # nothing of it was written, and the server answers searches and writes as usual
        read = httpx.post(
            f"{srv.url}/api/v1/read_memory", json={"uri": "ctx://resources/ops/long.md", "level": "L1"}, timeout=60
        )
        assert read.status_code == 403 and read.json()["code"] == "RET-4032", read.text
        ok = httpx.post(
            f"{srv.url}/api/v1/resources/text",
            json={"uri": "ctx://resources/ops/short.md", "text": _doc(3)},
            timeout=120,
        )
        assert ok.status_code == 200, ok.text
        found = httpx.post(f"{srv.url}/api/v1/search_memory", json={"query": "kubelet log replica"}, timeout=60)
        assert found.status_code == 200, found.text
        uris = [h["uri"] for h in found.json()["hits"]]
        assert "ctx://resources/ops/short.md" in uris and "ctx://resources/ops/long.md" not in uris


def _wait_for_log_event(srv: ServeProcess, event: str, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in srv.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("{") and f'"{event}"' in line:
                record = json.loads(line)
                if record.get("event") == event:
                    return record
        time.sleep(0.5)
    raise AssertionError(f"no {event} in the server log:\n{srv.log()}")


# ---- a real server and CLI processes writing one home ---------------------------------------------------------------
_LOCK_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")  # a writer that keeps the database's write lock for longer than anyone may wait
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
"""
HTTP_WRITES, CLI_WRITES = 4, 3
HOLD_S = 50  # well past the bounded wait (30 s): before the fix, writes then failed with 500 WRT-5001


@pytest.mark.slow
def test_server_and_cli_writers_on_one_home_land_or_get_a_retryable_503_never_a_500(tmp_path):
    home = tmp_path / "home"
    cli_env = dict(os.environ)  # the defaults: ingest.write_wait_s = 30 s, as SQLite's former fixed busy wait
    outcomes: list[tuple[str, int, str]] = []  # (writer, status or exit code, error code)
    landed: set[str] = set()
    guard = threading.Lock()

    def record(writer: str, status: int, code: str, uri: str | None) -> None:
        with guard:
            outcomes.append((writer, status, code))
            if uri:
                landed.add(uri)

    def http_writer(i: int, url: str, deadline: float) -> None:
        text = f"Deploy window {i}: the {i}th release of service alpha{i} ships on day {i + 10} of the quarter."
        while time.monotonic() < deadline:
            r = httpx.post(f"{url}/api/v1/memories", json={"text": text, "category": "events"}, timeout=120)
            if r.status_code == 200:
                record(f"http{i}", 200, "", r.json()["uris"][0])
                return
            body = r.json()
            record(f"http{i}", r.status_code, body["code"], None)
            if not body["details"].get("retryable"):
                return
            time.sleep(1)

    def cli_writer(i: int, deadline: float) -> None:
        text = f"Ticket {i}: the {i}th outage of service beta{i} lasted {i + 20} minutes."
        while time.monotonic() < deadline:
            p = subprocess.run(
                [*CLI, "--home", str(home), "--json", "add-memory", text, "--category", "events"],
                capture_output=True,
                text=True,
                env=cli_env,
                timeout=300,
            )
            out = json.loads(p.stdout) if p.stdout.strip().startswith("{") else {}
            if p.returncode == 0:
                record(f"cli{i}", 0, "", out["uris"][0])
                return
            record(f"cli{i}", p.returncode, out.get("code", p.stderr[-300:]), None)
            if not out.get("details", {}).get("retryable"):
                return
            time.sleep(1)

    with ServeProcess(home) as srv:
        holder = subprocess.Popen(
            [sys.executable, "-c", _LOCK_HOLDER, str(home / "metadata.db"), str(HOLD_S)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            deadline = time.monotonic() + HOLD_S + 240
            with ThreadPoolExecutor(HTTP_WRITES + CLI_WRITES) as pool:
                futures = [pool.submit(http_writer, i, srv.url, deadline) for i in range(HTTP_WRITES)]
                futures += [pool.submit(cli_writer, i, deadline) for i in range(CLI_WRITES)]
                for f in futures:
                    f.result()
        finally:
            holder.kill()
            holder.wait()
        listed = httpx.get(f"{srv.url}/api/v1/memories", params={"limit": 200}, timeout=60)
        assert listed.status_code == 200, listed.text
        stored = {m["uri"] for m in listed.json()["items"]}
    failures = [o for o in outcomes if o[1] not in (0, 200)]
    print(f"outcomes: {outcomes}")
    assert all(status in (503, 4) and code == "WRT-5032" for _, status, code in failures), failures
    assert failures, "the held lock made no writer wait past ingest.write_wait_s"
    assert len(landed) == HTTP_WRITES + CLI_WRITES  # every writer landed once retried
    assert stored == landed
