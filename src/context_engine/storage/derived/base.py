"""One base for the in-memory derived indexes: the level-0 matrix and BM25 (docs/derived_indexes.md, DESIGN §13).

A derived index holds, per account, a structure built from the metadata store's vector rows. What every such index
does the same way lives here, written once:

* the **account registry**: the accounts held, least recently used first, dropped past ``max_accounts``; the
  accounts found over the index's limit (and at which generation); one load lock per account, so that two threads
  asking for an account not held load it once;
* the **generation check** (rule 2): a held account at the committed generation *and* its token
  (:class:`~context_engine.storage.changes.AccountState`) is returned with no lock;
* **restore from file**: an account not held is opened from its derived file
  (:class:`~context_engine.storage.derived_files.DerivedFiles`) when there is a usable one;
* **catch up from the change log or reload** (rules 3 and 4): ``changes_since`` from the generation and token held,
  applied in O(changes), or a wholesale load when the log does not reach back, the database is behind, its history
  no longer holds the state held (another token: a restored database), or too much changed;
* **background saves**: a wholesale load, or ``max(1024, rows / 10)`` rows applied since the file, writes the file
  again on the index's saver thread (:class:`~context_engine.storage.derived_files.BackgroundSaves`);
* **wholesale loads elsewhere**: with a :class:`FileBuilder` (a child process, :mod:`.child`), the wholesale load of
  a large account writes its file there, and this process opens that file and catches up, as a restarted process
  would; it holds none of the load's garbage.

A subclass says how its structure is built, restored, changed and captured (the ``_`` hooks below).
"""

from __future__ import annotations

import ctypes
import gc
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from context_engine.storage.changes import AccountState, IndexDelta
from context_engine.storage.derived_files import BackgroundSaves, DerivedFiles, Snapshot

__all__ = ["DerivedAccount", "DerivedIndex", "FileBuilder"]

MAX_CHANGES = 50_000
"""Catch-up applies at most ``max(this, half the account's rows)`` changed ids; past that it reloads the account."""

RELEASE_MIN_ROWS = 100_000
"""A wholesale load of at least this many rows, once replaced by its file (:meth:`DerivedIndex._remap`), is followed
by a full garbage collection and :func:`_release_free_memory` (a smaller one frees too little to be worth them)."""

RESAVE_MIN_ROWS = 1024
"""A derived file is rewritten once ``max(this, a tenth of the rows)`` rows were applied since it was written."""


class FileBuilder(Protocol):
    """Writes an account's derived file outside this process (:class:`~context_engine.storage.derived.child.
    ChildProcessBuilder`): a wholesale load there, so that its garbage is never this process's."""

    min_rows: int
    """Accounts of at least this many vector rows (every level) are built by it; 0: none."""

    def build(self, kind: str, account_id: str) -> bool:
        """Load ``account_id`` wholesale into the index of ``kind`` (``bm25``, ``l0``) and write its file; whether the
        file was written (a failure is logged, never raised: the caller then loads in its own process)."""
        ...


class DerivedAccount:
    """What the base keeps of every held account; a subclass adds its structure.

    Attributes:
        account_id: the account.
        generation: the account generation the structure is exactly at (``None``: not loaded from a store, e.g. an
            index fed directly).
        token: the token of ``generation`` (:class:`~context_engine.storage.changes.AccountState`): the structure is
            the store's state only when both match; ``None`` for generation 0, a state written before tokens, or an
            index fed directly.
        unsaved: rows applied from the change log since the state its derived file holds.
        lock: serialises the writers of the account (catch-up, loads into it, direct writes); readers of a current
            account never take it.
    """

    def __init__(self, account_id: str, generation: int | None, token: str | None = None) -> None:
        self.account_id = account_id
        self.generation = generation
        self.token = token
        self.unsaved = 0
        self.lock = threading.Lock()

    @property
    def rows(self) -> int:
        """Live rows held (a subclass counts them)."""
        raise NotImplementedError

    def at(self, state: AccountState) -> bool:
        """Whether the structure is exactly the store's ``state`` (generation and token; read with no lock: a
        catch-up sets each after the rows, and no half-set pair equals a state the store named)."""
        return self.generation == state.generation and self.token == state.token


A = TypeVar("A", bound=DerivedAccount)


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
_MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's initial value


def _release_free_memory() -> None:
    """Hand the C heap's free pages back to the system and keep later large blocks out of the heap (glibc
    ``malloc_trim`` and ``mallopt(M_MMAP_THRESHOLD)``; nothing elsewhere), after a wholesale load was replaced by its
    file (:meth:`DerivedIndex._remap`). The load frees many large blocks, which makes glibc raise its mmap threshold
    (up to 32 MB): later temporaries of that size (a search's score arrays) then come from the heap, which fragments
    and keeps its pages. Fixed at glibc's initial 128 KiB, such blocks are mapped and unmapped again. At 1M nodes, a
    process that built its files held 4.0 GB after 600 bench searches (2.35 GB anonymous), one started with
    ``MALLOC_MMAP_THRESHOLD_=131072`` 2.9 GB (1.25 GB), as a restarted one does (docs/derived_indexes.md). The
    threshold is the process's, for the rest of its life (glibc's dynamic adjustment stops); an environment that sets
    ``MALLOC_MMAP_THRESHOLD_`` keeps its value."""
    try:
        libc = ctypes.CDLL(None)
        trim, mallopt = libc.malloc_trim, libc.mallopt
    except (AttributeError, OSError, TypeError):  # not glibc (macOS, musl; Windows has no CDLL(None))
        return
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:  # an operator's own setting stands
        mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    trim(0)


class DerivedIndex(Generic[A]):
    """Accounts held in memory and kept current from the metadata store (module docstring).

    Args:
        metadata: the metadata store (``account_state``, ``changes_since``, ``load_vector_matrix``); ``None``: the
            index is fed directly and never catches up.
        files: where accounts are kept as files (``None``: no files).
        kind: the derived file kind (``l0``, ``bm25``, ...).
        saver: the background saver's thread name prefix and what its files hold (for a failed save's log line).
        max_accounts: accounts held at once (least recently used are dropped); ``None``: no limit.
        levels: the levels asked of the change log (``None``: every level).

        builder: writes the file of a large account's wholesale load in another process (:meth:`_load_elsewhere`);
            ``None``: every load is this process's.

    Attributes:
        loads: accounts loaded wholesale (first use, or a change log that did not reach back), here or by the
            ``builder``.
        built_elsewhere: those of :attr:`loads` whose file the ``builder`` wrote, opened from it here.
        file_loads: accounts opened from their derived file (then caught up like a held account).
        remaps: wholesale loads replaced by the account read back from the file just written (:meth:`_remap`).
    """

    _holds = "this structure"
    """What a file of this index holds, for the log line of one that does not parse (``a level-0 matrix``)."""

    def __init__(
        self,
        metadata: Any,
        *,
        files: DerivedFiles | None,
        kind: str,
        saver: tuple[str, str],
        max_accounts: int | None = None,
        levels: Sequence[int] | None = None,
        builder: FileBuilder | None = None,
    ) -> None:
        if max_accounts is not None and max_accounts < 1:
            raise ValueError("max_cached_accounts must be at least 1")
        self._metadata = metadata
        self._files = files if metadata is not None else None
        self._kind = kind
        self._saves = BackgroundSaves(*saver)
        self._max_accounts = max_accounts
        self._change_levels = None if levels is None else list(levels)
        self._accounts: OrderedDict[str, A] = OrderedDict()
        self._too_large: dict[str, AccountState] = {}  # account -> the state at which it was found over the limit
        self._lock = threading.Lock()  # guards the registry and the counters
        self._load_locks: dict[str, threading.Lock] = {}
        self._builder = builder if self._files is not None else None
        self.loads = 0
        self.built_elsewhere = 0
        self.file_loads = 0
        self.remaps = 0
        self._closing = False

    # ---- hooks ------------------------------------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        """What shapes a derived file besides the rows: a file written with other values is not used."""
        raise NotImplementedError

    def _restored(self, account_id: str, snap: Snapshot) -> A:
        """The account read back from its file (its generation is the file's; :meth:`_restore` sets its token to the
        file's).

        Raises:
            KeyError, ValueError, TypeError, IndexError: the file does not hold this structure.
        """
        raise NotImplementedError

    def _loaded(self, account_id: str) -> A | None:
        """The account read wholesale from the metadata store (``load_vector_matrix``) at the matrix's generation and
        token, with ``unsaved`` set to the rows read, or ``None`` when it is over the index's limit (then recorded
        with :meth:`_mark_too_large`)."""
        raise NotImplementedError

    def _apply(self, account: A, delta: IndexDelta) -> None:
        """Apply a change-log delta to a held account (its :attr:`DerivedAccount.lock` held) and bring it to
        ``delta.generation`` and ``delta.token`` (set after the rows); then :meth:`_applied`."""
        raise NotImplementedError

    def _snapshot(self, account: A) -> tuple[AccountState, int, dict[str, Any], dict[str, np.ndarray]] | None:
        """``(state, unsaved, meta, arrays)`` of a held account for its file (``state``: its generation and token;
        the subclass takes the account's lock while it captures), or ``None`` when there is nothing to save."""
        raise NotImplementedError

    def _over_limit(self, account: A) -> bool:
        """Whether an account restored from its file is over the index's limit (not held)."""
        return False

    # ---- registry ---------------------------------------------------------------------------------------------------
    def held(self, account_id: str) -> bool:
        """Whether the account is held in memory now (at any generation)."""
        with self._lock:
            return account_id in self._accounts

    def too_large(self, account_id: str) -> bool:
        """Whether the account was found over the index's limit (at the generation last checked)."""
        with self._lock:
            return account_id in self._too_large

    def _held_accounts(self, account_id: str | None = None) -> list[A]:
        """The accounts held (or the one named, when held)."""
        with self._lock:
            return [a for a in self._accounts.values() if account_id is None or a.account_id == account_id]

    def _install(self, account: A) -> None:
        """Hold ``account`` (replacing the one held), most recently used; drop the least recently used past the
        limit."""
        with self._lock:
            self._too_large.pop(account.account_id, None)
            self._accounts[account.account_id] = account
            self._accounts.move_to_end(account.account_id)
            while self._max_accounts is not None and len(self._accounts) > self._max_accounts:
                self._accounts.popitem(last=False)

    def _mark_too_large(self, account_id: str, state: AccountState) -> None:
        with self._lock:
            self._too_large[account_id] = state
            self._accounts.pop(account_id, None)

    def warm(self, account_id: str) -> bool:
        """Bring the account into memory now, as its first request would (opened from its file and caught up, or
        loaded wholesale), so that request finds it held (a server's warm-up before it says ready, issue 26).

        Returns:
            Whether the account is held now (``False`` when it is over the index's limit, or the index is fed
            directly and does not hold it).

        Raises:
            ContextEngineError: what the metadata store raises (``WRT-5001``, ...).
        """
        return self._current(account_id) is not None

    # ---- the rule ---------------------------------------------------------------------------------------------------
    def _current(self, account_id: str, state: AccountState | int | None = None) -> A | None:
        """The account at (at least) its committed state, opened, caught up or reloaded first when needed; ``None``
        when it is over the index's limit. Without a metadata store: the account as fed, or ``None``.

        Args:
            account_id: the account.
            state: the committed :class:`AccountState` when the caller just read it (saves the read). A bare
                generation number (what callers read before tokens) saves nothing: the number alone cannot tell
                the held state from another history's state of that number, so the state is read here.

        Raises:
            ContextEngineError: what the metadata store raises (``WRT-5001``, ...).
        """
        if self._metadata is None:
            with self._lock:
                return self._accounts.get(account_id)
        if not isinstance(state, AccountState):
            state = AccountState(*self._metadata.account_state(account_id))
        with self._lock:
            account = self._accounts.get(account_id)
            if account is not None:
                self._accounts.move_to_end(account_id)
                if account.at(state):
                    return account  # rule 2: current, no lock
            elif self._too_large.get(account_id) == state:
                return None
            lock = self._load_locks.setdefault(account_id, threading.Lock())
        if account is None or account.generation is None:
            with lock:
                with self._lock:
                    account = self._accounts.get(account_id)
                if account is None or account.generation is None:
                    return self._open(account_id, state)
        with account.lock:
            if account.at(state):
                return account  # caught up by another thread meanwhile
            return self._catch_up(account)

    def _catch_up(self, account: A) -> A | None:
        """Rules 3 and 4: apply the change log since the generation and token held (account lock held), or reload
        the account when the log does not reach back, the database is behind it, its history does not hold the
        state held (a restored database), or more changed than is worth applying one by one."""
        delta = self._changes(account)
        if delta.reload:
            return self._load(account.account_id)
        self._apply(account, delta)
        return account

    def _changes(self, account: A) -> IndexDelta:
        """``changes_since`` the state the account holds."""
        assert account.generation is not None
        return self._metadata.changes_since(
            account.account_id,
            account.generation,
            token=account.token,
            levels=self._change_levels,
            max_changes=max(MAX_CHANGES, account.rows // 2),
        )

    def _open(self, account_id: str, state: AccountState) -> A | None:
        """First use of an account: from its derived file caught up from the change log, else a wholesale load."""
        account = self._restore(account_id)
        if account is None:
            return self._load(account_id)
        if self._over_limit(account):
            self._mark_too_large(account_id, state)
            return None
        if not account.at(state):
            # reloaded when the file is behind a pruned log, ahead of the database, or of a history the database
            # lost (restored, then written back to the file's generation or past it)
            caught = self._catch_up(account)
            if caught is not account:
                return caught
        with self._lock:
            self.file_loads += 1
        self._install(account)
        return account

    def _load(self, account_id: str) -> A | None:
        """A wholesale load, held and saved to its file: by the ``builder`` for a large account
        (:meth:`_load_elsewhere`), else here."""
        elsewhere = self._load_elsewhere(account_id)
        if elsewhere is not None:
            return elsewhere
        account = self._loaded(account_id)
        if account is None:
            return None
        with self._lock:
            self.loads += 1
        self._install(account)
        if account.unsaved and self._files is not None:  # the rows read (set by the subclass); empty: no file
            built = [account]  # emptied by the saver, so that the saver's task keeps no reference to the arrays
            self._saves.submit(account_id, lambda: self._save_and_remap(built))
        return account

    def _load_elsewhere(self, account_id: str) -> A | None:
        """A large account's wholesale load done by the ``builder`` (a child process writes its file), then opened
        from that file and caught up from the change log like a file a previous process left; ``None`` (the caller
        loads here) when there is no builder, the account has fewer than ``builder.min_rows`` vector rows, the build
        failed, the file cannot be used, it is over the index's limit, or its catch-up would be a reload.

        Why: a load builds the structure from Python objects (rows, tokens, postings) that are freed once it is held,
        but leave this process's heap fragmented, the more so while requests run beside it; read back from its file
        (:meth:`_remap`) the structure is mapped, yet the fragments stay. At 1M nodes, a fresh home's first start
        held about 1 GB more anonymous memory after the same searches than a restarted process
        (docs/derived_indexes.md); built elsewhere, it holds what a restarted one holds."""
        builder = self._builder
        if builder is None or builder.min_rows <= 0:
            return None
        rows = self._metadata.count_vectors(account_id)
        if rows < builder.min_rows or not self._builds_elsewhere(rows):
            return None
        if not builder.build(self._kind, account_id):
            return None
        account = self._restore(account_id)
        if account is None or self._over_limit(account):
            return None  # the load here decides (and records an account over the limit)
        if not account.at(self._metadata.account_state(account_id)):  # written meanwhile
            delta = self._changes(account)
            if delta.reload:
                return None
            with account.lock:
                self._apply(account, delta)
        with self._lock:
            self.loads += 1
            self.built_elsewhere += 1
        self._install(account)
        return account

    def _save_and_remap(self, built: list[A]) -> None:
        """The saver's work after a wholesale load (``built``: a list holding the account, emptied here): its file,
        then the account read back from it (:meth:`_remap`), then the C heap's free pages handed back (the built
        arrays are gone by then, unless a request still reads them)."""
        account = built.pop()
        if not self.save_file(account):
            return
        large = account.rows >= RELEASE_MIN_ROWS
        replaced = self._remap(account)
        del account
        if replaced and large:
            # the built account's reference cycles (a segment map, row tables pointing back at their owner); frozen
            # by a warm-up that stopped waiting for this save (gc.freeze), they are collected only once thawed
            frozen = gc.get_freeze_count() > 0
            if frozen:
                gc.unfreeze()
            gc.collect()
            if frozen:
                gc.freeze()
            _release_free_memory()

    def _applied(self, account: A, rows: int) -> None:
        """Count ``rows`` applied from the change log; past ``max(1024, rows / 10)`` since the file, save it."""
        account.unsaved += rows
        if self._files is not None and account.unsaved > max(RESAVE_MIN_ROWS, account.rows // 10):
            self._schedule_save(account)

    # ---- files ------------------------------------------------------------------------------------------------------
    def has_file(self, account_id: str) -> bool:
        """Whether the account has a derived file this index would open from (judged from its header: format,
        parameters, database; how far behind the change log it is is known only once opened)."""
        return self._files is not None and self._files.usable(self._kind, account_id, self._params())

    def _restore(self, account_id: str) -> A | None:
        if self._files is None:
            return None
        snap = self._files.load(self._kind, account_id, self._params())
        if snap is None:
            return None
        try:
            account = self._restored(account_id, snap)
        except (KeyError, ValueError, TypeError, IndexError) as err:
            self._files.reject(snap.path, f"does not hold {self._holds} ({type(err).__name__}: {err})"[:200])
            return None
        account.token = snap.token  # the state the file holds is its generation with this token
        return account

    def _remap(self, account: A) -> bool:
        """After a wholesale load's file is written (on the saver thread): hold the account as read back from that
        file instead of the arrays built in memory, when it is still held and nothing was applied to it since. The
        file's arrays are mapped (pages shared with the OS cache, read when touched), so a server that built its
        files at its first start holds about what a restarted one holds: at 1M nodes, with
        :func:`_release_free_memory`, 3.1 GB after the warm-up and 900 searches instead of 4.8 GB (a restarted
        process: 2.9 GB; docs/derived_indexes.md). Requests that took the built account finish with it; the
        next ones get the restored one. ``True`` when the account was replaced."""
        with self._lock:
            if self._accounts.get(account.account_id) is not account or account.unsaved or self._closing:
                return False
        restored = self._restore(account.account_id)  # outside the account's lock: a catch-up need not wait
        if restored is None:
            return False
        self._prepared(restored)
        with account.lock, self._lock:  # the same checks again, now that nothing can change the account
            if (
                self._accounts.get(account.account_id) is not account
                or account.unsaved
                or restored.generation != account.generation
                or restored.token != account.token
            ):
                return False
            self._accounts[account.account_id] = restored  # keeps its place in the least-recently-used order
            self.remaps += 1
        return True

    def _builds_elsewhere(self, rows: int) -> bool:
        """Whether the load of an account of ``rows`` vector rows (every level) may run in the ``builder``'s child
        (a subclass with a row limit says no when the account may be over it: the load here finds and records it)."""
        return True

    def _prepared(self, account: A) -> None:
        """Build what the first search of an account read back from its file would otherwise build (a subclass's
        lookups); nothing here."""

    def _schedule_save(self, account: A) -> None:
        """Write the account's derived file on the background saver (once at a time per account)."""
        if self._files is not None:
            self._saves.submit(account.account_id, lambda: self.save_file(account))

    def build_file(self, account_id: str) -> bool:
        """Load the account wholesale from the metadata store and write its derived file, holding nothing afterwards
        (what a :class:`FileBuilder`'s child process runs); ``False`` when there are no files, the account is over
        the index's limit, or writing failed (logged).

        Raises:
            ContextEngineError: what the metadata store raises (``WRT-5001``, ...).
        """
        account = self._loaded(account_id) if self._files is not None else None
        return account is not None and self.save_file(account)

    def save_file(self, account: A | str) -> bool:
        """Write the derived file of a held account now (``account``: the account or its id); ``False`` when there
        are no files, the account is not held or not loaded, or writing failed (logged)."""
        if self._files is None:
            return False
        if isinstance(account, str):
            with self._lock:
                found = self._accounts.get(account)
            if found is None:
                return False
            account = found
        with self._lock:
            held = self._accounts.get(account.account_id)
        if held is not None and held is not account and (held.generation or 0) > (account.generation or 0):
            return False  # replaced by a newer load (its file, maybe a child's, must not be overwritten by this one)
        captured = self._snapshot(account)
        if captured is None:
            return False
        state, unsaved, meta, arrays = captured
        saved = self._files.save(
            self._kind, account.account_id, state.generation, self._params(), meta, arrays, token=state.token
        )
        if saved is None:
            return False
        with account.lock:
            account.unsaved -= unsaved
        return True

    def wait_for_saves(self, timeout: float) -> bool:
        """Wait until the derived files being written are written (and a wholesale load's account read back from
        its file, :meth:`_remap`), at most ``timeout`` seconds; whether they are. A server's warm-up calls it before
        it says ready, so that its first requests neither share the machine with the saves nor meet the swap."""
        return self._saves.wait(timeout)

    def close(self) -> None:
        """Wait for the derived files being written (a process that exits right after still leaves them whole); a
        wholesale load whose file is still pending is not read back from it (:meth:`_remap`: the process is ending)."""
        self._closing = True
        self._saves.close()
