"""The BM25 keyword index (DESIGN §7.1, §14): ``bm25s`` over :class:`KeywordTokenizer` tokens, per account and level.

A derived index like the vector index: the metadata store is the source of truth, the write pipeline keeps this index
in sync through :class:`~context_engine.ingest.pipeline.WriteListener` (:meth:`BM25Index.nodes_written`,
:meth:`BM25Index.nodes_deleted`), and :meth:`BM25Index.rebuild` restores it from the vector rows kept in the metadata
store (each row carries its text). One bm25s model is kept per ``(account_id, level)`` so that the IDF statistics of
level-0 abstracts and level-2 chunks never mix and no tenant's vocabulary leaks into another's scores. bm25s has no
incremental update: a write marks the partition stale and the next search re-indexes it (about 1 s per 5k documents
on 2 cores; tokens are cached per record, so only the matrix is rebuilt).

Scores are BM25 scores (``score_label='bm25'``): higher is better, ``> 0`` for every hit (a record sharing no token
with the query is never returned), not comparable across queries. Each hit also carries ``coverage``, the score divided
by its upper bound for the query, ``sum over query tokens of idf(t)`` (Lucene BM25's term-frequency factor
``tf / (tf + k1 * norm)`` is below 1; a token absent from the partition counts with ``df = 0``): a query-normalised
value in [0, 1) that says how much of the query's information the record matches (about 0.5 when every query token
occurs once in a record of average length, k1 = 0.9), comparable across queries, as the "theoretical" normalisation of
Bruch et al. 2023 (ACM TOIS, "An Analysis of Fusion Functions for Hybrid Retrieval") suggests. The bound is exact for
``method='lucene'`` (the default) and an approximation for the other variants. Fuse with dense scores through
:mod:`context_engine.retrieval.fusion`.
"""

from __future__ import annotations

import bisect
import json
import math
import threading
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
from context_engine.storage.keyword.tokenize import KeywordTokenizer

__all__ = ["BM25Index", "KeywordDoc", "KeywordHit", "keyword_text"]

_FORMAT_VERSION = 1


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
    message's preceding turn) and the text.

    The same fields the embedding input is built from (DESIGN §4), so both retrievers see the same words.
    """
    return "\n".join(part for part in (r.breadcrumb, r.context, r.text) if part)


class KeywordHit(BaseModel):
    """A keyword search hit. ``score`` is the BM25 score (higher is better, > 0, query-dependent scale)."""

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


class _Partition:
    """The records of one ``(account_id, level)`` and, once built, their bm25s model and filter columns."""

    def __init__(self) -> None:
        self.docs: dict[str, KeywordDoc] = {}
        self.tokens: dict[str, list[str]] = {}
        self.model: Any = None
        self.ids: list[str] = []
        self.columns: dict[str, np.ndarray] = {}
        self.df: Counter[str] = Counter()
        self.stale = True

    def upper_bound(self, q_tokens: Sequence[str]) -> float:
        """The highest BM25 score ``q_tokens`` can reach here: ``sum idf(t)`` (Lucene idf; see the module docstring)."""
        n = len(self.ids)
        return sum(math.log(1.0 + (n - self.df.get(t, 0) + 0.5) / (self.df.get(t, 0) + 0.5)) for t in q_tokens)

    def build(self, settings: KeywordSettings) -> None:
        import bm25s

        self.ids = sorted(self.docs)
        self.columns = {}
        self.codes: dict[str, tuple[dict[str, int], np.ndarray]] = {}
        self.model = None
        if self.ids:
            model = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
            model.index([self.tokens[i] for i in self.ids], show_progress=False)
            self.model = model
            self.df = Counter(t for i in self.ids for t in set(self.tokens[i]))
            for name in ("uri", "parent_uri", "owner_space", "context_type", "category", "doc_id"):
                col = np.empty(len(self.ids), dtype=object)
                col[:] = [getattr(self.docs[i], name) for i in self.ids]
                self.columns[name] = col
                if name != "uri":
                    # Integer codes per distinct value, so a filter is one vectorised np.isin (not a Python loop
                    # over every record: 100k level-0 records per search otherwise).
                    vocab: dict[str, int] = {}
                    codes = np.fromiter((vocab.setdefault(v, len(vocab)) for v in col), dtype=np.int32, count=len(col))
                    self.codes[name] = (vocab, codes)
            order = sorted(range(len(self.ids)), key=lambda r: self.columns["uri"][r])
            self.uri_order = np.asarray(order, dtype=np.int64)
            self.sorted_uris = [self.columns["uri"][r] for r in order]
        self.stale = False

    def mask(self, flt: VectorFilter) -> np.ndarray | None:
        n = len(self.ids)
        mask: np.ndarray | None = None
        for name, wanted in (
            ("owner_space", flt.owner_spaces),
            ("context_type", flt.context_types),
            ("category", flt.categories),
            ("parent_uri", flt.parent_uris),
            ("doc_id", flt.doc_ids),
        ):
            if wanted is None:
                continue
            vocab, codes = self.codes[name]
            allowed = [vocab[v] for v in set(wanted) if v in vocab]
            part = np.isin(codes, np.asarray(allowed, dtype=np.int32)) if allowed else np.zeros(n, dtype=bool)
            mask = part if mask is None else mask & part
        if flt.uri_prefix is not None:
            # URIs in code-point order: the records under a prefix are one contiguous range (two bisections).
            lo = bisect.bisect_left(self.sorted_uris, flt.uri_prefix)
            hi = bisect.bisect_left(self.sorted_uris, flt.uri_prefix + "\U0010ffff")
            part = np.zeros(n, dtype=bool)
            part[self.uri_order[lo:hi]] = True
            mask = part if mask is None else mask & part
        return mask


class BM25Index:
    """BM25 over keyword records, with the same pre-filter as the vector index (DESIGN §3, §7.1).

    Thread-safe. Usable as a :class:`~context_engine.ingest.pipeline.WriteListener`
    (``pipeline.add_listener(index)``), or fed directly with :meth:`upsert`/:meth:`delete`.

    With a ``source`` (the metadata store), an account's records are loaded lazily from it on the first search for
    that account (:meth:`rebuild`), and write notifications for accounts not loaded yet are ignored (the load will
    read them from the store, which is committed before listeners are called). Opening an engine therefore costs
    nothing until a keyword search runs. Like the vector index, the records of ``pending`` nodes are included: callers
    drop hits whose node is not ``indexed``, as ``ContextEngineService.search`` does.

    Args:
        settings: the ``keyword`` settings section (BM25 parameters and tokenisation).
        tokenizer: overrides the tokenizer built from ``settings``.
        source: a :class:`~context_engine.storage.protocols.MetadataStore` to load accounts from lazily.
    """

    name = "bm25"

    def __init__(
        self,
        settings: KeywordSettings | None = None,
        tokenizer: KeywordTokenizer | None = None,
        *,
        source: Any = None,
    ) -> None:
        self._source = source
        self._loaded: set[str] = set()
        self.settings = settings or KeywordSettings()
        self.tokenizer = tokenizer or KeywordTokenizer(
            stem=self.settings.stem,
            stopwords=self.settings.stopwords,
            split_identifiers=self.settings.split_identifiers,
            cjk=self.settings.cjk,
        )
        self._parts: dict[tuple[str, int], _Partition] = {}
        self._by_uri: dict[tuple[str, str], set[tuple[int, str]]] = {}  # (account, uri) -> {(level, id)}
        self._lock = threading.RLock()

    # ---- writes ---------------------------------------------------------------------------------------------------
    def upsert(self, docs: Iterable[KeywordDoc | VectorRecord]) -> None:
        """Insert or replace records by ``id`` (a :class:`VectorRecord` is converted with :func:`keyword_text`).

        Tokenises outside the lock; the affected partitions are re-indexed on their next search.
        """
        prepared = [(d if isinstance(d, KeywordDoc) else KeywordDoc.from_vector_record(d)) for d in docs]
        tokens = [self.tokenizer(d.text) for d in prepared]
        with self._lock:
            for doc, toks in zip(prepared, tokens, strict=True):
                self._remove_id(doc.account_id, doc.id)
                part = self._parts.setdefault((doc.account_id, doc.level), _Partition())
                part.docs[doc.id] = doc
                part.tokens[doc.id] = toks
                part.stale = True
                self._by_uri.setdefault((doc.account_id, doc.uri), set()).add((doc.level, doc.id))

    def delete(self, account_id: str, ids: Sequence[str]) -> None:
        """Delete records of ``account_id`` by ``id``; unknown ids are ignored."""
        with self._lock:
            for i in ids:
                self._remove_id(account_id, i)

    def delete_uris(self, account_id: str, uris: Sequence[str]) -> None:
        """Delete every record whose ``uri`` is one of ``uris`` (all levels and chunks)."""
        with self._lock:
            for uri in uris:
                for level, rid in self._by_uri.pop((account_id, uri), set()):
                    part = self._parts.get((account_id, level))
                    if part is not None and part.docs.pop(rid, None) is not None:
                        part.tokens.pop(rid, None)
                        part.stale = True

    def _remove_id(self, account_id: str, rid: str) -> None:
        for (acc, level), part in self._parts.items():
            if acc != account_id:
                continue
            doc = part.docs.pop(rid, None)
            if doc is not None:
                part.tokens.pop(rid, None)
                part.stale = True
                refs = self._by_uri.get((acc, doc.uri))
                if refs is not None:
                    refs.discard((level, rid))
                    if not refs:
                        del self._by_uri[(acc, doc.uri)]

    # ---- WriteListener --------------------------------------------------------------------------------------------
    def nodes_written(self, account_id: str, nodes: Sequence[NodeRecord], vectors: Sequence[VectorRecord]) -> None:
        """Replace every record of ``nodes`` by ``vectors`` (their level-0 and level-2 rows)."""
        if self._source is not None and account_id not in self._loaded:
            return  # loaded from the store on the first search
        with self._lock:
            self.delete_uris(account_id, [n.uri for n in nodes])
            self.upsert([v for v in vectors if v.account_id == account_id])

    def nodes_deleted(self, account_id: str, uris: Sequence[str]) -> None:
        """Drop every record of ``uris``."""
        if self._source is not None and account_id not in self._loaded:
            return
        self.delete_uris(account_id, uris)

    def rebuild(self, metadata: Any, account_id: str | None = None) -> int:
        """Reload from the vector rows kept in a :class:`MetadataStore` (``iter_vectors``); returns the row count.

        Replaces what the index held for ``account_id`` (every account when ``None``).
        """
        with self._lock:
            for key in [k for k in self._parts if account_id is None or k[0] == account_id]:
                del self._parts[key]
            for key in [k for k in self._by_uri if account_id is None or k[0] == account_id]:
                del self._by_uri[key]
        n = 0
        seen: set[str] = set() if account_id is None else {account_id}
        for batch in metadata.iter_vectors(account_id):
            self.upsert(batch)
            n += len(batch)
            seen.update(r.account_id for r in batch)
        with self._lock:
            self._loaded.update(seen)  # so the first search of each account does not reload it
        return n

    # ---- reads ----------------------------------------------------------------------------------------------------
    def search(self, query: str, top_k: int, flt: VectorFilter) -> list[KeywordHit]:
        """The ``top_k`` records passing ``flt`` with the highest BM25 score for ``query``.

        Args:
            query: free text, tokenised like the documents.
            top_k: hits wanted; ``<= 0`` returns none.
            flt: the pre-filter (the account is mandatory; ``None`` fields do not restrict).

        Returns:
            Hits with score > 0, ordered by score descending, ties by ``id`` ascending. When ``flt.levels`` is
            ``None`` every level is searched and the lists merged by score.

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when bm25s fails.
        """
        if top_k <= 0:
            return []
        q_tokens = self.tokenizer(query)
        if not q_tokens:
            return []
        if self._source is not None and flt.account_id not in self._loaded:
            with self._lock:
                if flt.account_id not in self._loaded:
                    self.rebuild(self._source, flt.account_id)
        with self._lock:
            keys = [k for k in self._parts if k[0] == flt.account_id and (flt.levels is None or k[1] in flt.levels)]
            hits: list[tuple[float, str, KeywordDoc, float]] = []
            try:
                for key in sorted(keys):
                    hits.extend(self._search_part(self._parts[key], q_tokens, top_k, flt))
            except (ValueError, IndexError, TypeError, MemoryError) as err:
                raise ContextEngineError(
                    ErrorCode.VECTOR_SEARCH_FAILED,
                    f"keyword search failed: {type(err).__name__}: {err}"[:300],
                    {"index": self.name},
                    retryable=True,
                ) from err
        hits.sort(key=lambda h: (-h[0], h[1]))
        return [_hit(doc, score, bound) for score, _, doc, bound in hits[:top_k]]

    def _search_part(
        self, part: _Partition, q_tokens: list[str], top_k: int, flt: VectorFilter
    ) -> list[tuple[float, str, KeywordDoc, float]]:
        if part.stale:
            part.build(self.settings)
        if part.model is None:
            return []
        ids = part.model.get_tokens_ids(q_tokens)
        if not ids:
            return []
        scores = np.asarray(part.model.get_scores_from_ids(ids), dtype=np.float64)
        mask = part.mask(flt)
        if mask is not None:
            scores = np.where(mask, scores, 0.0)
        rows = np.flatnonzero(scores > 0)
        if rows.size > top_k:
            kth = np.partition(scores[rows], rows.size - top_k)[rows.size - top_k]
            rows = rows[scores[rows] >= kth]  # keep every row tied with the k-th: ties resolve by id
        bound = part.upper_bound(q_tokens)
        return [(float(scores[r]), part.ids[r], part.docs[part.ids[r]], bound) for r in rows]

    def count(self, account_id: str | None = None) -> int:
        """Records held (of one account, or all)."""
        with self._lock:
            return sum(len(p.docs) for (acc, _), p in self._parts.items() if account_id is None or acc == account_id)

    def optimize(self) -> None:
        """Re-index every stale partition now (so the next search does not pay for it)."""
        with self._lock:
            for part in self._parts.values():
                if part.stale:
                    part.build(self.settings)

    # ---- persistence ----------------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the records (JSON lines after a header with the format version and parameters) to ``path``."""
        with self._lock:
            docs = [d for p in self._parts.values() for d in p.docs.values()]
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


def _hit(doc: KeywordDoc, score: float, bound: float) -> KeywordHit:
    return KeywordHit(
        id=doc.id,
        score=score,
        coverage=min(1.0, score / bound) if bound > 0 else 0.0,
        uri=doc.uri,
        parent_uri=doc.parent_uri,
        owner_space=doc.owner_space,
        context_type=doc.context_type,
        category=doc.category,
        level=doc.level,
        doc_id=doc.doc_id,
        chunk_index=doc.chunk_index,
        text=doc.text,
        breadcrumb=doc.breadcrumb,
    )
