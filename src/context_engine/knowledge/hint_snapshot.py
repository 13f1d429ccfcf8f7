"""The hint index of one account compiled for lookups (``knowledge/hint_index.py``): :class:`HintSnapshot`, built from
the stored rows (:meth:`HintSnapshot.build`) or brought along by a write's change (:meth:`HintSnapshot.patched`: the
writer's own write, or another process's read from the change log, issue 26).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from context_engine.knowledge.hint_terms import split_identifier
from context_engine.knowledge.tokenize import has_cjk
from context_engine.storage.metadata.audit import HINT_TERM_MAX_CHARS, HintDoc, HintTerm

if TYPE_CHECKING:
    from context_engine.knowledge.semantic_search import DomainRestriction

__all__ = ["HintSnapshot"]

T = TypeVar("T")


@dataclass
class HintSnapshot:
    """One account's hint index compiled for lookups (immutable once built; replaced when the generation moves)."""

    generation: int
    docs: dict[str, HintDoc]
    postings: dict[str, tuple[tuple[str, str], ...]]  # key -> ((uri, kind), ...)
    title_groups: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]  # (title words, uris), one per distinct title
    word_groups: dict[str, tuple[int, ...]]  # title word -> indexes into title_groups
    max_phrase_tokens: int
    max_alert_words: int
    domain_docs: dict[str, tuple[str, ...]]
    cross_cutting: frozenset[str] = frozenset()
    #: How many terms span each length (phrase: query tokens, alert: title words + 1): the two maxima above follow
    #: from them, so a patch lowers them when the longest keys go, as a reload would.
    phrase_lengths: dict[int, int] = field(default_factory=dict)
    alert_lengths: dict[int, int] = field(default_factory=dict)
    #: The change log's token of ``generation`` (``audit.HintChange``): with it the number names one state of the
    #: account, so a catch-up or a patch never builds on a history the store lost (a restore); ``None``: unknown.
    token: str | None = None
    _filters: dict[str, DomainRestriction] = field(default_factory=dict)
    _group_index: dict[tuple[str, ...], int] | None = None  # title words -> index in title_groups, made on first patch

    @classmethod
    def build(
        cls,
        generation: int,
        docs: Iterable[HintDoc],
        terms: Iterable[HintTerm],
        cross_cutting: frozenset[str] = frozenset(),
        token: str | None = None,
    ) -> HintSnapshot:
        # One object per distinct value (each row read from the database brings its own strings): at 1,000,000
        # nodes the same parents, titles, words, kinds and (uri, kind) postings repeat across 487,163 documents.
        shared: dict[Any, Any] = {}

        def one(value: T) -> T:
            return value if value is None else shared.setdefault(value, value)

        by_uri: dict[str, HintDoc] = {}
        for d in docs:
            words = one(tuple(one(w) for w in d.title_words))
            by_uri[d.uri] = HintDoc(
                d.uri, one(d.parent_uri), one(d.owner_space), one(d.context_type), one(d.title), one(d.domain), words
            )
        postings: dict[str, list[tuple[str, str]]] = {}
        phrase_lengths: dict[int, int] = {}
        alert_lengths: dict[int, int] = {}
        for t in terms:
            doc = by_uri.get(t.uri)
            if doc is None:
                continue
            postings.setdefault(t.term, []).append(one((doc.uri, one(t.kind))))
            _count_lengths(t, doc, phrase_lengths, alert_lengths, 1)
        # Documents grouped by their title words: a weak match is decided once per distinct title (many documents
        # share one, e.g. a runbook template's copies), not once per document.
        groups: dict[tuple[str, ...], list[str]] = {}
        domain_docs: dict[str, list[str]] = {}
        for d in by_uri.values():
            if d.title_words:
                groups.setdefault(d.title_words, []).append(d.uri)
            if d.domain:
                domain_docs.setdefault(d.domain, []).append(d.uri)
        return cls(
            generation=generation,
            docs=by_uri,
            postings={k: tuple(sorted(set(v))) for k, v in postings.items()},
            title_groups=tuple((words, tuple(uris)) for words, uris in groups.items()),
            word_groups=_word_groups(groups),
            max_phrase_tokens=_longest(phrase_lengths, 8),
            max_alert_words=_longest(alert_lengths, 12),
            domain_docs={k: tuple(sorted(v)) for k, v in domain_docs.items()},
            cross_cutting=cross_cutting,
            phrase_lengths=phrase_lengths,
            alert_lengths=alert_lengths,
            token=token,
        )

    def patched(
        self,
        generation: int,
        uris: Iterable[str],
        removed_terms: Sequence[HintTerm],
        docs: Sequence[HintDoc],
        terms: Sequence[HintTerm],
        token: str | None = None,
    ) -> HintSnapshot:
        """This index after a write (:meth:`KnowledgeIndexService.nodes_written` / ``nodes_deleted``): the documents
        ``uris`` and ``docs`` lose their entries (``removed_terms``: the term rows the write removed, as the store
        returned them), ``docs`` and ``terms`` are added, at ``generation``. A new snapshot (this one is unchanged:
        a lookup may be reading it); what changes is copied, not rebuilt from the account's rows.

        The answers equal those of :meth:`build` over the account's rows after the write (tests compare them).
        One thing may differ from such a build and changes no answer: a distinct title whose documents all went
        keeps an empty group. ``max_phrase_tokens`` and ``max_alert_words`` follow the counts of the terms' lengths
        (``phrase_lengths``, ``alert_lengths``), down too: a run of the query's words is looked up against every
        key, so a longer bound than a reload's would find keys a reload does not ("crash loop back off" ->
        ``crashloopbackoff``, a helper's review).

        Cost: O(written documents and their terms, the postings of their keys) plus copies of the dictionaries
        (``docs``, ``postings``, ``word_groups``) and of ``title_groups``, which grow with the account: 0.8-3.2 ms
        for 24,168 documents (the 100k bench home's largest account), whose reload and build took 2,082 ms."""
        gone = set(uris) | {d.uri for d in docs}
        by_uri = dict(self.docs)
        old_docs = [by_uri.pop(u) for u in gone if u in by_uri]
        for d in docs:
            by_uri[d.uri] = d
        phrase_lengths, alert_lengths = dict(self.phrase_lengths), dict(self.alert_lengths)
        for t in removed_terms:
            old = self.docs.get(t.uri)
            if old is not None:
                _count_lengths(t, old, phrase_lengths, alert_lengths, -1)
        added: dict[str, set[tuple[str, str]]] = {}
        for t in terms:
            doc = by_uri.get(t.uri)
            if doc is None:
                continue
            stored = HintTerm(t.uri, t.term[:HINT_TERM_MAX_CHARS], t.kind)  # as a reload reads it
            added.setdefault(stored.term, set()).add((t.uri, t.kind))
            _count_lengths(stored, doc, phrase_lengths, alert_lengths, 1)
        postings = dict(self.postings)
        for key in {t.term for t in removed_terms} | added.keys():
            kept = {p for p in self.postings.get(key, ()) if p[0] not in gone} | added.get(key, set())
            if kept:
                postings[key] = tuple(sorted(kept))
            else:
                postings.pop(key, None)
        groups, word_groups, index = self._regrouped(old_docs, docs)
        domain_docs = dict(self.domain_docs)
        for domain in {d.domain for d in (*old_docs, *docs) if d.domain}:
            members = {u for u in self.domain_docs.get(domain, ()) if u not in gone}
            members |= {d.uri for d in docs if d.domain == domain}
            if members:
                domain_docs[domain] = tuple(sorted(members))
            else:
                domain_docs.pop(domain, None)
        return HintSnapshot(
            generation=generation,
            docs=by_uri,
            postings=postings,
            title_groups=groups,
            word_groups=word_groups,
            max_phrase_tokens=_longest(phrase_lengths, 8),
            max_alert_words=_longest(alert_lengths, 12),
            domain_docs=domain_docs,
            cross_cutting=self.cross_cutting,
            phrase_lengths=phrase_lengths,
            alert_lengths=alert_lengths,
            token=token,
            _group_index=index,
        )

    def _regrouped(
        self, old_docs: Sequence[HintDoc], docs: Sequence[HintDoc]
    ) -> tuple[tuple[tuple[tuple[str, ...], tuple[str, ...]], ...], dict[str, tuple[int, ...]], dict[Any, int]]:
        """``title_groups``, ``word_groups`` and the group index after ``old_docs`` left and ``docs`` came
        (:meth:`patched`): a group keeps its index, so ``word_groups`` changes only for a new distinct title."""
        if self._group_index is None:
            self._group_index = {words: i for i, (words, _) in enumerate(self.title_groups)}
        index = dict(self._group_index)
        groups = list(self.title_groups)
        word_groups = self.word_groups
        for d in old_docs:
            i = index.get(d.title_words)
            if d.title_words and i is not None:
                words, members = groups[i]
                groups[i] = (words, tuple(u for u in members if u != d.uri))
        for d in docs:
            if not d.title_words:
                continue
            i = index.get(d.title_words)
            if i is None:
                index[d.title_words] = i = len(groups)
                groups.append((d.title_words, (d.uri,)))
                if word_groups is self.word_groups:
                    word_groups = dict(word_groups)
                for w in set(d.title_words):
                    word_groups[w] = (*word_groups.get(w, ()), i)
            else:
                words, members = groups[i]
                groups[i] = (words, (*members, d.uri))
        return tuple(groups), word_groups, index

    def domain_filter(self, domain: str) -> DomainRestriction:
        """How to restrict a vector search to ``domain`` (plus the cross-cutting domains' documents):
        ``("parent_uris", dirs)`` when those documents are exactly the documents of some directories (compact),
        else ``("doc_ids", uris)``. The list is empty when the domain has no document."""
        cached = self._filters.get(domain)
        if cached is not None:
            return cached
        wanted = {domain, *self.cross_cutting}
        uris = {u for d in wanted for u in self.domain_docs.get(d, ())} if domain in self.domain_docs else set()
        parents = {self.docs[u].parent_uri for u in uris}
        whole = all(d.domain in wanted for d in self.docs.values() if d.parent_uri in parents)
        found: DomainRestriction
        if uris and whole and None not in parents:
            found = ("parent_uris", sorted(p for p in parents if p is not None))
        else:
            found = ("doc_ids", sorted(uris))
        self._filters[domain] = found
        return found


def _count_lengths(
    term: HintTerm, doc: HintDoc, phrase_lengths: dict[int, int], alert_lengths: dict[int, int], step: int
) -> None:
    """Count ``term`` (``step`` 1) or uncount it (-1) in the length counts: a phrase key (title, heading) by how many
    query tokens it spans, an alert key by how many words ``doc``'s title has plus one (``max_phrase_tokens`` /
    ``max_alert_words``); other kinds are not counted. A count that falls to zero is dropped."""
    if term.kind == "alert":
        counts, length = alert_lengths, len(split_identifier(doc.title)) + 1
    elif term.kind in ("title", "heading"):
        counts, length = phrase_lengths, term.term.count(" ") + 1 + (len(term.term) if has_cjk(term.term) else 0)
    else:
        return
    left = counts.get(length, 0) + step
    if left > 0:
        counts[length] = left
    else:
        counts.pop(length, None)


def _longest(lengths: dict[int, int], cap: int) -> int:
    """The longest counted length, at least 1 and at most ``cap``."""
    return min(max(lengths, default=1), cap)


def _word_groups(groups: dict[tuple[str, ...], list[str]]) -> dict[str, tuple[int, ...]]:
    """Title word -> the indexes (in ``groups``' order) of the distinct titles holding it."""
    out: dict[str, list[int]] = {}
    for g, words in enumerate(groups):
        for w in set(words):
            out.setdefault(w, []).append(g)
    return {w: tuple(gs) for w, gs in out.items()}
