"""Tenancy scope of a typed query: the server-built filter every search stage applies (DESIGN.md §1, seed 000 §2.3).

The filter starts from the :class:`RequestContext` (the caller's account and visible owner spaces) and the caller's
own restrictions are ANDed onto it (``owner_space``, ``categories``, ``target_uri``), so they can only narrow. The
typed query's ``filters.account_id`` is never read: the account always comes from the context.
"""

from __future__ import annotations

from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import TypedQuery
from context_engine.schema.uri import ContextURI

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


def base_filter(tq: TypedQuery, ctx: RequestContext) -> VectorFilter:
    """The level-0 pre-filter of ``tq`` for ``ctx``: account, visible (and narrowed) spaces, type, categories,
    subtree."""
    return VectorFilter(
        account_id=ctx.account_id,
        owner_spaces=effective_owner_spaces(ctx, tq.filters.owner_space),
        levels=[0],
        context_types=[tq.context_type],
        categories=list(tq.categories) or None,
        uri_prefix=target_prefix(tq.target_uri),
    )


def type_roots(tq: TypedQuery, ctx: RequestContext) -> list[str]:
    """Root directories the hierarchical search starts from for ``tq``, all visible to ``ctx``.

    With a directory ``target_uri`` the target itself; otherwise the context type's root in each owner space the
    query covers: ``ctx://resources/`` for resources, ``ctx://user/<s>/memories/`` for memories,
    ``ctx://agent/<s>/skills/`` for skills. An admin without its own spaces and without an ``owner_space``
    narrowing has no memory/skill roots (there may be thousands); expansion then starts from the seeds' parents.
    """
    if tq.target_uri:
        t = ContextURI.parse(tq.target_uri)
        return [str(t)] if t.is_dir else []
    if tq.context_type == "resource":
        spaces = effective_owner_spaces(ctx, tq.filters.owner_space)
        return ["ctx://resources/"] if spaces is None or "shared" in spaces else []
    scope = "user" if tq.context_type == "memory" else "agent"
    spaces = effective_owner_spaces(ctx, tq.filters.owner_space)
    if spaces is None:
        own = ctx.user_space if scope == "user" else ctx.agent_space
        names = [own] if own else []
    else:
        names = [s.split(":", 1)[1] for s in spaces if s.startswith(scope + ":")]
    return [f"ctx://{scope}/{name}/{_TYPE_ROOT[tq.context_type]}/" for name in names]
