"""Final score, deduplication and thresholds of search_memory (seed 000 §6; DESIGN.md §5).

``final = (w_v·vector + w_h·hierarchy + w_c·category_boost + w_t·target_uri_boost) / (w_v + w_h + w_c + w_t)``
with the default weights 0.65 / 0.20 / 0.10 / 0.05 (sum 1), every component in 0..1, so ``final`` is in 0..1 and
higher is better. Components:

* ``vector_score``: with the hybrid first round and ``convex`` fusion (the default), the node's fused score
  ``w·clip(scale(cosine), 0, 1) + (1 − w)·BM25 coverage`` (``retrieval/fusion.py``), and ``w·clip(scale(cosine), 0, 1)``
  for a candidate BM25 did not find (an expansion hit): one scale for every candidate, so a node that matches only on
  meaning cannot outrank one that matches on meaning and words (on conversational memory the old ``max(cosine,
  fused)`` let chit-chat siblings with a high cosine crowd out the turns that held the answer: LoCoMo R@10 0.62 ->
  0.73, eval/README.md). Without hybrid: ``clip(scale(cosine), 0, 1)``, the cosine similarity of the query and the
  node's abstract on the engine's calibrated scale (the embedding model's
  :class:`~context_engine.schema.similarity.SimilarityScale`, the identity for all-MiniLM-L6-v2), with negative values
  (no similarity) at 0. Clipping rather than ``(cos + 1) / 2`` keeps the scale of the raw similarity, so a threshold
  such as 0.3 keeps its usual meaning for sentence embeddings (unrelated pairs sit near 0 with all-MiniLM-L6-v2;
  ``(cos + 1) / 2`` would put them near 0.5).
* ``hierarchy_score``: path consistency, computed by ``HierarchicalSearcher`` (see its docstring), 0..1.
* ``category_boost``: 1 when the node's category is named by the query: one of the typed query's ``categories``,
  or the category name (or a configured synonym, e.g. 偏好 -> preference) occurring in the query text; else 0.
* ``target_uri_boost``: 1 when a ``target_uri`` is in force and the node lies in its subtree; else 0.

Recency (memories only, off by default; issue 11): with ``memory.recency_half_life_days`` = ``h`` set, a memory's
``recency = 0.5 ** (age_days / h)`` (age from ``occurred_at``, else ``updated_at``; 1 for now) and
``final = (1 − r)·final + r·recency`` with ``r`` = ``memory.recency_weight`` (0.1). Other context types are unchanged.

Scores are rounded to 6 decimals so that the same request always ranks identically, whichever similarity path
(index or in-memory matrix) produced them. Ranking: score descending, then ``has_overview`` first, then URI.

Merging the typed queries of a request (:meth:`Scorer.merge`), in this order:

1. **Dedupe** by URI (:func:`dedupe_by_uri`).
2. **Intent boost**: the planner ranks context types, it never excludes one (``query_planner``). A hit whose context
   type the planner preferred gets ``final = min(1, final + intent_boost)`` (``retrieval.scoring.intent_boost``,
   default 0.05: enough to order near-ties by the intent, too small to lift a weak match of the preferred type over
   a clearly better one of another). No preferred type (no intent keyword, or the caller named the types): no boost.
   Then the question's own shape: memories holding the answer type its opening words ask for (a time for "when",
   a name for "who") get ``answer_type_boost`` (``retrieval/answer_type.py``), and a question about the present
   state ("now", "still") prefers the later memories and, of two on the same topic that match about equally, the
   later one (``retrieval/current_state.py``).
3. **Threshold**: only when one is in force. ``default_score_threshold`` is ``None`` (no threshold at the defaults,
   chosen per model on the dev sets, docs/search_memory.md), so at the defaults a request returns
   ``min(top_k, candidates)`` hits. A caller's ``score_threshold`` keeps ``score > threshold`` (``>=`` with
   ``score_gte``) except for *protected* hits, which a threshold never drops: a file whose name (the URI's last
   segment without extension, ``-``/``_`` read as spaces, at least 4 characters) the query names exactly, as a
   whole word (case-insensitively), and the first BM25 hit of a typed query when it leads by a clear margin
   (its BM25 score at least ``bm25_protect_margin`` times the second one's, or the only BM25 hit).
4. **Top k with earned expansion**: the ``top_k`` best by :func:`rank_key`, then a direct hit (``source='seed'``)
   left out is swapped in for the expansion hit in the top ``k`` with the lowest own vector score while that
   expansion hit's vector score is lower than the direct hit's (:func:`select_top`). An expansion hit so keeps its
   place only when its own match earns it: path consistency or a category may order it among direct hits, never
   push out a direct hit that matches the query better on its own.
5. **Directories below memories for a memory-intent query** (:func:`is_memory_intent`): when the planner preferred
   the ``memory`` type, or every candidate is a memory, the answer is a memory, and a directory ("Directory
   2024-06-health: 10 items: Sam, assistant, ...") is only a way to one. Every directory then ranks below the last
   memory file hit, and keeps its score order among what follows (:func:`below_memory_files`); steps 3 and 4 run on
   that order (a directory never takes a memory's place by the expansion swap either). So directories never crowd
   memories out of the ``top_k`` slots, still fill slots the memories leave, and come back as they were when no
   memory matches. The order of the file hits is unchanged, and other queries rank directories among files.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from context_engine.retrieval.answer_type import AnswerType, prefer_answer_type
from context_engine.retrieval.current_state import asks_current_state, prefer_corrections, prefer_latest, supersede
from context_engine.retrieval.replies import prefer_reports, prefer_sources
from context_engine.retrieval.scope import within_target
from context_engine.schema.hits import NodeHit
from context_engine.schema.query import TypedQuery
from context_engine.schema.similarity import IDENTITY, SimilarityScale
from context_engine.settings import ScoringSettings

__all__ = [
    "MergeResult",
    "Scorer",
    "below_memory_files",
    "dedupe_by_uri",
    "is_memory_intent",
    "names_node",
    "passes_threshold",
    "rank_key",
    "select_top",
    "vector_score",
]

_DECIMALS = 6
_MIN_NAME_CHARS = 4  # shorter file names ("a.md", "faq") are too common as words to count as being named


def vector_score(similarity: float, scale: SimilarityScale = IDENTITY) -> float:
    """Cosine similarity in [-1, 1] mapped to 0..1: calibrated by ``scale``, then clipped (module docstring)."""
    return min(1.0, max(0.0, scale(similarity)))


def rank_key(hit: NodeHit) -> tuple[float, bool, str]:
    """Sort key: score descending, nodes with an overview first on ties, then URI ascending (deterministic)."""
    return (-hit.score, not hit.has_overview, hit.uri)


def dedupe_by_uri(hits: Iterable[NodeHit]) -> list[NodeHit]:
    """One hit per URI, the best by :func:`rank_key` (then a seed over an expansion hit), in ranked order."""
    best: dict[str, NodeHit] = {}
    for h in hits:
        kept = best.get(h.uri)
        if kept is None or (rank_key(h), h.source != "seed") < (rank_key(kept), kept.source != "seed"):
            best[h.uri] = h
    return sorted(best.values(), key=rank_key)


def passes_threshold(score: float, threshold: float, gte: bool) -> bool:
    """``score > threshold`` by default, ``score >= threshold`` with ``score_gte`` (seed 000 §6)."""
    return score >= threshold if gte else score > threshold


def select_top(hits: Sequence[NodeHit], top_k: int, *, memory_intent: bool = False) -> list[NodeHit]:
    """The ``top_k`` results of ranked ``hits`` (best first by :func:`rank_key`) where expansion hits earn their place.

    Start from the first ``top_k``; while a direct hit (``source='seed'``) outside them has a higher own vector score
    than an expansion hit inside, the expansion hit with the lowest vector score leaves and the direct hit enters
    (module docstring, step 4). With ``memory_intent`` (step 5) the order is :func:`below_memory_files` of the rank
    order, and a directory never enters by the swap. Returns at most ``top_k`` hits in that order; deterministic.
    """
    if memory_intent:
        hits = below_memory_files(hits)
    top = list(hits[:top_k])
    waiting = sorted(
        (h for h in hits[top_k:] if h.source == "seed" and not (memory_intent and h.is_dir)),
        key=lambda h: (-h.vector_score, rank_key(h)),
    )
    for direct in waiting:
        weaker = [h for h in top if h.source != "seed" and h.vector_score < direct.vector_score]
        if not weaker:
            break  # the waiting hits come by decreasing vector score: none of the later ones can enter either
        top.remove(max(weaker, key=lambda h: (-h.vector_score, rank_key(h))))  # weakest match; on ties the lowest rank
        top.append(direct)
    top.sort(key=rank_key)
    return below_memory_files(top) if memory_intent else top


def is_memory_intent(preferred: Collection[str], candidates: Sequence[NodeHit]) -> bool:
    """Whether a request asks for memories (module docstring, step 5): the planner preferred the ``memory`` type, or
    every candidate is a memory (the caller searched memories only, or the store holds nothing else)."""
    if "memory" in preferred:
        return True
    return bool(candidates) and all(h.context_type == "memory" for h in candidates)


def below_memory_files(ranked: Sequence[NodeHit]) -> list[NodeHit]:
    """``ranked`` (best first by :func:`rank_key`) with every directory moved below the last memory file hit, where
    it takes its :func:`rank_key` place among the hits that follow (module docstring, step 5). The file hits keep
    their order; without a memory file hit the order is unchanged."""
    last = max((i for i, h in enumerate(ranked) if not h.is_dir and h.context_type == "memory"), default=-1)
    head = [h for h in ranked[: last + 1] if not h.is_dir]
    held = [h for h in ranked[: last + 1] if h.is_dir]
    return head + sorted([*held, *ranked[last + 1 :]], key=rank_key)


def names_node(query: str, uri: str) -> bool:
    """Whether ``query`` names the file ``uri`` exactly (module docstring, step 3); directories never match."""
    if uri.endswith("/"):
        return False
    stem = uri.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    name = " ".join(re.sub(r"[-_]+", " ", _normalise(stem)).split())
    if len(name) < _MIN_NAME_CHARS:
        return False
    text = " ".join(re.sub(r"[-_]+", " ", _normalise(query)).split())
    return _mentions(text, name)


@dataclass(slots=True)
class MergeResult:
    """What :meth:`Scorer.merge` decided.

    Attributes:
        final: the results, at most ``top_k``, best first.
        merged: every deduplicated candidate after the intent boost, ranked (for the trace).
        below_threshold: candidates the threshold dropped.
        protected: URIs a threshold could not drop (named by the query, or BM25's clear first), sorted.
        swapped_in: direct hits that took the place of an expansion hit with a weaker own match.
        memory_intent: whether directories were ranked below the memory file hits (step 5).
        answer_type: the answer type whose holders got ``answer_type_boost`` (step 2), or ``None``.
        current_state: whether the query asks for the current state, so the current-state rules ran (step 2).
        superseded: later same-topic statements ordered first by :func:`~context_engine.retrieval.current_state.
            supersede`.
        corrected: corrections ordered above what they correct by :func:`~context_engine.retrieval.current_state.
            prefer_corrections` (any question).
        reported: the assistant's reports of an action ordered above the request they carry out by
            :func:`~context_engine.retrieval.replies.prefer_reports`.
        echoed: the user's statements ordered above the assistant's echo of them by
            :func:`~context_engine.retrieval.replies.prefer_sources`.
    """

    final: list[NodeHit]
    merged: list[NodeHit]
    below_threshold: int = 0
    protected: list[str] = field(default_factory=list)
    swapped_in: int = 0
    memory_intent: bool = False
    answer_type: AnswerType | None = None
    current_state: bool = False
    superseded: int = 0
    corrected: int = 0
    reported: int = 0
    echoed: int = 0


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _mentions(text: str, word: str) -> bool:
    """Whether ``word`` occurs in ``text`` (both normalised): as a whole word for ASCII, as a substring otherwise."""
    w = _normalise(word).strip()
    if not w:
        return False
    if w.isascii():
        return re.search(r"(?<![\w])" + re.escape(w) + r"(?![\w])", text) is not None
    return w in text


class Scorer:
    """Computes the seed 000 §6 components and the final score of candidates.

    Args:
        settings: the ``retrieval.scoring`` section (weights, synonyms, default threshold).
        scale: the embedding model's similarity scale (``vector_score``).
    """

    def __init__(
        self,
        settings: ScoringSettings,
        scale: SimilarityScale = IDENTITY,
        *,
        recency_half_life_days: float | None = None,
        recency_weight: float = 0.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._settings = settings
        self.scale = scale
        self._half_life_s = recency_half_life_days * 86_400.0 if recency_half_life_days else None
        self._recency_weight = recency_weight
        self._clock = clock
        s = settings
        self._weights = (s.weight_vector, s.weight_hierarchy, s.weight_category, s.weight_target)
        self._total = sum(self._weights)

    def vector_score(self, similarity: float) -> float:
        """:func:`vector_score` on this scorer's scale."""
        return vector_score(similarity, self.scale)

    @property
    def default_threshold(self) -> float | None:
        """The threshold in force when a request gives none; ``None``: no threshold (module docstring, step 3)."""
        return self._settings.default_score_threshold

    def final(self, vector: float, hierarchy: float, category: float, target: float) -> float:
        """The weighted mean of the four 0..1 components, rounded to 6 decimals."""
        wv, wh, wc, wt = self._weights
        value = (wv * vector + wh * hierarchy + wc * category + wt * target) / self._total
        return round(min(1.0, max(0.0, value)), _DECIMALS)

    def category_terms(self, typed_query: TypedQuery, categories: Iterable[str]) -> set[str]:
        """Which of ``categories`` the typed query names (its categories, the query text, synonyms)."""
        text = _normalise(typed_query.text)
        named = set(typed_query.categories)
        for cat in set(categories):
            if not cat or cat in named:
                continue
            if _mentions(text, cat) or any(_mentions(text, s) for s in self._settings.category_synonyms.get(cat, ())):
                named.add(cat)
        return named

    def score(self, typed_query: TypedQuery, hits: Sequence[NodeHit]) -> list[NodeHit]:
        """``hits`` with ``category_boost``, ``target_uri_boost`` and ``score`` set (in place: the hits belong to the
        request), in ranked order. ``vector_score`` and ``hierarchy_score`` are taken as the searcher computed them.
        """
        named = self.category_terms(typed_query, {h.category for h in hits})
        target = typed_query.target_uri
        now = self._clock() if self._half_life_s else None
        for h in hits:
            h.category_boost = 1.0 if h.category and h.category in named else 0.0
            h.target_uri_boost = 1.0 if target and within_target(h.uri, target) else 0.0
            h.score = self.final(h.vector_score, h.hierarchy_score, h.category_boost, h.target_uri_boost)
            if now is not None and h.context_type == "memory" and not h.is_dir:
                h.recency = self.recency(h.occurred_at or h.updated_at, now)
                w = self._recency_weight
                h.score = round(min(1.0, max(0.0, (1.0 - w) * h.score + w * h.recency)), _DECIMALS)
        return sorted(hits, key=rank_key)

    def recency(self, when: datetime | None, now: datetime) -> float:
        """The recency component: ``0.5 ** (age / half-life)`` in 0..1 (1 for now or the future, 0 without a time)."""
        if when is None or not self._half_life_s:
            return 0.0
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        age = max(0.0, (now - when).total_seconds())
        return round(math.pow(0.5, age / self._half_life_s), _DECIMALS)

    def merge(
        self,
        pool: Iterable[NodeHit],
        *,
        query: str,
        top_k: int,
        threshold: float | None,
        gte: bool = False,
        preferred: Collection[str] = (),
        keyword_top: Mapping[str, Sequence[tuple[str, float]]] | None = None,
        embed: Callable[[list[str]], np.ndarray] | None = None,
        roles: Callable[[list[str]], Mapping[str, str]] | None = None,
    ) -> MergeResult:
        """Merge the scored, rechecked hits of a request's typed queries (module docstring, steps 1-5).

        Args:
            pool: every typed query's hits (scores set by :meth:`score`); mutated: preferred hits get the boost.
            query: the caller's query text (for the name protection).
            top_k: results wanted, 1..50.
            threshold: the final-score threshold in force (0..1), or ``None`` for none.
            gte: compare with ``>=`` instead of ``>``.
            preferred: the context types the planner ranked first (``query_planner.preferred_types``).
            keyword_top: per context type, the first two BM25 hits ``(uri, bm25 score)`` of the first round.
            embed: texts -> vectors (the embedding model's ``embed_documents``), for the current-state rule's
                same-topic test; ``None`` skips that test.
            roles: URIs -> the ``role`` their messages were stored with (``RequestNodes.roles``), read only when an
                assistant's report of an action is among the candidates; ``None``: the report rule is skipped.

        Returns:
            A :class:`MergeResult`; ``final`` holds ``min(top_k, candidates)`` hits when ``threshold`` is ``None``,
            in :func:`rank_key` order, with directories below the memory file hits for a memory-intent query.
        """
        merged = dedupe_by_uri(pool)
        boost = self._settings.intent_boost
        if preferred and boost > 0:
            for h in merged:
                if h.context_type in preferred:
                    h.score = round(min(1.0, h.score + boost), _DECIMALS)
            merged.sort(key=rank_key)
        s = self._settings
        answer_type = prefer_answer_type(query, merged, s.answer_type_boost)
        if answer_type is not None:
            merged.sort(key=rank_key)
        superseded = 0
        current_state = asks_current_state(query)
        if current_state:
            prefer_latest(query, merged, s.current_state_boost)
            if embed is not None and s.current_state_margin > 0 and s.current_state_same_topic < 1:
                superseded = supersede(
                    merged, embed, same_topic=s.current_state_same_topic, margin=s.current_state_margin, query=query
                )
            merged.sort(key=rank_key)
        corrected = prefer_corrections(
            merged, embed, same_topic=s.current_state_same_topic, margin=s.correction_margin, query=query
        )
        reported = prefer_reports(query, merged, s.report_margin, roles)
        echoed = prefer_sources(merged, s.echo_margin, roles)
        if corrected or reported or echoed:
            merged.sort(key=rank_key)
        if threshold is None:
            passing, protected = merged, set()
        else:
            protected = {h.uri for h in merged if names_node(query, h.uri)}
            margin = self._settings.bm25_protect_margin
            for top in (keyword_top or {}).values():
                if top and (len(top) == 1 or top[0][1] >= margin * top[1][1]):
                    protected.add(top[0][0])
            passing = [h for h in merged if h.uri in protected or passes_threshold(h.score, threshold, gte)]
        memory_intent = is_memory_intent(preferred, merged)
        if memory_intent:
            passing = below_memory_files(passing)
        final = select_top(passing, top_k, memory_intent=memory_intent)
        first = {id(h) for h in passing[:top_k]}
        swapped = sum(1 for h in final if id(h) not in first)
        return MergeResult(
            final=final,
            merged=merged,
            below_threshold=len(merged) - len(passing),
            protected=sorted(protected & {h.uri for h in merged}),
            swapped_in=swapped,
            memory_intent=memory_intent,
            answer_type=answer_type,
            current_state=current_state,
            superseded=superseded,
            corrected=corrected,
            reported=reported,
            echoed=echoed,
        )
