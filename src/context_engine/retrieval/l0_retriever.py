"""L0Retriever: first-round recall over level-0 records only (DESIGN.md §5, seed 000 §4.2 "L0Retriever").

The vector search is restricted to ``level == 0``, the caller's account, the visible (and narrowed) owner spaces,
the typed query's context type, its categories and the ``target_uri`` subtree (the typed query's
:class:`~context_engine.retrieval.scope.QueryScope`, built once per request). Each hit is hydrated from the metadata
store and dropped when the node is missing or pending. The abstract is the level-0 record's text: no content file
is touched.

Hybrid (``retrieval.seed.hybrid``): the dense list (its usual rows for ``convex``, ``keyword.fusion_depth`` rows for
the min-max and rank fusions, which normalise over them) is fused with as many BM25 rows over the same
level-0 abstracts under the same filter (``keyword.fusion``: ``convex``, ``weighted`` or ``rrf``,
:mod:`context_engine.retrieval.fusion`); the fused order
chooses and orders the seeds, ``match_reason`` becomes ``l0_hybrid``, and each seed's ``score`` stays its cosine
similarity (looked up through the scorer for a record only BM25 found), so the seed 000 §6 final score and every
threshold keep their meaning. A failing BM25 search degrades to the dense list (``RET-5001`` in the trace). What the
fusion found besides the seeds is returned with them (:class:`~context_engine.retrieval.run.FirstRound`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from context_engine.errors import ContextEngineError
from context_engine.retrieval.fusion import convex_inputs, rrf, weighted_fusion
from context_engine.retrieval.query_planner import preferred_types
from context_engine.retrieval.run import DENSE_ONLY, FirstRound, RequestNodes, SearchRun, SeedRound, unusable_reason
from context_engine.retrieval.scope import QueryScope, scope_of
from context_engine.retrieval.speakers import (
    addressed_name,
    fold_name,
    is_role,
    message_has_content,
    message_speaker,
    named_speakers,
    references,
    refers_to_user,
    speaker_of_reference,
)
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import SeedHit
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import TypedQuery
from context_engine.schema.similarity import DEFAULT_DENSE_WEIGHT, IDENTITY, SimilarityScale
from context_engine.settings import KeywordSettings, SeedSettings
from context_engine.storage.changes import AccountState
from context_engine.storage.keyword.bm25_index import KeywordScore
from context_engine.storage.protocols import Embedder, MetadataStore
from context_engine.storage.vector.l0_source import L0Source
from context_engine.storage.vector.scoring import L0Match

__all__ = ["L0Retriever"]


class KeywordSearch(Protocol):
    """BM25 over level-0 abstracts (``storage.keyword.BM25Index``)."""

    def scores_many(
        self, query: str, top_k: int, flts: Sequence[VectorFilter], *, generation: AccountState | int | None = None
    ) -> list[list[KeywordScore]]: ...


class L0Retriever:
    """Level-0 vector recall.

    Args:
        source: hands out the level-0 scorer of a request (index or in-memory).
        metadata: for hydrating hits (``get_nodes``, one batch per call).
        embedder: embeds the query when :meth:`search` is called without a prepared run.
        settings: the ``retrieval.seed`` section (``hybrid`` switches BM25 fusion on).
        keyword: BM25 over the same records (hybrid only).
        keyword_settings: the ``keyword`` section (fusion method and parameters).
        scale: the embedding model's similarity scale (``convex`` fusion).
    """

    def __init__(
        self,
        source: L0Source,
        metadata: MetadataStore,
        embedder: Embedder,
        settings: SeedSettings,
        *,
        keyword: KeywordSearch | None = None,
        keyword_settings: KeywordSettings | None = None,
        scale: SimilarityScale = IDENTITY,
    ) -> None:
        self._source = source
        self._scale = scale
        self._metadata = metadata
        self._embedder = embedder
        self._settings = settings
        self._keyword = keyword if settings.hybrid else None
        self._ks = keyword_settings or KeywordSettings()

    def search(self, typed_query: TypedQuery, ctx: RequestContext, *, run: SearchRun | None = None) -> list[SeedHit]:
        """The best ``typed_query.top_k`` level-0 hits for ``ctx`` (seed 000 §4.2).

        Args:
            typed_query: the typed query (its ``text`` is embedded unless ``run`` carries the scorer).
            ctx: the caller; the filter is built from it, never from the query's ``filters.account_id``.
            run: the request's shared state (scorer, metadata cache, trace); built here when ``None``.

        Returns:
            Seed hits ordered by ``score`` (cosine similarity, [-1, 1]) descending, then URI. Only the seed 000 §3.2
            fields; ``match_reason`` is ``l0_vector``.

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when the vector search fails; ``WRT-5031`` when the query
                cannot be embedded (no ``run``); ``WRT-5001`` when the metadata store fails.
        """
        if run is None:
            vector = self._embedder.embed_query(typed_query.text)
            run = SearchRun(self._source.scorer(ctx.account_id, vector), RequestNodes(self._metadata, ctx.account_id))
        return self.search_all([typed_query], ctx, run=run).seeds[0]

    def search_all(
        self,
        typed_queries: Sequence[TypedQuery],
        ctx: RequestContext,
        *,
        run: SearchRun,
        scopes: Sequence[QueryScope] | None = None,
        allowed: frozenset[str] | None = None,
        map_fn: Callable[..., Iterable[list[L0Match]]] = map,
        speakers: frozenset[str] | None = None,
    ) -> SeedRound:
        """:meth:`search` for every typed query of a request, hydrating their candidates together.

        Each typed query asks the scorer for ``top_k * overfetch + extra_rows`` rows; the first ``top_k`` of each
        are hydrated in one metadata batch, and only a typed query that lost rows to drops (missing, pending) has
        the rest of its rows hydrated in a second batch. ``map_fn`` (called like :func:`map`) may run the typed
        queries' similarity queries concurrently.

        Args:
            typed_queries: the plan.
            ctx: the caller.
            run: the request's scorer, metadata cache and trace.
            scopes: each typed query's scope, built once by the pipeline (built here when ``None``).
            allowed: the URIs the request's memory filters select (issue 11), or ``None`` without memory filters:
                the search is narrowed to them (a level-0 record's ``doc_id`` is its URI).
            speakers: the speakers whose turns get ``speaker_boost``, when the caller already knows them (a search
                again with the names taken out of the text); ``None``: those the query text names.

        Returns:
            Each typed query's seeds, and what the hybrid first round found besides (:class:`FirstRound`).
        """
        if scopes is None:
            scopes = [scope_of(tq, ctx) for tq in typed_queries]
        filters = [scope.filter for scope in scopes]
        if allowed is not None:  # memory filters: pre-filter to the selected memories (level-0 doc_id = URI)
            filters = [f.model_copy(update={"doc_ids": sorted(allowed)}) for f in filters]
        fetch = [tq.top_k * self._settings.overfetch + self._settings.extra_rows for tq in typed_queries]
        if self._keyword is not None and self._ks.fusion != "convex":
            # min-max and rank fusions need the deeper lists to normalise over; convex scores are absolute, so the
            # union of both lists' first `fetch` rows already holds every record that can make the seeds.
            fetch = [max(f, self._ks.fusion_depth) for f in fetch]
        # map_fn may run the similarity queries concurrently (index source); the rest is sequential.
        matches = list(map_fn(lambda i: run.scorer.top(filters[i], fetch[i]), range(len(typed_queries))))
        if run.dated and self.reads_dates:
            matches = self._with_dated(typed_queries, filters, matches, run.dated, run)
        first_round = DENSE_ONLY
        if self._keyword is not None:
            matches, first_round = self._fuse_all(typed_queries, filters, matches, run, speakers)
        windows = [min(len(ms), tq.top_k) for tq, ms in zip(typed_queries, matches, strict=True)]
        while True:
            run.nodes.fetch(m.uri for ms, w in zip(matches, windows, strict=True) for m in ms[:w])
            widened = False
            for i, tq in enumerate(typed_queries):
                usable = sum(1 for m in matches[i][: windows[i]] if unusable_reason(run.nodes.get(m.uri)) is None)
                if usable < tq.top_k and windows[i] < len(matches[i]):
                    windows[i] = len(matches[i])
                    widened = True
            if not widened:
                break
        out: list[list[SeedHit]] = []
        for tq, flt, ms, window in zip(typed_queries, filters, matches, windows, strict=True):
            out.append(self._seeds(tq, flt, ms[:window], run))
        return SeedRound(out, first_round)

    @property
    def reads_dates(self) -> bool:
        """Whether a search's dated memories (``SearchRun.dated``) are used: ``date_boost`` above 0 under the hybrid
        first round's ``convex`` fusion (the boost is added to absolute fused scores)."""
        return self._settings.date_boost > 0 and self._keyword is not None and self._ks.fusion == "convex"

    def _with_dated(
        self,
        typed_queries: Sequence[TypedQuery],
        filters: Sequence[VectorFilter],
        matches: list[list[L0Match]],
        dated: frozenset[str],
        run: SearchRun,
    ) -> list[list[L0Match]]:
        """Each memory typed query's dense matches with the best ``date_candidates`` memories of the dates the query
        names added (``dated``, :meth:`MemoryFilter.dated`; within the typed query's filter, memory filters
        included), so that the date boost of :meth:`_fuse` can lift a memory the similarity ranked too low."""
        out = list(matches)
        for i, tq in enumerate(typed_queries):
            flt = filters[i]
            ids = sorted(dated if flt.doc_ids is None else dated & set(flt.doc_ids))
            if tq.context_type != "memory" or not ids:
                continue
            have = {m.uri for m in out[i]}
            extra = run.scorer.top(flt.model_copy(update={"doc_ids": ids}), self._settings.date_candidates)
            out[i] = out[i] + [m for m in extra if m.uri not in have]
        return out

    def _fuse_all(
        self,
        typed_queries: Sequence[TypedQuery],
        filters: Sequence[VectorFilter],
        dense: list[list[L0Match]],
        run: SearchRun,
        speakers: frozenset[str] | None = None,
    ) -> tuple[list[list[L0Match]], FirstRound]:
        """Each typed query's dense matches fused with its BM25 list (a typed query whose BM25 search failed keeps
        its dense matches), and the :class:`FirstRound` of all of them."""
        keyword = self._keyword_lists(typed_queries, filters, dense, run)
        fused: list[list[L0Match]] = []
        lexical: dict[str, float] = {}
        keyword_top: dict[str, list[tuple[str, float]]] = {}
        dense_weight: float | None = None
        gap_weights: dict[str, float] = {}
        named: set[str] = set()
        user_names: set[str] = set()
        base = _weight(self._ks)
        preferred = preferred_types(typed_queries)
        memory_wanted = not preferred or "memory" in preferred
        for tq, flt, ms, kw in zip(typed_queries, filters, dense, keyword, strict=True):
            if kw is None:
                fused.append(ms)
                continue
            keyword_top[tq.context_type] = [(h.uri, h.score) for h in kw[:2]]
            weight = self._dense_weight(tq, kw, base, run) if memory_wanted else base
            matches, scores = self._fuse(tq, flt, ms, kw, run, speakers, named, weight, user_names)
            fused.append(matches)
            if scores is not None:  # convex: absolute fused scores
                lexical.update(scores)
                dense_weight = base
                if weight != base:
                    gap_weights[tq.context_type] = weight
        first = FirstRound(
            lexical=lexical,
            dense_weight=dense_weight,
            keyword_top=keyword_top,
            speakers=frozenset(named),
            gap_weights=gap_weights,
            user_names=frozenset(user_names),
        )
        return fused, first

    def _dense_weight(self, tq: TypedQuery, keyword: list[KeywordScore], base: float, run: SearchRun) -> float:
        """The dense weight ``w`` of a typed query's fusion: ``base`` (``keyword.dense_weight``, the model's tuned
        weight), raised to ``retrieval.seed.lexical_gap_dense_weight`` for a **memory** typed query when BM25 finds
        little of the query in any memory: no hit holds ``lexical_gap_share`` of the query's information
        (``KeywordScore.matched``: the Lucene idf of the query tokens a record holds, over their sum; whatever the
        record's length). A question about a person asked in other words than their memory ("What does the user
        cook in bulk at the weekend?" for "Sundays are meal prep day, usually a big batch of chilli") shares only
        incidental words with the memories ("user", "weekend"), and at the tuned weight those decide the order; the
        meaning is then the better guide. Documents keep the tuned weight: it was tuned on them (SciFact, the
        runbooks), and a question in another language than the document, whose few shared words are identifiers,
        loses with a higher one (eval/README.md). The raised weight lifts the memories' fused scores, which the
        merge compares with the other types' on one scale: so :meth:`_fuse_all` applies it only when the planner
        prefers memories or no type, never to a request whose intent is a skill or a document ("runbook for ...")."""
        settings = self._settings
        if (
            self._ks.fusion != "convex"
            or tq.context_type != "memory"
            or not keyword
            or base >= settings.lexical_gap_dense_weight
        ):
            return base
        best = max(h.matched for h in keyword)
        if best >= settings.lexical_gap_share:
            return base
        weight = settings.lexical_gap_dense_weight
        run.trace.event(
            "seed", "lexical_gap", context_type=tq.context_type, best_matched=round(best, 3), dense_weight=weight
        )
        return weight

    def _keyword_lists(
        self,
        typed_queries: Sequence[TypedQuery],
        filters: Sequence[VectorFilter],
        dense: Sequence[list[L0Match]],
        run: SearchRun,
    ) -> list[list[KeywordScore] | None]:
        """Each typed query's BM25 list (``None`` where BM25 failed: a warning, dense seeds only). Typed queries of
        one text (the planner's usual plan: one per context type) share one scoring of the postings
        (``BM25Index.scores_many``: URIs and scores only; ``_resolve`` takes the texts from the scorer)."""
        assert self._keyword is not None
        ks = self._ks
        depths = [
            max(len(ms) if ks.fusion == "convex" else ks.fusion_depth, tq.top_k)
            for tq, ms in zip(typed_queries, dense, strict=True)
        ]
        by_text: dict[str, list[int]] = {}
        for i, tq in enumerate(typed_queries):
            by_text.setdefault(tq.text, []).append(i)
        out: list[list[KeywordScore] | None] = [None] * len(typed_queries)
        for text, group in by_text.items():
            try:
                lists = self._keyword.scores_many(
                    text, max(depths[i] for i in group), [filters[i] for i in group], generation=run.generation
                )
            except ContextEngineError as err:
                run.trace.warn(err.code, f"BM25 search failed ({err.message[:120]}); dense seeds only", stage="seed")
                continue
            for i, hits in zip(group, lists, strict=True):
                out[i] = hits[: depths[i]]
        return out

    def _fuse(
        self,
        tq: TypedQuery,
        flt: VectorFilter,
        dense: list[L0Match],
        keyword: list[KeywordScore],
        run: SearchRun,
        speakers: frozenset[str] | None,
        named: set[str],
        weight: float,
        user_names: set[str],
    ) -> tuple[list[L0Match], dict[str, float] | None]:
        """The dense matches fused with the BM25 list (module docstring), as many as the dense list had, in fused
        order; with ``convex`` fusion (dense weight ``weight``, :meth:`_dense_weight`) also their fused scores by URI
        (absolute, so usable as a relevance score downstream: the expansion lifts vector scores to them), else
        ``None``. The speakers given the boost are added to ``named``, the user's names the query used to
        ``user_names``."""
        ks = self._ks
        lexical: dict[str, float] | None = None
        by_uri = {m.uri: m for m in dense}
        only_bm25 = {h.uri: h for h in keyword if h.uri not in by_uri}
        n = len(dense) or None
        if ks.fusion == "convex":
            # Both sides absolute: look up the cosine of BM25's best records the dense list lacks, then sum.
            self._resolve(flt, [h.uri for h in keyword[: tq.top_k] if h.uri in only_bm25], by_uri, run)
            lists = convex_inputs(
                [(u, m.similarity) for u, m in by_uri.items()], [(h.uri, h.coverage) for h in keyword], self._scale
            )
            dated = run.dated if run.dated and tq.context_type == "memory" else None
            fused = weighted_fusion(lists, [weight, 1.0 - weight], normalization="none", top_k=None if dated else n)
            if dated:  # the cut to n counts the date boost, so a memory of the date the dense list ranked low stays
                boost = self._settings.date_boost
                kept = {u for u, _ in _ranked((u, v + boost if u in dated else v) for u, v in fused)[:n]}
                fused = [(u, v) for u, v in fused if u in kept]
            fused = self._adjust_messages(tq.text, fused, by_uri, run, speakers, named, user_names)
            if dated:
                fused = _ranked((u, v + boost if u in dated else v) for u, v in fused)
            lexical = {u: v for u, v in fused if u in by_uri}
        else:
            pairs = [[(m.uri, m.similarity) for m in dense], [(h.uri, h.score) for h in keyword]]
            if ks.fusion == "rrf":
                fused = rrf(pairs, k=ks.rrf_k, depth=ks.fusion_depth, top_k=n)
            else:
                fused = weighted_fusion(pairs, [_weight(ks), 1.0 - _weight(ks)], depth=ks.fusion_depth, top_k=n)
            self._resolve(flt, [u for u, _ in fused if u in only_bm25], by_uri, run)
        run.trace.event("seed", "fused", context_type=tq.context_type, bm25_hits=len(keyword), fusion=ks.fusion)
        return [by_uri[u] for u, _ in fused if u in by_uri], lexical

    def _adjust_messages(
        self,
        query: str,
        fused: list[tuple[str, float]],
        by_uri: dict[str, L0Match],
        run: SearchRun,
        speakers: frozenset[str] | None,
        found: set[str],
        user_names: set[str] | None = None,
    ) -> list[tuple[str, float]]:
        """Conversation messages among the fused candidates (:mod:`context_engine.retrieval.speakers`): a message
        that carries no content of its own (an acknowledgement, a question back) has its fused score multiplied by
        ``content_free_factor``, so it ranks below the fact it answers; the turns of the speakers the query names
        get ``speaker_boost`` added (``speakers`` when given, else those ``query`` names; added to ``found``); a
        query that names none of them but refers to the user (``speakers.refers_to_user``: "Where does she work?",
        "the user") boosts the turns stored with the role ``user`` instead (:meth:`_user_speakers`), and so does a
        query naming someone the assistant greets at the start of a candidate message ("Where does Priya work?" with
        "assistant: Hi Priya, congratulations!" among the candidates, :func:`_addressed_user`: the name, added to
        ``user_names``, is the user's; beside a named speaker too). Re-ranked; unchanged when no candidate is a
        message."""
        speaker_of = {u: message_speaker(u, m.text) for u, m in by_uri.items()}
        if not any(speaker_of.values()):
            return fused
        names = frozenset(s for s in speaker_of.values() if s)
        factor, boost = self._settings.content_free_factor, self._settings.speaker_boost
        if boost <= 0.0:
            named: set[str] = set()
        elif speakers is not None:
            named = set(speakers) & names
        else:
            named = named_speakers(query, names)
        user_reference = False
        # the user's greeted name counts beside a named speaker too: "What did Priya ask the assistant?" names both
        addressed = _addressed_user(query, speaker_of, by_uri, names) if boost > 0.0 else []
        if addressed or (not named and boost > 0.0 and refers_to_user(query)):
            named, user_reference = set(named) | self._user_speakers(speaker_of, run), True
            if user_names is not None:
                user_names.update(addressed)
        found.update(named)
        adjusted: list[tuple[str, float]] = []
        demoted = 0
        for u, v in fused:
            speaker = speaker_of.get(u)
            if speaker is not None and factor < 1.0 and not message_has_content(by_uri[u].text, speaker, names):
                v *= factor
                demoted += 1
            if speaker in named:
                v += boost
            adjusted.append((u, v))
        if named or demoted:
            extra = {"user_reference": True} if user_reference else {}
            run.trace.event("seed", "messages", named=sorted(named), content_free=demoted, **extra)
        return sorted(adjusted, key=lambda p: (-p[1], p[0]))

    @staticmethod
    def _user_speakers(speaker_of: dict[str, str | None], run: SearchRun) -> set[str]:
        """The speakers of the candidate messages stored with the role ``user`` (a query that refers to the user
        without a name, :func:`~context_engine.retrieval.speakers.refers_to_user`). Messages stored without a
        speaker are labelled by their role; only a named speaker needs its role read from the metadata."""
        speakers = {s for s in speaker_of.values() if s}
        by_role = {s for s in speakers if is_role(s) and speaker_of_reference(s) == "user"}  # "user", "用户"
        if all(is_role(s) for s in speakers):
            return by_role
        roles = run.nodes.roles(u for u, s in speaker_of.items() if s and not is_role(s))
        return {s for u, s in speaker_of.items() if s and roles.get(u) == "user"} | by_role

    @staticmethod
    def _resolve(flt: VectorFilter, uris: list[str], by_uri: dict[str, L0Match], run: SearchRun) -> None:
        """Add matches for records only BM25 found, with their cosine from the scorer; a record the scorer cannot see
        (filtered out, or gone) is not a seed."""
        if uris:
            by_uri.update(run.scorer.matches(flt, uris))

    def _seeds(
        self, typed_query: TypedQuery, flt: VectorFilter, matches: Sequence[L0Match], run: SearchRun
    ) -> list[SeedHit]:
        trace = run.trace
        seeds: list[SeedHit] = []
        for m in matches:
            node = run.nodes.get(m.uri)
            reason = unusable_reason(node)
            if reason is not None or node is None:
                trace.drop("seed", m.uri, reason or "missing")
                continue
            seeds.append(
                SeedHit(
                    uri=node.uri,
                    score=m.similarity,
                    category=node.category or "",
                    owner_space=node.owner_space,
                    abstract=m.text,
                    has_overview=node.has_overview,
                    has_content=node.has_content,
                    match_reason="l0_hybrid" if self._keyword is not None else "l0_vector",
                )
            )
            if len(seeds) == typed_query.top_k:
                break
        trace.event(
            "seed",
            "searched",
            context_type=typed_query.context_type,
            source=run.scorer.name,
            fetched=len(matches),
            kept=len(seeds),
        )
        if trace.detailed:
            trace.detail(
                "seed",
                typed_query.context_type,
                {
                    "source": run.scorer.name,
                    "filter": flt.model_dump(exclude_none=True),
                    "hits": [{"uri": s.uri, "similarity": round(s.score, 6)} for s in seeds],
                },
            )
        return seeds


def _addressed_user(
    query: str, speaker_of: dict[str, str | None], by_uri: dict[str, L0Match], names: frozenset[str]
) -> list[str]:
    """The names ``query`` refers to, capitalised as names are, that an assistant's candidate message greets the user
    by (:func:`~context_engine.retrieval.speakers.addressed_name`: "Hi Priya, ..."), a greeted full name also by its
    first word ("Priya" for "Priya Sharma"). Not a speaker of the candidates, and not a name another speaker's
    candidate message says: the user never calls themselves by name, while an assistant's draft for someone the
    user speaks of opens with a greeting too ("my landlord Greg" and "assistant: Hi Greg, just a heads-up ...").
    A message stored under the assistant's role only (a named assistant's user is named too)."""
    greeted: set[str] = set()
    others: list[str] = []
    for uri, speaker in speaker_of.items():
        if speaker is None:
            continue
        text = by_uri[uri].text[len(speaker) + 2 :]
        if not is_role(speaker) or speaker_of_reference(speaker) != "assistant":
            others.append(text)
            continue
        name = addressed_name(text)
        if name is not None:
            greeted.update({name, name.split()[0]})
    folded = {fold_name(n) for n in names}
    greeted = {n for n in greeted if fold_name(n) not in folded and not any(references(t, (n,)) for t in others)}
    if not greeted:
        return []
    return sorted({m.group(2) for m in references(query, greeted) if m.group(2)[:1].isupper()})


def _ranked(pairs: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """``(uri, score)`` pairs by score descending, then URI."""
    return sorted(pairs, key=lambda p: (-p[1], p[0]))


def _weight(ks: KeywordSettings) -> float:
    """``keyword.dense_weight`` (the service resolves ``None`` to the model's tuned weight before it gets here)."""
    return DEFAULT_DENSE_WEIGHT if ks.dense_weight is None else ks.dense_weight
