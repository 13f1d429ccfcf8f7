"""The in-process matrix index: exact cosine search over the metadata store's vector rows (DESIGN.md §3, §12).

One adapter serves two roles: the **exact index** (every level; the reference the other indexes are tested against
and the ``auto`` fallback) and the **level-0 matrix** of search_memory (``levels=(0,)``, scored per request by
:class:`~context_engine.storage.vector.matrix_scoring.MemoryL0Scorer`). It is a derived index
(:class:`~context_engine.storage.derived.base.DerivedIndex`): the metadata store is the source of truth, and each
account's rows are kept current by the one invalidation rule (docs/derived_indexes.md): before a read, the committed
account generation and its token are compared with the ones held (one primary-key read); when they moved, the
changed rows are read from the change log and applied (O(changes): append + tombstone), or the account is reloaded
when the log does not reach back (or no longer holds the state held: a restored database). Writes of any process
are therefore seen by the next search, with no listener.

Rows are kept per account in one segment per owner space (a user's memory query scores that user's segment and the
shared resources, not every user's): :mod:`context_engine.storage.vector.matrix_segment`. A segment whose
tombstones pass a third of its rows is compacted: a new segment is built beside it and swapped in; readers holding
the old one finish on it.

Scores are cosine similarity (the dot product of unit float32 vectors; of the float16 copies in a compressed segment,
within 4.9e-4 of it) clipped to [-1, 1]; ties by id ascending.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorHit, VectorRecord
from context_engine.storage.changes import AccountState, IndexDelta
from context_engine.storage.derived.base import DerivedIndex, FileBuilder
from context_engine.storage.derived_files import DerivedFiles, Snapshot
from context_engine.storage.protocols import MetadataStore
from context_engine.storage.vector.matrix_segment import (
    PROJECT_MIN_ROWS,
    MatrixAccount,
    MatrixSegment,
    MatrixView,
    rescore_depth,
    row_of_record,
    rows_of_matrix,
)

__all__ = ["MatrixSegment", "MatrixVectorIndex", "MatrixView", "rescore_depth"]


class MatrixVectorIndex(DerivedIndex[MatrixAccount]):
    """:class:`~context_engine.storage.protocols.VectorIndex` held in memory, kept current from the change log.

    Writes go to the metadata store (``put_vectors`` / ``delete_vectors``, joining its open transaction); reads see
    every committed write, of this process or another, at the next search (module docstring). Thread-safe; readers
    of a current account take no lock.

    Args:
        metadata: the metadata store (the source of truth and the change feed).
        levels: the levels held (``None``: every level, the exact index; ``(0,)``: the level-0 matrix).
        max_rows: an account with more rows (at ``levels``) is not held; :meth:`view` returns ``None`` for it.
        max_cached_accounts: accounts held at once (least recently used are dropped).
        compress_rows: every segment of an account of at least this many rows holds ``compress_dims``-dimensional
            float32 projections of its vectors (one projection per account; uncentred PCA, :func:`fit_projection`)
            plus float16 copies of the vectors (:class:`MatrixSegment`): three quarters of the memory at 128 of 512
            dimensions, and a quarter of the work per score. Searches pick :func:`rescore_depth` candidates from
            the projections and rescore them from the float16 vectors, in memory. ``None``: never compress.
        compress_dims: the projection's dimensions.
        project_rows: in a compressed account, a segment of fewer rows keeps float16 vectors only and is scanned
            from them (``None``: :data:`PROJECT_MIN_ROWS`).
        files: where accounts are kept as files (``<home>/derived``; :mod:`context_engine.storage.derived_files`):
            an account not held is opened from its file and caught up from the change log; a wholesale load, or
            ``max(1024, rows / 10)`` rows applied since the file, writes the file again on a background thread.
            ``None``: no files.
        builder: writes a large account's file in a child process at its wholesale load (with ``files`` only;
            :class:`~context_engine.storage.derived.base.FileBuilder`).

    Attributes:
        loads, built_elsewhere, file_loads: accounts loaded wholesale, those of them built by the ``builder``, and
            accounts opened from their file (:class:`DerivedIndex`).
        rows_loaded: rows read by the loads made in this process.
        rows_applied: rows applied from the change log (upserted + removed): the O(changes) work of catch-up.
    """

    name = "matrix"
    _holds = "a level-0 matrix"

    def __init__(
        self,
        metadata: MetadataStore,
        *,
        levels: Sequence[int] | None = None,
        max_rows: int | None = None,
        max_cached_accounts: int = 64,
        compress_rows: int | None = None,
        compress_dims: int = 128,
        project_rows: int | None = None,
        files: DerivedFiles | None = None,
        builder: FileBuilder | None = None,
    ) -> None:
        self.levels = None if levels is None else tuple(sorted(set(levels)))
        kind = "l0" if self.levels == (0,) else "matrix" if self.levels is None else f"levels-{self.levels}"
        super().__init__(
            metadata,
            files=files,
            kind=kind,
            saver=("ce-derived-l0", "level-0 matrix"),
            max_accounts=max_cached_accounts,
            levels=self.levels,
            builder=builder,
        )
        self._compress_rows = compress_rows
        self._compress_dims = compress_dims
        self._project_rows = PROJECT_MIN_ROWS if project_rows is None else project_rows
        self._max_rows = max_rows
        self.rows_loaded = 0
        self.rows_applied = 0

    # ---- VectorIndex writes -------------------------------------------------------------------------------------
    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by ``id`` (in the metadata store; joins its open transaction)."""
        self._metadata.put_vectors(records)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records by ``id``; unknown ids are ignored."""
        self._metadata.delete_vectors(ids)

    # ---- reads --------------------------------------------------------------------------------------------------
    def search(self, vector: np.ndarray, top_k: int, flt: VectorFilter) -> list[VectorHit]:
        """The ``top_k`` committed records of ``flt.account_id`` passing ``flt``, nearest to ``vector``.

        Args:
            vector: the query, shape ``(dim,)``, L2-normalised (not re-normalised here).
            top_k: the number of hits wanted; ``<= 0`` returns none.
            flt: the pre-filter; ``None`` fields do not restrict, empty lists match nothing, ``uri_prefix`` is a
                plain string prefix of ``uri``. Levels outside :attr:`levels` are never returned.

        Returns:
            Hits ordered by score descending, ties by ``id`` ascending. Score: cosine similarity, clipped to [-1, 1].

        Raises:
            ContextEngineError: ``IDX-4091`` when ``vector`` does not have the index's dimension;
                ``RET-5001`` (retryable) when loading or scoring fails, or the account is over ``max_rows``.
        """
        query = np.asarray(vector, dtype=np.float32)
        if query.ndim != 1 or not np.isfinite(query).all():
            raise ContextEngineError(
                ErrorCode.VECTOR_SEARCH_FAILED, "the query vector must be a finite 1-D array", retryable=False
            )
        if top_k <= 0:
            return []
        try:
            view = self.view(flt.account_id)
            if view is None:
                raise ContextEngineError(
                    ErrorCode.VECTOR_SEARCH_FAILED,
                    f"the account has more than {self._max_rows} rows, over the matrix index's limit",
                    {"max_rows": self._max_rows},
                    retryable=False,
                )
            return view.search(query, top_k, flt)
        except ContextEngineError as err:
            if err.code in (ErrorCode.INDEX_MODEL_MISMATCH, ErrorCode.VECTOR_SEARCH_FAILED):
                raise
            raise _search_failed(err) from err
        except (MemoryError, ValueError, TypeError, IndexError) as err:
            raise _search_failed(err) from err

    def count(self) -> int:
        """Number of vector rows in the metadata store (every account and level)."""
        return self._metadata.count_vectors()

    def check(self) -> None:
        """Nothing to check: the rows are the metadata store's (derived files are checked when opened)."""

    def ids(self, account_id: str) -> list[str]:
        """Every record id of ``account_id`` at the index's levels, sorted: the metadata store's vector rows.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the metadata store fails.
        """
        levels = self.levels
        return sorted(
            r.id
            for batch in self._metadata.iter_vectors(account_id)
            for r in batch
            if levels is None or r.level in levels
        )

    def drop(self) -> bool:
        """``False``: nothing to drop, the rows are the metadata store's (the derived files are removed by
        ``reindex --full`` when unusable)."""
        return False

    def read_stamp(self) -> str | None:
        """``None``: the rows are the metadata store's, in no store shared apart from it."""
        return None

    def write_stamp(self, store_id: str) -> None:
        """Nothing to record (:meth:`read_stamp`)."""

    def optimize(self) -> None:
        """Compact every held segment with tombstones (a new segment is swapped in; readers are not blocked)."""
        for account in self._held_accounts():
            with account.lock:
                for space, seg in list(account.segments.items()):
                    if seg.dead:
                        account.segments[space] = seg.compacted(seg.projection, half=seg.layout == "half")

    def warm(self, account_id: str) -> bool:
        """:meth:`DerivedIndex.warm`, then the keys of each segment's URI lookups
        (:meth:`PackedStrings.prepare_lookups`), which the first search would otherwise build."""
        held = super().warm(account_id)
        view = self.view(account_id) if held else None
        if view is not None:
            for seg, _ in view.segments.values():
                seg.uris.prepare_lookups()
        return held

    def view(self, account_id: str, generation: AccountState | int | None = None) -> MatrixView | None:
        """A read view of the account at (at least) its committed state, catching up first when needed
        (:meth:`DerivedIndex._current`); ``None`` when the account has more than ``max_rows`` rows.

        Args:
            account_id: the account.
            generation: the committed :class:`AccountState` if the caller just read it (saves the read); a bare
                generation number saves nothing (the state is read again: the number alone cannot tell a restored
                database's history from the one held).

        Raises:
            ContextEngineError: what the metadata store raises (``WRT-5001``, ``IDX-4091``).
        """
        account = self._current(account_id, generation)
        return None if account is None else MatrixView(account)

    def _prepared(self, account: MatrixAccount) -> None:
        for seg in account.segments.values():
            seg.uris.prepare_lookups()

    def save(self, account: MatrixAccount | str) -> bool:
        """:meth:`DerivedIndex.save_file`: write the account's derived file now."""
        return self.save_file(account)

    # ---- DerivedIndex hooks -------------------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        levels = None if self.levels is None else list(self.levels)
        return {"levels": levels, "compress_rows": self._compress_rows, "compress_dims": self._compress_dims}

    def _restored(self, account_id: str, snap: Snapshot) -> MatrixAccount:
        # at the file's generation; DerivedIndex._restore sets the file's token
        return MatrixAccount.restored(account_id, snap, self._compress_rows, self._compress_dims, self._project_rows)

    def _over_limit(self, account: MatrixAccount) -> bool:
        return self._max_rows is not None and account.rows > self._max_rows

    def _builds_elsewhere(self, rows: int) -> bool:
        # ``rows`` counts every level: at most the limit, the account's level-0 rows are too
        return self._max_rows is None or rows <= self._max_rows

    def _loaded(self, account_id: str) -> MatrixAccount | None:
        if self._max_rows is not None and self._metadata.count_vectors(account_id) > 4 * max(self._max_rows, 1):
            self._mark_too_large(account_id, self._metadata.account_state(account_id))
            return None
        m = self._metadata.load_vector_matrix(account_id, levels=self.levels)
        if self._max_rows is not None and m.n > self._max_rows:
            self._mark_too_large(account_id, AccountState(m.generation, m.token))
            return None
        account = MatrixAccount(account_id, m.generation, self._compress_rows, self._compress_dims, self._project_rows)
        account.token = m.token
        if m.n:
            account.add(rows_of_matrix(m, range(m.n)), m.vectors)
        account.unsaved = m.n
        with self._lock:
            self.rows_loaded += m.n
        return account

    def _apply(self, account: MatrixAccount, delta: IndexDelta) -> None:
        for rid in delta.removed:
            account.remove(rid)
        if delta.upserted:
            vectors = np.stack([np.asarray(r.vector, dtype=np.float32).reshape(-1) for r in delta.upserted])
            account.add([row_of_record(r) for r in delta.upserted], vectors)
        account.compact()
        account.generation = delta.generation
        account.token = delta.token
        applied = len(delta.removed) + len(delta.upserted)
        with self._lock:
            self.rows_applied += applied
        self._applied(account, applied)

    def _snapshot(self, account: MatrixAccount) -> tuple[AccountState, int, dict[str, Any], dict[str, np.ndarray]]:
        with account.lock:
            generation, segs, unsaved = account.capture()
            state = AccountState(generation, account.token)
            dim, projection = account.dim, account.projection
        metas: list[dict[str, Any]] = []
        arrays: dict[str, np.ndarray] = {}
        for i, (_, seg, n, alive) in enumerate(segs):
            seg_meta, seg_arrays = seg.snapshot(f"s{i}.", n, alive)
            metas.append(seg_meta)
            arrays.update(seg_arrays)
        if projection is not None:
            arrays["projection"] = projection
        return state, unsaved, {"dim": dim, "spaces": [space for space, *_ in segs], "segments": metas}, arrays


def _search_failed(err: Exception) -> ContextEngineError:
    return ContextEngineError(
        ErrorCode.VECTOR_SEARCH_FAILED,
        f"matrix vector search failed: {getattr(err, 'message', None) or f'{type(err).__name__}: {err}'[:200]}",
        {"error": type(err).__name__},
        retryable=True,
    )
