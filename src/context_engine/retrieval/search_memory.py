"""The search_memory and read_memory pipelines (DESIGN.md §5-6, §8-9; seed 000 §4-7).

``search_memory``: validate -> tenancy scope (target_uri checked before any search) -> ``QueryPlanner.plan`` ->
embed the query once -> ``L0Retriever.search`` per typed query -> ``HierarchicalSearcher.expand`` + ``Scorer`` ->
``CandidateRechecker.recheck`` -> merge typed queries (``Scorer.merge``: dedupe by URI, intent boost, threshold
that never drops a protected hit, top_k where expansion hits earn their place, directories below memories for a
memory-intent query) -> ``RetrievalAssembler.assemble`` -> ``MatchQualityRater`` (``match_quality``: how confident
the best hit is, ``retrieval/match_quality.py``; a label, never a filter). Each stage is timed and traced; every
degradation of seed 000 §7 becomes a ``trace.warnings`` line and a ``retrieval.fallback.count`` increment:

========  ===============================================  =============================================
code      when                                             result
========  ===============================================  =============================================
RET-4041  target_uri visible but missing                   target ignored
RET-4221  planner prefers no type (informational), or    memory + skill + resource, ranked equally
          the planner failed (an exception, an empty plan)
RET-5001  query embedding or vector search failed          empty hits, ``retryable=true`` (during expansion:
                                                           seeds kept without expansion)
RET-5002  recheck failed                                   candidates kept unchecked
RET-5003  assembly failed                                  ``hits`` empty, ``seed_hits`` returned raw
RET-5004  expansion time budget spent                      shallower expansion
========  ===============================================  =============================================

``read_memory``: ``MemoryReadService.read`` (ACL before storage) then, when asked, its one-hop relations; timed as
``read_ms`` and ``relations_ms``.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.observability.metrics import Metrics
from context_engine.observability.trace import TraceRecorder
from context_engine.retrieval.assembler import RetrievalAssembler
from context_engine.retrieval.candidate_rechecker import CandidateRechecker
from context_engine.retrieval.dates import asks_only_the_date
from context_engine.retrieval.hierarchical_searcher import HierarchicalSearcher
from context_engine.retrieval.l0_retriever import L0Retriever
from context_engine.retrieval.match_quality import MatchQualityRater, query_names
from context_engine.retrieval.memory_filter import MemoryFilter
from context_engine.retrieval.memory_read_service import MemoryReadService
from context_engine.retrieval.query_planner import QueryPlanner, preferred_types
from context_engine.retrieval.query_transform import QueryTransformer, without_speakers
from context_engine.retrieval.query_vectors import QueryVectors, TextVectors
from context_engine.retrieval.redaction import Redactor
from context_engine.retrieval.replies import unlift_orphans
from context_engine.retrieval.run import RequestNodes, SearchRun, SeedRound
from context_engine.retrieval.scope import QueryScope, effective_owner_spaces, scopes_of
from context_engine.retrieval.scoring import Scorer
from context_engine.retrieval.speakers import refers_to_user
from context_engine.schema.context import RequestContext
from context_engine.schema.conversation import message_speaker
from context_engine.schema.hits import NodeHit, RetrievedBlock, SeedHit
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import (
    TOP_K_MAX,
    TOP_K_MIN,
    MatchQuality,
    NextActions,
    ReadMemoryRequest,
    ReadMemoryResponse,
    ReadTrace,
    SearchMemoryRequest,
    SearchMemoryResponse,
    SearchTrace,
    TypedQuery,
)
from context_engine.schema.text import check_query_text
from context_engine.schema.uri import ContextURI, parse_read_target
from context_engine.settings import RetrievalSettings
from context_engine.storage.protocols import Embedder, MetadataStore
from context_engine.storage.vector.l0_source import L0Source

__all__ = ["ReadMemoryPipeline", "SearchMemoryPipeline", "new_request_id"]

_LOG = logging.getLogger("context_engine.retrieval")
_DEGRADED_SEARCH = (ErrorCode.VECTOR_SEARCH_FAILED, ErrorCode.EMBEDDING_FAILED)


def new_request_id() -> str:
    """A search's ``request_id`` (the response's, and its audit row's ``invocation_id``): 32 hex digits."""
    return uuid.uuid4().hex


class SearchMemoryPipeline:
    """Orchestrates the search_memory stages; plain code that reads top to bottom (STYLE.md).

    Args:
        planner, retriever, searcher, rechecker, scorer, assembler: the stages.
        source: the level-0 similarity source (index or in-memory).
        embedder: embeds the query (once per request).
        metadata: for the target check and hydration.
        redactor: pattern redaction of the returned seed abstracts.
        metrics: request, stage, seed, recheck, threshold, fallback and match-quality counters.
        settings: the ``retrieval`` section.
        rater: labels each answer's ``match_quality`` (default: from ``settings.match_quality`` on the scorer's
            similarity scale).

    The call's audit row is the service's to write (``ContextEngineService.search_memory``: the layer above, with
    :class:`context_engine.knowledge.search_audit.SearchAudit`), so that a request's walk goes down the layers only.
    """

    def __init__(
        self,
        *,
        planner: QueryPlanner,
        retriever: L0Retriever,
        searcher: HierarchicalSearcher,
        rechecker: CandidateRechecker,
        scorer: Scorer,
        assembler: RetrievalAssembler,
        source: L0Source,
        embedder: Embedder,
        metadata: MetadataStore,
        redactor: Redactor,
        metrics: Metrics,
        settings: RetrievalSettings,
        rater: MatchQualityRater | None = None,
    ) -> None:
        self.planner = planner
        self.retriever = retriever
        self.searcher = searcher
        self.rechecker = rechecker
        self.scorer = scorer
        self.assembler = assembler
        self.source = source
        self._embedder = embedder
        self._metadata = metadata
        self._redactor = redactor
        self._metrics = metrics
        self._settings = settings
        self.rater = rater or MatchQualityRater(settings.match_quality, scorer.scale)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._memory_filter = MemoryFilter(metadata)
        self._transformer = QueryTransformer(first_person=settings.query_transform.first_person)
        self._text_vectors = TextVectors()  # hits' texts embedded alone, kept across requests

    def _embed_texts(self, texts: list[str]) -> np.ndarray:
        """``texts`` embedded as documents (the current-state rule's same-topic test, ``Scorer.merge``), from the
        vectors kept across requests (:class:`TextVectors`)."""
        return self._text_vectors.embed(self._embedder, texts)

    def close(self) -> None:
        """Stop the worker threads (if any were started)."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    # ------------------------------------------------------------------------------------------------ search
    def run(
        self, request: SearchMemoryRequest, ctx: RequestContext, *, request_id: str | None = None
    ) -> SearchMemoryResponse:
        """Execute one search_memory request for ``ctx`` (DESIGN §5; seed 000 §4.1.1).

        Args:
            request_id: the response's ``request_id`` (:func:`new_request_id` when ``None``): the service passes the
                one its audit row carries.

        Returns:
            The response; degradations are in ``trace.warnings`` (see the module docstring), never raised.

        Raises:
            ContextEngineError: ``RET-4001`` empty/invalid query, owner_space, target_uri or hints; ``RET-4002``
                top_k outside 1..50; ``RET-4003`` invalid score_threshold; ``RET-4031`` target_uri not visible
                (the same whether or not it exists); ``WRT-5001`` when the metadata store fails.
        """
        return self._search(request, ctx, request_id or new_request_id(), time.perf_counter())

    def _gather_seeds(
        self,
        typed: list[TypedQuery],
        scopes: list[QueryScope],
        ctx: RequestContext,
        trace: TraceRecorder,
        allowed: frozenset[str] | None,
        vectors: QueryVectors,
        query: str,
    ) -> tuple[SearchRun | None, SeedRound]:
        """The request's run and the seeds of every typed query (with the hybrid first round); ``(None, no seeds)``
        when the query embedding or the vector search failed (``RET-5001`` recorded: no hits this time, retryable).
        The query is embedded in one batch with the texts it will likely need later (:meth:`_likely_texts`;
        ``query``: the request's own, of which ``match_quality`` makes its speaker-neutral form)."""
        run: SearchRun | None = None
        seeds = SeedRound([[] for _ in typed])
        dated = None  # the memories of the dates the query names (retrieval.seed.date_boost)
        if self.retriever.reads_dates and allowed != frozenset() and any(tq.context_type == "memory" for tq in typed):
            dated = self._memory_filter.dated(typed[0].text, ctx, trace)
        try:
            with trace.stage("embed"):  # part of seed_ms; kept apart in the detailed timings
                vectors.prefetch(self._likely_texts(typed[0].text, query))
                vector = self._transformer.vector(vectors, typed[0].text, trace)
            # One generation for every derived index a request reads (docs/derived_indexes.md): when a write
            # commits while the seeds are gathered, gather them again once, from the new generation.
            # The state is the generation and its token (a restored database may reach the same number by another
            # history): one primary-key read, passed to every structure so that none reads it again.
            for attempt in (1, 2):
                state = self._metadata.account_state(ctx.account_id)
                scorer = self.source.scorer(ctx.account_id, vector, state)
                nodes = RequestNodes(self._metadata, ctx.account_id)
                run = SearchRun(scorer, nodes, trace, generation=state, query_vector=vector, dated=dated)
                seeds = self.retriever.search_all(
                    typed, ctx, run=run, scopes=scopes, allowed=allowed, map_fn=self._mapper(run)
                )
                run, seeds = self._without_speaker_names(typed, scopes, ctx, trace, allowed, run, seeds, vectors, query)
                if attempt == 2 or self._metadata.account_state(ctx.account_id) == state:
                    break
                trace.event("seed", "generation_moved", generation=state.generation)
        except ContextEngineError as err:
            if err.code not in _DEGRADED_SEARCH:
                raise
            what = "query embedding" if err.code is ErrorCode.EMBEDDING_FAILED else "vector search"
            trace.warn(
                ErrorCode.VECTOR_SEARCH_FAILED,
                f"{what} failed ({err.code.value}); no hits this time, retry later",
                stage="seed",
            )
            return None, seeds
        return run, seeds

    def _likely_texts(self, text: str, query: str) -> list[str]:
        """The query texts this request will most likely embed, for one batch (``retrieval/query_vectors.py``): those
        of the planned ``text`` (:meth:`QueryTransformer.texts`) and, when it names someone (:func:`query_names`) or
        refers to the user (:func:`refers_to_user`), the second search's text and the speaker-neutral form of the
        request's ``query`` that those names and the user's role would give as speakers (:func:`without_speakers`,
        :meth:`MatchQualityRater.neutral_for`).
        A guess: a text never used costs its share of the batch; a text needed and not guessed is embedded then.
        Acronyms ("CPU throttling") are not guessed to be speakers."""
        texts = self._transformer.texts(text)
        names = {n for n in query_names(text) if not _acronym(text, n)}
        if not names and not refers_to_user(text):
            return texts
        speakers = names | {"user"}
        second = without_speakers(text, speakers) if self._settings.query_transform.speaker_names else None
        neutral = self.rater.neutral_for(query, speakers)
        return [*texts, *(self._transformer.texts(second) if second else []), *([neutral] if neutral else [])]

    def _without_speaker_names(
        self,
        typed: list[TypedQuery],
        scopes: list[QueryScope],
        ctx: RequestContext,
        trace: TraceRecorder,
        allowed: frozenset[str] | None,
        run: SearchRun,
        seeds: SeedRound,
        vectors: QueryVectors,
        query: str,
    ) -> tuple[SearchRun, SeedRound]:
        """The seeds searched again with the names of the speakers the query names taken out of its text and the
        user's role in the first person (``retrieval.query_transform.speaker_names``,
        :func:`~context_engine.retrieval.query_transform.without_speakers`), those speakers' turns still boosted;
        the first search's run and seeds when the query names no speaker, or when the second search fails (recorded
        in the trace)."""
        speakers = seeds.first_round.speakers
        if not self._settings.query_transform.speaker_names or not speakers:
            return run, seeds
        text = without_speakers(typed[0].text, speakers, seeds.first_round.user_names)
        if text is None:
            return run, seeds
        try:
            # with the speaker-neutral query the answer's match_quality will most likely embed (the same speakers)
            neutral = self.rater.neutral_for(query, speakers)
            vectors.prefetch([*self._transformer.texts(text), *([neutral] if neutral else [])])
            vector = self._transformer.vector(vectors, text, trace)
            again = SearchRun(
                self.source.scorer(ctx.account_id, vector, run.generation),
                RequestNodes(self._metadata, ctx.account_id),
                trace,
                generation=run.generation,
                query_vector=vector,
                dated=run.dated,
            )
            retyped = [tq.model_copy(update={"text": text}) for tq in typed]
            found = self.retriever.search_all(
                retyped, ctx, run=again, scopes=scopes, allowed=allowed, map_fn=self._mapper(again), speakers=speakers
            )
        except ContextEngineError as err:
            trace.event("planner", "query_transform", transform="speaker_names", fallback=err.code.value)
            return run, seeds
        trace.event("planner", "query_transform", transform="speaker_names", text=text, speakers=sorted(speakers))
        return again, found

    def _recheck_all(
        self,
        typed: list[TypedQuery],
        scored: list[list[NodeHit]],
        ctx: RequestContext,
        trace: TraceRecorder,
        allowed: frozenset[str] | None,
    ) -> list[list[NodeHit]]:
        """Each typed query's scored hits rechecked, the counts and drop reasons recorded."""
        kept: list[list[NodeHit]] = []
        for tq, hits in zip(typed, scored, strict=True):
            kept.append(self.rechecker.recheck(tq, hits, ctx, trace=trace, allowed=allowed))
        total_in, total_out = sum(len(h) for h in scored), sum(len(h) for h in kept)
        self._metrics.recheck_input.inc(total_in)
        self._metrics.recheck_pass.inc(total_out)
        for reason, count in trace.drop_reasons("recheck").items():
            self._metrics.recheck_drop.labels(reason=reason).inc(count)
        trace.detail("recheck", "in", total_in)
        trace.detail("recheck", "out", total_out)
        return kept

    def _search(
        self, request: SearchMemoryRequest, ctx: RequestContext, request_id: str, started: float
    ) -> SearchMemoryResponse:
        detailed = request.include_debug and request.trace_level == "detailed"
        trace = TraceRecorder(detailed=detailed, metrics=self._metrics)
        self._metrics.search_requests.inc()
        threshold = self._validate(request)
        target = self._check_target(request.target_uri, ctx, trace)  # parsed once, passed down
        allowed = self._memory_filter.select(request, ctx, trace)  # None without memory filters (issue 11)
        spaces = effective_owner_spaces(ctx, request.owner_space)  # the tenant's spaces, once a request

        with trace.stage("planner"):
            typed = self._plan(request, ctx, target, trace)
        if detailed:
            trace.detail("planner", "typed_queries", [tq.model_dump(mode="json") for tq in typed])
        # each typed query's tenant filter and expansion roots, built once and read by every stage
        scopes = scopes_of(typed, ctx, target=target, owner_space=request.owner_space, spaces=spaces)

        with trace.stage("seed"):
            vectors = QueryVectors(self._embedder)  # each query text embedded once a request
            run, first = self._gather_seeds(typed, scopes, ctx, trace, allowed, vectors, request.query)
        seeds = first.seeds
        retryable = run is None
        self._metrics.seed_hits.inc(sum(len(s) for s in seeds))
        if run is None:
            return self._respond(request, ctx, request_id, typed, [], [], trace, started, retryable, spaces)

        with trace.stage("hierarchical"):
            expanded = self.searcher.expand_all(
                typed, seeds, ctx, run=run, scopes=scopes, first_round=first.first_round, map_fn=self._mapper(run)
            )
            retryable = retryable or trace.has(ErrorCode.VECTOR_SEARCH_FAILED)
            scored = [self.scorer.score(tq, hits) for tq, hits in zip(typed, expanded, strict=True)]

        with trace.stage("recheck"):
            kept = self._recheck_all(typed, scored, ctx, trace, allowed)
            if unlift_orphans(kept):  # a reply whose question a filter dropped ranks on its own score
                kept = [self.scorer.score(tq, hits) for tq, hits in zip(typed, kept, strict=True)]

        with trace.stage("assemble"):
            origin: dict[int, int] = {}
            pool: list[NodeHit] = []
            for index, hits in enumerate(kept):
                for h in hits:
                    origin[id(h)] = index
                    pool.append(h)
            # dedupe, intent boost, threshold (never on protected hits), top_k where expansion earns its place
            result = self.scorer.merge(
                pool,
                query=request.query,
                top_k=request.top_k,
                threshold=threshold,
                gte=request.score_gte,
                preferred=preferred_types(typed),
                keyword_top=first.first_round.keyword_top,
                embed=self._embed_texts,
                roles=run.nodes.roles,
            )
            merged, final, filtered = result.merged, result.final, result.below_threshold
            if filtered:
                self._metrics.threshold_filtered.inc(filtered)
            trace.event(
                "assemble",
                "ranked",
                candidates=len(merged),
                below_threshold=filtered,
                final=len(final),
                expansion=sum(1 for h in final if h.source != "seed"),
                swapped_in=result.swapped_in,
                memory_intent=result.memory_intent,
                answer_type=result.answer_type,
                current_state=result.current_state,
                superseded=result.superseded,
                corrected=result.corrected,
                reported=result.reported,
                echoed=result.echoed,
            )
            if detailed:
                trace.detail("assemble", "threshold", {"value": threshold, "gte": request.score_gte})
                trace.detail("assemble", "protected", result.protected)
                trace.detail("assemble", "preferred", sorted(preferred_types(typed)))
                trace.detail("assemble", "scores", [_components(h) for h in merged])
            surviving_seeds = {h.uri for hits in kept for h in hits if h.source == "seed"}
            seed_out = _dedupe_seeds(s for group in seeds for s in group if s.uri in surviving_seeds)
            try:
                blocks = self._assemble(typed, final, origin, ctx)
            except Exception as err:  # noqa: BLE001 - a degradation by design (seed 000 §7), recorded as RET-5003
                trace.warn(
                    ErrorCode.ASSEMBLY_FAILED,
                    f"assembly failed ({type(err).__name__}); returning the raw seed_hits",
                    stage="assemble",
                )
                blocks = []
            quality = self._match_quality(request.query, final if blocks else [], merged, run, ctx, spaces, vectors)
            trace.event("assemble", "query_embeddings", texts=vectors.embedded, batches=vectors.batches)
        return self._respond(
            request, ctx, request_id, typed, seed_out, blocks, trace, started, retryable, spaces, quality
        )

    # ---- steps ----------------------------------------------------------------------------------------------------
    def _validate(self, request: SearchMemoryRequest) -> float | None:
        """Check the request; return the threshold in force (``None``: none, the default)."""
        # The query's own rules (non-empty, at most 4096 characters, no control character), for every entry point
        # (full and compact answers, Python API, HTTP, MCP, CLI), here inside the run that the service audits. Every
        # text field's encoding (a lone surrogate: RET-4001) was checked once by the service, before anything is
        # recorded.
        check_query_text(request.query)
        if isinstance(request.top_k, bool) or not TOP_K_MIN <= request.top_k <= TOP_K_MAX:
            raise ContextEngineError(
                ErrorCode.TOP_K_OUT_OF_RANGE,
                f"top_k must be in {TOP_K_MIN}..{TOP_K_MAX}, got {request.top_k}",
                {"field": "top_k", "min": TOP_K_MIN, "max": TOP_K_MAX},
            )
        threshold = request.score_threshold
        if threshold is not None and (not math.isfinite(threshold) or not 0.0 <= threshold <= 1.0):
            raise ContextEngineError(
                ErrorCode.SCORE_THRESHOLD_INVALID,
                f"score_threshold must be a number in 0..1 (final scores are normalised), got {threshold}",
                {"field": "score_threshold", "min": 0.0, "max": 1.0},
            )
        if request.owner_space is not None and not _valid_owner_space(request.owner_space):
            raise ContextEngineError(
                ErrorCode.QUERY_INVALID,
                "owner_space must be 'shared', 'user:<space>' or 'agent:<space>'",
                {"field": "owner_space"},
            )
        if any(not isinstance(c, str) or not c.strip() for c in request.categories):
            raise ContextEngineError(
                ErrorCode.QUERY_INVALID, "categories must be non-empty strings", {"field": "categories"}
            )
        return threshold if threshold is not None else self.scorer.default_threshold

    def _plan(
        self, request: SearchMemoryRequest, ctx: RequestContext, target: ContextURI | None, trace: TraceRecorder
    ) -> list[TypedQuery]:
        """The planner's typed queries. A planner fault (an empty plan, or any exception other than a caller's error
        such as ``RET-4001`` for malformed hints) falls back to :meth:`QueryPlanner.fallback`, the three-query plan,
        with the warning ``RET-4221`` (seed 000 §7): a bug in the rules degrades the ranking, never the request."""
        try:
            typed = self.planner.plan(
                request.query,
                request.session_archive,
                request.planner_hints,
                ctx,
                top_k=request.top_k,
                categories=request.categories,
                target_uri=target,
                owner_space=request.owner_space,
                trace=trace,
            )
            why = "" if typed else "the planner returned no typed query"
        except ContextEngineError as err:
            if err.code.http_status < 500:  # the caller's error (malformed hints or session): answered as such
                raise
            typed, why = [], f"the planner failed ({err.code.value})"
        except Exception as err:  # a fault in the rules: recorded as RET-4221 below, the traceback logged
            _LOG.warning("query planner failed; falling back to the three-query plan", exc_info=True)
            typed, why = [], f"the planner failed ({type(err).__name__})"
        if typed:
            return typed
        trace.warn(
            ErrorCode.PLANNER_UNCLASSIFIED,
            f"{why}; fallback plan: memory, skill and resource ranked equally",
            stage="planner",
        )
        return self.planner.fallback(
            request.query,
            ctx,
            top_k=request.top_k,
            categories=request.categories,
            target_uri=target,
            owner_space=request.owner_space,
        )

    def _check_target(self, target_uri: str | None, ctx: RequestContext, trace: TraceRecorder) -> ContextURI | None:
        """The canonical target, parsed (the planner and the scopes get it, so no stage parses ``target_uri`` again),
        or ``None`` (absent, the root ``ctx://``, or missing: ``RET-4041``). Visibility is checked first, from the
        context alone, so an invisible target gives ``RET-4031`` whether or not it exists (seed 000 §9)."""
        t = parse_read_target(target_uri)  # RET-4001 when malformed; None for ctx:// (the whole visible scope)
        if t is None:
            return None
        if not ctx.can_see_uri(t):
            raise ContextEngineError(
                ErrorCode.TARGET_FORBIDDEN,
                "target_uri does not exist or is not visible to this caller",
                {"field": "target_uri"},
            )
        node = self._metadata.get_node(ctx.account_id, t)
        if node is None or not ctx.can_see(node.owner_space):
            trace.warn(
                ErrorCode.TARGET_NOT_FOUND,
                "target_uri does not exist; searching without it",
                stage="planner",
            )
            return None
        canonical = t.as_dir() if node.is_dir else t.as_file()  # the node's form (found with or without the slash)
        return canonical if str(canonical) == node.uri else ContextURI.parse(node.uri)

    def _match_quality(
        self,
        query: str,
        final: Sequence[NodeHit],
        merged: Sequence[NodeHit],
        run: SearchRun,
        ctx: RequestContext,
        spaces: list[str] | None,
        vectors: QueryVectors,
    ) -> MatchQuality:
        """The answer's ``match_quality`` over the returned hits ``final`` (empty when assembly failed: ``none``),
        names checked against every candidate ``merged``; its features go into the detailed trace.

        When the query names a speaker of the returned messages, the speaker-neutral query
        (:meth:`MatchQualityRater.neutral_query`) is embedded and the returned file hits' level-0 cosines to it read
        from the similarity source (one lookup of at most ``top_k`` records; the embedding is most often made
        already, in the batch of the query's or the second search's texts: ``retrieval/query_vectors.py``). A
        failure there labels from the query's own cosines, recorded as the trace event ``match_quality_fallback``.

        A question that asks only what happened on a date it names (:func:`~context_engine.retrieval.dates.
        asks_only_the_date`) has no topic to match: labelled ``none``, it is ``weak`` when its first file hit is a
        memory of that date (``SearchRun.dated``; trace event ``match_quality_dated``).

        When the evidence is in the own-text band (:meth:`MatchQualityRater.own_text_hits`), the first file hits
        that are conversation messages are embedded alone (one batch of at most ``own_text_hits`` texts, less those
        an earlier request embedded: :class:`TextVectors`) and their
        cosines to the same query vector read; a failure there keeps the label of the evidence alone (trace event
        ``match_quality_fallback``, ``check`` ``own_text``)."""
        trace = run.trace
        neutral_query = self.rater.neutral_query(query, final)
        neutral: dict[str, float] | None = None
        query_vector = run.query_vector
        if neutral_query is not None:
            try:
                vector = vectors.embed_query(neutral_query)
                scorer = self.source.scorer(ctx.account_id, vector, run.generation)
                flt = VectorFilter(account_id=ctx.account_id, owner_spaces=spaces, levels=[0])
                found = scorer.matches(flt, [h.uri for h in final if not h.is_dir])
                neutral = {uri: m.similarity for uri, m in found.items()}
                query_vector = vector
            except Exception as err:  # noqa: BLE001 - a label never fails a search: the query's own cosines, traced
                trace.event("assemble", "match_quality_fallback", reason=type(err).__name__)
        features = self.rater.features(query, final, merged, neutral=neutral, neutral_query=neutral_query)
        checked = self.rater.own_text_hits(features, final)
        if checked and query_vector is not None:
            try:
                own = self._own_text_cosines(checked, query_vector, neutral)
                features = self.rater.features(
                    query, final, merged, neutral=neutral, neutral_query=neutral_query, own=own
                )
            except Exception as err:  # noqa: BLE001 - a label never fails a search: the evidence alone, traced
                trace.event("assemble", "match_quality_fallback", check="own_text", reason=type(err).__name__)
        quality = self.rater.label(features)
        if quality == "none" and run.dated:
            # "What did the user talk about on 22 September?" has no topic to match: a first hit of that date is
            # the answer (retrieval/dates.py); the speakers of the messages found are no topic either
            first = next((h for h in final if not h.is_dir), None)
            names = {s for h in final if (s := message_speaker(h.uri, h.abstract or "")) is not None}
            if first is not None and first.uri in run.dated and asks_only_the_date(query, names):
                quality = "weak"
                trace.event("assemble", "match_quality_dated", uri=first.uri)
        if trace.detailed:
            trace.detail("assemble", "match_quality", {"label": quality, **features.as_dict()})
        return quality

    def _own_text_cosines(
        self, checked: Sequence[NodeHit], query_vector: np.ndarray, neutral: Mapping[str, float] | None
    ) -> dict[str, float]:
        """The own-text check's raw cosines by URI (:meth:`MatchQualityRater.features`, ``own``): each message of
        ``checked`` embedded alone, against ``query_vector`` (the speaker-neutral query's when there is one); any
        other hit's level-0 cosine (``neutral``'s, else its own similarity)."""
        alone = self.rater.embedded_alone(checked)
        vectors = self._text_vectors.embed(self._embedder, [h.abstract or "" for h in alone])
        cosines = dict(zip([h.uri for h in alone], (np.asarray(vectors) @ query_vector).tolist(), strict=True))
        for h in checked:
            if h.uri not in cosines:
                cosines[h.uri] = neutral.get(h.uri, h.similarity) if neutral is not None else h.similarity
        return cosines

    def _assemble(
        self, typed: Sequence[TypedQuery], final: Sequence[NodeHit], origin: dict[int, int], ctx: RequestContext
    ) -> list[RetrievedBlock]:
        """Assemble each typed query's share of the final ranking, then restore the ranking order."""
        blocks: dict[str, RetrievedBlock] = {}
        for index, tq in enumerate(typed):
            share = [h for h in final if origin.get(id(h)) == index]
            if share:
                for block in self.assembler.assemble(tq, share, ctx):
                    blocks[block.uri] = block
        return [blocks[h.uri] for h in final]

    def _mapper(self, run: SearchRun) -> Callable[..., Iterable[Any]]:
        """``map``, or a thread pool's ``map`` when several typed queries wait on the vector index (I/O that
        releases the GIL: the scorer says so, ``L0Scorer.concurrent``). The in-memory source is CPU-bound Python, so
        it runs sequentially."""
        workers = self._settings.hierarchy.parallel_workers
        if workers < 2 or not run.scorer.concurrent:
            return map
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ce-search")
            return self._executor.map

    def _respond(
        self,
        request: SearchMemoryRequest,
        ctx: RequestContext,
        request_id: str,
        typed: list[TypedQuery],
        seeds: list[SeedHit],
        blocks: list[RetrievedBlock],
        trace: TraceRecorder,
        started: float,
        retryable: bool,
        spaces: list[str] | None,
        match_quality: MatchQuality = "none",
    ) -> SearchMemoryResponse:
        seeds = [
            s.model_copy(update={"abstract": self._redactor.redact(s.abstract, library=False).text}) for s in seeds
        ]
        response = SearchMemoryResponse(
            request_id=request_id,
            typed_queries=typed,
            seed_hits=seeds,
            hits=blocks,
            next_actions=self.assembler.next_actions(blocks) if blocks else NextActions(),
            trace=SearchTrace(
                planner_ms=trace.ms("planner"),
                seed_ms=trace.ms("seed"),
                recheck_ms=trace.ms("recheck"),
                hierarchical_ms=trace.ms("hierarchical"),
                assemble_ms=trace.ms("assemble"),
                warnings=list(trace.warnings),
                event_count=trace.event_count,
            ),
            thinking_trace=trace.thinking_trace() if trace.detailed else None,
            retryable=retryable,
            match_quality=match_quality if blocks else "none",
        )
        elapsed = time.perf_counter() - started
        self._metrics.search_duration.observe(elapsed)
        self._metrics.match_quality.labels(quality=response.match_quality).inc()
        _LOG.info(
            "search_memory",
            extra={
                "ce_event": {
                    "request_id": request_id,
                    "query_hash": hashlib.sha256(request.query.encode("utf-8")).hexdigest()[:16],
                    "typed_query_count": len(typed),
                    "top_k": request.top_k,
                    "seed_count": len(seeds),
                    "final_count": len(blocks),
                    "match_quality": response.match_quality,
                    "warnings": list(trace.warnings),
                    "account_id": ctx.account_id,
                    "role": ctx.role,
                    "effective_owner_spaces": spaces,
                    "recheck_drop_reasons": trace.drop_reasons("recheck"),
                    "duration_ms": round(elapsed * 1e3, 3),
                }
            },
        )
        return response


def _acronym(query: str, name: str) -> bool:
    """Whether ``name`` (case-folded, :func:`query_names`) is written in capitals only wherever ``query`` has it
    ("CPU", "API"): a term, seldom a person who speaks."""
    found = [m.group(0) for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", query, re.IGNORECASE)]
    return bool(found) and all(f.isupper() and len(f) > 1 for f in found)


def _valid_owner_space(value: str) -> bool:
    if value == "shared":
        return True
    kind, _, space = value.partition(":")
    if kind not in ("user", "agent") or not space:
        return False
    try:
        ContextURI.parse(f"ctx://{kind}/{space}/")
    except ContextEngineError:
        return False
    return True


def _components(h: NodeHit) -> dict[str, Any]:
    return {
        "uri": h.uri,
        "source": h.source,
        "similarity": round(h.similarity, 6),
        "vector": round(h.vector_score, 6),
        "hierarchy": h.hierarchy_score,
        "category": h.category_boost,
        "target": h.target_uri_boost,
        "final": h.score,
    }


def _dedupe_seeds(seeds: Any) -> list[SeedHit]:
    best: dict[str, SeedHit] = {}
    for s in seeds:
        kept = best.get(s.uri)
        if kept is None or s.score > kept.score:
            best[s.uri] = s
    return sorted(best.values(), key=lambda s: (-s.score, not s.has_overview, s.uri))


# ---------------------------------------------------------------------------------------------------- read
class ReadMemoryPipeline:
    """read_memory: one explicit read plus optional relations, timed (seed 000 §4.1.2).

    Args:
        reader: the read service.
    """

    def __init__(self, reader: MemoryReadService) -> None:
        self.reader = reader

    def run(self, request: ReadMemoryRequest, ctx: RequestContext) -> ReadMemoryResponse:
        """Read ``request.uri`` at ``request.level`` for ``ctx``.

        Raises:
            ContextEngineError: ``RET-4032`` invisible or missing (same body); ``RET-4004`` no such level;
                ``RET-4001`` ``max_relations``, ``offset`` or ``max_chars`` out of range.
        """
        request_id = new_request_id()
        start = time.perf_counter()
        paged = self.reader.read_page(
            request.uri,
            request.level,
            False,
            request.max_relations,
            ctx=ctx,
            offset=request.offset,
            max_chars=request.max_chars,
        )
        block = paged.block
        read_ms = (time.perf_counter() - start) * 1e3
        relations_ms = 0.0
        if request.expand_relations and request.max_relations > 0:
            start = time.perf_counter()
            block.relations = self.reader.relations(block.uri, request.max_relations, ctx)
            relations_ms = (time.perf_counter() - start) * 1e3
        return ReadMemoryResponse(
            request_id=request_id,
            block=block,
            trace=ReadTrace(read_ms=round(read_ms), relations_ms=round(relations_ms)),
            offset=paged.offset,
            next_offset=paged.next_offset,
            total_chars=paged.total_chars,
        )
