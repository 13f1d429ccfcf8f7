"""The audit rows' background writer (``tool_invocation_recorder._RowWriter``) around a recording sink: when it
writes, in which batches, and that closing and flushing never hang (a unit test of the code around the store; the
store itself is tested in test_audit.py and tests/integration/test_search_audit.py)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from context_engine.knowledge import tool_invocation_recorder as tir
from context_engine.observability.metrics import Metrics


def row(i: int) -> SimpleNamespace:
    return SimpleNamespace(invocation_id=f"r{i}", tool_name="search_memory")


class Sink:
    """Records each batch written (its row ids), after ``delay`` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.batches: list[list[str]] = []
        self.delay = delay
        self.written = threading.Event()

    def __call__(self, rows) -> None:
        time.sleep(self.delay)
        self.batches.append([r.invocation_id for r in rows])
        self.written.set()

    @property
    def ids(self) -> list[str]:
        return [i for batch in self.batches for i in batch]


def test_two_closes_at_once_both_return_and_every_row_is_written():
    """Only the first close queues the end mark: a second one left on the queue made both wait forever (found by a
    review; the process then never exited when a shutdown hook and atexit closed at once)."""
    sink = Sink(delay=0.05)
    writer = tir._RowWriter(sink, Metrics())
    for i in range(3):
        writer.submit(row(i))
    start = threading.Barrier(2)

    def close() -> None:
        start.wait()
        writer.close()

    closers = [threading.Thread(target=close, daemon=True) for _ in range(2)]
    for t in closers:
        t.start()
    for t in closers:
        t.join(10)
    assert not any(t.is_alive() for t in closers)
    assert sink.ids == ["r0", "r1", "r2"]
    writer.flush()  # a read after the closes returns too
    writer.close()  # and so does a third close


def test_rows_queued_while_the_writer_writes_are_written_together_in_batches_of_at_most_write_batch_rows():
    entered, release = threading.Event(), threading.Event()

    class Held(Sink):
        def __call__(self, rows) -> None:
            entered.set()
            release.wait(10)
            super().__call__(rows)

    sink = Held()
    writer = tir._RowWriter(sink, Metrics())
    n = tir.WRITE_BATCH_ROWS + 6
    writer.submit(row(0))
    assert entered.wait(10)  # the first row is being written; the others queue behind it
    for i in range(1, n):
        writer.submit(row(i))
    release.set()
    writer.flush()
    assert sink.ids == [f"r{i}" for i in range(n)]
    assert [len(b) for b in sink.batches] == [1, tir.WRITE_BATCH_ROWS, 5]
    writer.close()
