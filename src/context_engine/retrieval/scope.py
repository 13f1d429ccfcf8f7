"""Tenancy scope of a typed query: the server-built filter every search stage applies (DESIGN.md §1, seed 000 §2.3).

The filter starts from the :class:`RequestContext` (the caller's account and visible owner spaces) and the caller's
own restrictions are ANDed onto it (``owner_space``, ``categories``, ``target_uri``), so they can only narrow. The
typed query's ``filters.account_id`` is never read: the account always comes from the context.

search_memory builds each typed query's :class:`QueryScope` once per request (:func:`scopes_of`, from the target the
pipeline parsed and checked): the level-0 recall and the hierarchical expansion search under the same filter, and
the expansion starts from its roots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import TypedQuery
from context_engine.schema.uri import ContextURI

__all__ = [
    "QueryScope",
    "base_filter",
    "effective_owner_spaces",
    "scope_of",
    "scopes_of",
    "target_prefix",
    "type_roots",
    "within_target",
]

_TYPE_ROOT = {"memory": "memories", "skill": "skills"}


def effective_owner_spaces(ctx: RequestContext, owner_space: str | None) -> list[str] | None:
    """The caller's visible owner spaces, narrowed to ``owner_space`` when given.

    Returns ``None`` for "every space of the account" (an admin without a narrowing) and ``[]`` when the narrowing
    names a space the caller cannot see (nothing matches).
    """
    visible = ctx.visible_owner_spaces()
    if owner_space is None:
        return visible
    if visible is None or owner_space in visible:
        return [owner_space]
    return []


def target_prefix(target_uri: str | None) -> str | None:
    """The ``uri_prefix`` of a target: a directory's URI (with its ``/``) or a file's own URI."""
    if not target_uri:
        return None
    return str(ContextURI.parse(target_uri))


def within_target(uri: str, target_uri: str | None) -> bool:
    """Whether ``uri`` is the target or lies in its subtree. Both are canonical URI strings (as stored and as
    :func:`target_prefix` writes them), so a directory target is a segment-exact string prefix (it ends with ``/``)
    and a file target must match exactly."""
    if not target_uri:
        return True
    if target_uri.endswith("/"):
        return uri.startswith(target_uri)
    return uri == target_uri


@dataclass(frozen=True, slots=True)
class QueryScope:
    """Where one typed query searches, for every stage of one request.

    Attributes:
        filter: the level-0 pre-filter (:func:`base_filter`): account, visible (and narrowed) owner spaces, type,
            categories, the target's subtree.
        roots: the directories the hierarchical expansion starts from (:func:`type_roots`).
        target: the typed query's ``target_uri``, parsed (``None`` without one).
    """

    filter: VectorFilter
    roots: tuple[str, ...]
    target: ContextURI | None


def scope_of(tq: TypedQuery, ctx: RequestContext) -> QueryScope:
    """The :class:`QueryScope` of ``tq`` for ``ctx`` (its ``target_uri`` parsed here)."""
    target = ContextURI.parse(tq.target_uri) if tq.target_uri else None
    return _scope(tq, ctx, target, effective_owner_spaces(ctx, tq.filters.owner_space))


def scopes_of(
    typed_queries: Sequence[TypedQuery],
    ctx: RequestContext,
    *,
    target: ContextURI | None,
    owner_space: str | None,
    spaces: list[str] | None,
) -> list[QueryScope]:
    """Every typed query's scope, built once for a request.

    Args:
        typed_queries: the plan.
        ctx: the caller.
        target: the request's checked target, parsed (each typed query's ``target_uri`` is its text).
        owner_space: the request's owner-space narrowing (the planner puts it in every typed query's filters).
        spaces: :func:`effective_owner_spaces` of ``ctx`` and ``owner_space``.
    """
    out = []
    for tq in typed_queries:
        if target is not None and tq.target_uri == str(target) and tq.filters.owner_space == owner_space:
            out.append(_scope(tq, ctx, target, spaces))
        elif tq.target_uri is None and tq.filters.owner_space == owner_space:
            out.append(_scope(tq, ctx, None, spaces))
        else:  # a typed query the planner narrowed otherwise
            out.append(scope_of(tq, ctx))
    return out


def _scope(tq: TypedQuery, ctx: RequestContext, target: ContextURI | None, spaces: list[str] | None) -> QueryScope:
    flt = VectorFilter(
        account_id=ctx.account_id,
        owner_spaces=spaces,
        levels=[0],
        context_types=[tq.context_type],
        categories=list(tq.categories) or None,
        uri_prefix=str(target) if target is not None else None,
    )
    return QueryScope(flt, tuple(_roots(tq, ctx, target, spaces)), target)


def base_filter(tq: TypedQuery, ctx: RequestContext) -> VectorFilter:
    """The level-0 pre-filter of ``tq`` for ``ctx``: account, visible (and narrowed) spaces, type, categories,
    subtree."""
    return scope_of(tq, ctx).filter


def type_roots(tq: TypedQuery, ctx: RequestContext) -> list[str]:
    """Root directories the hierarchical search starts from for ``tq``, all visible to ``ctx``.

    With a directory ``target_uri`` the target itself; otherwise the context type's root in each owner space the
    query covers: ``ctx://resources/`` for resources, ``ctx://user/<s>/memories/`` for memories,
    ``ctx://agent/<s>/skills/`` for skills. An admin without its own spaces and without an ``owner_space``
    narrowing has no memory/skill roots (there may be thousands); expansion then starts from the seeds' parents.
    """
    return list(scope_of(tq, ctx).roots)


def _roots(tq: TypedQuery, ctx: RequestContext, target: ContextURI | None, spaces: list[str] | None) -> list[str]:
    """:func:`type_roots` of a parsed target and the query's spaces."""
    if target is not None:
        return [str(target)] if target.is_dir else []
    if tq.context_type == "resource":
        return ["ctx://resources/"] if spaces is None or "shared" in spaces else []
    scope = "user" if tq.context_type == "memory" else "agent"
    if spaces is None:
        own = ctx.user_space if scope == "user" else ctx.agent_space
        names = [own] if own else []
    else:
        names = [s.split(":", 1)[1] for s in spaces if s.startswith(scope + ":")]
    return [f"ctx://{scope}/{name}/{_TYPE_ROOT[tq.context_type]}/" for name in names]
