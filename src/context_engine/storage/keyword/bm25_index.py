"""The BM25 keyword index (DESIGN §7.1, §14): an inverted index over :class:`KeywordTokenizer` tokens, scored at
query time, per account and level.

A derived index like the vector index: the metadata store is the source of truth. With a ``source`` (the metadata
store) the index follows the one invalidation rule of the derived indexes (:mod:`context_engine.storage.changes`,
docs/derived_indexes.md): before each search of an account it reads the committed account generation and its token
(one primary-key read); when they moved, the changed rows are read from the change log (``changes_since``) and
applied, which costs O(changed records), or the account is reloaded wholesale (``load_vector_matrix``) on its first
search, when the log does not reach back or when the store's history no longer holds the state held (a restored
database). Writes of any process are therefore seen by the next search, with no listener
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
  ``df`` per term; a partition's scores after any sequence of adds and deletes are those of a fresh build of its
  live rows;
* a **main segment**: postings in CSR form (per-term offsets into int32 row and uint16 tf arrays), grouped within a
  term by the row's owner space (so a search whose filters name owner spaces scores only theirs), immutable once
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
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.conversation import message_speaker
from context_engine.schema.nodes import NodeRecord, VectorFilter, VectorRecord
from context_engine.settings import KeywordSettings
from context_engine.storage.changes import AccountState, IndexDelta, VectorMatrix
from context_engine.storage.derived.base import DerivedIndex, FileBuilder
from context_engine.storage.derived_files import DerivedFiles, Snapshot
from context_engine.storage.filters import RowFields
from context_engine.storage.keyword.bm25_partition import BM25Account, Partition, PartitionView
from context_engine.storage.keyword.content_words import carries_content
from context_engine.storage.keyword.tokenize import KeywordTokenizer

__all__ = ["BM25Index", "KeywordDoc", "KeywordHit", "KeywordScore", "keyword_text"]

_FORMAT_VERSION = 1
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

    ``text`` is what BM25 scored (:func:`keyword_text` of the record: breadcrumb, context and text). ``coverage`` is
    the score over its upper bound for the query (module docstring); ``matched`` the share of that bound (the
    query tokens' Lucene idf) whose tokens occur in the record at all, whatever their frequency or the record's
    length: 1 when the record holds every query token, 0..1.
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    score: float
    score_label: Literal["bm25"] = "bm25"
    coverage: float = 0.0
    matched: float = 0.0
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


class KeywordScore(NamedTuple):
    """A keyword hit reduced to what a fusion reads (:meth:`BM25Index.scores_many`): the record's ``id`` and ``uri``
    and the scores of :class:`KeywordHit` (``score``, ``coverage``, ``matched``), without decoding the other columns
    or building a model (search_memory ranks ~60 of them a request, issue 26)."""

    id: str
    uri: str
    score: float
    coverage: float
    matched: float


def _partitions_of_matrix(
    account_id: str, m: VectorMatrix, tokenizer: KeywordTokenizer, keep_texts: bool
) -> dict[int, Partition]:
    """Partitions built from a store snapshot (tokenises every row; main segments built at once)."""
    parts: dict[int, Partition] = {}
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
        part = Partition(account_id, level, capacity=max(256, len(idx)))
        part.add(rows, part.encode([tokenizer(t) for t in texts]), to_tail=False)
        part.swap_main(*part.build_main())
        if keep_texts:
            part.texts = {m.ids[i]: (t, m.breadcrumb[i]) for i, t in zip(idx, texts, strict=True)}
        parts[level] = part
    return parts


class BM25Index(DerivedIndex[BM25Account]):
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
        builder: writes a large account's file in a child process at its wholesale load (with ``files`` only;
            :class:`~context_engine.storage.derived.base.FileBuilder`).

    Attributes:
        docs_indexed: records tokenised and added (loads, catch-up and direct writes).
        loads: accounts loaded wholesale from a store (first search, a change log that did not reach back,
            :meth:`rebuild`); ``built_elsewhere``: those of them a child process built (``builder``), whose records
            are not in ``docs_indexed``.
        file_loads: accounts opened from their derived file.
        merges: append segments merged and partitions compacted.
    """

    name = "bm25"
    _holds = "BM25 partitions"

    def __init__(
        self,
        settings: KeywordSettings | None = None,
        tokenizer: KeywordTokenizer | None = None,
        *,
        source: Any = None,
        files: DerivedFiles | None = None,
        builder: FileBuilder | None = None,
    ) -> None:
        super().__init__(source, files=files, kind="bm25", saver=("ce-derived-bm25", "BM25"), builder=builder)
        self.settings = settings or KeywordSettings()
        self.tokenizer = tokenizer or KeywordTokenizer(
            stem=self.settings.stem,
            stopwords=self.settings.stopwords,
            split_identifiers=self.settings.split_identifiers,
            cjk=self.settings.cjk,
        )
        self.docs_indexed = 0
        self.merges = 0

    def _account(self, account_id: str, *, create: bool) -> BM25Account | None:
        with self._lock:
            account = self._accounts.get(account_id)
            if account is None and create:
                account = self._accounts[account_id] = BM25Account(account_id, by_uri=self._metadata is None)
            return account

    def _count(self, *, indexed: int = 0, merges: int = 0) -> None:
        with self._lock:
            self.docs_indexed += indexed
            self.merges += merges

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
            with account.lock:
                self._change(
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
            with account.lock:
                self._change(account, list(ids), [], [], None)

    def delete_uris(self, account_id: str, uris: Sequence[str]) -> None:
        """Delete every record whose ``uri`` is one of ``uris`` (all levels and chunks).

        O(the records) without a source; with one, a scan of the account's rows (the engine never calls it then).
        """
        account = self._account(account_id, create=False)
        if account is None:
            return
        with account.lock:
            if account.by_uri is not None:
                ids = [rid for uri in uris for rid in account.by_uri.get(uri, ())]
            else:
                wanted = set(uris)
                ids = [
                    p.ids[r] for p in account.parts.values() for r in range(p.n) if p.alive[r] and p.uris[r] in wanted
                ]
            self._change(account, ids, [], [], None)

    def _change(
        self,
        account: BM25Account,
        removed: Sequence[str],
        rows: Sequence[Any],
        tokens: Sequence[list[str]],
        texts: Sequence[tuple[str, str]] | None,
        state: AccountState | None = None,
    ) -> None:
        """Apply removals and upserts (account lock held), then merge what passed its threshold; ``state``: the
        generation and token they bring the account to (a change-log delta), set in the same view change."""
        with account.view_lock:
            for rid in removed:
                account.remove(rid)
            account.add(rows, tokens, texts)
            if state is not None:
                account.generation, account.token = state
        self._count(indexed=len(rows), merges=account.maintain())

    # ---- WriteListener --------------------------------------------------------------------------------------------
    def nodes_written(self, account_id: str, nodes: Sequence[NodeRecord], vectors: Sequence[VectorRecord]) -> None:
        """Replace every record of ``nodes`` by ``vectors`` (their level-0 and level-2 rows).

        A no-op with a ``source``: the change log is the one rule (the next search catches up).
        """
        if self._metadata is not None:
            return
        self.delete_uris(account_id, [n.uri for n in nodes])
        self.upsert([v for v in vectors if v.account_id == account_id])

    def nodes_deleted(self, account_id: str, uris: Sequence[str]) -> None:
        """Drop every record of ``uris`` (a no-op with a ``source``, see :meth:`nodes_written`)."""
        if self._metadata is not None:
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
            with account.lock:
                n += self._fill(account, metadata)
            with self._lock:
                self.loads += 1
            if self._files is not None and metadata is self._metadata and account.unsaved:
                self._schedule_save(account)
        return n

    def _fill(self, account: BM25Account, metadata: Any) -> int:
        """Replace the account's partitions by a snapshot of ``metadata`` (account lock held); returns its rows."""
        m: VectorMatrix = metadata.load_vector_matrix(account.account_id, with_vectors=False)
        keep_texts = self._metadata is None
        parts = _partitions_of_matrix(account.account_id, m, self.tokenizer, keep_texts)
        by_uri: dict[str, set[str]] | None = None
        if account.by_uri is not None:
            by_uri = {}
            for i, uri in zip(m.ids, m.uri.tolist(), strict=True):
                by_uri.setdefault(uri, set()).add(i)
        with account.view_lock:
            account.parts = parts
            account.by_uri = by_uri
            account.generation, account.token = m.generation, m.token
        account.unsaved = m.n
        self._count(indexed=m.n)
        return m.n

    # ---- DerivedIndex hooks (storage/derived/base.py) -------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        """What shapes a derived file besides the records: the tokenizer (BM25's k1, b and method apply at query
        time)."""
        # "text": the rule of keyword_text (2: content-free messages hold no tokens), so files built by another
        # rule are rebuilt rather than mixed with rows indexed by this one.
        # "postings": main segments grouped by owner space within a term (files from before lack main.spaces).
        return {"tokenizer": self.tokenizer.config, "text": 2, "postings": "by-space"}

    def _restored(self, account_id: str, snap: Snapshot) -> BM25Account:
        account = BM25Account(account_id, by_uri=False)
        account.parts = {
            int(m["level"]): Partition.restored(account_id, m, snap.arrays, f"p{i}.")
            for i, m in enumerate(snap.meta["partitions"])
        }
        account.generation = snap.generation  # and the file's token (set by DerivedIndex._restore)
        return account

    def _loaded(self, account_id: str) -> BM25Account:
        account = BM25Account(account_id, by_uri=False)
        self._fill(account, self._metadata)
        return account

    def _apply(self, account: BM25Account, delta: IndexDelta) -> None:
        tokens = [self.tokenizer(keyword_text(r)) for r in delta.upserted]
        self._change(account, delta.removed, delta.upserted, tokens, None, AccountState(delta.generation, delta.token))
        self._applied(account, len(delta.removed) + len(delta.upserted))

    def _snapshot(self, account: BM25Account) -> tuple[AccountState, int, dict[str, Any], dict[str, np.ndarray]] | None:
        with account.lock:
            generation, token, unsaved = account.generation, account.token, account.unsaved
            if generation is None:
                return None
            captured = [(part, part.capture_state()) for _, part in sorted(account.parts.items())]
        metas: list[dict[str, Any]] = []
        arrays: dict[str, np.ndarray] = {}
        for i, (part, cap) in enumerate(captured):
            meta, part_arrays = part.snapshot(f"p{i}.", cap)
            metas.append(meta)
            arrays.update(part_arrays)
        return AccountState(generation, token), unsaved, {"partitions": metas}, arrays

    def save_files(self, account_id: str | None = None) -> int:
        """Write the derived files of the held accounts (or of one) now; returns the files written (none without
        ``files``)."""
        if self._files is None:
            return 0
        return sum(self.save_file(a) for a in self._held_accounts(account_id))

    # ---- reads ----------------------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        top_k: int,
        flt: VectorFilter,
        *,
        generation: AccountState | int | None = None,
        with_text: bool = True,
    ) -> list[KeywordHit]:
        """The ``top_k`` records passing ``flt`` with the highest BM25 score for ``query``.

        With a ``source``, catches the account up first (module docstring) and reads the hits' texts from it (one
        query); a hit whose record was deleted from the store meanwhile is dropped.

        Args:
            query: free text, tokenised like the documents.
            top_k: hits wanted; ``<= 0`` returns none.
            flt: the pre-filter (the account is mandatory; ``None`` fields do not restrict).
            generation: the account's committed :class:`AccountState` when the caller just read it (one read
                saved; a bare generation number saves nothing: :meth:`DerivedIndex._current`).
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
        generation: AccountState | int | None = None,
        with_text: bool = True,
    ) -> list[list[KeywordHit]]:
        """:meth:`search` of one query under several filters of one account (search_memory's typed queries): the
        postings are read and scored once, each filter's mask applied after. Returns one hit list per filter, each
        exactly what :meth:`search` returns for it.

        Raises:
            ValueError: when the filters name different accounts.
            ContextEngineError: ``RET-5001`` (retryable) when scoring or reading the store fails.
        """
        account_id = flts[0].account_id if flts else ""
        out: list[list[KeywordHit]] = []
        for found in self._found(query, top_k, flts, generation):
            if with_text:
                out.append(self._hits(account_id, found))
            else:
                out.append(
                    [
                        _hit(view.part.row(row), score, view.bound, ("", ""), matched)
                        for score, _, view, row, matched in found
                    ]
                )
        return out

    def scores_many(
        self, query: str, top_k: int, flts: Sequence[VectorFilter], *, generation: AccountState | int | None = None
    ) -> list[list[KeywordScore]]:
        """:meth:`search_many` without texts (``with_text=False``), each hit reduced to a :class:`KeywordScore`:
        the same records, order and scores, at the captured generation (a record deleted since included).

        Raises:
            ValueError: when the filters name different accounts.
            ContextEngineError: ``RET-5001`` (retryable) when scoring fails.
        """
        out: list[list[KeywordScore]] = []
        for found in self._found(query, top_k, flts, generation):
            hits: list[KeywordScore] = []
            for score, rid, view, row, matched in found:
                bound = view.bound
                hits.append(
                    KeywordScore(
                        rid,
                        view.part.uris[row],
                        score,
                        min(1.0, score / bound) if bound > 0 else 0.0,
                        min(1.0, matched / bound) if bound > 0 else 0.0,
                    )
                )
            out.append(hits)
        return out

    def _found(
        self, query: str, top_k: int, flts: Sequence[VectorFilter], generation: AccountState | int | None
    ) -> list[list[tuple[float, str, PartitionView, int, float]]]:
        """Each filter's best ``top_k`` as ``(score, id, view, row, matched)``, best first (ties by id)."""
        if not flts:
            return []
        if len({f.account_id for f in flts}) > 1:
            raise ValueError("search_many: every filter must name the same account")
        if top_k <= 0:
            return [[] for _ in flts]
        q_tokens = self.tokenizer(query)
        if not q_tokens:
            return [[] for _ in flts]
        try:
            account = self._current(flts[0].account_id, generation)
            if account is None:
                return [[] for _ in flts]
            return self._search_account(account, q_tokens, top_k, flts)
        except ContextEngineError as err:
            if err.code == ErrorCode.VECTOR_SEARCH_FAILED:
                raise
            raise _search_failed(err) from err
        except (ValueError, IndexError, TypeError, KeyError, MemoryError) as err:
            raise _search_failed(err) from err

    def _search_account(
        self,
        account: BM25Account,
        q_tokens: list[str],
        top_k: int,
        flts: Sequence[VectorFilter],
    ) -> list[list[tuple[float, str, PartitionView, int, float]]]:
        """The body of :meth:`_found` on one loaded account: capture the partitions' views under the lock, score
        once, one best-first list per filter."""
        with account.view_lock:
            views = [
                part.capture(q_tokens, [f if f.levels is None or level in f.levels else None for f in flts])
                for level, part in sorted(account.parts.items())
                if any(f.levels is None or level in f.levels for f in flts)
            ]
        found: list[list[tuple[float, str, PartitionView, int, float]]] = [[] for _ in flts]
        for view in views:
            if view is not None:
                for i, tops in enumerate(view.top(top_k, self.settings)):
                    found[i].extend((s, rid, view, r, m) for s, rid, r, m in tops)
        for hits in found:
            hits.sort(key=lambda h: (-h[0], h[1]))
            del hits[top_k:]
        return found

    def _hits(self, account_id: str, found: list[tuple[float, str, PartitionView, int, float]]) -> list[KeywordHit]:
        texts: dict[str, tuple[str, str]] = {}
        missing: list[str] = []
        for _, rid, view, _, _ in found:
            text = view.part.texts.get(rid)
            if text is not None:
                texts[rid] = text
            else:
                missing.append(rid)
        if missing and self._metadata is not None:
            stored = self._metadata.get_vector_texts(account_id, missing)  # three columns, no vectors
            texts.update(
                (rid, (_join(breadcrumb, context, text), breadcrumb))
                for rid, (text, breadcrumb, context) in stored.items()
            )
        out: list[KeywordHit] = []
        for score, rid, view, row, matched in found:
            text = texts.get(rid)
            if text is None:
                continue  # deleted since the search started
            out.append(_hit(view.part.row(row), score, view.bound, text, matched))
        return out

    def count(self, account_id: str | None = None) -> int:
        """Records held (of one account, or all)."""
        return sum(a.rows for a in self._held_accounts(account_id))

    def optimize(self) -> None:
        """Merge every append segment and compact every partition with tombstones now (readers are not blocked)."""
        for account in self._held_accounts():
            with account.lock:
                self._count(merges=account.maintain(force=True))

    # ---- persistence ----------------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the records (JSON lines after a header with the format version and parameters) to ``path``.

        Texts not held (records loaded from a ``source``) are read from it.
        """
        docs: list[KeywordDoc] = []
        for account in self._held_accounts():
            with account.view_lock:
                held = [(p, r) for p in account.parts.values() for r in np.flatnonzero(p.alive[: p.n]).tolist()]
            stored: dict[str, VectorRecord] = {}
            missing = [p.ids[r] for p, r in held if p.ids[r] not in p.texts]
            if missing and self._metadata is not None:
                stored = self._metadata.get_vector_rows(account.account_id, missing)
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


def _hit(r: RowFields, score: float, bound: float, text: tuple[str, str], matched: float) -> KeywordHit:
    return KeywordHit(
        id=r.id,
        score=score,
        coverage=min(1.0, score / bound) if bound > 0 else 0.0,
        matched=min(1.0, matched / bound) if bound > 0 else 0.0,
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
