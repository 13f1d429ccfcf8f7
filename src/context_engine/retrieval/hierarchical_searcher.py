"""HierarchicalSearcher: expand from root and seed directories, score children by their L0 vectors (DESIGN.md §5,
seed 000 §4.2 "HierarchicalSearcher").

Expansion starts, all at once, from the context type's root directories visible to the caller (or the target
directory) and from the seeds' parent directories (and seeds that are directories). It proceeds breadth-first, one
level per step: each step scores the children of every frontier directory in one batched similarity query (one
index search, or one pass over the in-memory matrix), keeps the best ``children_per_dir`` children per directory,
and carries the best ``dirs_per_level`` child directories into the next step; at most ``max_depth`` steps, within
``budget_ms`` per expansion (a step that would start after the budget is spent is skipped, with the warning
``RET-5004``). Only level-0 records are used: no overview or content is read. When the planner's intent prefers
some context types, only their typed queries are walked; the others keep their seeds, scored with their ancestors as
usual (``retrieval.hierarchy.expand_other_types`` walks them all).

``hierarchy_score`` (path consistency), in 0..1::

    hierarchy_score(n) = sum_i w_i * v(a_i) / sum_i w_i      over the ancestors a_1 (parent), a_2, ... a_L of n
                                                             that have a level-0 record (L = ancestor_levels)
    w_i = ancestor_decay ** (i - 1)                          (the parent counts most)
    v(a) = clip(cosine(query, abstract(a)), 0, 1)            (the same vector score as the node's own)

It is high when the directories on the node's path also match the query (the node sits in a relevant branch) and
0 when no ancestor has a level-0 record.

An expansion hit competes on its own score: its ``vector_score`` is its own match (the first-round fused score when
the hybrid first round already scored it and did not choose it as a seed, else its calibrated cosine), never the
cosine lifted above what the first round found; path consistency orders it among direct hits, and the merge
(``Scorer.merge``, :func:`~context_engine.retrieval.scoring.select_top`) never lets it push out of ``top_k`` a direct
hit whose own vector score is higher. Ancestors are scored under the same tenancy filter as the node (account,
visible spaces, context type), without the target or category narrowing, since a target's ancestors lie above it.

A seed that is a conversation message asking something brings its reply, the next message by another speaker that states
something (:mod:`~context_engine.retrieval.replies`): an expansion candidate whose vector score is at least
``reply_factor`` times the seed's, so the answer to a question that matches the query ranks below the question, or just
above it when the query names the reply's speaker and not the asker's (``named_reply_first``). It is the one case where
an expansion hit's score comes from another node's match; ``match_reason`` ends with ``reply_to:<seed>``; at most one
reply per seed, on top of the ``hits_per_top_k`` cap; the pipeline gives a reply its own score back when the recheck
drops its question.

Every step searches under the typed query's :class:`~context_engine.retrieval.scope.QueryScope` (the filter the
level-0 recall used, built once per request), and the scores on the first round's scale come from the recall's
:class:`~context_engine.retrieval.run.FirstRound`, passed in. A hydrated node that is missing or pending is dropped;
whether the caller may see a candidate is checked once, by the recheck (the tenant filter already excludes it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.retrieval.query_planner import preferred_types
from context_engine.retrieval.replies import NAMED_REPLY_LEAD, answers_for_named, first_reply, lift, reply_window
from context_engine.retrieval.run import DENSE_ONLY, FirstRound, SearchRun, unusable_reason
from context_engine.retrieval.scope import QueryScope, scope_of, within_target
from context_engine.retrieval.scoring import Scorer
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import NodeHit, SeedHit
from context_engine.schema.nodes import NodeHead, VectorFilter
from context_engine.schema.query import TypedQuery
from context_engine.settings import HierarchySettings
from context_engine.storage.vector.scoring import L0Match

__all__ = ["HierarchicalSearcher", "ancestor_uris"]

_NOT_URIS = frozenset({"ctx://", "ctx://user/", "ctx://agent/"})


def _parent(uri: str) -> str | None:
    body = uri.removesuffix("/")
    cut = body.rfind("/")
    parent = body[: cut + 1]
    return None if parent in _NOT_URIS or len(parent) <= len("ctx://") else parent


def ancestor_uris(uri: str, levels: int) -> list[str]:
    """Up to ``levels`` ancestor directory URIs of a canonical URI, nearest first (scope/space roots included)."""
    out: list[str] = []
    cur = _parent(uri)
    while cur is not None and len(out) < levels:
        out.append(cur)
        cur = _parent(cur)
    return out


@dataclass(slots=True)
class _Found:
    match: L0Match
    depth: int


@dataclass(slots=True)
class _Plan:
    """What phase 1 of an expansion found for one typed query (see ``HierarchicalSearcher.expand_all``)."""

    tq: TypedQuery
    seeds: list[SeedHit]
    provisional: list[_Found]  # the candidates chosen for hydration (set by _select)
    paths: dict[str, list[str]]
    known: dict[str, float]
    ranked: list[tuple[float, _Found]]  # every expansion candidate with its provisional final score, best first
    # the replies of asking seeds (retrieval/replies.py): URI -> (match, least vector score, the seed it answers)
    replies: dict[str, tuple[_Found, float, str]] = field(default_factory=dict)


class HierarchicalSearcher:
    """Breadth-first, batched expansion with a time budget (see the module docstring).

    Only the best expansion candidates are hydrated from the metadata store: ranked by the final score they would
    get (the ``Scorer`` formula), at most ``top_k * hits_per_top_k`` per request over all its typed queries, since
    the others could not reach the results anyway.

    Args:
        settings: the ``retrieval.hierarchy`` section.
        scorer: the final-score formula, used to rank expansion candidates before hydration.
    """

    def __init__(self, settings: HierarchySettings, scorer: Scorer) -> None:
        self._settings = settings
        self._scorer = scorer

    # ---- public API (seed 000 §4.2) --------------------------------------------------------------------------------
    def expand(
        self,
        typed_query: TypedQuery,
        seeds: Sequence[SeedHit],
        ctx: RequestContext,
        *,
        run: SearchRun,
        first_round: FirstRound = DENSE_ONLY,
    ) -> list[NodeHit]:
        """Seeds plus the children found by expanding from the roots and the seeds' directories.

        Args:
            typed_query: the typed query (its filter scopes every step).
            seeds: the L0 seeds of this typed query (already hydrated into ``run.nodes``).
            ctx: the caller.
            run: the request's shared state.
            first_round: what the hybrid first round found besides the seeds (its fused scores).

        Returns:
            Node hits with ``similarity``, ``vector_score`` and ``hierarchy_score`` set (``score`` is 0 until
            ``Scorer`` runs): every seed (``source='seed'``) and at most ``top_k * hits_per_top_k`` expansion hits
            (``source='expansion'``), ordered by provisional final score. Expansion hits whose node is missing or
            pending are dropped (recorded in the trace). When a similarity query fails, the seeds alone, with the
            degradation ``RET-5001`` recorded in ``run.trace``.

        Raises:
            ContextEngineError: ``WRT-5001`` when the metadata store fails.
        """
        return self.expand_all([typed_query], [seeds], ctx, run=run, first_round=first_round)[0]

    def expand_all(
        self,
        typed_queries: Sequence[TypedQuery],
        seeds: Sequence[Sequence[SeedHit]],
        ctx: RequestContext,
        *,
        run: SearchRun,
        scopes: Sequence[QueryScope] | None = None,
        first_round: FirstRound = DENSE_ONLY,
        map_fn: Callable[[Callable[[int], _Plan | None], Sequence[int]], Iterable[_Plan | None]] = map,
    ) -> list[list[NodeHit]]:
        """:meth:`expand` for every typed query of a request, hydrating all expansion hits in one batch.

        A typed query whose similarity queries fail keeps its seeds alone (``hierarchy_score`` 0) and the
        degradation ``RET-5001`` is recorded; the others are unaffected. ``map_fn`` may run the typed queries'
        explorations concurrently (it is called like :func:`map`). ``scopes``: each typed query's scope, built once
        by the pipeline (built here when ``None``).
        """
        if scopes is None:
            scopes = [scope_of(tq, ctx) for tq in typed_queries]
        walk = self._walked(typed_queries)

        def explore(i: int) -> _Plan | None:
            try:
                return self._explore(typed_queries[i], scopes[i], seeds[i], run, first_round, walk=walk[i])
            except ContextEngineError as err:
                if err.code is not ErrorCode.VECTOR_SEARCH_FAILED:
                    raise
                run.trace.warn(
                    ErrorCode.VECTOR_SEARCH_FAILED,
                    "hierarchical expansion failed; seeds kept without expansion",
                    stage="hierarchical",
                    context_type=typed_queries[i].context_type,
                )
                return None

        plans = list(map_fn(explore, range(len(typed_queries))))
        self._select(plans, typed_queries, seeds)
        run.nodes.fetch(
            uri
            for plan in plans
            if plan is not None
            for uri in [*(f.match.uri for f in plan.provisional), *plan.replies]
        )
        return [
            self._finish(plan, run, first_round) if plan is not None else self.seeds_only(seeds[i], run, first_round)
            for i, plan in enumerate(plans)
        ]

    def score_children(
        self,
        parent_uri: str,
        typed_query: TypedQuery,
        ctx: RequestContext,
        *,
        run: SearchRun,
        first_round: FirstRound = DENSE_ONLY,
    ) -> list[NodeHit]:
        """The best ``children_per_dir`` children of one directory, scored by their L0 vectors (seed 000 §4.2).

        Returns:
            Node hits (``source='expansion'``, ``depth=1``) ordered by provisional score; missing or pending nodes
            are dropped. ``hierarchy_score`` uses the parent and further ancestors.

        Raises:
            ContextEngineError: ``RET-5001`` when the similarity query fails.
        """
        flt = scope_of(typed_query, ctx).filter
        children = run.scorer.children(flt, [parent_uri], self._settings.children_per_dir).get(parent_uri, [])
        found = [_Found(m, 1) for m in children]
        known = {m.uri: m.similarity for m in children}
        paths = {f.match.uri: ancestor_uris(f.match.uri, self._settings.ancestor_levels) for f in found}
        self._score_ancestors(flt, paths, known, run)
        found.sort(
            key=lambda f: (
                -self._scorer.final(
                    self._own_score(f.match.uri, f.match.similarity, first_round, f.match.context_type),
                    self._hierarchy(paths[f.match.uri], known),
                    0.0,
                    0.0,
                ),
                f.match.uri,
            )
        )
        return self._hydrate(found, paths, known, run, first_round)

    def seeds_only(
        self, seeds: Sequence[SeedHit], run: SearchRun, first_round: FirstRound = DENSE_ONLY
    ) -> list[NodeHit]:
        """The seeds as node hits without expansion (``hierarchy_score`` 0): the ``RET-5001`` degradation."""
        return [self._seed_hit(h, run, first_round) for h in seeds]

    # ---- internals -----------------------------------------------------------------------------------------------
    def _walked(self, typed_queries: Sequence[TypedQuery]) -> list[bool]:
        """Which typed queries are walked: all with ``retrieval.hierarchy.expand_other_types`` or when the planner
        prefers no type, else those of a preferred type (:func:`preferred_types`). The others keep their seeds, so
        the intent still never excludes a type (issue 11); what they lose is the siblings of those seeds, which the
        intent says are not what the caller is after, and a search saves the walk's cost (issue 26)."""
        preferred = preferred_types(typed_queries)
        if self._settings.expand_other_types or not preferred:
            return [True] * len(typed_queries)
        return [tq.context_type in preferred for tq in typed_queries]

    def _explore(
        self,
        tq: TypedQuery,
        scope: QueryScope,
        seeds: Sequence[SeedHit],
        run: SearchRun,
        first_round: FirstRound,
        *,
        walk: bool = True,
    ) -> _Plan:
        """Phase 1: the breadth-first walk (none when ``walk`` is false: the seeds alone, with their ancestor
        scores), ancestor scores and the provisional ranking (no metadata reads)."""
        started = time.perf_counter()
        s = self._settings
        flt = scope.filter
        seed_uris = {h.uri for h in seeds}
        starts = self._starts(tq, scope, seeds, run) if walk else []
        if not walk:
            run.trace.event("hierarchical", "not_walked", context_type=tq.context_type, reason="not_preferred")
        found: dict[str, _Found] = {}
        frontier = starts
        visited = set(starts)
        depth = 0
        while frontier and depth < s.max_depth:
            if depth > 0 and (time.perf_counter() - started) * 1e3 > s.budget_ms:
                run.trace.warn(
                    ErrorCode.EXPANSION_TRUNCATED,
                    f"hierarchical expansion stopped at depth {depth} of {s.max_depth} (time budget {s.budget_ms} ms)",
                    stage="hierarchical",
                    context_type=tq.context_type,
                )
                break
            depth += 1
            children = run.scorer.children(flt, frontier, s.children_per_dir)
            next_dirs: list[L0Match] = []
            for parent in frontier:
                for m in children.get(parent, ()):
                    if m.uri not in found:
                        found[m.uri] = _Found(m, depth)
                    if m.is_dir and m.uri not in visited:
                        visited.add(m.uri)
                        next_dirs.append(m)
            next_dirs.sort(key=lambda m: (-m.similarity, m.uri))
            frontier = [m.uri for m in next_dirs[: s.dirs_per_level]]
        run.trace.event(
            "hierarchical", "expanded", context_type=tq.context_type, starts=len(starts), depth=depth, found=len(found)
        )
        known = {uri: f.match.similarity for uri, f in found.items()}
        known.update({h.uri: h.score for h in seeds})
        extra = [f for uri, f in found.items() if uri not in seed_uris]
        paths = {h.uri: self._path(h.uri, run.nodes.get(h.uri)) for h in seeds}
        # Siblings share their ancestors: one path (a shared list, never mutated) and one hierarchy score per
        # parent directory, not per candidate (a request ranks a few hundred candidates in a few dozen directories).
        by_parent: dict[str | None, list[str]] = {}
        for f in extra:
            above = _parent(f.match.uri)
            path = by_parent.get(above)
            if path is None:
                path = [] if above is None else [above, *ancestor_uris(above, s.ancestor_levels - 1)]
                by_parent[above] = path
            paths[f.match.uri] = path
        self._score_ancestors(flt, paths, known, run)
        hierarchy = {above: self._hierarchy(path, known) for above, path in by_parent.items()}
        named = self._scorer.category_terms(tq, {f.match.category for f in extra})
        ranked = sorted(
            (
                (
                    self._scorer.final(
                        self._own_score(f.match.uri, f.match.similarity, first_round, f.match.context_type),
                        hierarchy[_parent(f.match.uri)],
                        1.0 if f.match.category and f.match.category in named else 0.0,
                        1.0 if tq.target_uri and within_target(f.match.uri, tq.target_uri) else 0.0,
                    ),
                    f,
                )
                for f in extra
            ),
            key=lambda pair: (-pair[0], pair[1].match.uri),
        )
        plan = _Plan(tq, list(seeds), [], paths, known, ranked)
        if walk:
            plan.replies = self._replies(tq, seeds, flt, run, first_round, paths)
        if run.trace.detailed:
            run.trace.detail(
                "hierarchical",
                tq.context_type,
                {
                    "starts": starts,
                    "depth": depth,
                    "found": len(found),
                    "candidates": len(ranked),
                    "elapsed_ms": round((time.perf_counter() - started) * 1e3, 3),
                },
            )
        return plan

    def _replies(
        self,
        tq: TypedQuery,
        seeds: Sequence[SeedHit],
        flt: VectorFilter,
        run: SearchRun,
        first_round: FirstRound,
        paths: dict[str, list[str]],
    ) -> dict[str, tuple[_Found, float, str]]:
        """The reply of each seed that is a conversation message asking something (:mod:`~context_engine.
        retrieval.replies`), with the least vector score it gets: ``reply_factor`` times the seed's, or the seed's plus
        ``NAMED_REPLY_LEAD`` for a reply by a speaker the query names to an asker it does not name
        (``named_reply_first``, :func:`~context_engine.retrieval.replies.answers_for_named`). One level-0
        lookup for every seed's ``reply_window`` following messages, within the typed query's target and categories
        (the lookup by URI applies the rest of the filter); a reply found for several seeds keeps the highest. A reply
        shares its seed's directory, whose ancestors are already scored (``paths`` gets the seed's path). None with
        ``reply_factor`` 0."""
        s = self._settings
        if s.reply_factor <= 0:
            return {}
        following = {
            h.uri: [u for u in reply_window(h.uri, h.abstract, s.reply_window) if within_target(u, tq.target_uri)]
            for h in seeds
        }
        wanted = sorted({u for uris in following.values() for u in uris})
        if not wanted:
            return {}
        found = {
            uri: m
            for uri, m in run.scorer.matches(flt, wanted).items()
            if flt.categories is None or m.category in flt.categories
        }
        out: dict[str, tuple[_Found, float, str]] = {}
        for h in seeds:
            reply = first_reply(h.uri, h.abstract, following[h.uri], found) if following[h.uri] else None
            if reply is None:
                continue
            seed_score = self._vscore(h.uri, h.score, first_round, reply.context_type)
            if s.named_reply_first and answers_for_named(h.uri, h.abstract, reply, first_round.speakers, tq.text):
                least = seed_score + NAMED_REPLY_LEAD
            else:
                least = s.reply_factor * seed_score
            if reply.uri not in out or least > out[reply.uri][1]:
                out[reply.uri] = (_Found(reply, 1), least, h.uri)
        for uri, (_, _, asker) in out.items():
            paths.setdefault(uri, paths[asker])
        if out:
            run.trace.event("hierarchical", "replies", context_type=tq.context_type, count=len(out))
        return out

    def _select(
        self, plans: Sequence[_Plan | None], typed_queries: Sequence[TypedQuery], seeds: Sequence[Sequence[SeedHit]]
    ) -> None:
        """Choose the expansion candidates worth hydrating: the best by provisional final score over all typed
        queries, ``top_k * hits_per_top_k`` distinct URIs at most, none that is already a seed."""
        cap = max((tq.top_k for tq in typed_queries), default=0) * self._settings.hits_per_top_k
        taken = {h.uri for group in seeds for h in group}
        pool = [
            (score, i, f)
            for i, plan in enumerate(plans)
            if plan is not None
            for score, f in plan.ranked
            if f.match.uri not in taken
        ]
        pool.sort(key=lambda item: (-item[0], item[2].match.uri, item[1]))
        chosen: set[str] = set()
        for _score, i, f in pool:
            uri = f.match.uri
            if uri not in chosen and len(chosen) >= cap:
                continue
            chosen.add(uri)
            plan = plans[i]
            assert plan is not None
            plan.provisional.append(f)

    def _finish(self, plan: _Plan, run: SearchRun, first_round: FirstRound) -> list[NodeHit]:
        """Phase 2: seeds and hydrated expansion hits as node hits."""
        hits = [self._seed_hit(h, run, first_round) for h in plan.seeds]
        for h in hits:
            h.hierarchy_score = self._hierarchy(plan.paths[h.uri], plan.known)
        taken = {h.uri for h in plan.seeds} | {f.match.uri for f in plan.provisional}
        replies = [found for uri, (found, _, _) in plan.replies.items() if uri not in taken]
        out = hits + self._hydrate([*plan.provisional, *replies], plan.paths, plan.known, run, first_round)
        for h in out:
            reply = plan.replies.get(h.uri)
            if reply is not None:  # ranks with the question it answers (a seed too, when its own score is lower)
                lift(h, reply[1], reply[2])
        return out

    def _starts(self, tq: TypedQuery, scope: QueryScope, seeds: Sequence[SeedHit], run: SearchRun) -> list[str]:
        """Roots first, then each seed's directory (a seed that is a directory) and parent, deduplicated, capped.
        A seed's parent lies in the seed's own owner space, which the tenant filter let through."""
        out: list[str] = list(scope.roots)
        for h in seeds:
            node = run.nodes.get(h.uri)
            if node is None:
                continue
            if node.is_dir:
                out.append(node.uri)
            if node.parent_uri and within_target(node.parent_uri, tq.target_uri):
                out.append(node.parent_uri)
        return list(dict.fromkeys(out))[: self._settings.max_start_dirs]

    def _path(self, uri: str, node: NodeHead | None) -> list[str]:
        levels = self._settings.ancestor_levels
        if node is not None and node.parent_uri:
            return [node.parent_uri, *ancestor_uris(node.parent_uri, levels - 1)]
        return ancestor_uris(uri, levels)

    @staticmethod
    def _score_ancestors(
        flt: VectorFilter, paths: dict[str, list[str]], known: dict[str, float], run: SearchRun
    ) -> None:
        missing = sorted({a for path in paths.values() for a in path if a not in known})
        if missing:
            known.update(run.scorer.lookup(flt, missing))

    def _vscore(self, uri: str, similarity: float, first_round: FirstRound, context_type: str) -> float:
        """A seed's vector score: with convex hybrid its first-round fused score (the one scale every candidate is
        compared on; a candidate it did not fuse: ``w * similarity`` with its context type's weight), else its
        calibrated similarity."""
        weight = first_round.weight_for(context_type)
        if weight is not None:
            fused = first_round.lexical.get(uri)
            return fused if fused is not None else weight * self._scorer.vector_score(similarity)
        return self._scorer.vector_score(similarity)

    def _own_score(self, uri: str, similarity: float, first_round: FirstRound, context_type: str) -> float:
        """An expansion hit's own match, on the seeds' scale: with convex hybrid the first-round fused score when
        the first round scored it, else the fused score of its similarity alone (``w * similarity``: no keyword
        match was found for it), so a sibling that matches only on meaning cannot outrank a seed that matched on
        both; without hybrid its calibrated similarity."""
        return self._vscore(uri, similarity, first_round, context_type)

    def _hierarchy(self, path: Sequence[str], known: dict[str, float]) -> float:
        decay = self._settings.ancestor_decay
        num = den = 0.0
        weight = 1.0
        for a in path:
            sim = known.get(a)
            if sim is not None:
                num += weight * self._scorer.vector_score(sim)
                den += weight
            weight *= decay
        return round(num / den, 6) if den else 0.0

    def _seed_hit(self, seed: SeedHit, run: SearchRun, first_round: FirstRound) -> NodeHit:
        node = run.nodes.get(seed.uri)
        return NodeHit(
            uri=seed.uri,
            parent_uri=node.parent_uri if node else None,
            is_dir=node.is_dir if node else seed.uri.endswith("/"),
            context_type=(node.context_type or "") if node else "",
            category=seed.category,
            owner_space=seed.owner_space,
            abstract=seed.abstract,
            has_overview=seed.has_overview,
            has_content=seed.has_content,
            updated_at=node.updated_at if node else None,
            occurred_at=node.occurred_at if node else None,
            similarity=seed.score,
            vector_score=self._vscore(seed.uri, seed.score, first_round, (node.context_type or "") if node else ""),
            source="seed",
            depth=0,
            match_reason=seed.match_reason,
        )

    def _hydrate(
        self,
        found: Sequence[_Found],
        paths: dict[str, list[str]],
        known: dict[str, float],
        run: SearchRun,
        first_round: FirstRound,
    ) -> list[NodeHit]:
        rows = run.nodes.fetch(f.match.uri for f in found)
        out: list[NodeHit] = []
        for f in found:
            m = f.match
            node = rows.get(m.uri)
            reason = unusable_reason(node)
            if reason is not None or node is None:
                run.trace.drop("hierarchical", m.uri, reason or "missing")
                continue
            out.append(
                NodeHit(
                    uri=node.uri,
                    parent_uri=node.parent_uri,
                    is_dir=node.is_dir,
                    context_type=node.context_type or "",
                    category=node.category or "",
                    owner_space=node.owner_space,
                    abstract=m.text,
                    has_overview=node.has_overview,
                    has_content=node.has_content,
                    updated_at=node.updated_at,
                    occurred_at=node.occurred_at,
                    similarity=m.similarity,
                    vector_score=self._own_score(m.uri, m.similarity, first_round, m.context_type),
                    hierarchy_score=self._hierarchy(paths[m.uri], known),
                    source="expansion",
                    depth=f.depth,
                    match_reason=f"child_of:{m.parent_uri}",
                )
            )
        return out
