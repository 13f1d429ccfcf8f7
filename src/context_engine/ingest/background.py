"""One call run in a background thread while the calling thread goes on (issue 26: a write's embedding overlapped
with its content and node rows, :mod:`context_engine.ingest.pipeline`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Background"]

T = TypeVar("T")


class Background(Generic[T]):
    """``fn()`` started at once in a daemon thread of its own; :meth:`result` waits for it and returns its value or
    raises what it raised (``BaseException`` included), in the caller's thread.

    One thread per call, no pool: nothing to shut down, and concurrent writers never queue behind each other's
    embedding here (the embedder serialises what must be serialised). A caller that gives up on the value still
    calls :meth:`wait`, so no work of a finished write is left running.
    """

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread by result()
            self._error = err

    def wait(self) -> None:
        """Block until the call has returned or raised."""
        self._thread.join()

    def result(self) -> T:
        """The call's value, once it returned; its exception, raised again here, if it raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set by a call that returned
