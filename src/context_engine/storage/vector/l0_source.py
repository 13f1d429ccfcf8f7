"""Which level-0 scoring view serves a request, and when an account's level-0 matrix is loaded, kept or dropped
(DESIGN.md §5, §12; docs/derived_indexes.md): :class:`L0Source`, built by
:func:`context_engine.storage.factory.open_l0_source`.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from context_engine.errors import ContextEngineError
from context_engine.settings import RetrievalSettings
from context_engine.storage.changes import AccountState
from context_engine.storage.protocols import MetadataStore, VectorIndex
from context_engine.storage.vector.matrix import MatrixVectorIndex
from context_engine.storage.vector.matrix_scoring import MemoryL0Scorer
from context_engine.storage.vector.scoring import IndexL0Scorer, L0Scorer, search_failed

__all__ = ["L0Source"]

_LOG = logging.getLogger(__name__)


class L0Source:
    """Hands out one :class:`L0Scorer` per request, following ``RetrievalSettings.l0_source``.

    * ``index``: always :class:`IndexL0Scorer`.
    * ``memory``: :class:`MemoryL0Scorer` over the level-0 matrix, loading the account synchronously when needed;
      accounts over ``memory_max_rows`` use the index.
    * ``auto``: the memory scorer when the account is held, has a derived file, or is small enough to load now (at
      most ``memory_load_now_rows`` vector rows); otherwise the index scorer, and after ``memory_warm_after_searches``
      searches of the account the matrix is loaded on a background thread.

    A held account is brought to the committed account generation and token before each request (one primary-key
    read, then O(changes) from the change log when they moved: docs/derived_indexes.md), so every process sees every
    write, also after the metadata database was restored.

    Args:
        index: the vector index.
        matrix: the level-0 matrix (``None`` disables the memory path).
        metadata: the metadata store (account generations, row counts).
        settings: the retrieval settings.
    """

    def __init__(
        self,
        index: VectorIndex,
        matrix: MatrixVectorIndex | None,
        metadata: MetadataStore,
        settings: RetrievalSettings,
    ) -> None:
        self.index = index
        self.matrix = matrix
        self._metadata = metadata
        self._settings = settings
        self._searches: dict[str, int] = {}
        self._lock = threading.Lock()
        self._loading: set[str] = set()
        self._executor: ThreadPoolExecutor | None = None

    def scorer(
        self, account_id: str, query_vector: np.ndarray, generation: AccountState | int | None = None
    ) -> L0Scorer:
        """A scorer for one request of ``account_id`` (``generation``: the committed :class:`AccountState` when the
        caller just read it, which saves a read; a bare generation number saves nothing: the matrix reads the state
        again, since the number alone cannot tell a restored database's history from the one it holds).

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when mode ``memory`` cannot load the matrix.
        """
        mode = self._settings.l0_source
        matrix = self.matrix
        if mode == "index" or matrix is None:
            return IndexL0Scorer(self.index, query_vector)
        try:
            if not isinstance(generation, AccountState):
                generation = self._metadata.account_state(account_id)
            if mode == "memory" or matrix.held(account_id) or self._small(account_id):
                view = matrix.view(account_id, generation)
                if view is not None:
                    return MemoryL0Scorer(view, query_vector)
                return IndexL0Scorer(self.index, query_vector)
        except Exception as err:  # broad on purpose: translated (memory) or answered by the index (auto)
            if mode == "memory":
                raise search_failed(err, "level-0 matrix") from err
            return IndexL0Scorer(self.index, query_vector)
        if not matrix.too_large(account_id):
            with self._lock:
                seen = self._searches[account_id] = self._searches.get(account_id, 0) + 1
            if seen > self._settings.memory_warm_after_searches:
                self._load_in_background(account_id)
        return IndexL0Scorer(self.index, query_vector)

    def warm(self, account_id: str) -> bool:
        """Load the account's level-0 matrix now when the first :meth:`scorer` of the account would (mode
        ``memory``; ``auto``: held, with a derived file, or small enough to load at once), without counting a search;
        an account ``auto`` leaves to the vector index stays there (its matrix loads in the background after
        ``memory_warm_after_searches`` searches, as without a warm-up). Returns whether the matrix holds it now.

        Raises:
            ContextEngineError: what the metadata store raises (``WRT-5001``, ...).
        """
        matrix = self.matrix
        mode = self._settings.l0_source
        if mode == "index" or matrix is None:
            return False
        if mode == "memory" or matrix.held(account_id) or self._small(account_id):
            return matrix.warm(account_id)
        return False

    def wait_for_saves(self, timeout: float) -> bool:
        """The level-0 matrix's :meth:`~context_engine.storage.derived.base.DerivedIndex.wait_for_saves` (``True``
        without a matrix)."""
        return True if self.matrix is None else self.matrix.wait_for_saves(timeout)

    def _small(self, account_id: str) -> bool:
        assert self.matrix is not None
        if self.matrix.has_file(account_id):
            return True  # opened from its derived file (docs/derived_indexes.md), not read from the store
        limit = self._settings.memory_load_now_rows
        return limit > 0 and self._metadata.count_vectors(account_id) <= limit

    def _load_in_background(self, account_id: str) -> None:
        """Load the account's matrix on a background thread unless one is already loading it."""
        matrix = self.matrix
        assert matrix is not None
        with self._lock:
            if account_id in self._loading:
                return
            self._loading.add(account_id)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ce-l0-matrix")
            executor = self._executor

        def run() -> None:
            try:
                matrix.view(account_id)
            except ContextEngineError as err:  # the index keeps serving; the next search retries the load
                _LOG.warning("level-0 matrix load failed for one account: %s", err.message)
            finally:
                with self._lock:
                    self._loading.discard(account_id)

        executor.submit(run)

    def close(self) -> None:
        """Stop the background loader (waits for a running load)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
