"""Concurrent writers on every metadata backend: the account generation, sequence numbers and first writes of a key
(storage/metadata; docs/derived_indexes.md). Threads stand for replicas: on PostgreSQL each call runs on its own
pooled connection, exactly as in another process. The assertions hold whatever the interleaving."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from context_engine.schema.nodes import VectorRecord

from .conftest import MetadataBackend

A = "acc-a"


def _vrec(rid: str, text: str) -> VectorRecord:
    return VectorRecord(
        id=rid,
        vector=np.ones(4, dtype=np.float32),
        uri=f"ctx://resources/{rid}.md",
        parent_uri="ctx://resources/",
        account_id=A,
        owner_space="shared",
        context_type="resource",
        level=0,
        text=text,
    )


def _run_together(workers: list[Callable[[], None]]) -> list[BaseException]:
    start = threading.Barrier(len(workers))
    errors: list[BaseException] = []

    def run(work: Callable[[], None]) -> None:
        start.wait()
        try:
            work()
        except BaseException as err:  # noqa: BLE001 - collected and asserted by the caller
            errors.append(err)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_generations_commit_in_order_so_a_follower_misses_no_change(metadata_backend: MetadataBackend) -> None:
    """Writers of one account bump its generation inside their transactions; a follower that applies
    ``changes_since`` while they write ends with exactly the committed rows: no generation became visible before an
    earlier one (which would hide the earlier one's changes from the follower for good)."""
    writers, writes = 4, 15
    stores = [metadata_backend.open() for _ in range(writers + 1)]
    done = threading.Event()
    seen: dict[str, str] = {}
    generations: list[int] = []

    def writer(n: int) -> Callable[[], None]:
        def work() -> None:
            for i in range(writes):  # ids repeat (i % 4): rows are replaced as well as added
                stores[n].put_vectors([_vrec(f"w{n}-{i % 4}", f"writer {n} write {i}")])

        return work

    def follow() -> None:
        follower = stores[-1]
        generation, token = 0, None
        while True:
            finished = done.is_set()  # read before the delta: the last pass sees every commit
            delta = follower.changes_since(A, generation, token=token)
            assert not delta.reload
            for row in delta.upserted:
                seen[row.id] = row.text
            for rid in delta.removed:
                seen.pop(rid, None)
            if delta.generation != generation:
                generations.append(delta.generation)
            generation, token = delta.generation, delta.token
            if finished:
                return

    follower_thread = threading.Thread(target=follow)
    follower_thread.start()
    errors = _run_together([writer(n) for n in range(writers)])
    done.set()
    follower_thread.join()
    assert errors == []
    final = stores[0].load_vector_matrix(A, with_vectors=False)
    assert final.generation == writers * writes == generations[-1]
    assert generations == sorted(set(generations))  # strictly increasing
    assert seen == dict(zip(final.ids, final.text, strict=True))
    last = {k: max(i for i in range(writes) if i % 4 == k) for k in range(4)}
    assert seen == {f"w{n}-{k}": f"writer {n} write {last[k]}" for n in range(writers) for k in range(4)}


def test_concurrent_reservations_never_share_a_number(metadata_backend: MetadataBackend) -> None:
    stores = [metadata_backend.open() for _ in range(6)]
    parent = "ctx://user/bob/memories/sessions/s1/"
    got: list[list[int]] = []

    def reserve(store_index: int) -> Callable[[], None]:
        def work() -> None:
            for _ in range(8):
                first = stores[store_index].reserve_sequence(A, parent, 3, floor=0)
                got.append([first, first + 1, first + 2])

        return work

    assert _run_together([reserve(i) for i in range(6)]) == []
    numbers = sorted(n for block in got for n in block)
    assert numbers == list(range(1, 6 * 8 * 3 + 1))


def test_concurrent_first_writes_of_a_meta_key_all_succeed(metadata_backend: MetadataBackend) -> None:
    stores = [metadata_backend.open() for _ in range(6)]

    def write(i: int) -> Callable[[], None]:
        return lambda: stores[i].set_meta("stamp", f"value-{i}")

    assert _run_together([write(i) for i in range(6)]) == []
    assert stores[0].get_meta("stamp") in {f"value-{i}" for i in range(6)}


def test_lock_writes_serialises_journaled_writes(metadata_backend: MetadataBackend) -> None:
    """A read-modify-write under ``lock_writes`` (no other lock) loses no update: the journaled writes of every
    process take turns (SQLite: the write transaction; PostgreSQL: the row lock of one ``meta`` row)."""
    stores = [metadata_backend.open() for _ in range(4)]
    stores[0].set_meta("counter", "0")

    def increment(i: int) -> Callable[[], None]:
        def work() -> None:
            for _ in range(10):
                with stores[i].transaction():
                    stores[i].lock_writes()
                    value = int(stores[i].get_meta("counter") or 0)
                    stores[i].set_meta("counter", str(value + 1))

        return work

    assert _run_together([increment(i) for i in range(4)]) == []
    assert stores[0].get_meta("counter") == "40"
