"""Writer liveness and the vector-index sync lock of the write journal (:mod:`context_engine.ingest.journal`).

A write's intent row names its writer by a liveness token; another process may undo or finish the row only once that
writer is dead. :class:`~context_engine.storage.metadata.sqlalchemy_store.SqlMetadataStore` picks one of two
implementations by dialect (its ``hold_writer_lock`` / ``writer_alive`` / ``release_writer_lock`` /
``index_sync_lock``):

* :class:`FileWriterLocks` (SQLite: every process shares one machine and one home): an exclusive ``flock`` on
  ``<dir>/writer-<token>.lock`` held for the process's life. The kernel drops it when the process dies (``kill -9``
  included), so a lock that can be taken belongs to a dead writer. The sync lock is a ``flock`` on
  ``<dir>/index-sync.lock``.
* :class:`AdvisoryWriterLocks` (PostgreSQL: replicas on any machines): a session-level advisory lock on a dedicated
  connection held for the process's life. The server drops it when the session ends: at once when the process dies
  (its socket closes), within about a minute (TCP keepalives) when its host vanishes. Another writer's liveness is
  probed with ``pg_try_advisory_xact_lock``, which succeeds only when nobody holds the lock. The sync lock is a
  transaction advisory lock per account.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from sqlalchemy import Engine, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from context_engine.storage.metadata.dialects import lock_key, xact_lock

__all__ = ["AdvisoryWriterLocks", "FileWriterLocks"]

_LOG = logging.getLogger("context_engine.storage")
_TURN_POLL_MAX_S = 0.02  # a waiter looks at the write queue at least this often


class FileWriterLocks:
    """``flock`` files in ``directory`` (created on first use); see the module docstring."""

    def __init__(self, directory: Path) -> None:
        self._dir = Path(directory)
        self._held: dict[str, int] = {}
        self._mutex = threading.Lock()

    def hold(self, token: str) -> None:
        """Take (once; later calls return at once) the lock proving that the writer ``token`` is alive."""
        with self._mutex:
            if token in self._held:
                return
            self._dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path(token), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BaseException:
                os.close(fd)
                raise
            self._held[token] = fd

    def alive(self, token: str) -> bool:
        """Whether the writer ``token`` holds its lock (in this process or another)."""
        with self._mutex:
            if token in self._held:
                return True
        path = self._path(token)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False  # released cleanly (its lock file removed) or never taken
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing the descriptor releases the lock just taken
        path.unlink(missing_ok=True)  # its owner is dead: nobody will take this token again
        return False

    def release(self, token: str) -> None:
        """Drop the lock of ``token`` (its rows become recoverable by others). Idempotent."""
        with self._mutex:
            fd = self._held.pop(token, None)
            if fd is None:
                return
            self._path(token).unlink(missing_ok=True)
            os.close(fd)

    @contextmanager
    def sync(self, account_id: str) -> Iterator[None]:
        """Serialise vector-index syncs of every process sharing this directory (all accounts: one file)."""
        self._dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._dir / "index-sync.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    @contextmanager
    def turn(self, timeout_s: float) -> Iterator[bool]:
        """Wait, at most ``timeout_s``, for this writer's turn in the home's write queue; yields whether it came.

        The queue is a folder of ticket files named by arrival time (``CLOCK_MONOTONIC``, one clock for every process
        of the machine), each ``flock``-ed by its waiter for as long as it waits or writes. The turn is the waiter's
        whose ticket is the oldest live one: first come, first served across threads and processes, with no
        busy-wait back-off that lets a newcomer overtake (SQLite's own busy handler does). A ticket whose lock can be
        taken belongs to a dead waiter and is removed. A ticket is locked under a temporary name and then renamed, so
        nobody sees an unlocked one.
        """
        queue = self._dir / "write-queue"
        queue.mkdir(parents=True, exist_ok=True)
        name = f"{time.monotonic_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.ticket"
        staging = queue / f".{name}"
        fd = os.open(staging, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(staging, queue / name)
        except BaseException:
            os.close(fd)
            staging.unlink(missing_ok=True)
            raise
        try:
            deadline = time.monotonic() + timeout_s
            pause = 0.002
            while True:
                if _first_live_ticket(queue) == name:
                    got = True
                    break
                if time.monotonic() >= deadline:
                    got = False
                    break
                time.sleep(pause)
                pause = min(pause * 2, _TURN_POLL_MAX_S)
            yield got
        finally:
            (queue / name).unlink(missing_ok=True)
            os.close(fd)

    def close(self) -> None:
        """Release every lock this object holds."""
        for token in list(self._held):
            self.release(token)

    def _path(self, token: str) -> Path:
        return self._dir / f"writer-{token}.lock"


class AdvisoryWriterLocks:
    """PostgreSQL advisory locks on ``engine``'s database; see the module docstring.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: from every method on a database failure (the store translates it);
        RuntimeError: from :meth:`hold` when another session holds the token's lock (tokens are random: never).
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._held: dict[str, Connection] = {}
        self._mutex = threading.Lock()

    def hold(self, token: str) -> None:
        """Hold the token's session lock on a dedicated connection (outside the pool) until :meth:`release`.

        When already held, the connection is checked with one round trip: a session the server lost (restart,
        failover) is replaced and the lock taken again, so the writer does not look dead while it writes.
        """
        with self._mutex:
            conn = self._held.get(token)
            if conn is not None:
                try:
                    conn.execute(text("SELECT 1"))
                    return
                except SQLAlchemyError as err:
                    _LOG.warning("the liveness session of writer %s was lost (%s); taking its lock again", token, err)
                    self._held.pop(token)
                    _close_quietly(conn)
            conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            conn.detach()  # out of the pool's care: closed for real when released, never reused by a request
            try:
                got = conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": lock_key(f"writer:{token}")})
                if not got.scalar():
                    raise RuntimeError(f"the liveness lock of writer {token} is held by another session")
            except BaseException:
                _close_quietly(conn)
                raise
            self._held[token] = conn

    def alive(self, token: str) -> bool:
        """Whether a session (of any process, on any machine) holds the lock of writer ``token``."""
        with self._mutex:
            if token in self._held:
                return True
        with self._engine.connect() as conn, conn.begin():
            # taken only when nobody holds it, and released at once with this transaction
            free = conn.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": lock_key(f"writer:{token}")})
            return not free.scalar()

    def release(self, token: str) -> None:
        """Unlock and end the token's session. Idempotent."""
        with self._mutex:
            conn = self._held.pop(token, None)
        if conn is None:
            return
        try:  # unlocked before it returns (a closed socket alone is noticed by the server a moment later)
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": lock_key(f"writer:{token}")})
        except SQLAlchemyError as err:
            _LOG.warning("could not unlock writer %s (its session ends anyway): %s", token, err)
        finally:
            _close_quietly(conn)

    @contextmanager
    def sync(self, account_id: str) -> Iterator[None]:
        """Serialise vector-index syncs of one account across every process: a transaction advisory lock held on a
        pooled connection for the block's duration."""
        with self._engine.connect() as conn, conn.begin():
            xact_lock(conn, f"index-sync:{account_id}")
            yield

    def close(self) -> None:
        """Release every lock this object holds."""
        for token in list(self._held):
            self.release(token)


def _first_live_ticket(queue: Path) -> str | None:
    """The name of the oldest ticket in ``queue`` whose waiter is alive (dead waiters' tickets are removed)."""
    for name in sorted(n for n in os.listdir(queue) if n.endswith(".ticket") and not n.startswith(".")):
        try:
            fd = os.open(queue / name, os.O_RDWR)
        except FileNotFoundError:
            continue  # its waiter finished meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return name  # held: its waiter is alive (this process's own ticket included: another descriptor)
        finally:
            os.close(fd)
        (queue / name).unlink(missing_ok=True)  # nobody held it: its waiter died
    return None


def _close_quietly(conn: Connection) -> None:
    # a connection already broken: closing it is all that was left to do
    with suppress(SQLAlchemyError):
        conn.close()
