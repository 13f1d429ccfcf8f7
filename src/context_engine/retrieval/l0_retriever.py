"""L0Retriever: first-round recall over level-0 records only (DESIGN.md §5, seed 000 §4.2 "L0Retriever").

The vector search is restricted to ``level == 0``, the caller's account, the visible (and narrowed) owner spaces,
the typed query's context type, its categories and the ``target_uri`` subtree (:func:`scope.base_filter`). Each hit
is hydrated from the metadata store and dropped when the node is missing, pending or invisible. The abstract is the
level-0 record's text: no content file is touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from context_engine.retrieval.l0_source import L0Match, L0Source
from context_engine.retrieval.run import RequestNodes, SearchRun, unusable_reason
from context_engine.retrieval.scope import base_filter
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import SeedHit
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import TypedQuery
from context_engine.settings import SeedSettings
from context_engine.storage.protocols import Embedder, MetadataStore

__all__ = ["L0Retriever"]


class L0Retriever:
    """Level-0 vector recall.

    Args:
        source: hands out the level-0 scorer of a request (index or in-memory).
        metadata: for hydrating hits (``get_nodes``, one batch per call).
        embedder: embeds the query when :meth:`search` is called without a prepared run.
        settings: the ``retrieval.seed`` section.
    """

    def __init__(self, source: L0Source, metadata: MetadataStore, embedder: Embedder, settings: SeedSettings) -> None:
        self._source = source
        self._metadata = metadata
        self._embedder = embedder
        self._settings = settings

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
        return self.search_all([typed_query], ctx, run=run)[0]

    def search_all(
        self,
        typed_queries: Sequence[TypedQuery],
        ctx: RequestContext,
        *,
        run: SearchRun,
        map_fn: Callable[..., Iterable[list[L0Match]]] = map,
    ) -> list[list[SeedHit]]:
        """:meth:`search` for every typed query of a request, hydrating their candidates together.

        Each typed query asks the scorer for ``top_k * overfetch + extra_rows`` rows; the first ``top_k`` of each
        are hydrated in one metadata batch, and only a typed query that lost rows to drops (missing, pending,
        invisible) has the rest of its rows hydrated in a second batch. ``map_fn`` (called
        like :func:`map`) may run the typed queries' similarity queries concurrently.
        """
        filters = [base_filter(tq, ctx) for tq in typed_queries]
        fetch = [tq.top_k * self._settings.overfetch + self._settings.extra_rows for tq in typed_queries]
        # map_fn may run the similarity queries concurrently (index source); the rest is sequential.
        matches = list(map_fn(lambda i: run.scorer.top(filters[i], fetch[i]), range(len(typed_queries))))
        windows = [min(len(ms), tq.top_k) for tq, ms in zip(typed_queries, matches, strict=True)]
        while True:
            run.nodes.fetch(m.uri for ms, w in zip(matches, windows, strict=True) for m in ms[:w])
            widened = False
            for i, tq in enumerate(typed_queries):
                usable = sum(1 for m in matches[i][: windows[i]] if unusable_reason(run.nodes.get(m.uri), ctx) is None)
                if usable < tq.top_k and windows[i] < len(matches[i]):
                    windows[i] = len(matches[i])
                    widened = True
            if not widened:
                break
        out: list[list[SeedHit]] = []
        for tq, flt, ms, window in zip(typed_queries, filters, matches, windows, strict=True):
            out.append(self._seeds(tq, flt, ms[:window], ctx, run))
        return out

    def _seeds(
        self,
        typed_query: TypedQuery,
        flt: VectorFilter,
        matches: Sequence[L0Match],
        ctx: RequestContext,
        run: SearchRun,
    ) -> list[SeedHit]:
        trace = run.trace
        seeds: list[SeedHit] = []
        for m in matches:
            node = run.nodes.get(m.uri)
            reason = unusable_reason(node, ctx)
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
                    match_reason="l0_vector",
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
