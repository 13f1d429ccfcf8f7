"""The hint layer of lookup_knowledge: ``KnowledgeIndexService.analyze_query`` (DESIGN.md §7.1; seed 001 §3).

A keyword/entity index built at ingest (the service subscribes to the write pipeline as a ``WriteListener``) from
each document's title and file name (alert names), breadcrumbs (distinctive headings), the error codes, metric names
and service names in its chunks, and its domain (``knowledge/domains.py``). The index lives in the metadata database
(``storage/metadata/audit.py``) and is compiled per account into dictionaries held in memory; a per-account
generation counter tells every process when its copy is stale. The process that writes patches its own copy once the
write has committed (:meth:`HintSnapshot.patched`) instead of reloading the account's whole index; another process
applies the same patch from the change log the store keeps (``knowledge_hint_changes``, :meth:`KnowledgeIndexService.
_caught_up`).

What it returns is a hint, never evidence: document URIs, titles, the query keywords found and the domains they
point at. The semantic layer always runs; the hints only (a) choose a domain filter for its first attempt
(``single_domain_or_null``), (b) add a small documented rank boost and (c) decide the ``PRECISE`` level.

Term kinds in the index:

* ``alert``: the title or file stem when it is an identifier (``KubePodCrashLooping``), keyed by its words
  concatenated (``kubepodcrashlooping``), so ``KubePodCrashLooping``, ``kube pod crash looping`` and
  ``Kube-Pod-Crash-Looping`` in a query all find it;
* ``title``: a title that is a phrase (``容器频繁重启``, ``Disk Pressure``), keyed by its words;
* ``heading``: a heading of two to six words that is not a generic section name (Meaning, Diagnosis, 排查, ...);
* ``error_code``: ``ORA-00600``/``RET-4001``-like codes and Kubernetes reasons (``CrashLoopBackOff``, ``OOMKilled``);
* ``metric``: Prometheus metric and recording-rule names (``kube_pod_container_status_restarts_total``);
* ``service``: hyphenated component names in code spans or containing a component word (``kube-apiserver``).

Matching: a keyword found in at most ``hint_max_doc_freq`` documents makes each of them a *strong* match; a more
frequent one is reported in ``broad_keywords`` only. A document whose title words the query mostly contains (at
least two words and half of them) is a *weak* match, unless the query names a document outright (an alert or title
match), which makes look-alike titles (``KubeCPUQuotaOvercommit`` for ``KubeCPUOvercommit``) noise. Domains come
from the query's domain terms, from alert-like tokens with a domain's title prefix, and from the strong matches.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from context_engine.errors import ContextEngineError
from context_engine.knowledge.domains import domain_vocabularies
from context_engine.knowledge.hint_snapshot import HintSnapshot
from context_engine.knowledge.hint_terms import (
    EXTRACTOR_VERSION,
    STRONG_KINDS,
    DomainResolver,
    alert_key,
    extract_document,
    is_identifier,
    phrase_key,
    title_words,
)
from context_engine.knowledge.relevance import NAMING_KINDS
from context_engine.knowledge.tokenize import (
    Token,
    join_key,
    singular,
    split_identifier,
    strip_placeholders,
    tokenize,
)
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import HintMatch, HintResult
from context_engine.schema.nodes import NodeRecord, VectorRecord
from context_engine.schema.uri import parse_uri
from context_engine.settings import KnowledgeSettings
from context_engine.storage.metadata.audit import HintChange, HintDoc, HintTerm
from context_engine.storage.protocols import AuditStore, MetadataStore

if TYPE_CHECKING:
    from context_engine.knowledge.semantic_search import DomainRestriction

_LOG = logging.getLogger(__name__)

#: A compiled index catches up from the change log when at most this many document changes were logged since its
#: generation, and reloads the account otherwise (``KnowledgeIndexService._caught_up``).
CATCH_UP_MOST = 20_000


@dataclass
class HintAnalysis:
    """What :meth:`KnowledgeIndexService.analyze` found, before a lookup lists it.

    A broad query over a large account weakly matches thousands of titles (1,000,000 nodes: a median 2,600), and an
    answer lists at most ``knowledge.hint_max_weak_matches`` of them, so a weak match is made a :class:`HintMatch`
    only when it is read (:meth:`match`, :meth:`listed`, :meth:`full`); ranking reads it through :meth:`match`.

    Attributes:
        result: everything but the weak matches (``matches`` holds the strong ones, strong first by URI).
        weak: every weak match: document URI -> the title words of it the query covers.
        snapshot: the index analysed (``None`` when the hint layer failed and the analysis is empty).
    """

    result: HintResult = field(default_factory=HintResult)
    weak: dict[str, list[str]] = field(default_factory=dict)
    snapshot: HintSnapshot | None = None
    _made: dict[str, HintMatch] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._made.update((m.uri, m) for m in self.result.matches)

    @property
    def strong(self) -> list[HintMatch]:
        """The strong matches, by URI."""
        return self.result.matches

    def match(self, uri: str) -> HintMatch | None:
        """The match of document ``uri`` (strong or weak), ``None`` when the query does not hint at it."""
        made = self._made.get(uri)
        if made is None and uri in self.weak and self.snapshot is not None:
            doc = self.snapshot.docs[uri]
            made = HintMatch(
                uri=uri,
                title=doc.title,
                domain=doc.domain,
                strength="weak",
                keywords=self.weak[uri],
                kinds=["title_words"],
            )
            self._made[uri] = made
        return made

    def full(self) -> HintResult:
        """The :class:`HintResult` with every match: the strong ones, then the weak ones, each by URI."""
        return self._with(sorted(self.weak), 0)

    def listed(self, evidence: Iterable[str], most: int) -> HintResult:
        """The hints as an answer lists them: every strong match and at most ``most`` weak ones, those among
        ``evidence`` (document URIs) first, then by URI; the others counted in ``omitted_weak_matches``."""
        if len(self.weak) <= most:
            return self.full()
        shown = sorted(u for u in set(evidence) if u in self.weak)[:most]
        first = set(shown)
        rest = heapq.nsmallest(most - len(shown), (u for u in self.weak if u not in first))
        kept = sorted([*shown, *rest])
        return self._with(kept, len(self.weak) - len(kept))

    def _with(self, weak_uris: list[str], omitted: int) -> HintResult:
        weak = [m for m in (self.match(u) for u in weak_uris) if m is not None]
        matches = [*self.result.matches, *weak]
        return self.result.model_copy(update={"matches": matches, "omitted_weak_matches": omitted})


# ---- the service ------------------------------------------------------------------------------------------------
class KnowledgeIndexService:
    """The hint index: kept in sync with writes (a ``WriteListener``) and queried by :meth:`analyze_query`.

    Args:
        store: where the index rows and its generation live.
        metadata: the source of truth, read to rebuild an account's index when it is missing or was built by another
            extractor version.
        settings: the ``knowledge`` section (context types indexed, ``hint_max_doc_freq``, domain vocabularies).
    """

    def __init__(self, store: AuditStore, metadata: MetadataStore, settings: KnowledgeSettings) -> None:
        self._store = store
        self._metadata = metadata
        self._settings = settings
        self._types = frozenset(settings.context_types)
        self._cache: dict[str, HintSnapshot] = {}
        self._lock = threading.Lock()
        self._stale: set[str] = set()
        #: Index updates that failed after a committed write (logged; the account is rebuilt at its next lookup).
        self.sync_failures = 0

    # The domain rules are compiled on first use, not at open: compiling them tokenises the vocabularies' Chinese
    # terms, which loads jieba's dictionary (0.5-1 s), and a search_memory process never needs them (issue 12).
    @functools.cached_property
    def resolver(self) -> DomainResolver:
        """The compiled domain rules of the ``knowledge`` settings."""
        return DomainResolver.build(domain_vocabularies(self._settings))

    @functools.cached_property
    def _version(self) -> str:
        """The extractor version the stored rows must carry (rules and context types included)."""
        return hashlib.sha256(
            json.dumps([EXTRACTOR_VERSION, sorted(self._types), self.resolver.signature()]).encode()
        ).hexdigest()[:16]

    # ---- write side (WriteListener) --------------------------------------------------------------------------------
    def nodes_written(self, account_id: str, nodes: Sequence[NodeRecord], vectors: Sequence[VectorRecord]) -> None:
        """Index the written files (replacing their old entries); a stale or missing index is rebuilt instead.

        Only files of the indexed context types (``knowledge.context_types``) are read: a write of nothing else (a
        memory, a skill, a directory summary) leaves the index and its generation as they were, so the next lookup
        keeps its compiled index. (Until 2026-12-07 every write bumped the generation, and the lookup after a memory
        write reloaded and compiled the account's whole index: 85 -> 2,300 ms on the 100k bench home.) A node's
        context type follows from its URI, so a file of another type never has entries to replace.

        Never raises for a storage failure: the write it follows is committed and must go on to the vector index.
        The failure is logged and counted in :attr:`sync_failures`, and the account's index is rebuilt from the
        metadata store at its next lookup.
        """
        files = [n for n in nodes if not n.is_dir and n.context_type in self._types]
        if not files:
            return
        try:
            self._written(account_id, files, vectors)
        except ContextEngineError as err:
            self._sync_failed(account_id, err)

    def nodes_deleted(self, account_id: str, uris: Sequence[str]) -> None:
        """Drop the entries of deleted (or moved-away) nodes (failures handled as in :meth:`nodes_written`); nodes
        of a context type the index does not hold are passed over, as in :meth:`nodes_written`."""
        indexed = [u for u in uris if self._may_be_indexed(u)]
        if not indexed:
            return
        try:
            change = self._store.replace_hint_docs(account_id, indexed, [], [])
        except ContextEngineError as err:
            self._sync_failed(account_id, err)
            return
        self._patch_after_commit(account_id, change, indexed, [], [])

    def _may_be_indexed(self, uri: str) -> bool:
        """Whether the node at ``uri`` may have entries: its context type (read from the URI) is indexed, or the URI
        does not parse (kept: an entry it may have is dropped)."""
        try:
            context_type = parse_uri(uri).context_type
        except ContextEngineError:
            return True
        return context_type is None or context_type in self._types

    def _sync_failed(self, account_id: str, err: ContextEngineError) -> None:
        self.sync_failures += 1
        self._stale.add(account_id)
        _LOG.warning(
            "hint index update failed for account %s (%s); rebuilding at the next lookup", account_id, err.message
        )

    def _written(self, account_id: str, files: Sequence[NodeRecord], vectors: Sequence[VectorRecord]) -> None:
        version = self._store.hint_state(account_id).version
        if version != self._version:
            self.rebuild(account_id)
            return
        chunks: dict[str, list[VectorRecord]] = {}
        for v in vectors:
            if v.level == 2:
                chunks.setdefault(v.uri, []).append(v)
        docs: list[HintDoc] = []
        terms: list[HintTerm] = []
        for node in files:  # of the indexed types only (nodes_written)
            doc, doc_terms = extract_document(node, sorted(chunks.get(node.uri, []), key=_chunk_order), self.resolver)
            docs.append(doc)
            terms.extend(doc_terms)
        uris = [n.uri for n in files]
        change = self._store.replace_hint_docs(account_id, uris, docs, terms)
        self._patch_after_commit(account_id, change, uris, docs, terms)

    def _patch_after_commit(
        self,
        account_id: str,
        change: HintChange,
        uris: Sequence[str],
        docs: Sequence[HintDoc],
        terms: Sequence[HintTerm],
    ) -> None:
        """Once the write commits, bring this process's compiled index of the account along
        (:meth:`HintSnapshot.patched`) instead of leaving the next lookup to reload and compile the whole account:
        2 s at 100k nodes, O(documents). Only when the cached index is at the write's previous generation (nothing
        else changed the account in between), the account is not stale, and no reload holds the lock (a write never
        waits for one; the next lookup then reloads as before). Never before the commit: a rolled-back write must
        not stay in the cache, and a later write may commit the same generation number."""

        def patch() -> None:
            if not self._lock.acquire(blocking=False):
                return
            try:
                cached = self._cache.get(account_id)
                if (
                    cached is None
                    or (cached.generation, cached.token) != (change.previous_generation, change.previous_token)
                    or account_id in self._stale
                ):
                    return
                patched = cached.patched(change.generation, uris, change.removed_terms, docs, terms, change.token)
                self._cache[account_id] = patched
            except Exception:  # noqa: BLE001 - a wrong patch must never stay: the next lookup reloads the account
                self._cache.pop(account_id, None)
                _LOG.exception("hint index patch failed for account %s; reloading at the next lookup", account_id)
            finally:
                self._lock.release()

        self._store.after_commit(patch)

    def rebuild(self, account_id: str) -> int:
        """Rebuild the account's index from the metadata store; returns the number of documents indexed."""
        nodes = [n for n in self._metadata.list_all_nodes(account_id) if not n.is_dir and n.context_type in self._types]
        docs: list[HintDoc] = []
        terms: list[HintTerm] = []
        for start in range(0, len(nodes), 256):
            batch = nodes[start : start + 256]
            chunks: dict[str, list[VectorRecord]] = {}
            for v in self._metadata.get_vectors(account_id, [n.uri for n in batch]):
                if v.level == 2:
                    chunks.setdefault(v.uri, []).append(v)
            for node in batch:
                doc, doc_terms = extract_document(node, chunks.get(node.uri, []), self.resolver)
                docs.append(doc)
                terms.extend(doc_terms)
        self._store.replace_hint_docs(account_id, [], docs, terms, version=self._version, clear_all=True)
        return len(docs)

    # ---- read side -------------------------------------------------------------------------------------------------
    def snapshot(self, account_id: str) -> HintSnapshot:
        """The account's compiled index (one committed ``meta`` read when it is current). When another process moved
        the generation, it is brought along from the change log (:meth:`_caught_up`), else reloaded. Current means
        the same generation *and* the same change-log token: a store rewound (a restore, a failover) and carried back
        to the number by other writes holds another state under it."""
        return self._index(account_id)

    def _index(self, account_id: str) -> HintSnapshot:
        state = self._store.hint_state(account_id)
        cached = self._cache.get(account_id)
        fresh = state.version == self._version and account_id not in self._stale
        if cached is not None and (cached.generation, cached.token) == (state.generation, state.token) and fresh:
            return cached
        with self._lock:
            # read again: another thread may have brought the index past the generation read above meanwhile (a
            # helper's review: that lookup then reloaded an index newer than what it had read)
            state = self._store.hint_state(account_id)
            generation = state.generation
            cached = self._cache.get(account_id)
            fresh = state.version == self._version and account_id not in self._stale
            if cached is not None and (cached.generation, cached.token) == (generation, state.token) and fresh:
                return cached
            if not fresh:
                self.rebuild(account_id)
                self._stale.discard(account_id)
            elif cached is not None and cached.generation < generation:
                caught = self._caught_up(account_id, cached)
                if caught is not None:
                    self._cache[account_id] = caught
                    return caught
            generation, _, docs, terms = self._store.load_hint_index(account_id)
            token = self._store.hint_token(account_id, generation)  # log rows are never changed, only removed
            compiled = HintSnapshot.build(generation, docs, terms, self.resolver.cross_cutting, token)
            self._cache[account_id] = compiled
            return compiled

    def _caught_up(self, account_id: str, cached: HintSnapshot) -> HintSnapshot | None:
        """``cached`` brought to the account's current generation from the hint change log, when another process or
        replica wrote since (this process's own writes patch it at commit): O(changes) instead of a reload and
        compile of the whole account, 13 s at 1,000,000 nodes. ``None`` when the log cannot (pruned, a rebuild, more
        than :data:`CATCH_UP_MOST` documents changed, the store's history rewound past ``cached``'s token, another
        extractor version) or the patch fails: the caller reloads."""
        try:
            change = self._store.hint_changes_since(account_id, cached.generation, cached.token, CATCH_UP_MOST)
            if change is None or change.version != self._version:
                return None
            return cached.patched(
                change.generation, change.uris, change.removed_terms, change.docs, change.terms, change.token
            )
        except Exception:  # noqa: BLE001 - a failed catch-up reloads the account, as before the log existed
            _LOG.exception("hint index catch-up failed for account %s; reloading it", account_id)
            return None

    def domain_filter(self, account_id: str, domain: str) -> DomainRestriction:
        """The vector-filter restriction for ``domain`` (see :meth:`HintSnapshot.domain_filter`)."""
        return self._index(account_id).domain_filter(domain)

    def document_domains(self, account_id: str, uris: Iterable[str]) -> dict[str, str | None]:
        """The domain of each indexed document among ``uris``."""
        docs = self._index(account_id).docs
        return {u: docs[u].domain for u in uris if u in docs}

    def analyze_query(
        self,
        query: str,
        ctx: RequestContext,
        *,
        uri_prefix: str | None = None,
        snapshot: HintSnapshot | None = None,
    ) -> HintResult:
        """Hints for ``query`` (seed 001 §3) with every match: :meth:`analyze` made whole (:meth:`HintAnalysis.full`).

        Args and errors as :meth:`analyze`.
        """
        return self.analyze(query, ctx, uri_prefix=uri_prefix, snapshot=snapshot).full()

    def analyze(
        self,
        query: str,
        ctx: RequestContext,
        *,
        uri_prefix: str | None = None,
        snapshot: HintSnapshot | None = None,
    ) -> HintAnalysis:
        """Hints for ``query`` (seed 001 §3): ``matches, matched_keywords, domains, single_domain_or_null``.

        Only documents the caller can see (and inside ``uri_prefix`` when given) are matched. Template placeholders
        (``<namespace>``) are ignored. No document text is returned.

        Args:
            query: the raw query, English and/or Chinese.
            ctx: the caller; its account's index is used.
            uri_prefix: restrict matches to this subtree (a directory URI).
            snapshot: the index to use (from :meth:`snapshot`); by default the account's current one.

        Returns:
            The strong matches in ``result`` (by URI), the weak ones in ``weak``, made into matches when read;
            keywords and domains sorted.
        """
        idx = snapshot if snapshot is not None else self._index(ctx.account_id)
        text = strip_placeholders(query)
        toks = tokenize(text)
        if not toks:
            return HintAnalysis(snapshot=idx)
        visible = ctx.visible_owner_spaces()

        def allowed(uri: str) -> bool:
            doc = idx.docs[uri]
            return (visible is None or doc.owner_space in visible) and (
                uri_prefix is None or uri.startswith(uri_prefix)
            )

        found, words = _query_keys(idx, text, toks)
        strong, matched_keywords, broad = _strong_matches(idx, found, allowed, self._settings.hint_max_doc_freq)
        weak = _weak_matches(idx, words, strong, allowed)
        r = self.resolver
        domain_terms = _domain_terms(r, idx, text, toks, strong)
        matched_keywords |= {term for terms in domain_terms.values() for term in terms}
        domains = sorted(domain_terms)
        specific = [d for d in domains if d not in r.cross_cutting]  # a cross-cutting domain never narrows
        single = specific[0] if len(specific) == 1 else (domains[0] if len(domains) == 1 else None)
        result = HintResult(
            matches=_strong_hint_matches(idx, strong),
            matched_keywords=sorted(matched_keywords),
            domains=domains,
            single_domain_or_null=single,
            domain_terms={d: sorted(v) for d, v in sorted(domain_terms.items())},
            broad_keywords=sorted(broad),
        )
        return HintAnalysis(result=result, weak=weak, snapshot=idx)


# ---- the steps of analyze_query ----------------------------------------------------------------------------------
_Strong = dict[str, dict[str, set[str]]]  # uri -> {"keywords": shown keywords, "kinds": term kinds}


def _query_keys(idx: HintSnapshot, text: str, toks: Sequence[Token]) -> tuple[dict[str, str], list[tuple[str, int]]]:
    """The index keys the query holds (key -> the query's text for it: phrases, then alert-like word runs) and the
    query's words with the index of the token each comes from."""
    found: dict[str, str] = {}  # key -> display text
    keys = [t.key for t in toks]
    for i, j, key in _ngrams(keys, idx.max_phrase_tokens, spaced=True):
        if key in idx.postings and key not in found:
            found[key] = text[toks[i].start : toks[j].end]
    words: list[tuple[str, int]] = []
    for i, t in enumerate(toks):
        words.extend((w, i) for w in ([t.key] if t.cjk else split_identifier(t.text)))
    for i, j, key in _ngrams([w for w, _ in words], idx.max_alert_words, spaced=False):
        if key in idx.postings and key not in found:
            found[key] = text[toks[words[i][1]].start : toks[words[j][1]].end]
    return found, words


def _strong_matches(
    idx: HintSnapshot, found: dict[str, str], allowed: Callable[[str], bool], max_doc_freq: int
) -> tuple[_Strong, set[str], set[str]]:
    """Documents matched by a strong term kind, the matched keywords, and the keywords too broad to hint (in more
    than ``max_doc_freq`` visible documents)."""
    strong: _Strong = {}
    matched_keywords: set[str] = set()
    broad: set[str] = set()
    for key, shown in found.items():
        docs = [(u, k) for u, k in idx.postings[key] if k in STRONG_KINDS and allowed(u)]
        if not docs:
            continue
        matched_keywords.add(shown)
        if len({u for u, _ in docs}) > max_doc_freq:
            broad.add(shown)
            continue
        for uri, kind in docs:
            entry = strong.setdefault(uri, {"keywords": set(), "kinds": set()})
            entry["keywords"].add(shown)
            entry["kinds"].add(kind)
    return strong, matched_keywords, broad


def _weak_matches(
    idx: HintSnapshot, words: list[tuple[str, int]], strong: _Strong, allowed: Callable[[str], bool]
) -> dict[str, list[str]]:
    """Documents whose title words the query mostly covers (uri -> the covered words), unless the query names a
    document outright."""
    qwords = {singular(w) for w, _ in words} | {w for w, _ in words}
    qwords |= {words[i][0] + words[i + 1][0] for i in range(len(words) - 1)}
    weak: dict[str, list[str]] = {}
    named = any(kinds & NAMING_KINDS for kinds in (e["kinds"] for e in strong.values()))
    # A query that names a document outright (alert or title) makes look-alike titles noise, not hints.
    candidates = set() if named else {g for w in qwords for g in idx.word_groups.get(w, ())}
    for g in candidates:
        parts, uris = idx.title_groups[g]
        covered = _covered(parts, qwords)
        if len(covered) >= 2 and len(covered) * 2 >= len(parts):
            for uri in uris:
                if uri not in strong and allowed(uri):
                    weak[uri] = covered  # shared by a title's documents, never changed
    return weak


def _domain_terms(
    r: DomainResolver, idx: HintSnapshot, text: str, toks: Sequence[Token], strong: _Strong
) -> dict[str, set[str]]:
    """domain -> the query's terms for it: vocabulary terms, alert-like identifiers, strong matches' keywords."""
    domain_terms: dict[str, set[str]] = {}
    keys = [t.key for t in toks]
    for i, j, key in _ngrams(keys, r.max_term_tokens, spaced=True):
        domain = r.terms.get(key) or (r.terms.get(singular(key)) if i == j else None)
        if domain:
            domain_terms.setdefault(domain, set()).add(text[toks[i].start : toks[j].end])
    for t in toks:
        if not t.cjk and len(split_identifier(t.text)) >= 2 and t.text[1:] != t.text[1:].lower():
            domain = r.title_domain(t.text)
            if domain:
                domain_terms.setdefault(domain, set()).add(t.text)
    for uri, entry in strong.items():
        domain = idx.docs[uri].domain
        if domain:
            domain_terms.setdefault(domain, set()).update(entry["keywords"])
    return domain_terms


def _strong_hint_matches(idx: HintSnapshot, strong: _Strong) -> list[HintMatch]:
    """The strong matches, by URI."""
    return [
        HintMatch(
            uri=uri,
            title=idx.docs[uri].title,
            domain=idx.docs[uri].domain,
            strength="strong",
            keywords=sorted(entry["keywords"]),
            kinds=sorted(entry["kinds"]),
        )
        for uri, entry in sorted(strong.items())
    ]


def _covered(parts: Sequence[str], qwords: set[str]) -> list[str]:
    """Title words of a document present in the query, directly or as a two-word compound (``start`` + ``up``)."""
    covered: list[str] = []
    for i, p in enumerate(parts):
        if p in qwords or (i + 1 < len(parts) and p + parts[i + 1] in qwords) or (i > 0 and parts[i - 1] + p in qwords):
            covered.append(p)
    return covered


def _ngrams(keys: Sequence[str], max_n: int, *, spaced: bool) -> Iterable[tuple[int, int, str]]:
    """``(first, last, key)`` of every run of 1..``max_n`` consecutive keys, joined by :func:`join_key` (``spaced``)
    or concatenated; built incrementally so a query costs O(len * max_n) short string operations."""
    n = len(keys)
    for i in range(n):
        key = ""
        for j in range(i, min(n, i + max_n)):
            part = keys[j]
            if not key:
                key = part
            elif spaced:
                key = join_key([key, part])
            else:
                key += part
            yield i, j, key


def _chunk_order(v: VectorRecord) -> int:
    return v.chunk_index


__all__ = [
    "CATCH_UP_MOST",
    "EXTRACTOR_VERSION",
    "STRONG_KINDS",
    "DomainResolver",
    "HintSnapshot",
    "KnowledgeIndexService",
    "alert_key",
    "extract_document",
    "is_identifier",
    "phrase_key",
    "title_words",
]
