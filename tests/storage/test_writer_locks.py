"""Writer liveness and the index sync lock of the write journal, on every metadata backend
(storage/metadata/writer_locks.py; SQLite: flock under <home>/journal, PostgreSQL: advisory locks, across machines).

A second store on the same database stands for another process; a real subprocess killed with SIGKILL shows that a
dead writer's lock is released by the operating system or the database server, not by a clean shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from .conftest import MetadataBackend

_HOLDER = """
import sys, time
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
store = SqlMetadataStore(sys.argv[1])
store.hold_writer_lock(sys.argv[2])
print("held", flush=True)
time.sleep(600)
"""


def test_a_held_lock_is_seen_by_other_stores_until_released(metadata_backend: MetadataBackend) -> None:
    writer, other = metadata_backend.open(), metadata_backend.open()
    assert not other.writer_alive("t1")
    writer.hold_writer_lock("t1")
    writer.hold_writer_lock("t1")  # idempotent
    assert writer.writer_alive("t1") and other.writer_alive("t1")
    assert not other.writer_alive("t2")
    writer.release_writer_lock("t1")
    writer.release_writer_lock("t1")  # idempotent
    assert not other.writer_alive("t1")
    other.hold_writer_lock("t1")  # a released token can be taken again
    assert writer.writer_alive("t1")
    other.close()  # closing the store releases its locks
    assert not writer.writer_alive("t1")


def test_a_writer_killed_with_sigkill_is_detected_as_dead(metadata_backend: MetadataBackend) -> None:
    probe = metadata_backend.open()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, metadata_backend.url, "dead-writer"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert probe.writer_alive("dead-writer")
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    # the kernel closes the dead process's file and socket; the server ends its session (and its locks) when it
    # reads the closed socket, which may take a moment after wait() returns: poll, bounded
    deadline = time.monotonic() + 30
    while probe.writer_alive("dead-writer") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not probe.writer_alive("dead-writer")


def test_index_syncs_are_serialised_across_stores(metadata_backend: MetadataBackend) -> None:
    stores = [metadata_backend.open() for _ in range(4)]
    inside, most = [0], [0]
    guard = threading.Lock()
    errors: list[BaseException] = []

    def sync(store_index: int) -> None:
        try:
            for _ in range(5):
                with stores[store_index].index_sync_lock("acc-a"):
                    with guard:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    time.sleep(0.005)  # widen the window an overlap would need
                    with guard:
                        inside[0] -= 1
        except BaseException as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=sync, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and most[0] == 1


def test_a_failure_inside_the_sync_lock_propagates_unchanged_and_frees_it(metadata_backend: MetadataBackend) -> None:
    store, other = metadata_backend.open(), metadata_backend.open()

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.index_sync_lock("acc-a"):
        raise Boom
    with other.index_sync_lock("acc-a"):  # free again (this would wait forever otherwise)
        pass
