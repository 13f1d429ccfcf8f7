"""The home's write queue (issue 26): writers take turns first come, first served across threads and processes, wait
at most ``ingest.write_wait_s``, and a database locked past SQLite's busy wait is the retryable ``WRT-5032``, never
``WRT-5001`` (storage/metadata/writer_locks.py ``FileWriterLocks.turn``, sqlalchemy_store.py ``write_turn``)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.metadata.writer_locks import FileWriterLocks

_WAITER = """
import sys, time
from context_engine.storage.metadata.writer_locks import FileWriterLocks
with FileWriterLocks(sys.argv[1]).turn(60) as got:
    print("turn", got, flush=True)
"""


def test_turns_come_in_arrival_order_across_threads(tmp_path: Path) -> None:
    locks = FileWriterLocks(tmp_path)
    order: list[int] = []
    queued: list[threading.Event] = []
    with locks.turn(5) as first:
        assert first
        threads = []
        for i in range(6):
            started = threading.Event()
            queued.append(started)

            def wait(i: int = i, started: threading.Event = started) -> None:
                started.set()
                with locks.turn(30) as got:
                    assert got
                    order.append(i)

            t = threading.Thread(target=wait)
            t.start()
            threads.append(t)
            started.wait()
            _wait_for_tickets(tmp_path, i + 2)  # its ticket is in the queue before the next writer arrives
    for t in threads:
        t.join()
    assert order == list(range(6))
    assert not list((tmp_path / "write-queue").iterdir())  # every ticket removed


def test_a_turn_that_does_not_come_in_time_is_refused_and_leaves_the_queue(tmp_path: Path) -> None:
    locks = FileWriterLocks(tmp_path)
    with locks.turn(5) as got, locks.turn(0.2) as late:
        assert got and not late
    with locks.turn(0.2) as again:
        assert again  # nothing left behind


def test_another_process_waits_for_the_turn_and_a_dead_waiters_ticket_is_skipped(tmp_path: Path) -> None:
    locks = FileWriterLocks(tmp_path)
    queue = tmp_path / "write-queue"
    queue.mkdir()
    (queue / f"{0:020d}-1-dead.ticket").touch()  # a waiter killed while queued: nobody holds its lock
    with locks.turn(5) as got:
        assert got  # the dead ticket, older, did not block the queue
        proc = subprocess.Popen(
            [sys.executable, "-c", _WAITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        _wait_for_tickets(tmp_path, 2)
        assert proc.poll() is None  # queued behind this turn
    out, _ = proc.communicate(timeout=60)
    assert out.strip() == "turn True"


def test_the_store_refuses_a_turn_after_the_bounded_wait_with_a_retryable_503(tmp_path: Path) -> None:
    store = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    try:
        with store.write_turn(5), pytest.raises(ContextEngineError) as err, store.write_turn(0.2):
            pass
        assert err.value.code is ErrorCode.WRITE_BUSY and err.value.retryable
        assert err.value.code.http_status == 503 and err.value.code.exit_code == 4
    finally:
        store.close()


def test_a_database_locked_past_the_busy_wait_is_write_busy_not_a_storage_failure(tmp_path: Path) -> None:
    path = tmp_path / "metadata.db"
    SqlMetadataStore.sqlite(path).close()
    store = SqlMetadataStore(f"sqlite:///{path}", busy_timeout_s=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process holding SQLite's write lock
        with pytest.raises(ContextEngineError) as err:
            store.set_meta("k", "v")
        assert err.value.code is ErrorCode.WRITE_BUSY and err.value.retryable
        assert err.value.envelope()["details"]["retryable"] is True
        holder.execute("COMMIT")
        store.set_meta("k", "v")  # the lock gone, the same write lands
        assert store.get_meta("k") == "v"
    finally:
        holder.close()
        store.close()


def _wait_for_tickets(directory: Path, n: int) -> None:
    queue = directory / "write-queue"
    deadline = time.monotonic() + 30
    while len([p for p in queue.iterdir() if p.name.endswith(".ticket") and not p.name.startswith(".")]) < n:
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.01)
