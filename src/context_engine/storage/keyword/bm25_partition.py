"""BM25's per-account data (:mod:`context_engine.storage.keyword.bm25_index`): one :class:`Partition` per
``(account_id, level)`` (a :class:`~context_engine.storage.filters.RowTable`, the forward index, the statistics of
the live rows, the main and append segments), the :class:`PartitionView` a search captures, the BM25 variants'
``idf`` and ``tfc`` (module docstring of :mod:`~context_engine.storage.keyword.bm25_index`), and the
:class:`BM25Account` holding an account's partitions.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from context_engine.schema.nodes import VectorFilter
from context_engine.settings import KeywordSettings
from context_engine.storage.derived.base import DerivedAccount
from context_engine.storage.filters import RowFields, RowTable
from context_engine.storage.selection import kth_largest

__all__ = ["BM25Account", "Partition", "PartitionView"]

_DELTA = 0.5  # BM25L / BM25+ delta (bm25s's default; KeywordSettings has no field for it)
_TF_MAX = 65_535  # term frequencies are stored as uint16
_MERGE_MIN_ROWS = 2048  # an append segment is merged past max(this, _MERGE_FRACTION of the live rows)
_MERGE_FRACTION = 0.1
_COMPACT_MIN_DEAD = 256  # a partition is compacted past max(this, a third of its rows) tombstones


def _grown(arr: np.ndarray, need: int, used: int) -> np.ndarray:
    """``arr`` if it holds ``need`` entries, else a copy at least twice as long with its first ``used`` entries."""
    if need <= arr.shape[0]:
        return arr
    new = np.zeros(max(need, 2 * arr.shape[0]), dtype=arr.dtype)
    new[:used] = arr[:used]
    return new


@dataclass(frozen=True, slots=True)
class _Main:
    """An immutable main segment: the postings of term ``t`` are ``rows/tfs[indptr[t]:indptr[t + 1]]``, ordered by
    the row's owner space code (``spaces``, the partition's ``owner_space`` column), then row ascending (tombstoned
    rows dropped at build time; rows killed since are masked by the reader). Grouped by space, a search whose filters
    name owner spaces reads only their postings (two bisections a term and space): a user's memory question in an
    account of many users scores its own space and the shared ones, not every user's (issue 26)."""

    indptr: np.ndarray  # int64, (terms + 1,)
    rows: np.ndarray  # int32
    tfs: np.ndarray  # uint16
    spaces: np.ndarray  # int32, the owner space code of each posting's row (ascending within a term)

    def postings(self, term: int, wanted: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The rows and tfs of ``term``; with ``wanted`` (owner space codes, ascending) only those spaces' rows."""
        if term + 1 >= self.indptr.shape[0]:
            return _NO_ROWS, _NO_TFS
        start, end = int(self.indptr[term]), int(self.indptr[term + 1])
        if wanted is None or start == end:
            return self.rows[start:end], self.tfs[start:end]
        spaces = self.spaces[start:end]
        lo = np.searchsorted(spaces, wanted, side="left")
        hi = np.searchsorted(spaces, wanted, side="right")
        spans = [(start + int(a), start + int(b)) for a, b in zip(lo.tolist(), hi.tolist(), strict=True) if b > a]
        if len(spans) == 1:
            a, b = spans[0]
            return self.rows[a:b], self.tfs[a:b]
        if not spans:
            return _NO_ROWS, _NO_TFS
        return (
            np.concatenate([self.rows[a:b] for a, b in spans]),
            np.concatenate([self.tfs[a:b] for a, b in spans]),
        )


_NO_ROWS = np.zeros(0, dtype=np.int32)
_NO_TFS = np.zeros(0, dtype=np.uint16)
_EMPTY_MAIN = _Main(np.zeros(1, dtype=np.int64), _NO_ROWS, _NO_TFS, np.zeros(0, dtype=np.int32))


def _build_main(
    n: int,
    alive: np.ndarray,
    fwd_start: np.ndarray,
    fwd_terms: np.ndarray,
    fwd_tfs: np.ndarray,
    vocab: int,
    row_spaces: np.ndarray,
) -> _Main:
    """A main segment of the live rows below ``n`` from the forward index (postings of dead rows dropped), grouped
    by term, then by owner space (``row_spaces``: each row's code), rows ascending within."""
    used = int(fwd_start[n])
    counts = np.diff(fwd_start[: n + 1])
    entry_rows = np.repeat(np.arange(n, dtype=np.int32), counts)
    keep = alive[:n][entry_rows]
    rows = entry_rows[keep]
    terms = fwd_terms[:used][keep]
    spaces = row_spaces[:n].astype(np.int32)[rows]
    # stable: entries come in row order, so rows stay ascending within a (term, space) group
    order = np.argsort((terms.astype(np.int64) << 32) | spaces, kind="stable")
    indptr = np.zeros(vocab + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=vocab), out=indptr[1:])
    return _Main(indptr, rows[order], fwd_tfs[:used][keep][order], spaces[order])


class Partition(RowTable):
    """The records of one ``(account_id, level)``: a :class:`RowTable`, the forward index, the statistics of the live
    rows, and the main and append segments (module docstring).

    Not thread-safe: the owning account serialises writers and guards what readers capture (``BM25Account``).
    """

    def __init__(self, account_id: str, level: int, capacity: int = 256) -> None:
        super().__init__(account_id, capacity)
        self.part_level = level
        self.term_of: dict[str, int] = {}
        self.df = np.zeros(1024, dtype=np.int32)  # live rows holding each term id
        self.total_len = 0  # tokens of the live rows
        self.empty = 0  # live rows with no token: never matched, and left out of N and avgdl
        self.doc_len = np.zeros(self.capacity, dtype=np.int32)
        self.fwd_start = np.zeros(self.capacity + 1, dtype=np.int64)  # row r's entries: fwd_start[r]:fwd_start[r+1]
        self.fwd_terms = np.zeros(4096, dtype=np.int32)
        self.fwd_tfs = np.zeros(4096, dtype=np.uint16)
        self.main = _EMPTY_MAIN
        self.main_rows = 0  # rows below this are covered by ``main``
        self.tail: dict[int, tuple[array[int], array[int]]] = {}  # append segment: term -> (rows, tfs)
        self.texts: dict[str, tuple[str, str]] = {}  # id -> (text, breadcrumb), for records given with their text

    @property
    def tail_rows(self) -> int:
        return self.n - self.main_rows

    def on_grow(self, capacity: int) -> None:
        self.doc_len = _grown(self.doc_len, capacity, self.n)
        self.fwd_start = _grown(self.fwd_start, capacity + 1, self.n + 1)

    def kill(self, rid: str) -> int | None:
        """Tombstone the live row of ``rid`` and take it out of the statistics (O(its distinct terms))."""
        row = super().kill(rid)
        if row is not None:
            start, end = int(self.fwd_start[row]), int(self.fwd_start[row + 1])
            self.df[self.fwd_terms[start:end]] -= 1  # a row's term ids are distinct
            self.total_len -= int(self.doc_len[row])
            self.empty -= int(self.doc_len[row] == 0)
            self.texts.pop(rid, None)
        return row

    def row(self, row: int) -> RowFields:
        """The filter fields of ``row`` (decoded)."""
        return RowFields(
            self.ids[row],
            self.uris[row],
            self.value("parent_uri", row),
            self.value("owner_space", row),
            self.value("context_type", row),
            self.value("category", row),
            self.part_level,
            self.value("doc_id", row),
            int(self.chunk_index[row]),
        )

    # ---- writes --------------------------------------------------------------------------------------------------
    def encode(self, token_lists: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Term ids (new terms join the vocabulary), tfs, distinct-term counts and lengths of tokenised records."""
        term_of = self.term_of
        terms = array("i")  # compact while collecting (a Python list costs ~36 bytes an entry)
        tfs = array("H")
        counts = array("q")
        for tokens in token_lists:
            freq = Counter(tokens)
            for token, tf in freq.items():
                tid = term_of.get(token)
                if tid is None:
                    tid = term_of[token] = len(term_of)
                terms.append(tid)
                tfs.append(min(tf, _TF_MAX))
            counts.append(len(freq))
        return (
            np.frombuffer(terms, dtype=np.int32).copy(),
            np.frombuffer(tfs, dtype=np.uint16).copy(),
            np.frombuffer(counts, dtype=np.int64).copy(),
            np.asarray([len(t) for t in token_lists], dtype=np.int32),
        )

    def add(
        self,
        rows: Sequence[Any],
        encoded: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        *,
        to_tail: bool = True,
    ) -> None:
        """Append records (ids not live here; see ``BM25Account.add``) with their encoded tokens and publish them.

        ``to_tail``: also append their postings to the append segment (else the caller builds a main segment).
        """
        if not rows:
            return
        terms, tfs, counts, lens = encoded
        new = self.append(rows)
        used = int(self.fwd_start[new.start])
        end = used + terms.shape[0]
        self.fwd_terms = _grown(self.fwd_terms, end, used)
        self.fwd_tfs = _grown(self.fwd_tfs, end, used)
        self.fwd_terms[used:end] = terms
        self.fwd_tfs[used:end] = tfs
        self.fwd_start[new.start + 1 : new.stop + 1] = used + np.cumsum(counts)
        self.doc_len[new.start : new.stop] = lens
        self.df = _grown(self.df, len(self.term_of), self.df.shape[0])
        np.add.at(self.df, terms, 1)
        self.total_len += int(lens.sum())
        self.empty += int(np.count_nonzero(lens == 0))
        if to_tail and terms.size:
            # Group the batch's postings by term (stable: rows stay ascending), then one append per term.
            order = np.argsort(terms, kind="stable")
            by_term = terms[order]
            rows_sorted = np.repeat(np.arange(new.start, new.stop, dtype=np.int32), counts)[order]
            tfs_sorted = tfs[order]
            cuts = (np.flatnonzero(np.diff(by_term)) + 1).tolist()
            tail = self.tail
            for tid, start, stop in zip(by_term[[0, *cuts]].tolist(), [0, *cuts], [*cuts, by_term.size], strict=True):
                found = tail.get(tid)
                if found is None:
                    found = tail[tid] = (array("i"), array("H"))
                found[0].frombytes(rows_sorted[start:stop].tobytes())
                found[1].frombytes(tfs_sorted[start:stop].tobytes())
        self.publish(new)

    def build_main(self) -> tuple[_Main, int]:
        """A main segment of every live row (built beside the current one; swap it in with :meth:`swap_main`)."""
        n = self.n
        main = _build_main(
            n, self.alive[:n], self.fwd_start, self.fwd_terms, self.fwd_tfs, len(self.term_of), self._spaces(n)
        )
        return main, n

    def _spaces(self, n: int) -> np.ndarray:
        """The owner space code of each row below ``n``."""
        return self.columns["owner_space"][:n]

    # ---- files (storage/derived_files.py) ------------------------------------------------------------------------
    def capture_state(self) -> tuple[int, np.ndarray, np.ndarray, int, list[str], _Main | None]:
        """What a derived file of this partition needs, taken under the account's write lock: the row count, copies
        of the tombstones and document frequencies, the total length, the vocabulary in term-id order, and the main
        segment when it covers every row (else the file builds one)."""
        n, vocab = self.n, len(self.term_of)
        terms = list(self.term_of)  # insertion order is term-id order (ids are assigned as len(term_of))
        main = self.main if self.main_rows == n and not self.tail else None
        return n, self.alive[:n].copy(), self.df[:vocab].copy(), self.total_len, terms, main

    def snapshot(self, prefix: str, captured: tuple) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """``(meta, arrays)`` of a :meth:`capture_state` (built without the lock: rows below ``n`` never change)."""
        from context_engine.storage.derived_files import pack_strings

        n, alive, df, total_len, terms, main = captured
        if main is None:
            main = _build_main(n, alive, self.fwd_start, self.fwd_terms, self.fwd_tfs, len(terms), self._spaces(n))
        meta, rows = self.snapshot_rows(n, alive)
        meta.update(level=self.part_level, total_len=int(total_len), vocab=len(terms))
        arrays = {prefix + k: v for k, v in rows.items()}
        used = int(self.fwd_start[n])
        arrays.update(
            {
                prefix + "df": df,
                prefix + "doc_len": self.doc_len[:n],
                prefix + "fwd_start": self.fwd_start[: n + 1],
                prefix + "fwd_terms": self.fwd_terms[:used],
                prefix + "fwd_tfs": self.fwd_tfs[:used],
                prefix + "main.indptr": main.indptr,
                prefix + "main.rows": main.rows,
                prefix + "main.tfs": main.tfs,
                prefix + "main.spaces": main.spaces,
            }
        )
        arrays[prefix + "terms.utf8"], arrays[prefix + "terms.offsets"] = pack_strings(terms)
        return meta, arrays

    @classmethod
    def restored(cls, account_id: str, meta: dict[str, Any], arrays: dict, prefix: str) -> Partition:
        """A partition read back from :meth:`snapshot` output (its main segment covers every row)."""
        from context_engine.storage.derived_files import unpack_strings

        part = cls(account_id, int(meta["level"]), capacity=0)
        part.restore_rows(meta, arrays, prefix)
        n, vocab = part.n, int(meta["vocab"])
        terms = unpack_strings(arrays[prefix + "terms.utf8"], arrays[prefix + "terms.offsets"])
        part.term_of = {t: i for i, t in enumerate(terms)}
        part.df = arrays[prefix + "df"]
        part.total_len = int(meta["total_len"])
        part.doc_len = arrays[prefix + "doc_len"]
        part.fwd_start = arrays[prefix + "fwd_start"]
        part.fwd_terms = arrays[prefix + "fwd_terms"]
        part.fwd_tfs = arrays[prefix + "fwd_tfs"]
        indptr = arrays[prefix + "main.indptr"]
        part.main = _Main(
            indptr, arrays[prefix + "main.rows"], arrays[prefix + "main.tfs"], arrays[prefix + "main.spaces"]
        )
        part.main_rows = n
        part.empty = int(np.count_nonzero((part.doc_len == 0) & part.alive[:n]))
        if not (
            len(terms) == len(part.term_of) == vocab == part.df.shape[0] >= indptr.shape[0] - 1
            and part.doc_len.shape[0] == n
            and part.fwd_start.shape[0] == n + 1
            and part.fwd_terms.shape[0] == part.fwd_tfs.shape[0] == int(part.fwd_start[n])
            and part.main.rows.shape[0] == part.main.tfs.shape[0] == part.main.spaces.shape[0] == int(indptr[-1])
        ):
            raise ValueError("BM25 partition arrays do not match")
        return part

    def swap_main(self, main: _Main, rows: int) -> None:
        """Install a main segment covering the rows below ``rows`` (no row was added since it was built)."""
        self.main, self.main_rows, self.tail = main, rows, {}

    def compacted(self) -> Partition:
        """A new partition holding the live rows only (same order), its vocabulary reduced to the live terms."""
        live = np.flatnonzero(self.alive[: self.n])
        out = Partition(self.account_id, self.part_level, capacity=max(256, live.size))
        vocab = len(self.term_of)
        kept = np.flatnonzero(self.df[:vocab] > 0)
        remap = np.full(vocab, -1, dtype=np.int32)
        remap[kept] = np.arange(kept.size, dtype=np.int32)
        out.term_of = {t: int(remap[i]) for t, i in self.term_of.items() if remap[i] >= 0}
        starts = self.fwd_start[live]
        counts = self.fwd_start[live + 1] - starts
        total = int(counts.sum())
        entries = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total, dtype=np.int64)
        encoded = (remap[self.fwd_terms[entries]], self.fwd_tfs[entries], counts, self.doc_len[live])
        out.add([self.row(int(r)) for r in live], encoded, to_tail=False)
        out.swap_main(*out.build_main())
        out.texts = {self.ids[r]: self.texts[self.ids[r]] for r in live.tolist() if self.ids[r] in self.texts}
        return out

    # ---- reads ---------------------------------------------------------------------------------------------------
    def capture(self, q_tokens: Sequence[str], flts: Sequence[VectorFilter | None]) -> PartitionView | None:
        """What a search reads of this partition, copied out (under the account's view lock): the query's postings,
        the tombstones below ``n`` and ``flts`` (``None``: a filter that excludes this partition's level), applied to
        the scored rows by :meth:`PartitionView.top` (rows below ``n`` never change but for their tombstone)."""
        n = self.n
        live = self.live - self.empty  # N of the statistics: the rows with a token
        if live <= 0:
            return None
        bound = 0.0  # sum of Lucene idf over the query tokens (module docstring)
        terms: list[tuple[int, int, int]] = []
        for token, count in Counter(q_tokens).items():
            tid = self.term_of.get(token)
            df = int(self.df[tid]) if tid is not None else 0
            bound += count * math.log(1.0 + (live - df + 0.5) / (df + 0.5))
            if df > 0 and tid is not None:
                terms.append((tid, count, df))
        if not terms:
            return None
        tails = []
        for tid, _, _ in terms:
            found = self.tail.get(tid)
            if found is None:
                tails.append((_NO_ROWS, _NO_TFS))
            else:
                tails.append((np.array(found[0], dtype=np.int32), np.array(found[1], dtype=np.uint16)))
        alive = self.alive[:n].copy()  # the filters are applied to the scored rows only (PartitionView.top)
        return PartitionView(
            self,
            n,
            live,
            self.total_len,
            terms,
            self.main,
            tails,
            list(flts),
            alive,
            self.doc_len,
            bound,
            self._wanted_spaces(flts),
        )

    def _wanted_spaces(self, flts: Sequence[VectorFilter | None]) -> np.ndarray | None:
        """The owner space codes any of ``flts`` can pass (ascending), or ``None`` when one of them names no spaces or
        they name every space of the partition. A row of another space fails every filter, so its postings need not
        be scored."""
        wanted: set[int] = set()
        code_of = self.codes["owner_space"].code_of
        for flt in flts:
            if flt is None:
                continue
            if flt.owner_spaces is None:
                return None
            wanted.update(c for c in (code_of.get(s) for s in flt.owner_spaces) if c is not None)
        if len(wanted) == len(code_of):
            return None  # every space (an account admin's search): read whole postings, not a slice per space
        return np.asarray(sorted(wanted), dtype=np.int32)


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition as a search sees it: the query terms' postings and statistics, the tombstones and the filters."""

    part: Partition
    n: int
    live: int
    total_len: int
    terms: list[tuple[int, int, int]]  # (term id, times in the query, df)
    main: _Main
    tails: list[tuple[np.ndarray, np.ndarray]]
    flts: list[VectorFilter | None]  # the search's filters (None: excludes this partition)
    alive: np.ndarray  # a copy of the tombstones below n, taken with n
    doc_len: np.ndarray  # rows below n never change
    bound: float
    spaces: np.ndarray | None = None  # owner space codes the filters can pass (main postings read), None: all

    def top(self, top_k: int, settings: KeywordSettings) -> list[list[tuple[float, str, int, float]]]:
        """Per filter mask, ``(score, id, row, matched)`` of the best ``top_k`` rows passing it with score > 0 (and
        every row tied with the k-th, so that ties resolve by id in the caller); ``matched`` is the Lucene idf of the
        query tokens the row holds (query counts), whatever their term frequency or the row's length (divided by
        :attr:`bound`: the share of the query's information the row holds). The postings are scored once for all."""
        scored = self._scored(settings)
        out: list[list[tuple[float, str, int, float]]] = []
        ids = self.part.ids
        gathered: dict[str, np.ndarray] = {}  # the candidates' column values, gathered once for every filter
        for flt in self.flts:
            if scored is None or flt is None:
                out.append([])
                continue
            cand, scores, matched = scored
            keep = self.part.mask_rows(flt, self.n, cand, self.alive, gathered)
            cand, scores, matched = cand[keep], scores[keep], matched[keep]
            if cand.size > top_k:
                kth = kth_largest(scores, top_k)
                keep = scores >= kth  # every row tied with the k-th: ties resolve by id
                cand, scores, matched = cand[keep], scores[keep], matched[keep]
            out.append(
                [
                    (float(s), ids[r], r, float(m))
                    for r, s, m in zip(cand.tolist(), scores.tolist(), matched.tolist(), strict=True)
                ]
            )
        return out

    def _scored(self, settings: KeywordSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Rows with a score > 0 (live or not: :meth:`top` filters them), their BM25 scores and the Lucene idf of the
        query tokens each holds (:meth:`top`'s ``matched``)."""
        method, k1, b = settings.method, settings.k1, settings.b
        dfs = np.asarray([df for _, _, df in self.terms], dtype=np.float64)
        counts = np.asarray([c for _, c, _ in self.terms], dtype=np.float64)
        weights = counts * _idf(method, dfs, self.live)
        row_parts: list[np.ndarray] = []
        tf_parts: list[np.ndarray] = []
        for (tid, _, _), (tail_rows, tail_tfs) in zip(self.terms, self.tails, strict=True):
            main_rows, main_tfs = self.main.postings(tid, self.spaces)
            row_parts += (main_rows, tail_rows)
            tf_parts += (main_tfs, tail_tfs)
        rows = np.concatenate(row_parts)
        if not rows.size:
            return None
        per_term = np.add.reduceat([p.size for p in row_parts], np.arange(0, len(row_parts), 2))
        tf = np.concatenate(tf_parts).astype(np.float32)
        # float32 per posting (as bm25s), summed in float64 by bincount. kn = k1 * (1 - b + b * dl / avgdl).
        kn = self.doc_len[rows].astype(np.float32)
        kn *= np.float32(k1 * b * self.live / self.total_len)
        kn += np.float32(k1 * (1.0 - b))
        contrib = _tfc(method, tf, kn, k1)
        base = _tfc_zero(method, k1)
        if base:
            contrib -= np.float32(base)
        contrib *= np.repeat(weights.astype(np.float32), per_term)
        # Every contribution is > 0 except where idf is 0 (robertson, atire): "summed > 0" is "shares a token with
        # the query and scores above 0". The masks are applied after summing (a gather per candidate, not posting).
        # a token's idf once per row holding it (a row's postings of one token are one entry: main or tail)
        present = np.repeat(counts * _idf("lucene", dfs, self.live), per_term)
        scores: np.ndarray
        if rows.size * 8 > self.n:
            summed = np.bincount(rows, weights=contrib, minlength=self.n)
            cand = np.flatnonzero(summed > 0)
            scores = summed[cand]
            matched = np.bincount(rows, weights=present, minlength=self.n)[cand]
        else:
            cand, inverse = np.unique(rows, return_inverse=True)
            scores = np.bincount(inverse, weights=contrib, minlength=cand.size)
            matched = np.bincount(inverse, weights=present, minlength=cand.size)
            keep = scores > 0
            cand, scores, matched = cand[keep], scores[keep], matched[keep]
        if base:
            scores = scores + float(weights.sum()) * base  # the non-occurrence part of BM25L / BM25+
        return cand, scores, matched


def _idf(method: str, df: np.ndarray, n: int) -> np.ndarray:
    if method == "lucene":
        return np.log(1.0 + (n - df + 0.5) / (df + 0.5))
    if method == "robertson":
        return np.log(np.maximum(1.0, (n - df + 0.5) / (df + 0.5)))
    if method == "atire":
        return np.log(n / df)
    if method == "bm25l":
        return np.log((n + 1) / (df + 0.5))
    if method == "bm25+":
        return np.log((n + 1) / df)
    raise ValueError(f"unknown BM25 method {method!r}")


def _tfc(method: str, tf: np.ndarray, kn: np.ndarray, k1: float) -> np.ndarray:
    """The term factor of each posting; ``kn = k1 * norm`` (overwritten)."""
    if method in ("lucene", "robertson"):
        kn += tf
        return np.divide(tf, kn, out=kn)
    if method == "atire":
        kn += tf
        return np.divide(tf * np.float32(k1 + 1.0), kn, out=kn)
    if method == "bm25l":
        c = tf * np.float32(k1) / kn  # tf / norm
        return np.float32(k1 + 1.0) * (c + np.float32(_DELTA)) / (c + np.float32(k1 + _DELTA))
    if method == "bm25+":
        kn += tf
        out = np.divide(tf * np.float32(k1 + 1.0), kn, out=kn)
        out += np.float32(_DELTA)
        return out
    raise ValueError(f"unknown BM25 method {method!r}")


def _tfc_zero(method: str, k1: float) -> float:
    """The term factor of a token absent from a record (non-zero for BM25L and BM25+ only)."""
    if method == "bm25l":
        return (k1 + 1.0) * _DELTA / (k1 + _DELTA)
    if method == "bm25+":
        return _DELTA
    return 0.0


class BM25Account(DerivedAccount):
    """One account's partitions (by level) and the generation they hold.

    ``lock`` serialises writers (catch-up, direct writes, merges); ``view_lock`` is held by writers while they
    change what readers see, and by readers while they capture (never while a merge or a compaction builds).
    """

    def __init__(self, account_id: str, *, by_uri: bool) -> None:
        super().__init__(account_id, None)  # generation None: not loaded from a store
        self.parts: dict[int, Partition] = {}
        self.by_uri: dict[str, set[str]] | None = {} if by_uri else None  # uri -> ids (indexes without a source)
        self.view_lock = threading.Lock()

    @property
    def rows(self) -> int:
        return sum(p.live for p in self.parts.values())

    def remove(self, rid: str) -> bool:
        """Tombstone ``rid`` wherever it is live (under both locks)."""
        for part in self.parts.values():
            row = part.kill(rid)
            if row is not None:
                if self.by_uri is not None:
                    refs = self.by_uri.get(part.uris[row])
                    if refs is not None:
                        refs.discard(rid)
                        if not refs:
                            del self.by_uri[part.uris[row]]
                return True
        return False

    def add(self, rows: Sequence[Any], tokens: Sequence[list[str]], texts: Sequence[tuple[str, str]] | None) -> None:
        """Insert or replace records (the last of duplicate ids wins), grouped by level (under both locks)."""
        last = {r.id: i for i, r in enumerate(rows)}
        by_level: dict[int, list[int]] = {}
        for i, r in enumerate(rows):
            if last[r.id] == i:
                self.remove(r.id)
                by_level.setdefault(int(r.level), []).append(i)
        for level, idx in sorted(by_level.items()):
            part = self.parts.get(level)
            if part is None:
                part = self.parts[level] = Partition(self.account_id, level)
            part.add([rows[i] for i in idx], part.encode([tokens[i] for i in idx]))
            if texts is not None:
                part.texts.update((rows[i].id, texts[i]) for i in idx)
            if self.by_uri is not None:
                for i in idx:
                    self.by_uri.setdefault(rows[i].uri, set()).add(rows[i].id)

    def maintain(self, *, force: bool = False) -> int:
        """Compact or merge the partitions past their thresholds (every one with work when ``force``); each new
        structure is built outside the view lock and swapped in under it (account lock held). Returns the merges."""
        merges = 0
        for level, part in sorted(self.parts.items()):
            if part.dead and (force or part.dead > max(_COMPACT_MIN_DEAD, part.n // 3)):
                new = part.compacted()
                with self.view_lock:
                    self.parts[level] = new
                merges += 1
            elif part.tail_rows and (force or part.tail_rows > max(_MERGE_MIN_ROWS, part.live * _MERGE_FRACTION)):
                main, rows = part.build_main()
                with self.view_lock:
                    part.swap_main(main, rows)
                merges += 1
        return merges
