"""The level-0 matrix's data: one account's rows in one segment per owner space (DESIGN.md §3, §12).

:class:`MatrixSegment` holds the rows of one owner space (a :class:`~context_engine.storage.filters.RowTable` plus
vectors, texts and breadcrumbs, in one of three layouts); :class:`MatrixAccount` an account's segments and the
generation they hold; :class:`MatrixView` a consistent read view of an account at one generation. The index that
keeps them current is :class:`~context_engine.storage.vector.matrix.MatrixVectorIndex`; the request's scoring view
over a :class:`MatrixView` is :class:`~context_engine.storage.vector.matrix_scoring.MemoryL0Scorer`.

Scores are cosine similarity (the dot product of unit float32 vectors; of the float16 copies in a compressed segment,
within 4.9e-4 of it) clipped to [-1, 1]; ties by id ascending.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter, VectorHit, VectorRecord
from context_engine.storage.changes import VectorMatrix
from context_engine.storage.derived.base import DerivedAccount
from context_engine.storage.derived_files import FileRows, Snapshot
from context_engine.storage.filters import RowFields, RowTable, ValueCodes
from context_engine.storage.selection import kth_largest
from context_engine.storage.strings import HashedIds, PackedStrings

__all__ = [
    "PROJECT_MIN_ROWS",
    "MatrixAccount",
    "MatrixRow",
    "MatrixSegment",
    "MatrixView",
    "cascade_depth",
    "fit_projection",
    "lead_dims",
    "quantize",
    "refine_depth",
    "refine_margin",
    "rescore_depth",
    "row_of_record",
    "rows_of_matrix",
    "widen",
]

_COMPACT_MIN_DEAD = 256


@dataclass(frozen=True, slots=True)
class MatrixRow(RowFields):
    """What a segment stores of one vector row: the filter fields plus what a hit shows."""

    text: str
    breadcrumb: str


def rows_of_matrix(m: VectorMatrix, idx: Sequence[int]) -> list[MatrixRow]:
    return [
        MatrixRow(
            m.ids[i],
            m.uri[i],
            m.parent_uri[i],
            m.owner_space[i],
            m.context_type[i],
            m.category[i],
            int(m.level[i]),
            m.doc_id[i],
            int(m.chunk_index[i]),
            m.text[i],
            m.breadcrumb[i],
        )
        for i in idx
    ]


def row_of_record(r: VectorRecord) -> MatrixRow:
    return MatrixRow(
        r.id,
        r.uri,
        r.parent_uri,
        r.owner_space,
        r.context_type,
        r.category,
        r.level,
        r.doc_id,
        r.chunk_index,
        r.text,
        r.breadcrumb,
    )


def fit_projection(vectors: np.ndarray, dims: int, sample: int = 20_000) -> np.ndarray:
    """An orthonormal basis, shape ``(dim, dims)`` float32, of the ``dims`` leading eigenvectors of the rows' second
    moment ``E[v vᵀ]`` (uncentred PCA: the subspace that best preserves dot products with unit vectors; Jolliffe,
    *Principal Component Analysis*, 2002, §3.5). Fitted on at most ``sample`` evenly spaced rows."""
    step = max(1, len(vectors) // sample)
    x = np.asarray(vectors[::step], dtype=np.float64)
    _, eigvecs = np.linalg.eigh(x.T @ x)  # eigenvalues ascending
    return np.ascontiguousarray(eigvecs[:, ::-1][:, :dims], dtype=np.float32)


_HALF_TO_SINGLE = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


def widen(values: np.ndarray) -> np.ndarray:
    """``values`` as float32: float16 through a table of the 65,536 float16 values (256 KB, exact, the same values as
    ``astype``, which converts element by element without SIMD here: a rescoring of 200 rows x 512 in 0.09 instead
    of 0.18 ms; 7% of a search's CPU at 1M nodes, issue 26); float32 as is."""
    if values.dtype == np.float16:
        return np.take(_HALF_TO_SINGLE, values.view(np.uint16))
    return values.astype(np.float32, copy=False)


_QUANTIZE_CHUNK = 65_536  # rows converted at once: bounds the float32 temporaries of a large compaction


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 copies of ``vectors`` (``(n, dim)`` float16 or float32) with one float32 scale a row: ``q = rint(v / s)``,
    ``s = max|v| / 127`` (symmetric scalar quantisation, as in Jacob et al., *Quantization and Training of Neural
    Networks for Efficient Integer-Arithmetic-Only Inference*, CVPR 2018, with one scale per vector), so ``s * q``
    is within ``s / 2`` of each component. Returns ``(q (n, dim) int8, s (n,) float32)``; a zero row gets scale 1.
    A compressed segment quantises its float16 vectors, so a segment built, compacted or restored holds the same
    codes."""
    n = len(vectors)
    q = np.empty((n, vectors.shape[1] if vectors.ndim == 2 else 0), dtype=np.int8)
    scale = np.empty(n, dtype=np.float32)
    for start in range(0, n, _QUANTIZE_CHUNK):
        v = widen(vectors[start : start + _QUANTIZE_CHUNK])
        peak = np.abs(v).max(axis=1) if v.shape[1] else np.zeros(len(v), dtype=np.float32)
        s = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        q[start : start + len(v)] = np.clip(np.rint(v / s[:, None]), -127, 127)
        scale[start : start + len(v)] = s
    return q, scale


PROJECT_MIN_ROWS = 0
"""Default ``project_rows``: every segment of a compressed account holds projections. A segment below
``project_rows`` keeps float16 vectors only and is scanned from them: 1,024 instead of 1,536 bytes a row, but a
scan converts them (~1.2 ms for 2k rows x 512). Measured on the 1M bench home (``bench/search_memory.py``):
``project_rows=4096`` gives RSS 2,564 MB instead of 2,787, but a search whose scope spans every owner space (an
admin's) 230 ms instead of 80, as it converts every small segment; so the default projects every segment."""


class MatrixSegment(RowTable):
    """The rows of one owner space of one account: a :class:`RowTable` plus vectors, texts and breadcrumbs (texts
    and breadcrumbs: :class:`~context_engine.storage.strings.PackedStrings`, ``texts[row]``).

    Three layouts (``dim``: the model's dimension, ``r``: the projection's):

    * float32 (an account below ``compress_rows``): ``vectors`` holds the unit vectors, ``(capacity, dim)`` float32;
      a score is exact.
    * half (a segment below ``project_rows`` of a compressed account; none by default, :data:`PROJECT_MIN_ROWS`):
      ``full`` holds them as float16, ``(capacity, dim)``, and ``vectors`` is ``None``; a scan converts them (2 * dim
      bytes a row).
    * projected (any other segment of a compressed account, ``projection`` of shape ``(dim, r)``): the projections
      in two float32 arrays, ``vectors`` their :func:`lead_dims` leading coordinates ``(capacity, lead)`` and
      ``tail`` the others ``(capacity, r - lead)``; ``full`` the float16 vectors and ``q8`` / ``q8_scale`` their
      int8 copies (:func:`quantize`): 4 * r + 3 * dim + 4 bytes a row. A :meth:`scan` reads the leading
      coordinates only (the projection's first principal components: half the bytes of the projections); the
      :func:`cascade_depth` best rows by that partial score are scored on every projected coordinate
      (:meth:`approximate`), the :func:`rescore_depth` best of those are scored from the int8 copies
      (:meth:`fine`), and the :func:`refine_depth` best of them are rescored by :meth:`exact` from the float16
      vectors. A segment read back
      from a derived file reads those few float16 rows from the file (``far``, :class:`FileRows`: ``pread``, not the
      map), so a search keeps the projections and the int8 copies resident (1 KB a row at 512 -> 128), not the
      float16 vectors (another 1 KB a row, which the map would page in a few searches at a time).

    Float16 rounding moves a cosine of unit vectors by at most 2**-11 ~ 4.9e-4 (a relative error of 2**-11 per
    component, Cauchy-Schwarz; measured at most 5.9e-5 on 489k vectors of the default model). Rescoring read the
    float32 vectors from the metadata store until format 2 of the derived files: ~30 us a row, 70% of a search at 1M
    nodes.
    """

    def __init__(
        self,
        account_id: str,
        dim: int,
        capacity: int = 256,
        projection: np.ndarray | None = None,
        *,
        half: bool = False,
    ) -> None:
        self.dim = dim
        self.projection = projection
        self.vectors: np.ndarray | None = None
        self.full: np.ndarray | None = None
        self.tail: np.ndarray | None = None  # projected: the projections' coordinates after the leading ones
        self.q8: np.ndarray | None = None
        self.q8_scale: np.ndarray | None = None
        self.far: FileRows | None = None  # ``full`` in a derived file, read by row (restored segments only)
        if projection is not None or not half:
            width = dim if projection is None else lead_dims(int(projection.shape[1]))
            self.vectors = np.zeros((capacity, width), dtype=np.float32)
        if projection is not None:
            self.tail = np.zeros((capacity, int(projection.shape[1]) - lead_dims(int(projection.shape[1]))), np.float32)
        if projection is not None or half:
            self.full = np.zeros((capacity, dim), dtype=np.float16)
        if projection is not None:
            self.q8 = np.zeros((capacity, dim), dtype=np.int8)
            self.q8_scale = np.zeros(capacity, dtype=np.float32)
        self.texts = PackedStrings()
        self.breadcrumbs = PackedStrings()
        super().__init__(account_id, capacity)

    @property
    def compressed(self) -> bool:
        """Whether scan scores are approximations that :meth:`exact` rescores (the projected layout)."""
        return self.projection is not None

    @property
    def layout(self) -> str:
        """``float32``, ``half`` or ``projected`` (class docstring)."""
        return "projected" if self.projection is not None else "half" if self.vectors is None else "float32"

    def on_grow(self, capacity: int) -> None:
        def grown(old: np.ndarray | None) -> np.ndarray | None:
            if old is None:
                return None
            new = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            new[: self.n] = old[: self.n]
            return new

        self.vectors, self.tail, self.full = grown(self.vectors), grown(self.tail), grown(self._full_for_bulk())
        self.q8, self.q8_scale = grown(self.q8), grown(self.q8_scale)
        self.far = None  # the float16 rows are in memory now, and new rows are not in the file

    def _full_for_bulk(self) -> np.ndarray | None:
        """``full`` for a read of every row (a grow, a save, a compaction): a restored segment's through a map of
        its own, dropped afterwards, not the file's shared map, whose pages would then stay resident."""
        far = self.far  # read once: a writer's on_grow may drop it
        return far.whole() if far is not None else self.full

    def project(self, query: np.ndarray) -> np.ndarray | None:
        """The projection of ``query`` (``(r,)`` float32, contiguous) for :meth:`scan` and :meth:`approximate`, or
        ``None`` for a segment without projections."""
        return None if self.projection is None else np.ascontiguousarray(query @ self.projection)

    def scan(self, query: np.ndarray, n: int, projected: np.ndarray | None = None) -> np.ndarray:
        """Scores of ``query`` (unit, ``(dim,)`` float32) against every row below ``n``, float32 ``(n,)`` clipped to
        [-1, 1]: cosine similarities (float32, half), or for a projected segment the partial dot products of the
        leading projected coordinates (:func:`lead_dims`), which only pick the rows :meth:`approximate` scores
        (``projected``: :meth:`project`'s value, when already computed)."""
        if self.vectors is None:
            assert self.full is not None
            stored, q = widen(self.full[:n]), query
        else:
            stored = self.vectors[:n]
            q = query
            if self.projection is not None:
                whole = self.project(query) if projected is None else projected
                assert whole is not None
                q = whole[: stored.shape[1]]
        # einsum runs in this thread; a BLAS matrix-vector product would wake OpenBLAS's thread pool, which contends
        # with the embedder's on a small machine (measured: same median, 2x better p95).
        return np.clip(np.einsum("ij,j->i", stored, q), -1.0, 1.0)

    def approximate(self, rows: np.ndarray, lead: np.ndarray, projected: np.ndarray) -> np.ndarray:
        """A projected segment's approximate scores of ``rows``: their :meth:`scan` scores ``lead`` plus the dot
        products of the other projected coordinates (``projected``: :meth:`project`'s value), float32 clipped to
        [-1, 1]: the score of the whole projection, which picks the :func:`rescore_depth` candidates."""
        assert self.tail is not None and self.vectors is not None
        rest = self.tail[rows] @ projected[self.vectors.shape[1] :]
        return np.clip(lead + rest, -1.0, 1.0)

    def score_rows(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Scores of ``rows`` (row numbers): exact (float32, half), or the whole projection's (projected)."""
        projected = self.project(query)
        if projected is None:
            return self.exact(rows, query)
        assert self.vectors is not None
        return self.approximate(rows, self.vectors[rows] @ projected[: self.vectors.shape[1]], projected)

    def exact(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of ``query`` (unit, ``(dim,)``) to ``rows`` (row numbers), float32 clipped to
        [-1, 1]: from the float32 vectors, or the float16 ones (within 4.9e-4; read from the file when ``far``)."""
        far = self.far  # read once: a writer's on_grow may drop it
        if far is not None:
            picked = widen(far.rows(rows))
        else:
            stored = self.vectors if self.full is None else self.full
            assert stored is not None
            picked = widen(stored[rows])
        # einsum, as scan: each row's sum in the same order wherever it sits in the batch, so copies of one vector
        # score the same and tie by URI (a BLAS product rounded them differently by position)
        return np.clip(np.einsum("ij,j->i", picked, query), -1.0, 1.0)

    def fine(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Scores of ``rows`` from the int8 copies (a projected segment; :meth:`exact` for any other), float32
        clipped to [-1, 1]: within ``sum(s/2 * |query|)`` of the float16 score (s the row's scale), measured
        1.1e-3 at most on the 1M bench home's largest segment; used to pick which rows :meth:`exact` rescores,
        never returned as a score."""
        if self.q8 is None or self.q8_scale is None:
            return self.exact(rows, query)
        return np.clip((self.q8[rows].astype(np.float32) @ query) * self.q8_scale[rows], -1.0, 1.0)

    def refined(self, rows: np.ndarray, query: np.ndarray, k: int, fine: np.ndarray | None = None) -> np.ndarray:
        """Of candidate ``rows`` for ``k`` wanted, those :meth:`exact` rescores: every row whose int8 score
        (:meth:`fine`; ``fine``: those of ``rows``, when already computed) is among the :func:`refine_depth` best
        or within :func:`refine_margin` of the k-th best (ties kept). Any segment without int8 copies: ``rows``.

        The margin makes the cut safe whatever the vectors: a row can be in the float16 top k only if its int8
        score is within twice the largest quantisation error of the k-th best, and the error grows with a row's
        scale (vectors with one large component have coarse steps)."""
        depth = refine_depth(k)
        if self.q8_scale is None or rows.size <= depth:
            return rows
        if fine is None:
            fine = self.fine(rows, query)
        n = rows.size
        ranked = np.partition(fine, (n - depth, n - k))  # the depth-th and the k-th best in one pass (k <= depth)
        margin = refine_margin(float(self.q8_scale[rows].max()), float(np.sqrt(query @ query)))
        return rows[fine >= min(ranked[n - depth], ranked[n - k] - margin)]

    def add(self, rows: Sequence[MatrixRow], vectors: np.ndarray) -> None:
        """Append rows with their unit vectors (shape ``(len(rows), dim)``) and publish them."""
        if not rows:
            return
        if vectors.shape != (len(rows), self.dim):
            raise ContextEngineError(
                ErrorCode.INDEX_MODEL_MISMATCH,
                f"vectors of shape {tuple(vectors.shape[1:])} do not fit a matrix of {self.dim} dimensions; "
                "run `context-engine reindex`",
                {"index_dim": self.dim},
            )
        stored = vectors if self.projection is None else vectors @ self.projection
        self._add_stored(rows, stored, vectors.astype(np.float16) if self.full is not None else None)

    def _add_stored(self, rows: Sequence[MatrixRow], stored: np.ndarray | None, full: np.ndarray | None) -> None:
        """Append rows with what each layout stores: ``stored`` for ``vectors`` (unit vectors, or whole projections
        split into ``vectors`` and ``tail``), ``full`` (float16) for ``full``; the one a layout does not hold is
        ignored."""
        new = self.append(rows)
        if self.vectors is not None:
            assert stored is not None
            lead = self.vectors.shape[1]
            self.vectors[new.start : new.stop] = stored[:, :lead]
            if self.tail is not None:
                self.tail[new.start : new.stop] = stored[:, lead:]
        if self.full is not None:
            self.full[new.start : new.stop] = full
        if self.q8 is not None and self.q8_scale is not None:
            assert full is not None
            self.q8[new.start : new.stop], self.q8_scale[new.start : new.stop] = quantize(full)
        self.texts.extend([r.text for r in rows])
        self.breadcrumbs.extend([r.breadcrumb for r in rows])
        self.publish(new)

    def row(self, row: int) -> MatrixRow:
        return MatrixRow(
            self.ids[row],
            self.uris[row],
            self.value("parent_uri", row),
            self.value("owner_space", row),
            self.value("context_type", row),
            self.value("category", row),
            int(self.level[row]),
            self.value("doc_id", row),
            int(self.chunk_index[row]),
            self.texts[row],
            self.breadcrumbs[row],
        )

    def snapshot(self, prefix: str, n: int, alive: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The rows below ``n`` as ``(meta, arrays)`` for a derived file; ``n`` and ``alive`` (a copy) were taken
        under the account's lock, the rest is read without it (rows below ``n`` never change otherwise)."""
        meta, rows = self.snapshot_rows(n, alive)
        meta["layout"] = self.layout
        arrays = {prefix + k: v for k, v in rows.items()}
        if self.vectors is not None:
            arrays[prefix + "vectors"] = self.vectors[:n]
        if self.tail is not None:
            arrays[prefix + "tail"] = self.tail[:n]
        full = self._full_for_bulk()
        if full is not None:
            arrays[prefix + "full"] = full[:n]
        if self.q8 is not None and self.q8_scale is not None:
            arrays[prefix + "q8"], arrays[prefix + "q8_scale"] = self.q8[:n], self.q8_scale[:n]
        for name, column in (("texts", self.texts), ("breadcrumbs", self.breadcrumbs)):
            arrays[f"{prefix}{name}.utf8"], arrays[f"{prefix}{name}.byte_offsets"] = column.arrays(n)
        return meta, arrays

    @classmethod
    def restored(
        cls, account_id: str, dim: int, projection: np.ndarray | None, meta: dict[str, Any], arrays: dict, prefix: str
    ) -> MatrixSegment:
        """A segment read back from :meth:`snapshot` output (zero-copy: see :meth:`RowTable.restore_rows`)."""
        vectors, full = arrays.get(prefix + "vectors"), arrays.get(prefix + "full")
        layout = meta["layout"]
        if layout not in ("float32", "half", "projected") or (layout == "projected" and projection is None):
            raise ValueError(f"segment layout {layout!r} unknown or without its projection")
        seg = cls(account_id, dim, 0, projection if layout == "projected" else None, half=layout == "half")
        seg.restore_rows(meta, arrays, prefix)
        if (seg.vectors is None) != (vectors is None) or (seg.full is None) != (full is None):
            raise ValueError("segment vectors do not match its layout")
        if vectors is not None:
            assert seg.vectors is not None
            if vectors.shape != (seg.n, seg.vectors.shape[1]):
                raise ValueError("segment vectors do not match its rows")
            seg.vectors = vectors
        if seg.tail is not None:
            tail = arrays.get(prefix + "tail")
            if tail is None or tail.shape != (seg.n, seg.tail.shape[1]) or tail.dtype != np.float32:
                raise ValueError("segment projections do not match its rows")
            seg.tail = tail
        if full is not None:
            if full.shape != (seg.n, dim) or full.dtype != np.float16:
                raise ValueError("segment float16 vectors do not match its rows")
            seg.full = full
        if seg.q8 is not None:
            q8, scale = arrays.get(prefix + "q8"), arrays.get(prefix + "q8_scale")
            if (
                q8 is None
                or scale is None
                or (q8.shape, q8.dtype, scale.shape, scale.dtype) != ((seg.n, dim), np.int8, (seg.n,), np.float32)
            ):
                raise ValueError("segment int8 vectors do not match its rows")
            seg.q8, seg.q8_scale = q8, scale
        seg.texts = PackedStrings.from_arrays(arrays[prefix + "texts.utf8"], arrays[prefix + "texts.byte_offsets"])
        seg.breadcrumbs = PackedStrings.from_arrays(
            arrays[prefix + "breadcrumbs.utf8"], arrays[prefix + "breadcrumbs.byte_offsets"]
        )
        if len(seg.texts) != seg.n or len(seg.breadcrumbs) != seg.n:
            raise ValueError("segment texts do not match its rows")
        return seg

    def compacted(self, projection: np.ndarray | None = None, *, half: bool = False) -> MatrixSegment:
        """A new segment holding the live rows only (same order), in the layout of ``(projection, half)`` (see
        :meth:`__init__`). The float32 layout can only come from itself (float16 vectors are never widened back)."""
        live = np.flatnonzero(self.alive[: self.n])
        rows = [self.row(int(r)) for r in live]
        held = self._full_for_bulk()
        if held is not None:
            full = held[live]
            if projection is None and not half:
                raise ValueError("a float16 segment cannot be compacted into float32")
        else:
            assert self.vectors is not None
            full = self.vectors[live].astype(np.float16)
        out = MatrixSegment(self.account_id, self.dim, max(256, len(live)), projection, half=half)
        if out.projection is None and out.full is None:  # float32 -> float32
            assert self.vectors is not None
            out._add_stored(rows, self.vectors[live], None)
        elif out.projection is None:  # -> half
            out._add_stored(rows, None, full)
        elif self.projection is projection and self.vectors is not None:  # projected -> projected: keep them
            assert self.tail is not None
            out._add_stored(rows, np.hstack([self.vectors[live], self.tail[live]]), full)
        else:  # projections of the float32 vectors when there are, else of the float16 ones
            assert projection is not None
            vectors = self.vectors if self.full is None else None
            exact = vectors[live] if vectors is not None else widen(full)
            out._add_stored(rows, exact @ projection, full)
        return out


class _SpaceOf:
    """id -> owner space of one account's live rows: a :class:`~context_engine.storage.strings.HashedIds` of space
    numbers (12 bytes an id instead of a dict entry's ~31). Built from the segments' live ids on the first lookup
    (after a restore, or once more than ``max(1024, rows / 8)`` ids were set since the last build); a lookup gives
    candidate spaces, which the caller checks in their segment (:meth:`MatrixAccount.remove`). Serialised by the
    account's writer."""

    __slots__ = ("_account", "_built", "_map", "_spaces")

    def __init__(self, account: MatrixAccount, *, built: bool = True) -> None:
        self._account = account
        self._map = HashedIds()
        self._built = built
        self._spaces = ValueCodes()  # owner space <-> the number the map stores

    def _build(self) -> None:
        ids: list[str] = []
        numbers: list[np.ndarray] = []
        for space, seg in sorted(self._account.segments.items()):
            live = np.flatnonzero(seg.alive[: seg.n]).tolist()
            held = seg.ids[0 : seg.n]
            ids.extend(held[r] for r in live)
            numbers.append(np.full(len(live), self._spaces.code(space), dtype=np.int32))
        self._map.reset(ids, np.concatenate(numbers) if numbers else np.zeros(0, dtype=np.int32))
        self._built = True

    def candidates(self, rid: str) -> list[str]:
        """Spaces whose segment may hold ``rid`` live (the last one set first)."""
        if not self._built:
            self._build()
        return [self._spaces.values[i] for i in dict.fromkeys(self._map.candidates(rid))]

    def set(self, rid: str, space: str) -> None:
        if self._built:
            self._map.set(rid, self._spaces.code(space))

    def settle(self) -> None:
        """After a batch of :meth:`set`: past ``max(1024, rows / 8)`` ids set since the last build, drop the map (the
        next lookup builds it from the segments) instead of holding a large dict."""
        if self._built and len(self._map.tail) > max(1024, self._account.rows // 8):
            self._map, self._built = HashedIds(), False

    def discard(self, rid: str) -> None:
        self._map.discard(rid)


class MatrixAccount(DerivedAccount):
    """One account's segments (by owner space), the generation they hold, and id -> space.

    An account with at least ``compress_rows`` rows is compressed: one projection to ``compress_dims`` dimensions is
    fitted on its vectors (when it is loaded, or when it grows past the limit) and every segment holds float16
    vectors, plus projections when it has at least ``project_rows`` rows (:class:`MatrixSegment` layouts; built
    so, or rebuilt at the next compaction check). One projection per account, not per segment: a large account of
    many users is mostly small segments, which are the memory."""

    def __init__(
        self,
        account_id: str,
        generation: int,
        compress_rows: int | None = None,
        compress_dims: int = 128,
        project_rows: int = PROJECT_MIN_ROWS,
    ) -> None:
        super().__init__(account_id, generation)
        self.project_rows = project_rows
        self.compress_rows = compress_rows
        self.compress_dims = compress_dims
        self.segments: dict[str, MatrixSegment] = {}
        self.space_of = _SpaceOf(self)
        self.dim: int | None = None
        self.projection: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return sum(seg.live for seg in self.segments.values())

    def add(self, rows: Sequence[MatrixRow], vectors: np.ndarray) -> None:
        if rows and self.dim is None:
            self.dim = int(vectors.shape[1])
        if rows and self.projection is None and self._should_compress(self.rows + len(rows)):
            self.projection = fit_projection(self._sample(vectors), self.compress_dims)
        by_space: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            by_space.setdefault(r.owner_space, []).append(i)
        for space, idx in by_space.items():
            assert self.dim is not None
            seg = self.segments.get(space)
            if seg is None:
                seg = self.segments[space] = self._segment(max(256, len(idx)), len(idx))
            picked = [rows[i] for i in idx]
            for r in picked:
                self.remove(r.id)
            seg.add(picked, vectors[idx])
            for r in picked:
                self.space_of.set(r.id, space)
        self.space_of.settle()

    def _sample(self, vectors: np.ndarray, sample: int = 20_000) -> np.ndarray:
        """Unit vectors to fit the projection on: the new ones plus those of the (uncompressed) segments held."""
        held = [
            seg.vectors[np.flatnonzero(seg.alive[: seg.n])]
            for seg in self.segments.values()
            if seg.vectors is not None and seg.layout == "float32"
        ]
        total = len(vectors) + sum(len(h) for h in held)
        step = max(1, total // sample)
        return np.concatenate([vectors[::step], *(h[::step] for h in held)])

    def remove(self, rid: str) -> bool:
        for space in self.space_of.candidates(rid):
            seg = self.segments.get(space)
            if seg is not None and seg.kill(rid) is not None:
                self.space_of.discard(rid)
                return True
        return False

    def _should_compress(self, rows: int) -> bool:
        return self.compress_rows is not None and rows >= self.compress_rows and self.compress_dims < (self.dim or 0)

    def capture(self) -> tuple[int, list[tuple[str, MatrixSegment, int, np.ndarray]], int]:
        """What a derived file of this account needs, taken under :attr:`lock`: the generation, each segment with
        its row count and a copy of its tombstones, and the rows applied since the last file (see ``snapshot``)."""
        segs = [(space, seg, seg.n, seg.alive[: seg.n].copy()) for space, seg in sorted(self.segments.items())]
        assert self.generation is not None  # a matrix account is always read from a store
        return self.generation, segs, self.unsaved

    @classmethod
    def restored(
        cls, account_id: str, snap: Snapshot, compress_rows: int | None, compress_dims: int, project_rows: int
    ) -> MatrixAccount:
        """An account read back from a derived file (its generation is the file's)."""
        account = cls(account_id, snap.generation, compress_rows, compress_dims, project_rows)
        meta = snap.meta
        account.dim = None if meta["dim"] is None else int(meta["dim"])
        account.projection = snap.arrays.get("projection")
        for i, (space, seg_meta) in enumerate(zip(meta["spaces"], meta["segments"], strict=True)):
            assert account.dim is not None
            seg = MatrixSegment.restored(account_id, account.dim, account.projection, seg_meta, snap.arrays, f"s{i}.")
            if seg.compressed:
                seg.far = snap.file_rows(f"s{i}.full")
            account.segments[space] = seg
        account.space_of = _SpaceOf(account, built=False)  # built from the segments when a write first needs it
        return account

    def _segment(self, capacity: int, rows: int) -> MatrixSegment:
        """An empty segment in the layout an account like this one gives ``rows`` rows."""
        assert self.dim is not None
        if self.projection is None:
            return MatrixSegment(self.account_id, self.dim, capacity)
        if rows >= self.project_rows:
            return MatrixSegment(self.account_id, self.dim, capacity, self.projection)
        return MatrixSegment(self.account_id, self.dim, capacity, half=True)

    def _layout_of(self, seg: MatrixSegment) -> tuple[np.ndarray | None, bool]:
        """``(projection, half)`` a segment of this account should have now (a projected segment stays so)."""
        if self.projection is None:
            return None, False
        if seg.compressed or seg.live >= self.project_rows:
            return self.projection, False
        return None, True

    def compact(self) -> None:
        """Rebuild a segment whose layout the account's size changed (float32 -> half or projected, half ->
        projected), or a third of whose rows are tombstones."""
        for space, seg in list(self.segments.items()):
            projection, half = self._layout_of(seg)
            if (projection is not seg.projection) or (half != (seg.layout == "half")):
                self.segments[space] = seg.compacted(projection, half=half)
            elif seg.dead > _COMPACT_MIN_DEAD and seg.dead * 3 > seg.n:
                self.segments[space] = seg.compacted(seg.projection, half=half)


class MatrixView:
    """A consistent read view of one account at one generation: each segment with its published row count."""

    __slots__ = ("account_id", "generation", "segments")

    def __init__(self, account: MatrixAccount) -> None:
        self.account_id = account.account_id
        assert account.generation is not None  # a matrix account is always read from a store
        self.generation: int = account.generation
        self.segments: dict[str, tuple[MatrixSegment, int]] = {
            # dict(): one C-level copy, safe while a catch-up in another thread adds a segment (iterating the
            # account's dict itself could raise "dictionary changed size during iteration")
            space: (seg, seg.n)
            for space, seg in dict(account.segments).items()
        }

    @property
    def dim(self) -> int | None:
        for seg, _ in self.segments.values():
            return seg.dim
        return None

    def spaces(self, flt: VectorFilter) -> list[str]:
        """Owner-space segments that can hold rows passing ``flt``, sorted."""
        if flt.account_id != self.account_id:
            return []
        names: Iterable[str] = self.segments.keys()
        if flt.owner_spaces is not None:
            names = set(flt.owner_spaces) & self.segments.keys()
        return sorted(s for s in names if self.segments[s][1])

    def search(self, query: np.ndarray, top_k: int, flt: VectorFilter) -> list[VectorHit]:
        """The ``top_k`` rows passing ``flt`` nearest to ``query`` (see :meth:`MatrixVectorIndex.search`)."""
        dim = self.dim
        if dim is not None and query.shape != (dim,):
            raise ContextEngineError(
                ErrorCode.INDEX_MODEL_MISMATCH,
                f"query vector has shape {tuple(query.shape)} but the index holds vectors of dimension {dim}",
                {"query_dim": int(query.size), "index_dim": dim},
            )
        found: list[tuple[float, str, MatrixSegment, int]] = []
        for space in self.spaces(flt):
            seg, n = self.segments[space]
            if flt.parent_uris is not None and flt.uri_prefix is None and flt.doc_ids is None:
                rows = seg.rows_of_parents(flt.parent_uris, n)
                rows = rows[seg.mask(flt, n)[rows]] if rows.size else rows
            else:
                rows = np.flatnonzero(seg.mask(flt, n))
            if rows.size == 0:
                continue
            scores = seg.score_rows(rows, query)
            if seg.compressed:
                rows, scores = self.rescore(seg, rows, scores, query, top_k)
            k = min(top_k, rows.size)
            if k < rows.size:
                kth = scores[np.argpartition(-scores, k - 1)[:k]].min()
                keep = np.flatnonzero(scores >= kth)  # every row tied with the k-th: ties resolve by id below
                rows, scores = rows[keep], scores[keep]
            found.extend((float(s), seg.ids[int(r)], seg, int(r)) for r, s in zip(rows, scores, strict=True))
        found.sort(key=lambda h: (-h[0], h[1]))
        return [_hit(seg.row(row), score) for score, _, seg, row in found[:top_k]]

    def rescore(
        self, seg: MatrixSegment, rows: np.ndarray, approx: np.ndarray, query: np.ndarray, top_k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """For ``top_k`` wanted from a compressed segment: the :func:`rescore_depth` best ``rows`` by ``approx``,
        of those the ones :meth:`MatrixSegment.refined` keeps by their int8 scores, with their scores from the
        float16 vectors (:meth:`MatrixSegment.exact`); ties kept at both cuts."""
        depth = rescore_depth(top_k)
        if rows.size > depth:
            rows = rows[approx >= kth_largest(approx, depth)]  # every row tied with the last: ties resolve by id
        rows = seg.refined(rows, query, top_k)
        return rows, seg.exact(rows, query)


_HALVED_MIN_DIMS = 32  # a smaller projection is scanned whole (lead_dims)


def lead_dims(r: int) -> int:
    """How many leading coordinates of an ``r``-dimensional projection a :meth:`MatrixSegment.scan` reads: ``r //
    2`` for ``r >= 32``, else all ``r`` (the ``tail`` is then empty and the cascade cuts on the whole projection).

    The projection is the leading principal components (:func:`fit_projection`), so its first half carries most of
    a dot product; a scan of half the bytes (memory-bound: 243k rows x 128 float32, 4.7 ms -> 2.6 ms here) picks
    :func:`cascade_depth` rows to score on every coordinate. Measured on the 243k shared rows of the 1M bench
    home's largest account (300 bench queries, no filter), recall@10 of the top 10 as served against the scan of
    every coordinate: 64 of 128 leading coordinates 0.987 / 0.989 / 1.000 / 1.000 at 1k / 2k / 4k / 8k rows kept;
    48: 0.939 / 0.982 / 0.999 / 1.000; 32: 0.899 / 0.939 / 0.963 / 0.989. On 40,000 clustered rows (a review's
    test), recall of the cascade against the whole projection at k = 10 / 50: halving r = 8 0.935 / 0.913, r = 16
    0.997 / 0.988, r = 32 and more 1.000 / 1.000."""
    return r // 2 if r >= _HALVED_MIN_DIMS else r


def cascade_depth(k: int) -> int:
    """Rows a compressed segment's partial scan (:func:`lead_dims`) keeps for the whole projection to score, for
    ``k`` wanted: ``max(4000, 4 * rescore_depth(k))``. Measured as :func:`lead_dims` says, recall@k of the top k as
    served against the scan of every coordinate: k = 10 (200 candidates) 0.989 / 1.000 / 1.000 at 2k / 4k / 8k rows
    kept; k = 25 (500) 1.000 at 4k; k = 50 (1,000) 0.9999 at 4k, 6k and 8k; k = 100 (2,000) 0.992 / 0.998 / 0.9998 /
    1.000 at 3k / 4k / 6k / 8k. Every row kept costs a gather of its other coordinates (~0.1 us a row)."""
    return max(4_000, 4 * rescore_depth(k))


def rescore_depth(k: int) -> int:
    """Candidates rescored from the full vectors for ``k`` wanted from a compressed segment. Measured on the 243k
    shared rows of the 1M bench home's largest account (default model, 512 dimensions projected to 128; its texts
    come in near-identical copies, the hard case), recall@10 against float32 with no filter: 0.946 at 80
    candidates, 0.998 at 200, 0.999 at 400; float16 rescoring loses 0.001 at most (bench/search_memory.py
    reports recall as served at each size). Rescoring is in memory: 200 rows cost ~0.2 ms."""
    return max(20 * k, 200)


def refine_depth(k: int) -> int:
    """Of a compressed segment's :func:`rescore_depth` candidates for ``k`` wanted, how many the int8 scores
    (:meth:`MatrixSegment.fine`) keep for the float16 rescoring (:meth:`MatrixSegment.exact`): ``max(3k, 24)``.
    Measured on the 243k shared rows of the 1M bench home's largest account (near-identical texts, the hard case;
    300 bench queries, the int8 scores within 1.1e-3 of the float16 ones), the share of the float16 top k that the
    int8 top m keeps: k = 10 with no filter 0.963 at m = 10, 1.000 at 16; k = 25, 1.000 at 30; k = 8 in 2,400
    directory-query pairs 0.9989 at 10, 1.000 at 16. So ``3k`` (at least 24) keeps about twice what was needed, for
    ~1 us a float16 row read."""
    return max(3 * k, 24)


REFINE_SIGMAS = 5.0
"""How many standard deviations of a row's int8 quantisation error :func:`refine_margin` allows for (each side)."""


def refine_margin(scale: float, query_norm: float) -> float:
    """How far below the k-th best int8 score a row may score and still be in the float16 top k: twice
    :data:`REFINE_SIGMAS` standard deviations of the score error of a row of quantisation step ``scale`` (each
    component off by a uniform error in ``[-scale/2, scale/2]``, independent: a standard deviation of
    ``scale * |query| / sqrt(12)``). At the bench's vectors (steps ~1.2e-3) ~3.5e-3, against a largest error
    measured of 1.1e-3; a step of 5e-3 (vectors with one component of 0.6) gives ~1.4e-2."""
    return 2.0 * REFINE_SIGMAS * scale * query_norm / 12**0.5


def _hit(r: MatrixRow, score: float) -> VectorHit:
    return VectorHit(
        id=r.id,
        score=score,
        uri=r.uri,
        parent_uri=r.parent_uri,
        owner_space=r.owner_space,
        context_type=r.context_type,
        category=r.category,
        level=r.level,
        doc_id=r.doc_id,
        chunk_index=r.chunk_index,
        text=r.text,
        breadcrumb=r.breadcrumb,
    )
