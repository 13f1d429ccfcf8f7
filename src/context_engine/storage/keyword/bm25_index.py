"""The BM25 keyword index (DESIGN §7.1, §14): an inverted index over :class:`KeywordTokenizer` tokens, scored at
query time, per account and level.

A derived index like the vector index: the metadata store is the source of truth. With a ``source`` (the metadata
store) the index follows the one invalidation rule of the derived indexes (:mod:`context_engine.storage.changes`,
docs/derived_indexes.md): before each search of an account it reads the committed account generation (one
primary-key read); when it moved, the changed rows are read from the change log (``changes_since``) and applied, which
costs O(changed records), or the account is reloaded wholesale (``load_vector_matrix``) on its first search or when
the log does not reach back. Writes of any process are therefore seen by the next search, with no listener
(:meth:`BM25Index.nodes_written` / :meth:`BM25Index.nodes_deleted` do nothing then). Without a source the index is fed
directly (:meth:`BM25Index.upsert`, :meth:`BM25Index.delete`, or as a
:class:`~context_engine.ingest.pipeline.WriteListener`) and keeps the texts it was given; with one, no record text is
held in memory: the texts of the returned hits are read from the store (``get_vector_texts``, one query per search).

One partition is kept per ``(account_id, level)`` so that the IDF statistics of level-0 abstracts and level-2 chunks
never mix and no tenant's vocabulary leaks into another's scores. A partition is a
:class:`~context_engine.storage.filters.RowTable` (ids, URIs, the encoded filter columns and the tombstones; its
:meth:`~context_engine.storage.filters.RowTable.mask` is the filter) plus, in numpy arrays:

* a **forward index**: each row's distinct term ids and term frequencies (uint16, clipped at 65,535) and its length
  in tokens, so that a delete can decrement the document frequencies it contributed;
* the exact statistics of the live rows: ``N`` (live rows with at least one token: a row with none is never
  matched, e.g. a conversation's "Noted!", see :func:`keyword_text`), the total length (``avgdl = total / N``) and
  ``df`` per term; a partition's scores after any sequence of adds and deletes are those of a fresh build of its live rows;
* a **main segment**: postings in CSR form (per-term offsets into int32 row and uint16 tf arrays), immutable once
  built;
* an **append segment**: the postings of the rows added since the last merge, per term in growable arrays.

Adding or deleting n records costs O(their tokens). When the append segment holds more than
``max(2048, 10% of the live rows)`` rows it is merged: a new main segment is built beside the old one from the
forward index of the live rows (dropping tombstoned postings) and swapped in, as Lucene merges segments
(Lucene ``TieredMergePolicy``; Cutting and Pedersen 1990, "Optimizations for dynamic inverted index maintenance");
when tombstones pass a third of a partition's rows it is compacted instead (a new partition of the live rows is built
and swapped in). Readers hold an account's view lock only while they capture what a search reads (the query terms'
postings and statistics, the filter mask): never while a merge or a compaction builds, and they never see a half-built
segment.

Scores are BM25 scores (``score_label='bm25'``) with the ``keyword`` settings' ``k1``, ``b`` and variant ``method``
(Robertson and Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and Beyond"; the variants as in Kamphuis et
al. 2020, "Which BM25 Do You Mean?", ECIR, and bm25s): ``score = sum over the query tokens (duplicates counted, tokens
absent from the partition skipped) of idf(t) * tfc(t)``, with ``norm = 1 - b + b * dl / avgdl`` and

* ``lucene`` (the default): idf = ln(1 + (N - df + 0.5) / (df + 0.5)), tfc = tf / (tf + k1 * norm);
* ``robertson``: idf = ln(max(1, (N - df + 0.5) / (df + 0.5))), tfc as lucene;
* ``atire``: idf = ln(N / df), tfc = tf * (k1 + 1) / (tf + k1 * norm);
* ``bm25l``: idf = ln((N + 1) / (df + 0.5)), tfc = (k1 + 1) * (c + d) / (k1 + c + d) with c = tf / norm, d = 0.5;
* ``bm25+``: idf = ln((N + 1) / df), tfc = (k1 + 1) * tf / (k1 * norm + tf) + d, d = 0.5.

These equal bm25s's ``BM25(k1, b, method).get_scores`` over the same tokens (float64 here, float32 there; checked in
tests/keyword/test_bm25_index.py). For ``bm25l`` and ``bm25+`` a query token absent from a record still adds
``idf * tfc(tf=0)``, as in bm25s, but only records sharing at least one token with the query are returned. Higher is
better, ``> 0`` for every hit (a record sharing no token with the query is never returned), not comparable across
queries.

Each hit also carries ``coverage``, the score divided by its upper bound for the query, ``sum over query tokens of
idf(t)`` (Lucene BM25's term-frequency factor ``tf / (tf + k1 * norm)`` is below 1; a token absent from the partition
counts with ``df = 0``): a query-normalised value in [0, 1) that says how much of the query's information the record
matches (about 0.5 when every query token occurs once in a record of average length, k1 = 0.9), comparable across
queries, as the "theoretical" normalisation of Bruch et al. 2023 (ACM TOIS, "An Analysis of Fusion Functions for
Hybrid Retrieval") suggests. The bound is exact for ``method='lucene'`` (the default) and an approximation for the
other variants (coverage is clipped to 1). Fuse with dense scores through :mod:`context_engine.retrieval.fusion`.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import NodeRecord, VectorFilter, VectorRecord
from context_engine.settings import KeywordSettings
from context_engine.storage.changes import IndexDelta, VectorMatrix
from context_engine.storage.derived_files import BackgroundSaves, DerivedFiles
from context_engine.storage.filters import RowFields, RowTable
from context_engine.storage.keyword.content_words import carries_content, message_speaker
from context_engine.storage.keyword.tokenize import KeywordTokenizer

__all__ = ["BM25Index", "KeywordDoc", "KeywordHit", "keyword_text"]

_FORMAT_VERSION = 1
_DELTA = 0.5  # BM25L / BM25+ delta (bm25s's default; KeywordSettings has no field for it)
_TF_MAX = 65_535  # term frequencies are stored as uint16
_MERGE_MIN_ROWS = 2048  # an append segment is merged past max(this, _MERGE_FRACTION of the live rows)
_MERGE_FRACTION = 0.1
_COMPACT_MIN_DEAD = 256  # a partition is compacted past max(this, a third of its rows) tombstones
_MAX_CHANGES = 50_000  # catch-up applies at most max(this, half the account) changed ids, else reloads
_RESAVE_MIN_ROWS = 1024  # a derived file is rewritten once max(this, a tenth of the rows) were applied since it
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KeywordDoc:
    """One indexed record: the text BM25 scores plus the fields a :class:`VectorFilter` restricts on."""

    id: str
    text: str
    account_id: str
    uri: str = ""
    parent_uri: str | None = None
    owner_space: str = "shared"
    context_type: str = "resource"
    category: str = ""
    level: int = 2
    doc_id: str = ""
    chunk_index: int = 0
    breadcrumb: str = ""

    @classmethod
    def from_vector_record(cls, r: VectorRecord) -> KeywordDoc:
        """The keyword record of a vector row: same id and filter fields, text from :func:`keyword_text`."""
        return cls(
            id=r.id,
            text=keyword_text(r),
            account_id=r.account_id,
            uri=r.uri,
            parent_uri=r.parent_uri,
            owner_space=r.owner_space,
            context_type=r.context_type,
            category=r.category,
            level=r.level,
            doc_id=r.doc_id,
            chunk_index=r.chunk_index,
            breadcrumb=r.breadcrumb,
        )


def keyword_text(r: VectorRecord) -> str:
    """What BM25 reads for a vector row: the breadcrumb (heading path, starting with the title), the context (a
    message's neighbouring turns) and the text, twice when there is a context (:func:`_join`); nothing for a
    conversation message indexed alone that carries no content of its own (an acknowledgement, a question back:
    :func:`~context_engine.storage.keyword.content_words.carries_content`), which stays in the vector index.

    The same fields the embedding input is built from (DESIGN §4), so both retrievers see the same words.
    """
    return _indexed_text(r.uri, r.level, r.breadcrumb, r.context, r.text)


def _indexed_text(uri: str, level: int, breadcrumb: str, context: str, text: str) -> str:
    # A conversation message that carries no content of its own (an acknowledgement, a question back; indexed with
    # no context, ingest/conversation.py) is no keyword document: it has nothing for BM25 to match, and as a row it
    # would only shift N and avgdl (a session full of "Noted!" lowered locomo_dev R@10 by 0.013; eval/README.md).
    if level == 0 and not context:
        speaker = message_speaker(uri, text)
        if speaker is not None and not carries_content(text[len(speaker) + 2 :], None, (speaker,)):
            return ""
    return _join(breadcrumb, context, text)


def _join(breadcrumb: str, context: str, text: str) -> str:
    # A record with context (a conversation message, ingest/conversation.py) counts its own words twice: a field
    # weight of 2 for the text against 1 for the neighbouring messages (BM25F-style), so the message that says a
    # thing outranks the one that only borrows its words (locomo_dev R@10 0.746 -> 0.753, eval/README.md).
    parts = (breadcrumb, context, text, text) if context else (breadcrumb, text)
    return "\n".join(part for part in parts if part)


class KeywordHit(BaseModel):
    """A keyword search hit. ``score`` is the BM25 score (higher is better, > 0, query-dependent scale).

    ``text`` is what BM25 scored (:func:`keyword_text` of the record: breadcrumb, context and text).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    score: float
    score_label: Literal["bm25"] = "bm25"
    coverage: float = 0.0
    uri: str
    parent_uri: str | None
    owner_space: str
    context_type: str
    category: str
    level: int
    doc_id: str
    chunk_index: int
    text: str
    breadcrumb: str = ""


def _grown(arr: np.ndarray, need: int, used: int) -> np.ndarray:
    """``arr`` if it holds ``need`` entries, else a copy at least twice as long with its first ``used`` entries."""
    if need <= arr.shape[0]:
        return arr
    new = np.zeros(max(need, 2 * arr.shape[0]), dtype=arr.dtype)
    new[:used] = arr[:used]
    return new


@dataclass(frozen=True, slots=True)
class _Main:
    """An immutable main segment: the postings of term ``t`` are ``rows/tfs[indptr[t]:indptr[t + 1]]``, rows
    ascending (tombstoned rows dropped at build time; rows killed since are masked by the reader)."""

    indptr: np.ndarray  # int64, (terms + 1,)
    rows: np.ndarray  # int32
    tfs: np.ndarray  # uint16

    def postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        if term + 1 >= self.indptr.shape[0]:
            return _NO_ROWS, _NO_TFS
        start, end = int(self.indptr[term]), int(self.indptr[term + 1])
        return self.rows[start:end], self.tfs[start:end]


_NO_ROWS = np.zeros(0, dtype=np.int32)
_NO_TFS = np.zeros(0, dtype=np.uint16)
_EMPTY_MAIN = _Main(np.zeros(1, dtype=np.int64), _NO_ROWS, _NO_TFS)


def _build_main(
    n: int, alive: np.ndarray, fwd_start: np.ndarray, fwd_terms: np.ndarray, fwd_tfs: np.ndarray, vocab: int
) -> _Main:
    """A main segment of the live rows below ``n`` from the forward index (postings of dead rows dropped)."""
    used = int(fwd_start[n])
    counts = np.diff(fwd_start[: n + 1])
    entry_rows = np.repeat(np.arange(n, dtype=np.int32), counts)
    keep = alive[:n][entry_rows]
    terms = fwd_terms[:used][keep]
    order = np.argsort(terms, kind="stable")  # stable: rows stay ascending within a term
    indptr = np.zeros(vocab + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=vocab), out=indptr[1:])
    return _Main(indptr, entry_rows[keep][order], fwd_tfs[:used][keep][order])


class _Partition(RowTable):
    """The records of one ``(account_id, level)``: a :class:`RowTable`, the forward index, the statistics of the live
    rows, and the main and append segments (module docstring).

    Not thread-safe: the owning account serialises writers and guards what readers capture (``_Account``).
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
        """Append records (ids not live here; see ``_Account.add``) with their encoded tokens and publish them.

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
        return _build_main(n, self.alive[:n], self.fwd_start, self.fwd_terms, self.fwd_tfs, len(self.term_of)), n

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
            main = _build_main(n, alive, self.fwd_start, self.fwd_terms, self.fwd_tfs, len(terms))
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
            }
        )
        arrays[prefix + "terms.utf8"], arrays[prefix + "terms.offsets"] = pack_strings(terms)
        return meta, arrays

    @classmethod
    def restored(cls, account_id: str, meta: dict[str, Any], arrays: dict, prefix: str) -> _Partition:
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
        part.main = _Main(indptr, arrays[prefix + "main.rows"], arrays[prefix + "main.tfs"])
        part.main_rows = n
        part.empty = int(np.count_nonzero((part.doc_len == 0) & part.alive[:n]))
        if not (
            len(terms) == len(part.term_of) == vocab == part.df.shape[0] >= indptr.shape[0] - 1
            and part.doc_len.shape[0] == n
            and part.fwd_start.shape[0] == n + 1
            and part.fwd_terms.shape[0] == part.fwd_tfs.shape[0] == int(part.fwd_start[n])
            and part.main.rows.shape[0] == part.main.tfs.shape[0] == int(indptr[-1])
        ):
            raise ValueError("BM25 partition arrays do not match")
        return part

    def swap_main(self, main: _Main, rows: int) -> None:
        """Install a main segment covering the rows below ``rows`` (no row was added since it was built)."""
        self.main, self.main_rows, self.tail = main, rows, {}

    def compacted(self) -> _Partition:
        """A new partition holding the live rows only (same order), its vocabulary reduced to the live terms."""
        live = np.flatnonzero(self.alive[: self.n])
        out = _Partition(self.account_id, self.part_level, capacity=max(256, live.size))
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
    def capture(self, q_tokens: Sequence[str], flts: Sequence[VectorFilter | None]) -> _View | None:
        """What a search reads of this partition, copied out (under the account's view lock): the query's postings,
        the tombstones below ``n`` and ``flts`` (``None``: a filter that excludes this partition's level), applied to
        the scored rows by :meth:`_View.top` (rows below ``n`` never change but for their tombstone)."""
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
        alive = self.alive[:n].copy()  # the filters are applied to the scored rows only (_View.top)
        return _View(self, n, live, self.total_len, terms, self.main, tails, list(flts), alive, self.doc_len, bound)


@dataclass(frozen=True, slots=True)
class _View:
    """One partition as a search sees it: the query terms' postings and statistics, the tombstones and the filters."""

    part: _Partition
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

    def top(self, top_k: int, settings: KeywordSettings) -> list[list[tuple[float, str, int]]]:
        """Per filter mask, ``(score, id, row)`` of the best ``top_k`` rows passing it with score > 0 (and every row
        tied with the k-th, so that ties resolve by id in the caller). The postings are scored once for all."""
        scored = self._scored(settings)
        out: list[list[tuple[float, str, int]]] = []
        ids = self.part.ids
        for flt in self.flts:
            if scored is None or flt is None:
                out.append([])
                continue
            cand, scores = scored
            keep = self.part.mask_rows(flt, self.n, cand, self.alive)
            cand, scores = cand[keep], scores[keep]
            if cand.size > top_k:
                kth = np.partition(scores, cand.size - top_k)[cand.size - top_k]
                keep = scores >= kth  # every row tied with the k-th: ties resolve by id
                cand, scores = cand[keep], scores[keep]
            out.append([(float(s), ids[r], r) for r, s in zip(cand.tolist(), scores.tolist(), strict=True)])
        return out

    def _scored(self, settings: KeywordSettings) -> tuple[np.ndarray, np.ndarray] | None:
        """Rows with a score > 0 (live or not: :meth:`top` filters them) and their BM25 scores."""
        method, k1, b = settings.method, settings.k1, settings.b
        dfs = np.asarray([df for _, _, df in self.terms], dtype=np.float64)
        weights = np.asarray([c for _, c, _ in self.terms], dtype=np.float64) * _idf(method, dfs, self.live)
        row_parts: list[np.ndarray] = []
        tf_parts: list[np.ndarray] = []
        for (tid, _, _), (tail_rows, tail_tfs) in zip(self.terms, self.tails, strict=True):
            main_rows, main_tfs = self.main.postings(tid)
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
        if rows.size * 8 > self.n:
            summed = np.bincount(rows, weights=contrib, minlength=self.n)
            cand = np.flatnonzero(summed > 0)
            scores = summed[cand]
        else:
            cand, inverse = np.unique(rows, return_inverse=True)
            scores = np.bincount(inverse, weights=contrib, minlength=cand.size)
            keep = scores > 0
            cand, scores = cand[keep], scores[keep]
        if base:
            scores = scores + float(weights.sum()) * base  # the non-occurrence part of BM25L / BM25+
        return cand, scores


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


class _Account:
    """One account's partitions (by level) and the generation they hold.

    ``write_lock`` serialises writers (catch-up, direct writes, merges); ``view_lock`` is held by writers while they
    change what readers see, and by readers while they capture (never while a merge or a compaction builds).
    """

    def __init__(self, account_id: str, *, by_uri: bool) -> None:
        self.account_id = account_id
        self.generation: int | None = None  # None: not loaded from a store
        self.parts: dict[int, _Partition] = {}
        self.by_uri: dict[str, set[str]] | None = {} if by_uri else None  # uri -> ids (indexes without a source)
        self.unsaved = 0  # records applied from the change log since the state its derived file holds
        self.write_lock = threading.Lock()
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
                part = self.parts[level] = _Partition(self.account_id, level)
            part.add([rows[i] for i in idx], part.encode([tokens[i] for i in idx]))
            if texts is not None:
                part.texts.update((rows[i].id, texts[i]) for i in idx)
            if self.by_uri is not None:
                for i in idx:
                    self.by_uri.setdefault(rows[i].uri, set()).add(rows[i].id)

    def maintain(self, *, force: bool = False) -> int:
        """Compact or merge the partitions past their thresholds (every one with work when ``force``); each new
        structure is built outside the view lock and swapped in under it (write lock held). Returns the merges."""
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


def _partitions_of_matrix(
    account_id: str, m: VectorMatrix, tokenizer: KeywordTokenizer, keep_texts: bool
) -> dict[int, _Partition]:
    """Partitions built from a store snapshot (tokenises every row; main segments built at once)."""
    parts: dict[int, _Partition] = {}
    levels = m.level
    for level in sorted({int(v) for v in levels.tolist()}):
        idx = np.flatnonzero(levels == level).tolist()
        rows = [
            RowFields(
                m.ids[i],
                m.uri[i],
                m.parent_uri[i],
                m.owner_space[i],
                m.context_type[i],
                m.category[i],
                level,
                m.doc_id[i],
                int(m.chunk_index[i]),
            )
            for i in idx
        ]
        texts = [_indexed_text(m.uri[i], level, m.breadcrumb[i], m.context[i], m.text[i]) for i in idx]
        part = _Partition(account_id, level, capacity=max(256, len(idx)))
        part.add(rows, part.encode([tokenizer(t) for t in texts]), to_tail=False)
        part.swap_main(*part.build_main())
        if keep_texts:
            part.texts = {m.ids[i]: (t, m.breadcrumb[i]) for i, t in zip(idx, texts, strict=True)}
        parts[level] = part
    return parts


class BM25Index:
    """BM25 over keyword records, with the same pre-filter as the vector index (DESIGN §3, §7.1).

    Thread-safe. With a ``source`` (the metadata store) every search sees the committed records of its account, of
    this process or another (module docstring): an account is loaded on its first search and caught up from the
    change log before each later one; opening an engine therefore costs nothing until a keyword search runs. Like the
    vector index, the records of ``pending`` nodes are included: callers drop hits whose node is not ``indexed``, as
    ``ContextEngineService.search`` does. Without a source, feed it with :meth:`upsert` / :meth:`delete`, or use it as
    a :class:`~context_engine.ingest.pipeline.WriteListener` (``pipeline.add_listener(index)``).

    Args:
        settings: the ``keyword`` settings section (BM25 parameters and tokenisation).
        tokenizer: overrides the tokenizer built from ``settings``.
        source: a :class:`~context_engine.storage.protocols.MetadataStore` to load and catch up accounts from.

        files: where accounts are kept as files (``<home>/derived``, with a ``source`` only;
            :mod:`context_engine.storage.derived_files`): an account is opened from its file and caught up from the
            change log instead of being loaded and tokenised; a wholesale load, or ``max(1024, rows / 10)`` records
            applied since the file, writes it again on a background thread.

    Attributes:
        docs_indexed: records tokenised and added (loads, catch-up and direct writes).
        loads: accounts loaded wholesale from a store (first search, a change log that did not reach back,
            :meth:`rebuild`).
        file_loads: accounts opened from their derived file.
        merges: append segments merged and partitions compacted.
    """

    name = "bm25"

    def __init__(
        self,
        settings: KeywordSettings | None = None,
        tokenizer: KeywordTokenizer | None = None,
        *,
        source: Any = None,
        files: DerivedFiles | None = None,
    ) -> None:
        self._source = source
        self._files = files if source is not None else None
        self._saves = BackgroundSaves("ce-derived-bm25", "BM25")
        self.settings = settings or KeywordSettings()
        self.tokenizer = tokenizer or KeywordTokenizer(
            stem=self.settings.stem,
            stopwords=self.settings.stopwords,
            split_identifiers=self.settings.split_identifiers,
            cjk=self.settings.cjk,
        )
        self._accounts: dict[str, _Account] = {}
        self._lock = threading.Lock()  # guards _accounts and the counters
        self.docs_indexed = 0
        self.loads = 0
        self.file_loads = 0
        self.merges = 0

    def _account(self, account_id: str, *, create: bool) -> _Account | None:
        with self._lock:
            account = self._accounts.get(account_id)
            if account is None and create:
                account = self._accounts[account_id] = _Account(account_id, by_uri=self._source is None)
            return account

    def _count(self, *, indexed: int = 0, loads: int = 0, merges: int = 0, file_loads: int = 0) -> None:
        with self._lock:
            self.docs_indexed += indexed
            self.loads += loads
            self.merges += merges
            self.file_loads += file_loads

    # ---- writes ---------------------------------------------------------------------------------------------------
    def upsert(self, docs: Iterable[KeywordDoc | VectorRecord]) -> None:
        """Insert or replace records by ``id`` (a :class:`VectorRecord` is converted with :func:`keyword_text`); their
        texts are kept for the hits.

        Tokenises outside the locks; O(the records' tokens) plus, now and then, a merge. With a ``source`` these
        records are replaced by the store's at the account's next wholesale load.
        """
        prepared = [(d if isinstance(d, KeywordDoc) else KeywordDoc.from_vector_record(d)) for d in docs]
        by_account: dict[str, list[int]] = {}
        for i, d in enumerate(prepared):
            by_account.setdefault(d.account_id, []).append(i)
        tokens = [self.tokenizer(d.text) for d in prepared]
        for account_id, idx in by_account.items():
            account = self._account(account_id, create=True)
            assert account is not None
            self._write(
                account,
                [],
                [prepared[i] for i in idx],
                [tokens[i] for i in idx],
                [(prepared[i].text, prepared[i].breadcrumb) for i in idx],
            )

    def delete(self, account_id: str, ids: Sequence[str]) -> None:
        """Delete records of ``account_id`` by ``id``; unknown ids are ignored."""
        account = self._account(account_id, create=False)
        if account is not None:
            self._write(account, list(ids), [], [], None)

    def delete_uris(self, account_id: str, uris: Sequence[str]) -> None:
        """Delete every record whose ``uri`` is one of ``uris`` (all levels and chunks).

        O(the records) without a source; with one, a scan of the account's rows (the engine never calls it then).
        """
        account = self._account(account_id, create=False)
        if account is None:
            return
        with account.write_lock:
            if account.by_uri is not None:
                ids = [rid for uri in uris for rid in account.by_uri.get(uri, ())]
            else:
                wanted = set(uris)
                ids = [
                    p.ids[r] for p in account.parts.values() for r in range(p.n) if p.alive[r] and p.uris[r] in wanted
                ]
            self._apply(account, ids, [], [], None)

    def _write(
        self,
        account: _Account,
        removed: Sequence[str],
        rows: Sequence[Any],
        tokens: Sequence[list[str]],
        texts: Sequence[tuple[str, str]] | None,
    ) -> None:
        with account.write_lock:
            self._apply(account, removed, rows, tokens, texts)

    def _apply(
        self,
        account: _Account,
        removed: Sequence[str],
        rows: Sequence[Any],
        tokens: Sequence[list[str]],
        texts: Sequence[tuple[str, str]] | None,
        generation: int | None = None,
    ) -> None:
        """Apply removals and upserts (write lock held), then merge what passed its threshold."""
        with account.view_lock:
            for rid in removed:
                account.remove(rid)
            account.add(rows, tokens, texts)
            if generation is not None:
                account.generation = generation
        merges = account.maintain()
        self._count(indexed=len(rows), merges=merges)
        if generation is not None and self._files is not None:
            account.unsaved += len(removed) + len(rows)
            if account.unsaved > max(_RESAVE_MIN_ROWS, account.rows // 10):
                self._schedule_save(account)

    # ---- WriteListener --------------------------------------------------------------------------------------------
    def nodes_written(self, account_id: str, nodes: Sequence[NodeRecord], vectors: Sequence[VectorRecord]) -> None:
        """Replace every record of ``nodes`` by ``vectors`` (their level-0 and level-2 rows).

        A no-op with a ``source``: the change log is the one rule (the next search catches up).
        """
        if self._source is not None:
            return
        self.delete_uris(account_id, [n.uri for n in nodes])
        self.upsert([v for v in vectors if v.account_id == account_id])

    def nodes_deleted(self, account_id: str, uris: Sequence[str]) -> None:
        """Drop every record of ``uris`` (a no-op with a ``source``, see :meth:`nodes_written`)."""
        if self._source is not None:
            return
        self.delete_uris(account_id, uris)

    def rebuild(self, metadata: Any, account_id: str | None = None) -> int:
        """Reload from the vector rows of a :class:`MetadataStore` (``load_vector_matrix``); returns the row count.

        Replaces what the index held for ``account_id`` (every account of ``metadata`` and every held one when
        ``None``). Without a ``source`` the texts are kept (nothing else could serve them).
        """
        if account_id is not None:
            accounts = [account_id]
        else:
            with self._lock:
                held = set(self._accounts)
            accounts = sorted(held | set(metadata.accounts()))
        n = 0
        for acc in accounts:
            account = self._account(acc, create=True)
            assert account is not None
            with account.write_lock:
                n += self._load(account, metadata)
        return n

    def _load(self, account: _Account, metadata: Any) -> int:
        """Replace the account's partitions by a snapshot of ``metadata`` (write lock held); returns its rows."""
        m: VectorMatrix = metadata.load_vector_matrix(account.account_id, with_vectors=False)
        keep_texts = self._source is None
        parts = _partitions_of_matrix(account.account_id, m, self.tokenizer, keep_texts)
        by_uri: dict[str, set[str]] | None = None
        if account.by_uri is not None:
            by_uri = {}
            for i, uri in zip(m.ids, m.uri.tolist(), strict=True):
                by_uri.setdefault(uri, set()).add(i)
        with account.view_lock:
            account.parts = parts
            account.by_uri = by_uri
            account.generation = m.generation
        account.unsaved = m.n
        self._count(indexed=m.n, loads=1)
        if self._files is not None and self._source is metadata and m.n:  # an empty account: no file
            self._schedule_save(account)
        return m.n

    # ---- files (storage/derived_files.py) ------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        """What shapes a derived file besides the records: the tokenizer (BM25's k1, b and method apply at query
        time)."""
        # "text": the rule of keyword_text (2: content-free messages hold no tokens), so files built by another
        # rule are rebuilt rather than mixed with rows indexed by this one.
        return {"tokenizer": self.tokenizer.config, "text": 2}

    def _restore(self, account: _Account) -> bool:
        """Replace a never-loaded account by its derived file (write lock held); ``False`` when there is no usable
        file."""
        if self._files is None:
            return False
        snap = self._files.load("bm25", account.account_id, self._params())
        if snap is None:
            return False
        try:
            parts = {
                int(m["level"]): _Partition.restored(account.account_id, m, snap.arrays, f"p{i}.")
                for i, m in enumerate(snap.meta["partitions"])
            }
        except (KeyError, ValueError, TypeError, IndexError) as err:
            self._files._reject(snap.path, f"does not hold BM25 partitions ({type(err).__name__}: {err})"[:200])
            return False
        with account.view_lock:
            account.parts = parts
            account.generation = snap.generation
        account.unsaved = 0
        self._count(file_loads=1)
        return True

    def _schedule_save(self, account: _Account) -> None:
        """Write the account's derived file on the background saver (once at a time per account)."""
        if self._files is not None:
            self._saves.submit(account.account_id, lambda: self._save_account(account))

    def save_files(self, account_id: str | None = None) -> int:
        """Write the derived files of the held accounts (or of one) now; returns the files written (none without
        ``files``)."""
        if self._files is None:
            return 0
        with self._lock:
            accounts = [a for a in self._accounts.values() if account_id is None or a.account_id == account_id]
        return sum(self._save_account(a) for a in accounts)

    def _save_account(self, account: _Account) -> bool:
        assert self._files is not None
        with account.write_lock:
            generation, unsaved = account.generation, account.unsaved
            if generation is None:
                return False
            captured = [(part, part.capture_state()) for _, part in sorted(account.parts.items())]
        metas: list[dict[str, Any]] = []
        arrays: dict[str, np.ndarray] = {}
        for i, (part, cap) in enumerate(captured):
            meta, part_arrays = part.snapshot(f"p{i}.", cap)
            metas.append(meta)
            arrays.update(part_arrays)
        saved = self._files.save("bm25", account.account_id, generation, self._params(), {"partitions": metas}, arrays)
        if saved is None:
            return False
        with account.write_lock:
            account.unsaved -= unsaved
        return True

    def close(self) -> None:
        """Wait for the derived files being written (a process that exits right after still leaves them whole)."""
        self._saves.close()

    def _current(self, account_id: str, generation: int | None = None) -> _Account | None:
        """The account, caught up to (at least) its committed generation when the index has a source
        (``generation``: the committed value when the caller just read it)."""
        if self._source is None:
            return self._account(account_id, create=False)
        if generation is None:
            generation = self._source.account_generation(account_id)
        account = self._account(account_id, create=True)
        assert account is not None
        if account.generation == generation:
            return account
        with account.write_lock:
            if account.generation == generation:
                return account  # caught up by another thread meanwhile
            if account.generation is None and self._restore(account) and account.generation == generation:
                return account  # its derived file is current
            if account.generation is not None:
                delta: IndexDelta = self._source.changes_since(
                    account_id, account.generation, max_changes=max(_MAX_CHANGES, account.rows // 2)
                )
                if not delta.reload:
                    tokens = [self.tokenizer(keyword_text(r)) for r in delta.upserted]
                    self._apply(account, delta.removed, delta.upserted, tokens, None, delta.generation)
                    return account
            self._load(account, self._source)  # never loaded, or the change log does not reach back
        return account

    # ---- reads ----------------------------------------------------------------------------------------------------
    def search(
        self, query: str, top_k: int, flt: VectorFilter, *, generation: int | None = None, with_text: bool = True
    ) -> list[KeywordHit]:
        """The ``top_k`` records passing ``flt`` with the highest BM25 score for ``query``.

        With a ``source``, catches the account up first (module docstring) and reads the hits' texts from it (one
        query); a hit whose record was deleted from the store meanwhile is dropped.

        Args:
            query: free text, tokenised like the documents.
            top_k: hits wanted; ``<= 0`` returns none.
            flt: the pre-filter (the account is mandatory; ``None`` fields do not restrict).
            generation: the account's committed generation when the caller just read it (one read saved).
            with_text: ``False`` returns hits with empty ``text`` and ``breadcrumb`` and reads nothing from the
                store (a caller that has the texts elsewhere, e.g. the level-0 matrix of search_memory; hits are
                then at the captured generation, including a record deleted since).

        Returns:
            Hits with score > 0, ordered by score descending, ties by ``id`` ascending. When ``flt.levels`` is
            ``None`` every level is searched and the lists merged by score.

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when scoring or reading the store fails.
        """
        return self.search_many(query, top_k, [flt], generation=generation, with_text=with_text)[0]

    def search_many(
        self,
        query: str,
        top_k: int,
        flts: Sequence[VectorFilter],
        *,
        generation: int | None = None,
        with_text: bool = True,
    ) -> list[list[KeywordHit]]:
        """:meth:`search` of one query under several filters of one account (search_memory's typed queries): the
        postings are read and scored once, each filter's mask applied after. Returns one hit list per filter, each
        exactly what :meth:`search` returns for it.

        Raises:
            ValueError: when the filters name different accounts.
            ContextEngineError: ``RET-5001`` (retryable) when scoring or reading the store fails.
        """
        if not flts:
            return []
        if len({f.account_id for f in flts}) > 1:
            raise ValueError("search_many: every filter must name the same account")
        if top_k <= 0:
            return [[] for _ in flts]
        q_tokens = self.tokenizer(query)
        if not q_tokens:
            return [[] for _ in flts]
        account_id = flts[0].account_id
        try:
            account = self._current(account_id, generation)
            if account is None:
                return [[] for _ in flts]
            with account.view_lock:
                views = [
                    part.capture(q_tokens, [f if f.levels is None or level in f.levels else None for f in flts])
                    for level, part in sorted(account.parts.items())
                    if any(f.levels is None or level in f.levels for f in flts)
                ]
            found: list[list[tuple[float, str, _View, int]]] = [[] for _ in flts]
            for view in views:
                if view is not None:
                    for i, tops in enumerate(view.top(top_k, self.settings)):
                        found[i].extend((s, rid, view, r) for s, rid, r in tops)
            out: list[list[KeywordHit]] = []
            for hits in found:
                hits.sort(key=lambda h: (-h[0], h[1]))
                if with_text:
                    out.append(self._hits(account_id, hits[:top_k]))
                else:
                    out.append(
                        [_hit(view.part.row(row), score, view.bound, ("", "")) for score, _, view, row in hits[:top_k]]
                    )
            return out
        except ContextEngineError as err:
            if err.code == ErrorCode.VECTOR_SEARCH_FAILED:
                raise
            raise _search_failed(err) from err
        except (ValueError, IndexError, TypeError, KeyError, MemoryError) as err:
            raise _search_failed(err) from err

    def _hits(self, account_id: str, found: list[tuple[float, str, _View, int]]) -> list[KeywordHit]:
        texts: dict[str, tuple[str, str]] = {}
        missing: list[str] = []
        for _, rid, view, _ in found:
            text = view.part.texts.get(rid)
            if text is not None:
                texts[rid] = text
            else:
                missing.append(rid)
        if missing and self._source is not None:
            stored = self._source.get_vector_texts(account_id, missing)  # three columns, no vectors
            texts.update(
                (rid, (_join(breadcrumb, context, text), breadcrumb))
                for rid, (text, breadcrumb, context) in stored.items()
            )
        out: list[KeywordHit] = []
        for score, rid, view, row in found:
            text = texts.get(rid)
            if text is None:
                continue  # deleted since the search started
            out.append(_hit(view.part.row(row), score, view.bound, text))
        return out

    def count(self, account_id: str | None = None) -> int:
        """Records held (of one account, or all)."""
        with self._lock:
            accounts = [a for a in self._accounts.values() if account_id is None or a.account_id == account_id]
        return sum(a.rows for a in accounts)

    def optimize(self) -> None:
        """Merge every append segment and compact every partition with tombstones now (readers are not blocked)."""
        with self._lock:
            accounts = list(self._accounts.values())
        for account in accounts:
            with account.write_lock:
                self._count(merges=account.maintain(force=True))

    # ---- persistence ----------------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the records (JSON lines after a header with the format version and parameters) to ``path``.

        Texts not held (records loaded from a ``source``) are read from it.
        """
        with self._lock:
            accounts = list(self._accounts.values())
        docs: list[KeywordDoc] = []
        for account in accounts:
            with account.view_lock:
                held = [(p, r) for p in account.parts.values() for r in np.flatnonzero(p.alive[: p.n]).tolist()]
            stored: dict[str, VectorRecord] = {}
            missing = [p.ids[r] for p, r in held if p.ids[r] not in p.texts]
            if missing and self._source is not None:
                stored = self._source.get_vector_rows(account.account_id, missing)
            for part, row in held:
                rid = part.ids[row]
                text = part.texts.get(rid)
                if text is None:
                    rec = stored.get(rid)
                    text = (keyword_text(rec), rec.breadcrumb) if rec is not None else ("", "")
                r = part.row(row)
                docs.append(
                    KeywordDoc(
                        id=rid,
                        text=text[0],
                        account_id=account.account_id,
                        uri=r.uri,
                        parent_uri=r.parent_uri,
                        owner_space=r.owner_space,
                        context_type=r.context_type,
                        category=r.category,
                        level=r.level,
                        doc_id=r.doc_id,
                        chunk_index=r.chunk_index,
                        breadcrumb=text[1],
                    )
                )
        header = {
            "format": "context-engine-bm25",
            "version": _FORMAT_VERSION,
            "settings": self.settings.model_dump(mode="json"),
            "tokenizer": self.tokenizer.config,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(json.dumps(header) + "\n")
            for d in sorted(docs, key=lambda d: (d.account_id, d.id)):
                fh.write(json.dumps(asdict(d), ensure_ascii=False) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path, settings: KeywordSettings | None = None) -> BM25Index:
        """Read a file written by :meth:`save`; ``settings`` default to the saved ones.

        Raises:
            ContextEngineError: ``CFG-4001`` when the file is not a saved BM25 index of a known version.
        """
        with path.open(encoding="utf-8") as fh:
            header = json.loads(fh.readline() or "{}")
            if header.get("format") != "context-engine-bm25" or header.get("version") != _FORMAT_VERSION:
                raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"{path} is not a saved BM25 index (version 1)")
            index = cls(settings or KeywordSettings(**header["settings"]))
            index.upsert(KeywordDoc(**json.loads(line)) for line in fh if line.strip())
        return index


def _hit(r: RowFields, score: float, bound: float, text: tuple[str, str]) -> KeywordHit:
    return KeywordHit(
        id=r.id,
        score=score,
        coverage=min(1.0, score / bound) if bound > 0 else 0.0,
        uri=r.uri,
        parent_uri=r.parent_uri,
        owner_space=r.owner_space,
        context_type=r.context_type,
        category=r.category,
        level=r.level,
        doc_id=r.doc_id,
        chunk_index=r.chunk_index,
        text=text[0],
        breadcrumb=text[1],
    )


def _search_failed(err: Exception) -> ContextEngineError:
    return ContextEngineError(
        ErrorCode.VECTOR_SEARCH_FAILED,
        f"keyword search failed: {getattr(err, 'message', None) or f'{type(err).__name__}: {err}'}"[:300],
        {"index": "bm25", "error": getattr(err, "code", None) or type(err).__name__},
        retryable=True,
    )
