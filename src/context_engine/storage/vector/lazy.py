"""A vector index opened on first use (DESIGN.md §3, issue 12 cold start).

Opening LanceDB costs seconds (``import lancedb`` alone is 2-4 s on a small machine), and a search_memory served by
the level-0 matrix and BM25 never touches it. :class:`LazyVectorIndex` holds the opener and runs it the first time
anything is asked of the index, once, under a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from context_engine.schema.nodes import VectorFilter, VectorHit, VectorRecord
from context_engine.storage.protocols import VectorIndex

__all__ = ["LazyVectorIndex"]


class LazyVectorIndex:
    """:class:`~context_engine.storage.protocols.VectorIndex` that opens the real one on first use: a home's own
    files (LanceDB), which no other deployment shares, so never stamped (:meth:`read_stamp`).

    Args:
        name: the backend's name (``lancedb``), known before opening.
        opener: builds the index; what it raises (``IDX-4091``, ``IDX-5031``, ``WRT-5001``) surfaces at the first
            call, and at every call after it until an open succeeds (a damaged index is not kept).
        dropper: removes the index's files without opening them (:meth:`drop`); ``None``: it cannot be dropped.
    """

    def __init__(
        self, name: str, opener: Callable[[], VectorIndex], *, dropper: Callable[[], bool] | None = None
    ) -> None:
        self.name = name
        self._opener = opener
        self._dropper = dropper
        self._index: VectorIndex | None = None
        self._lock = threading.Lock()

    @property
    def opened(self) -> bool:
        """Whether the real index was opened."""
        return self._index is not None

    def _get(self) -> VectorIndex:
        index = self._index
        if index is None:
            with self._lock:
                if self._index is None:
                    self._index = self._opener()
                index = self._index
        return index

    def check(self) -> None:
        """Open the index (if not yet) and check that its files are whole (``IDX-5031`` when not)."""
        self._get().check()

    def close(self) -> None:
        """Close the wrapped index if it was opened (opens nothing)."""
        index = self._index
        if index is not None:
            index.close()

    def drop(self) -> bool:
        """Forget the open index and remove its files without opening them (``reindex --full`` of a damaged index);
        the next call opens, and so creates, an empty one. Returns whether files were removed."""
        if self._dropper is None:
            return False
        with self._lock:
            self._index = None
            return self._dropper()

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        self._get().upsert(records)

    def delete(self, ids: Sequence[str]) -> None:
        self._get().delete(ids)

    def search(self, vector: np.ndarray, top_k: int, flt: VectorFilter) -> list[VectorHit]:
        return self._get().search(vector, top_k, flt)

    def ids(self, account_id: str) -> list[str]:
        """The wrapped index's record ids of ``account_id``."""
        return self._get().ids(account_id)

    def read_stamp(self) -> str | None:
        """``None``, opening nothing: the index opened lazily is a home's own files (LanceDB), never stamped."""
        return None

    def write_stamp(self, store_id: str) -> None:
        """Nothing to record (:meth:`read_stamp`)."""

    def count(self) -> int:
        return self._get().count()

    def optimize(self) -> None:
        self._get().optimize()

    def __getattr__(self, attr: str) -> Any:  # adapter specifics (has_ann_index, dim, ...)
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self._get(), attr)
