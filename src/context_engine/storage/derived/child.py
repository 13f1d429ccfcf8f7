"""A large account's derived file, built in a child process (docs/derived_indexes.md, "Built in a child process").

The first load of an account with no usable derived file (a fresh home, a file behind a pruned change log) reads
every row and builds the structure from Python objects: rows, tokens, postings lists. Once the structure is held,
those objects are freed, but the heap they lived in stays fragmented, the more so when requests allocate beside the
load, and neither a garbage collection nor ``malloc_trim`` gives the pages back. :class:`ChildProcessBuilder` runs
that load in a child process instead (``python -m context_engine.storage.derived.child``), which writes the file and
exits; the serving process then opens the file (mapped) and catches up from the change log, as a restarted process
does (:meth:`~context_engine.storage.derived.base.DerivedIndex._load_elsewhere`).

The child gets the engine's :class:`~context_engine.settings.Settings` (pickled, on its standard input: secrets such
as a database password never appear on a command line), opens the same metadata store and derived folder, builds
the index of the asked kind exactly as the engine does (same parameters, so the file's header matches and the
parent uses it; a mismatch would only make the parent load in its own process), writes the file and exits with 0.
Any failure (a non-zero exit, logged with the error the child reports; a timeout; a child that cannot start) is
logged and the parent loads the account itself, as before; after :data:`MAX_FAILURES` failures in a row the builder
turns itself off (a child that cannot start costs a second and a warning per load). Closing the engine stops the
children still running (:meth:`ChildProcessBuilder.close`), and on Linux a child dies with its parent
(``PR_SET_PDEATHSIG``). The child runs with ``-P`` (the working directory, here the data home, is not put on its
import path) and in the data home.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import pickle
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from context_engine.settings import Settings

__all__ = ["BUILD_TIMEOUT_S", "KINDS", "MAX_FAILURES", "NOT_WRITTEN", "ChildProcessBuilder", "main"]

_LOG = logging.getLogger(__name__)

KINDS = ("bm25", "l0")
"""The derived file kinds a child builds: BM25 postings and the level-0 matrix."""

BUILD_TIMEOUT_S = 3600.0
"""A child still building after this long is stopped and the account loaded in the parent (a 1M-node account's
files take about a minute each on a 2-core machine)."""

MAX_FAILURES = 3
"""Failures in a row after which the builder turns itself off (every later load runs in the parent)."""

NOT_WRITTEN = 3
"""The child's exit status when it ran but wrote no file (the write failed, or the account is over the index's
limit); 2 is an error it reports, any other status a child that did not get that far (e.g. an import failure)."""

_PR_SET_PDEATHSIG = 1  # prctl(2)


class ChildProcessBuilder:
    """:class:`~context_engine.storage.derived.base.FileBuilder` that runs the wholesale load in a child process.

    Args:
        settings: the engine's settings (the child opens the same home, metadata store and index parameters); pickled
            here, once: the child builds with the settings the engine was opened with.
        min_rows: accounts of at least this many vector rows are built here
            (``retrieval.derived_build_process_rows``; 0: none).
        timeout_s: seconds a child may run before it is stopped.

    Attributes:
        builds: children that wrote their file; ``failures``: those that did not (the parent loaded instead).

    Raises:
        pickle.PicklingError, TypeError: ``settings`` cannot be pickled (at construction, not at a load).
    """

    def __init__(self, settings: Settings, min_rows: int, *, timeout_s: float = BUILD_TIMEOUT_S) -> None:
        self._settings = pickle.dumps(settings)
        self._home = settings.home_path
        self.min_rows = min_rows
        self.timeout_s = timeout_s
        self.builds = 0
        self.failures = 0
        self._failed_in_a_row = 0
        self._lock = threading.Lock()  # guards the counters and the running children
        self._running: set[subprocess.Popen[bytes]] = set()
        self._closed = False

    def build(self, kind: str, account_id: str) -> bool:
        """Run the child for ``kind`` (:data:`KINDS`) and ``account_id``; whether it wrote the file. Never raises: a
        failure is logged (with what the child reported) and counted."""
        payload = pickle.dumps({"settings": self._settings, "kind": kind, "account_id": account_id})
        started = time.perf_counter()
        why = self._run(payload)
        with self._lock:
            if why:
                self.failures += 1
                self._failed_in_a_row += 1
                off = self._failed_in_a_row >= MAX_FAILURES and self.min_rows > 0
                if off:
                    self.min_rows = 0
            else:
                self.builds += 1
                self._failed_in_a_row = 0
        if why:
            _LOG.warning("%s file of one account not built in a child process (%s); loading it here", kind, why)
            if off:
                _LOG.warning("%d child builds failed in a row: large accounts now load in this process", MAX_FAILURES)
            return False
        _LOG.info("%s file of one account built in a child process in %.1f s", kind, time.perf_counter() - started)
        return True

    def _run(self, payload: bytes) -> str:
        """Run one child to its end; why it wrote no file, or ``""``."""
        try:
            with self._lock:
                if self._closed:
                    return "the engine is closing"
                child = subprocess.Popen(
                    [sys.executable, "-P", "-m", __name__],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    cwd=self._home,
                )
                self._running.add(child)
        except OSError as err:
            return f"could not start ({err.strerror or err})"
        try:
            _, err_out = child.communicate(payload, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            return f"still building after {self.timeout_s:g} s, stopped"
        finally:
            with self._lock:
                self._running.discard(child)
        if child.returncode == 0:
            return ""
        if self._closed:
            return "stopped: the engine is closing"
        reported = err_out.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no error output"]
        return f"exit status {child.returncode}: {reported[0][:300]}"

    def close(self) -> None:
        """Stop the children still running (their loads then happen nowhere: the engine is closing) and start no
        other."""
        with self._lock:
            self._closed = True
            running = list(self._running)
        for child in running:
            with contextlib.suppress(OSError):
                child.terminate()


def _die_with_parent() -> None:
    """On Linux, have the kernel stop this child when its parent dies (``prctl(PR_SET_PDEATHSIG, SIGTERM)``);
    nothing elsewhere."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))


def _index(kind: str, settings: Settings, metadata: Any, files: Any) -> Any:
    """The derived index of ``kind`` as the engine makes it (``service.py``, ``factory.open_l0_source``)."""
    if kind == "bm25":
        from context_engine.storage.keyword.bm25_index import BM25Index

        return BM25Index(settings.keyword, source=metadata, files=files)
    if kind == "l0":
        from context_engine.storage.factory import level0_matrix

        return level0_matrix(settings.retrieval, metadata, files)
    raise ValueError(f"unknown derived file kind {kind!r} (expected one of {', '.join(KINDS)})")


def main() -> int:
    """The child: read ``{"settings", "kind", "account_id"}`` (pickled) from standard input, build and write the
    account's file; exit status 0 when written, :data:`NOT_WRITTEN` when not (over the index's limit, or the write
    failed: logged), 2 on an error (its type and error code, or its message for a bad request, on standard error:
    never a database message, which may quote rows)."""
    from context_engine.errors import ContextEngineError
    from context_engine.storage.derived_files import DerivedFiles
    from context_engine.storage.factory import open_metadata

    _die_with_parent()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        asked = pickle.loads(sys.stdin.buffer.read())  # noqa: S301 - written by the parent process, never a user
        settings = pickle.loads(asked["settings"])  # noqa: S301 - idem
        kind, account_id = asked["kind"], asked["account_id"]
        metadata = open_metadata(settings, upgrade=False)
        try:
            index = _index(kind, settings, metadata, DerivedFiles(settings.home_path / "derived", metadata))
            try:
                return 0 if index.build_file(account_id) else NOT_WRITTEN
            finally:
                index.close()
        finally:
            metadata.close()
    except ContextEngineError as err:
        print(f"ContextEngineError: {err.code.value}", file=sys.stderr)
        return 2
    except ValueError as err:  # a request this module does not know (an unknown kind)
        print(f"ValueError: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - reported to the parent, which loads the account itself
        print(type(err).__name__, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
