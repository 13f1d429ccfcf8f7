"""Compact columns of the in-memory derived rows (docs/derived_indexes.md): packed strings and a hashed id map.

A row table of a million rows held as Python objects costs about 90 bytes per id (a 32-character ``str`` plus its
list slot), 60 per ``id -> row`` dict entry and 36 per row number in a list. These classes hold the same information
in numpy arrays: a :class:`PackedStrings` column costs the UTF-8 bytes of its strings plus an 8-byte offset, and a
:class:`HashedIds` map 12 bytes per id (a 64-bit hash and a 32-bit value).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import groupby, pairwise
from typing import overload

import numpy as np

__all__ = ["HashedIds", "PackedStrings", "best_by_score"]

_ERRORS = "surrogatepass"  # any Python str round-trips, a lone surrogate included
_MATCH_CHUNK_BYTES = 1 << 20  # bytes gathered at once when comparing rows to a value
_MATCH_DECODED = 24  # up to this many rows are compared one by one (cheaper than the vectorised comparison)
_MATCH_PROBE = 8  # bytes at the end of a value compared first (_matches)


def _part(data: np.ndarray, offsets: np.ndarray) -> tuple[memoryview, memoryview, np.ndarray, np.ndarray]:
    """One part of a column as readers take it in one attribute read: views of the bytes and the offsets for single
    rows (a memoryview indexes in tens of nanoseconds, a numpy array in hundreds), then the arrays themselves."""
    # numpy's stubs do not declare ndarray a buffer; it is one (PEP 3118)
    return memoryview(data), memoryview(offsets).cast("B").cast("q"), data, offsets  # type: ignore[arg-type]


def _matches(data: np.ndarray, starts: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Whether ``data[start:start + len(want)] == want`` for each start (every row at least that long).

    Values longer than :data:`_MATCH_PROBE` bytes are probed on their last ``_MATCH_PROBE`` bytes first and compared
    whole only where those agree: the URIs of one directory share everything up to the file name, so the probe
    rules out nearly every row after reading an eighth of the bytes or less (issue 26)."""
    width = want.shape[0]
    if width > 2 * _MATCH_PROBE and starts.shape[0] > 1:
        probe = np.arange(width - _MATCH_PROBE, width, dtype=np.int64)
        ends = data[starts[:, None] + probe].view(np.uint64)[:, 0]  # the probe's 8 bytes as one integer a row
        agree = np.flatnonzero(ends == want[-_MATCH_PROBE:].view(np.uint64)[0])
        keep = np.zeros(starts.shape[0], dtype=bool)
        if agree.size:
            keep[agree] = _whole(data, starts[agree], want)
        return keep
    return _whole(data, starts, want)


def _whole(data: np.ndarray, starts: np.ndarray, want: np.ndarray) -> np.ndarray:
    """:func:`_matches` comparing every byte, in chunks of ``_MATCH_CHUNK_BYTES``."""
    width = want.shape[0]
    keep = np.zeros(starts.shape[0], dtype=bool)
    step = max(1, _MATCH_CHUNK_BYTES // width)
    span = np.arange(width, dtype=np.int64)
    for lo in range(0, starts.shape[0], step):
        keep[lo : lo + step] = (data[starts[lo : lo + step, None] + span] == want).all(axis=1)
    return keep


class PackedStrings:
    """An append-only column of ``str`` kept as UTF-8 bytes in ``uint8`` arrays plus ``int64`` byte offsets.

    Two parts: a **head** that never changes (the arrays of a derived file, zero-copy: :meth:`from_arrays`) and a
    growable **tail** for the rows appended since (all rows of a column built in memory). Within a part, row ``j`` is
    ``data[offsets[j]:offsets[j + 1]]`` decoded (``offsets[0] == 0``). Appends never copy the head, so a column
    opened from a file stays the file's pages (read only where used) after writes. ``col[i]`` decodes one row
    (negative indexes count from the end), ``col[a:b]`` a list, iteration every row held when it starts. ``None`` is
    not a value (``TypeError``). Lone surrogates pass through (``surrogatepass``).

    Concurrency: one writer at a time (the owner serialises them) and any number of readers, each reading only rows
    below a count published after those rows were appended (``RowTable.n``, moved last). Appended bytes and offsets
    are written before :meth:`extend` returns and never change afterwards; growing the tail allocates new arrays
    (doubling), copies its rows and swaps one reference, so a reader holding the old arrays still reads every row it
    may read, and a reader never sees a half-written row.

    Args:
        values: the initial rows.
    """

    __slots__ = ("_count", "_ends", "_head", "_tail")

    def __init__(self, values: Iterable[str] = ()) -> None:
        empty = _part(np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64))
        self._head: tuple[int, memoryview, memoryview, np.ndarray, np.ndarray] = (0, *empty)
        self._tail = empty
        self._count = 0
        self._ends: tuple[int, np.ndarray] | None = None  # (rows covered, each row's last 8 bytes): _end_keys
        self.extend(values)

    @classmethod
    def from_arrays(cls, data: np.ndarray, offsets: np.ndarray) -> PackedStrings:
        """A column whose head is ``data`` (``uint8``, the UTF-8 bytes) and ``offsets`` (``int64``, ``rows + 1`` byte
        offsets) as :meth:`arrays` returns them, zero-copy (a derived file's memory map is paged in only where read,
        and appends go to the tail).

        Raises:
            ValueError: the arrays do not describe a column (dtype, shape, offsets not ascending from 0 to
                ``len(data)``). The bytes are neither read nor decoded here (that would page the whole file in): a
                row that is not UTF-8 raises ``UnicodeDecodeError`` (a ``ValueError``) when it is read.
        """
        if data.dtype != np.uint8 or data.ndim != 1 or offsets.dtype != np.int64 or offsets.ndim != 1:
            raise ValueError("a string column is uint8 bytes and int64 offsets")
        if offsets.shape[0] < 1 or int(offsets[0]) != 0 or int(offsets[-1]) != data.shape[0]:
            raise ValueError("string offsets do not span the bytes")
        if offsets.shape[0] > 1 and bool((np.diff(offsets) < 0).any()):
            raise ValueError("string offsets are not ascending")
        out = cls()
        out._head = (offsets.shape[0] - 1, *_part(data, offsets))
        out._count = offsets.shape[0] - 1
        return out

    def arrays(self, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(data, offsets)`` of the first ``n`` rows (default: all) for a derived file, in the layout of
        :meth:`from_arrays` (``data`` holds ``offsets[-1]`` bytes, ``offsets`` ``n + 1`` entries): views of one part,
        or a copy joining the head and the tail."""
        n = self._count if n is None else n
        if not 0 <= n <= self._count:
            raise IndexError(f"{n} rows asked of a column of {self._count}")
        h, _, _, head_data, head_offsets = self._head
        _, _, tail_data, tail_offsets = self._tail
        if n <= h:
            return head_data[: int(head_offsets[n])], head_offsets[: n + 1]
        if h == 0:
            return tail_data[: int(tail_offsets[n])], tail_offsets[: n + 1]
        split = int(head_offsets[h])
        data = np.concatenate([head_data[:split], tail_data[: int(tail_offsets[n - h])]])
        return data, np.concatenate([head_offsets[: h + 1], tail_offsets[1 : n - h + 1] + split])

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays, the head (a file's pages, resident once read) and the tail's capacity included."""
        _, _, _, head_data, head_offsets = self._head
        _, _, tail_data, tail_offsets = self._tail
        return int(head_data.nbytes + head_offsets.nbytes + tail_data.nbytes + tail_offsets.nbytes)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        try:
            if 0 <= i < self._count:  # type: ignore[operator]  # the hot path: one row by a non-negative index
                head = self._head
                h = head[0]
                if i < h:  # type: ignore[operator]
                    view, at = head[1], head[2]
                else:
                    tail = self._tail
                    view, at = tail[0], tail[1]
                    i -= h  # type: ignore[operator]
                return view[at[i] : at[i + 1]].tobytes().decode("utf-8", _ERRORS)  # type: ignore[operator, index]
        except TypeError:  # a slice does not compare with an int
            if not isinstance(i, slice):
                raise
            start, stop, step = i.indices(self._count)
            if step != 1:
                return [self[j] for j in range(start, stop, step)]
            return self._decode(start, stop) if stop > start else []
        if -self._count <= i < 0:  # type: ignore[operator]
            return self[i + self._count]  # type: ignore[operator]
        raise IndexError("string column index out of range")

    def __iter__(self) -> Iterator[str]:
        count, step = self._count, 8192
        for start in range(0, count, step):
            yield from self._decode(start, min(count, start + step))

    def _decode(self, start: int, stop: int) -> list[str]:
        """Rows ``start:stop`` (``start < stop <= len``): one decode per part when its bytes are ASCII."""
        h, head_view, _, _, head_offsets = self._head
        out: list[str] = []
        if start < h:
            out += _decode_rows(head_view, head_offsets[start : min(stop, h) + 1])
        if stop > h:
            tail_view, _, _, tail_offsets = self._tail
            out += _decode_rows(tail_view, tail_offsets[max(start, h) - h : stop - h + 1])
        return out

    def append(self, value: str) -> None:
        """Append one row (see :meth:`extend`)."""
        self.extend((value,))

    def extend(self, values: Iterable[str]) -> None:
        """Append rows to the tail: their bytes and offsets are written (into new arrays when the tail is full,
        doubling its capacity) before the row count moves.

        Raises:
            TypeError: a value is not a ``str`` (nothing is appended then).
        """
        encoded = [str.encode(v, "utf-8", _ERRORS) for v in values]
        if not encoded:
            return
        _, _, data, offsets = self._tail
        count, k = self._count - self._head[0], len(encoded)
        used = int(offsets[count])
        blob = b"".join(encoded)
        end = used + len(blob)
        grown = False
        if end > data.shape[0]:
            bigger = np.empty(max(end, 2 * data.shape[0], 64), dtype=np.uint8)
            bigger[:used] = data[:used]
            data, grown = bigger, True
        data[used:end] = np.frombuffer(blob, dtype=np.uint8)
        if count + k + 1 > offsets.shape[0]:
            bigger = np.empty(max(count + k + 1, 2 * offsets.shape[0], 16), dtype=np.int64)
            bigger[: count + 1] = offsets[: count + 1]
            offsets, grown = bigger, True
        new = offsets[count + 1 : count + k + 1]
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=k), out=new)
        new += used
        if grown:
            self._tail = _part(data, offsets)
        self._count += k

    # ---- vectorised comparisons (no row is decoded) ------------------------------------------------------------
    def equal_rows(self, rows: Sequence[int] | np.ndarray, value: str) -> np.ndarray:
        """The rows of ``rows`` (each below ``len``) holding exactly ``value``, in the order given (``int64``).

        A value of at least :data:`_MATCH_PROBE` bytes is looked up by each row's last 8 bytes, kept as one integer a
        row (:meth:`_end_keys`, built on the first such call and extended as rows are appended): one integer
        comparison a row, then the few rows that agree are compared whole. A search looks up a few dozen URIs among
        their directory's siblings (hundreds at 1M nodes), which the byte gathers of :meth:`_matching` made
        ~30-50 us each (issue 26)."""
        at = np.asarray(rows, dtype=np.int64)
        encoded = str.encode(value, "utf-8", _ERRORS)
        if len(encoded) < _MATCH_PROBE or at.size <= 1:
            return self._matching(at, value, exact=True)
        if at.size and (int(at.min()) < 0 or int(at.max()) >= self._count):
            raise IndexError("string column index out of range")
        keys = self._end_keys(self._count)
        want = np.frombuffer(encoded[-_MATCH_PROBE:], dtype=np.uint64)[0]
        agree = at[keys[at] == want]
        if not agree.size:
            return agree
        return np.asarray(self._compare(agree.tolist(), value, exact=True), dtype=np.int64)

    def prepare_lookups(self) -> None:
        """Build now the keys :meth:`equal_rows` reads (8 bytes a row, reading each row's last bytes: ~0.2 s for 1M
        rows), as a server's warm-up does, so that no request pays for them."""
        self._end_keys(self._count)

    def _end_keys(self, need: int) -> np.ndarray:
        """The last :data:`_MATCH_PROBE` bytes of each row below ``need`` as one ``uint64`` (0 for a shorter row; a
        key only picks rows to compare whole). Rows below the count covered never change, so the array is filled
        past it in place (an eighth of slack when it grows, one builder at a time) and readers of covered rows are
        never disturbed."""
        found = self._ends
        if found is not None and found[0] >= need:
            return found[1]
        with _ENDS_LOCK:
            found = self._ends
            covered, keys = found if found is not None else (0, np.zeros(0, dtype=np.uint64))
            if covered >= need:
                return keys
            if keys.shape[0] < need:
                # an eighth of slack: appends come in batches, and doubling would hold 16 bytes a row
                bigger = np.zeros(max(need, keys.shape[0] + keys.shape[0] // 8, 1024), dtype=np.uint64)
                bigger[:covered] = keys[:covered]
                keys = bigger
            h, _, _, head_data, head_offsets = self._head
            _, _, tail_data, tail_offsets = self._tail
            for lo, hi, data, offsets, first in (
                (covered, min(need, h), head_data, head_offsets, 0),
                (max(covered, h), need, tail_data, tail_offsets, h),
            ):
                if hi <= lo:
                    continue
                ends = offsets[lo - first + 1 : hi - first + 1]
                long = ends - offsets[lo - first : hi - first] >= _MATCH_PROBE
                part = np.zeros(hi - lo, dtype=np.uint64)
                if long.any():
                    span = ends[long, None] + np.arange(-_MATCH_PROBE, 0, dtype=np.int64)
                    part[long] = np.ascontiguousarray(data[span]).view(np.uint64)[:, 0]
                keys[lo:hi] = part
            self._ends = (need, keys)
            return keys

    def find(self, rows: Iterable[int], value: str) -> list[int]:
        """:meth:`equal_rows` for a few rows given as Python ints (no array is built): the rows holding ``value``,
        in the order given."""
        return self._compare(rows if isinstance(rows, list) else list(rows), value, exact=True)

    def prefix_rows(self, prefix: str, start: int, stop: int) -> np.ndarray:
        """The rows of ``start:stop`` (``stop <= len``) starting with ``prefix``, ascending (``int64``); a plain
        string prefix, as ``str.startswith``."""
        return self._matching(np.arange(start, stop, dtype=np.int64), prefix, exact=False)

    def _compare(self, rows: list[int], value: str, *, exact: bool) -> list[int]:
        """Rows compared one by one on their bytes (a memoryview slice against ``bytes``), none decoded."""
        encoded = str.encode(value, "utf-8", _ERRORS)
        width = len(encoded)
        count = self._count
        h, head_view, head_at, _, _ = self._head
        tail_view, tail_at, _, _ = self._tail
        picked = []
        for r in rows:
            if not 0 <= r < count:
                raise IndexError("string column index out of range")
            view, at, j = (head_view, head_at, r) if r < h else (tail_view, tail_at, r - h)
            a, b = at[j], at[j + 1]
            if ((b - a == width) if exact else (b - a >= width)) and view[a : a + width] == encoded:
                picked.append(r)
        return picked

    def _matching(self, rows: np.ndarray, value: str, *, exact: bool) -> np.ndarray:
        if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= self._count):
            raise IndexError("string column index out of range")
        if rows.size <= _MATCH_DECODED:
            return np.asarray(self._compare(rows.tolist(), value, exact=exact), dtype=np.int64)
        encoded = str.encode(value, "utf-8", _ERRORS)
        width = len(encoded)
        h, _, _, head_data, head_offsets = self._head
        _, _, tail_data, tail_offsets = self._tail
        want = np.frombuffer(encoded, dtype=np.uint8)
        keep = np.zeros(rows.shape[0], dtype=bool)
        in_head = rows < h
        for where, data, offsets, first in (
            (np.flatnonzero(in_head), head_data, head_offsets, 0),
            (np.flatnonzero(~in_head), tail_data, tail_offsets, h),
        ):
            if not where.size:
                continue
            local = rows[where] - first
            starts = offsets[local]
            lengths = offsets[local + 1] - starts
            fits = np.flatnonzero(lengths == width if exact else lengths >= width)
            if width == 0:
                keep[where[fits]] = True
            elif fits.size:
                keep[where[fits]] = _matches(data, starts[fits], want)
        return rows[keep]


_ENDS_LOCK = threading.Lock()  # builders of PackedStrings._end_keys (rare: once, then per batch of appended rows)


def best_by_score(scores: Mapping[int, float], column: PackedStrings, k: int) -> list[int]:
    """The ``k`` rows of ``scores`` (row -> score) with the highest scores, ties by ``column[row]`` ascending: the
    order of ``sorted(scores, key=lambda r: (-scores[r], column[r]))[:k]``, decoding only the rows that tie."""
    ranked = sorted(scores, key=scores.__getitem__, reverse=True)  # stable: ties keep their order for groupby
    if len(set(scores.values())) == len(ranked):
        return ranked[:k]  # no ties: nothing to decode
    out: list[int] = []
    for _, group in groupby(ranked, key=scores.__getitem__):
        tied = list(group)
        out += sorted(tied, key=column.__getitem__) if len(tied) > 1 else tied
        if len(out) >= k:
            break
    return out[:k]


def _decode_rows(view: memoryview, bounds: np.ndarray) -> list[str]:
    """The rows whose byte bounds are ``bounds`` (``rows + 1`` offsets into ``view``): one decode when ASCII."""
    base = int(bounds[0])
    raw = bytes(view[base : int(bounds[-1])])
    rel = (bounds - base).tolist()
    if raw.isascii():
        text = raw.decode("ascii")
        return [text[a:b] for a, b in pairwise(rel)]
    return [raw[a:b].decode("utf-8", _ERRORS) for a, b in pairwise(rel)]


class HashedIds:
    """A compact ``id -> int`` map for ids whose strings are held elsewhere: a lookup gives candidates that the owner
    verifies against its own rows.

    Entries present at the last :meth:`reset` are two sorted arrays (the ids' 64-bit hashes and their values:
    12 bytes an id); entries set since are a small dict (:attr:`tail`), which the owner folds in with
    :meth:`reset` once it grows. Hashes are Python's ``hash`` (randomised per process: never persisted), so two ids
    may share one and a stale entry may remain (:meth:`discard` drops tail entries only): :meth:`candidates` returns
    every value that may belong to the id, and the owner checks each (``ids[row] == id and alive[row]``).

    Not thread-safe: the owner serialises its writers.
    """

    __slots__ = ("_keys", "_values", "tail")

    def __init__(self) -> None:
        self._keys = np.zeros(0, dtype=np.int64)
        self._values = np.zeros(0, dtype=np.int32)
        self.tail: dict[str, int] = {}

    def __len__(self) -> int:
        """Entries held (stale ones included)."""
        return self._keys.shape[0] + len(self.tail)

    @property
    def nbytes(self) -> int:
        """Bytes of the sorted arrays (the tail dict not counted)."""
        return int(self._keys.nbytes + self._values.nbytes)

    def reset(self, ids: Iterable[str], values: np.ndarray) -> None:
        """Replace every entry by ``ids[i] -> values[i]`` (``values``: ``int32``-able, one per id); the tail empties."""
        values = np.asarray(values, dtype=np.int32)
        keys = np.fromiter(map(_hash, ids), dtype=np.int64, count=values.shape[0])
        order = np.argsort(keys, kind="stable")
        self._keys, self._values, self.tail = keys[order], values[order], {}

    def set(self, rid: str, value: int) -> None:
        """Map ``rid`` to ``value`` (in the tail; it comes first among the candidates)."""
        self.tail[rid] = value

    def discard(self, rid: str) -> None:
        """Drop the tail entry of ``rid`` (sorted entries stay: the owner's check rejects them)."""
        self.tail.pop(rid, None)

    def candidates(self, rid: str) -> list[int]:
        """Values that may be ``rid``'s: its tail entry first, then every sorted entry of its hash."""
        out: list[int] = []
        found = self.tail.get(rid)
        if found is not None:
            out.append(found)
        keys = self._keys
        if keys.shape[0]:
            h = _hash(rid)
            lo = int(np.searchsorted(keys, h, side="left"))
            hi = lo
            while hi < keys.shape[0] and keys.item(hi) == h:
                hi += 1
            out.extend(self._values[lo:hi].tolist())
        return out


def _hash(value: str) -> int:
    """The 64-bit key of an id (module level so that tests can force collisions)."""
    return hash(value)
