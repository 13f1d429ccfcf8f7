"""The tenancy / scope pre-filter over in-memory derived rows: one compiler for every in-process index (DESIGN §3).

A :class:`~context_engine.schema.nodes.VectorFilter` is the one typed filter. It has two translations, each a small
function tested against the same reference on random filters (``tests/storage/test_filter_translation.py``):

* :func:`context_engine.storage.vector.lancedb_index.build_predicate`: SQL text for LanceDB;
* :meth:`RowTable.mask`: a boolean mask over the dictionary-encoded columns of a :class:`RowTable`, the row store
  under the level-0 / exact matrix (:mod:`context_engine.storage.vector.matrix`) and the BM25 partitions
  (:mod:`context_engine.storage.keyword.bm25_index`).

Semantics (both): fields are ANDed; ``None`` does not restrict; an empty list matches nothing; ``uri_prefix`` is a
plain string prefix of ``uri``; ``account_id`` must equal the table's account.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from context_engine.schema.nodes import VectorFilter

__all__ = ["ENCODED_COLUMNS", "RowFields", "RowTable"]

ENCODED_COLUMNS = ("owner_space", "context_type", "category", "parent_uri", "doc_id")
"""String columns kept as integer codes (one vocabulary per column and table)."""


@dataclass(frozen=True, slots=True)
class RowFields:
    """The filter fields of one derived row: what :meth:`RowTable.append` reads (indexes extend it)."""

    id: str
    uri: str
    parent_uri: str | None
    owner_space: str
    context_type: str
    category: str
    level: int
    doc_id: str
    chunk_index: int


_FILTER_FIELDS = (
    ("owner_space", "owner_spaces"),
    ("context_type", "context_types"),
    ("category", "categories"),
    ("parent_uri", "parent_uris"),
    ("doc_id", "doc_ids"),
)


class _Codes:
    """Dictionary encoding of one column: value -> code, append-only."""

    __slots__ = ("code_of", "values")

    def __init__(self) -> None:
        self.code_of: dict[Any, int] = {}
        self.values: list[Any] = []

    def code(self, value: Any) -> int:
        found = self.code_of.get(value)
        if found is None:
            found = self.code_of[value] = len(self.values)
            self.values.append(value)
        return found

    def lut(self, wanted: Sequence[Any]) -> np.ndarray:
        table = np.zeros(len(self.values) + 1, dtype=bool)
        for value in wanted:
            code = self.code_of.get(value)
            if code is not None:
                table[code] = True
        return table


class RowTable:
    """Append-only rows of one account with tombstones: ids, URIs, encoded filter columns, levels.

    Rows are appended (:meth:`append`) and killed (:meth:`kill`); a row number never changes until the owner
    compacts (builds a new table from the live rows). Readers take ``n`` first and look only at rows below it, so a
    concurrent append is never seen half-written (``n`` is published last). Not thread-safe for writers: the owner
    serialises them.

    Args:
        account_id: the account every row belongs to (a filter for another account matches nothing).
        capacity: initial row capacity (grows by doubling).
    """

    def __init__(self, account_id: str, capacity: int = 256) -> None:
        self.account_id = account_id
        self.n = 0
        self.dead = 0
        self.ids: list[str] = []
        self.uris: list[str] = []
        self.row_of: dict[str, int] = {}  # id -> live row
        self.children: dict[str | None, list[int]] = {}  # parent_uri -> rows (live or dead; callers check alive)
        self.alive = np.zeros(capacity, dtype=bool)
        self.level = np.zeros(capacity, dtype=np.int16)
        self.chunk_index = np.zeros(capacity, dtype=np.int32)
        self.codes = {name: _Codes() for name in ENCODED_COLUMNS}
        self.columns = {name: np.zeros(capacity, dtype=np.int32) for name in ENCODED_COLUMNS}
        self._sorted: tuple[int, list[str], np.ndarray] | None = None  # (rows covered, sorted uris, their rows)

    @property
    def live(self) -> int:
        return self.n - self.dead

    @property
    def capacity(self) -> int:
        return len(self.alive)

    def _grow(self, need: int) -> None:
        if need <= self.capacity:
            return
        new_cap = max(need, self.capacity * 2)

        def grown(old: np.ndarray) -> np.ndarray:
            new = np.zeros((new_cap, *old.shape[1:]), dtype=old.dtype)
            new[: self.n] = old[: self.n]
            return new

        self.alive, self.level, self.chunk_index = grown(self.alive), grown(self.level), grown(self.chunk_index)
        self.columns = {name: grown(col) for name, col in self.columns.items()}
        self.on_grow(new_cap)

    def on_grow(self, capacity: int) -> None:
        """Hook for owners with extra per-row arrays (called with the new capacity, before rows are written)."""

    def value(self, column: str, row: int) -> Any:
        """The decoded value of an encoded column at ``row``."""
        return self.codes[column].values[int(self.columns[column][row])]

    def append(self, rows: Sequence[Any]) -> range:
        """Append rows (objects with ``id``, ``uri``, ``level``, ``chunk_index`` and the encoded columns); an id
        already live is killed first. Returns the new row numbers; the caller fills its own arrays for them before
        calling :meth:`publish`."""
        for r in rows:
            self.kill(r.id)
        start, end = self.n, self.n + len(rows)
        self._grow(end)
        for name in ENCODED_COLUMNS:
            codes = self.codes[name]
            self.columns[name][start:end] = [codes.code(getattr(r, name)) for r in rows]
        self.level[start:end] = [r.level for r in rows]
        self.chunk_index[start:end] = [r.chunk_index for r in rows]
        for offset, r in enumerate(rows):
            row = start + offset
            self.ids.append(r.id)
            self.uris.append(r.uri)
            self.row_of[r.id] = row
            self.children.setdefault(r.parent_uri, []).append(row)  # None: the scope and space roots
        return range(start, end)

    def publish(self, rows: range) -> None:
        """Make appended rows visible to readers (``n`` moves last)."""
        self.alive[rows.start : rows.stop] = True
        self.n = rows.stop

    def kill(self, rid: str) -> int | None:
        """Tombstone the live row of ``rid``; returns its row number, or ``None`` when it was not live."""
        row = self.row_of.pop(rid, None)
        if row is not None and self.alive[row]:
            self.alive[row] = False
            self.dead += 1
            return row
        return None

    # ---- files (storage/derived_files.py) --------------------------------------------------------------------------
    def snapshot_rows(self, n: int, alive: np.ndarray) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The rows below ``n`` as ``(meta, arrays)`` for a derived file; ``alive`` is a copy taken with ``n`` under
        the owner's lock (rows below ``n`` never change otherwise, so the rest is read without it)."""
        from context_engine.storage.derived_files import pack_strings

        arrays: dict[str, np.ndarray] = {
            "alive": alive[:n],
            "level": self.level[:n],
            "chunk_index": self.chunk_index[:n],
        }
        for name, (blob, offsets) in (("ids", pack_strings(self.ids[:n])), ("uris", pack_strings(self.uris[:n]))):
            arrays[f"{name}.utf8"], arrays[f"{name}.offsets"] = blob, offsets
        for name in ENCODED_COLUMNS:
            codes = self.columns[name][:n]
            used = int(codes.max()) + 1 if n else 0  # values coded after ``n`` was taken are not needed
            arrays[f"col.{name}"] = codes
            arrays[f"vals.{name}.utf8"], arrays[f"vals.{name}.offsets"] = pack_strings(self.codes[name].values[:used])
        return {"n": n, "dead": int(n - np.count_nonzero(alive[:n]))}, arrays

    def restore_rows(self, meta: dict[str, Any], arrays: dict[str, np.ndarray], prefix: str = "") -> None:
        """Fill an empty table from :meth:`snapshot_rows` output (arrays under ``prefix``), zero-copy where it can:
        the arrays stay views of the file until a write grows them."""
        from context_engine.storage.derived_files import unpack_strings

        def get(name: str) -> np.ndarray:
            return arrays[prefix + name]

        n = int(meta["n"])
        self.n, self.dead = n, int(meta["dead"])
        self.alive, self.level, self.chunk_index = get("alive"), get("level"), get("chunk_index")
        self.ids = unpack_strings(get("ids.utf8"), get("ids.offsets"))
        self.uris = unpack_strings(get("uris.utf8"), get("uris.offsets"))
        if not (len(self.ids) == len(self.uris) == self.alive.shape[0] == self.level.shape[0] == n):
            raise ValueError("row arrays of different lengths")
        for name in ENCODED_COLUMNS:
            col = get(f"col.{name}")
            values = unpack_strings(get(f"vals.{name}.utf8"), get(f"vals.{name}.offsets"))
            if col.shape[0] != n or (n and int(col.max()) >= len(values)):
                raise ValueError(f"column {name} does not match its values")
            self.columns[name] = col
            codes = self.codes[name]
            codes.values = values
            codes.code_of = {v: i for i, v in enumerate(values)}
        live = np.flatnonzero(self.alive[:n]).tolist()
        ids = self.ids
        self.row_of = {ids[r]: r for r in live}
        # parent_uri -> rows (ascending), grouped by code with one stable sort
        parents = self.codes["parent_uri"].values
        codes = self.columns["parent_uri"][:n]
        order = np.argsort(codes, kind="stable")
        cuts = (np.flatnonzero(np.diff(codes[order])) + 1).tolist()
        self.children = {
            parents[int(codes[order[start]])]: order[start:stop].tolist()
            for start, stop in zip([0, *cuts], [*cuts, n], strict=True)
            if stop > start
        }
        self._sorted = None

    # ---- the filter ------------------------------------------------------------------------------------------------
    def mask(self, flt: VectorFilter, n: int | None = None) -> np.ndarray:
        """Boolean mask of shape ``(n,)``: live rows below ``n`` (default: all published) passing ``flt``."""
        n = self.n if n is None else n
        return self._mask(flt, n, None, self.alive[:n].copy())

    def mask_rows(self, flt: VectorFilter, n: int, rows: np.ndarray, alive: np.ndarray) -> np.ndarray:
        """``mask(flt, n)[rows]`` computed on ``rows`` only (row numbers below ``n``), with ``alive`` a copy of the
        tombstones below ``n`` taken with ``n``: a search that scored few rows of a large table filters those."""
        return self._mask(flt, n, rows, alive[rows])

    def _mask(self, flt: VectorFilter, n: int, rows: np.ndarray | None, mask: np.ndarray) -> np.ndarray:
        """``mask`` (the live flags of every row below ``n``, or of ``rows``) narrowed by ``flt``, in place."""
        if flt.account_id != self.account_id:
            return np.zeros(mask.shape[0], dtype=bool)
        for column, field in _FILTER_FIELDS:
            wanted = getattr(flt, field)
            if wanted is None:
                continue
            if not wanted:
                return np.zeros(mask.shape[0], dtype=bool)
            codes = self.codes[column]
            lut = codes.lut(wanted)
            if lut[: len(codes.values)].all():
                continue  # every value of the column passes (e.g. owner_space in a segment of one space)
            if not lut.any():
                return np.zeros(mask.shape[0], dtype=bool)
            col = self.columns[column]
            mask &= lut[col[:n] if rows is None else col[rows]]
        if flt.levels is not None:
            levels = self.level[:n] if rows is None else self.level[rows]
            picked = np.zeros(mask.shape[0], dtype=bool)
            for level in set(flt.levels):  # one to three levels: cheaper than np.isin, which sorts
                picked |= levels == level
            mask &= picked
        if flt.uri_prefix is not None:
            prefix = self.prefix_mask(flt.uri_prefix, n)
            mask &= prefix if rows is None else prefix[rows]
        return mask

    def prefix_mask(self, prefix: str, n: int) -> np.ndarray:
        """Rows below ``n`` whose URI starts with ``prefix``: two bisections over the sorted URIs of the rows
        covered by the last sort, plus a scan of the rows appended since (re-sorted when that tail grows large)."""
        found = self._sorted
        if found is None or found[0] > n or n - found[0] > max(1024, n // 8):
            order = np.array(sorted(range(n), key=self.uris.__getitem__), dtype=np.int64)
            found = self._sorted = (n, [self.uris[i] for i in order], order)
        covered, uris, order = found
        out = np.zeros(n, dtype=bool)
        width = len(prefix)
        lo = bisect.bisect_left(uris, prefix, key=lambda u: u[:width])
        hi = bisect.bisect_right(uris, prefix, key=lambda u: u[:width])
        out[order[lo:hi]] = True
        for row in range(covered, n):
            if self.uris[row].startswith(prefix):
                out[row] = True
        return out

    def rows_of_parents(self, parents: Sequence[str], n: int) -> np.ndarray:
        """Live rows below ``n`` whose ``parent_uri`` is one of ``parents`` (sorted row numbers)."""
        rows = sorted({r for p in parents for r in self.children.get(p, ()) if r < n and self.alive[r]})
        return np.asarray(rows, dtype=np.int64)
