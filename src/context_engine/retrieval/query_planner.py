"""QueryPlanner: a query (plus session and hints) -> typed queries (DESIGN.md §5, seed 000 §4.2 "QueryPlanner").

Rules (V1, keyword based, Chinese and English):

* ``memory``: 偏好 背景 身份 记忆 回顾 喜欢 习惯 记得 我是谁 ... / preference, background, who am I, remember,
  recall ...
* ``skill``: 怎么做 如何 步骤 命令 流程 操作 ... / how to, how do I, steps, command, procedure, workflow ...
* ``resource``: 文档 资料 规范 链接 手册 指南 ... / doc, documentation, spec, link, manual, guide, runbook ...

Chinese keywords match as substrings; English ones as whole words or phrases, case-insensitively (NFKC).

The intent **ranks** context types, it never excludes one: the planner always returns one typed query per context
type, the matched (preferred) types first in the order memory > skill > resource, then the others in the same
order. Every typed query carries the same ``hints.intent`` label naming the preferred types (``"skill"``,
``"memory+skill"``, ``"session:skill"``); the merge gives the hits of a preferred type a small boost
(``retrieval.scoring.intent_boost``, :mod:`context_engine.retrieval.scoring`), so "how do I ..." puts a matching skill
first and still finds the runbook that answers it. No intent, or all three at once (the rules do not discriminate: a
conflict), prefers none (label ``"fallback"``) and records ``RET-4221``, which is informational since every type is
searched anyway.

Only the caller narrows the types: ``planner_hints`` ``intent`` / ``context_types`` (labels ``"hint:..."``), or a
``target_uri`` inside a context-type root (label ``"target:..."``); then only those types are searched.

Before preferring none, the planner looks at ``session_archive``: the most recent user messages (newest first) are
classified with the same rules, so a follow-up such as "那具体步骤呢?" after a question about a runbook is planned
from its context. A short follow-up (``followup_max_chars``) also gets the last user message appended to the text
that is embedded. ``planner_hints`` may add terms to the text and carry ``must_have_terms``, ``exclude_terms`` and a
``time_range`` into every typed query.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.observability.trace import TraceRecorder
from context_engine.schema.context import RequestContext
from context_engine.schema.query import (
    CONTEXT_TYPE_ORDER,
    TOP_K_DEFAULT,
    ContextTypeName,
    PlannerHints,
    QueryFilters,
    QueryHints,
    SessionArchive,
    TypedQuery,
)
from context_engine.schema.uri import ContextURI, parse_uri
from context_engine.settings import PlannerSettings

__all__ = ["INTENT_KEYWORDS", "QueryPlanner", "classify", "preferred_types"]

#: Keyword rules per context type: (Chinese substrings, English words/phrases).
INTENT_KEYWORDS: dict[ContextTypeName, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "memory": (
        (
            "偏好",
            "背景",
            "身份",
            "记忆",
            "回顾",
            "喜欢",
            "喜好",
            "习惯",
            "记得",
            "我是谁",
            "之前说过",
            "我说过",
            "个人资料",
            "爱好",
        ),
        (
            "preference",
            "preferences",
            "prefer",
            "preferred",
            "background",
            "who am i",
            "remember",
            "recall",
            "my profile",
            "about me",
            "memory",
            "memories",
            "habit",
            "habits",
            "favorite",
            "favourite",
            "i like",
            "did i say",
            "what did i",
        ),
    ),
    "skill": (
        ("怎么做", "怎样做", "如何", "步骤", "命令", "流程", "操作步骤", "脚本"),
        (
            "how to",
            "how do i",
            "how can i",
            "how do you",
            "how should i",
            "steps",
            "step by step",
            "command",
            "commands",
            "procedure",
            "workflow",
            "instructions",
            "script",
        ),
    ),
    "resource": (
        ("文档", "资料", "规范", "链接", "手册", "说明书", "参考", "指南"),
        (
            "doc",
            "docs",
            "document",
            "documents",
            "documentation",
            "spec",
            "specs",
            "specification",
            "link",
            "links",
            "manual",
            "reference",
            "guide",
            "runbook",
            "runbooks",
            "readme",
            "article",
        ),
    ),
}


def _compile(words: Sequence[str]) -> re.Pattern[str]:
    alternatives = sorted((re.escape(w) for w in words), key=len, reverse=True)
    return re.compile(r"(?<![\w])(?:" + "|".join(alternatives) + r")(?![\w])")


_EN_PATTERNS = {t: _compile(en) for t, (_, en) in INTENT_KEYWORDS.items()}


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def classify(text: str) -> dict[ContextTypeName, list[str]]:
    """The context types whose keywords occur in ``text``, with the keywords found (rule order, no duplicates)."""
    norm = _normalise(text)
    found: dict[ContextTypeName, list[str]] = {}
    for ctype in CONTEXT_TYPE_ORDER:
        zh, _ = INTENT_KEYWORDS[ctype]
        words = [w for w in zh if w in norm]
        words += list(dict.fromkeys(m.group(0) for m in _EN_PATTERNS[ctype].finditer(norm)))
        if words:
            found[ctype] = words
    return found


def preferred_types(typed_queries: Sequence[TypedQuery]) -> frozenset[str]:
    """The context types the planner ranked first (from ``hints.intent``), or the empty set.

    Empty when the planner preferred none (``"fallback"``) and when the caller narrowed the types (``"hint:..."``,
    ``"target:..."``): every typed query searched is then equally wanted, and no boost changes the scores.
    """
    labels = {tq.hints.intent or "" for tq in typed_queries}
    if len(labels) != 1:
        return frozenset()
    label = labels.pop()
    if label.startswith("session:"):
        label = label.removeprefix("session:")
    elif ":" in label or label == "fallback":
        return frozenset()
    return frozenset(t for t in label.split("+") if t in CONTEXT_TYPE_ORDER)


def _text(target_uri: ContextURI | str | None) -> str | None:
    """A typed query's ``target_uri``: the text of a parsed target, a text as given."""
    return str(target_uri) if isinstance(target_uri, ContextURI) else target_uri


def _invalid(field: str, err: ValidationError | str) -> ContextEngineError:
    detail = (
        err
        if isinstance(err, str)
        else "; ".join(f"{'.'.join(str(p) for p in e['loc']) or field}: {e['msg']}" for e in err.errors()[:5])
    )
    return ContextEngineError(ErrorCode.QUERY_INVALID, f"{field} is invalid: {detail}", {"field": field})


class QueryPlanner:
    """Rule-based planner (V1). Stateless; its only collaborator is its settings section.

    Args:
        settings: the ``retrieval.planner`` section.
    """

    def __init__(self, settings: PlannerSettings) -> None:
        self._settings = settings

    def plan(
        self,
        query: str,
        session_archive: dict[str, Any] | None,
        hints: dict[str, Any] | None,
        ctx: RequestContext,
        *,
        top_k: int = TOP_K_DEFAULT,
        categories: Sequence[str] = (),
        target_uri: ContextURI | str | None = None,
        owner_space: str | None = None,
        trace: TraceRecorder | None = None,
    ) -> list[TypedQuery]:
        """Typed queries for ``query``: the preferred context types first, then the others (seed 000 §4.2; module
        docstring).

        Args:
            query: the caller's query, non-empty (checked by the pipeline).
            session_archive: recent messages (see :class:`SessionArchive`), or ``None``.
            hints: planner hints (see :class:`PlannerHints`), or ``None``.
            ctx: the caller; its account becomes every typed query's ``filters.account_id``.
            top_k: results per typed query (validated by the pipeline).
            categories: the caller's category narrowing; when empty, the type's configured default categories.
            target_uri: an already checked, visible, existing target (or ``None``); parsed or its text (the
                pipeline passes the target it parsed, so it is not parsed again).
            owner_space: the caller's owner-space narrowing (or ``None``).
            trace: receives the informational ``RET-4221`` warning and the planner's decisions.

        Returns:
            Three typed queries (one per context type, preferred first) sharing the same embedded text, or only the
            types the caller named through ``hints`` or ``target_uri``.

        Raises:
            ContextEngineError: ``RET-4001`` when ``hints`` or ``session_archive`` do not have the documented shape.
        """
        try:
            ph = PlannerHints.model_validate(hints or {})
        except ValidationError as err:
            raise _invalid("planner_hints", err) from err
        try:
            session = SessionArchive.model_validate(session_archive or {})
        except ValidationError as err:
            raise _invalid("session_archive", err) from err

        text = " ".join(query.split())
        matched = classify(text)
        target = parse_uri(target_uri) if target_uri else None
        types, intent = self._decide(matched, ph, session, target)
        if types is None:
            types, intent = list(CONTEXT_TYPE_ORDER), "fallback"
            why = "no intent keyword" if not matched else "every context type matched (conflict)"
            if trace is not None:
                # informational: with ranking, an unclassified query is searched exactly like a classified one
                trace.warn(
                    ErrorCode.PLANNER_UNCLASSIFIED,
                    f"planner found no preferred context type ({why}); memory, skill and resource ranked equally",
                    stage="planner",
                )
        elif not intent.startswith(("hint:", "target:")):
            # the intent ranks, it never excludes: the other types are searched after the preferred ones
            types = types + [t for t in CONTEXT_TYPE_ORDER if t not in types]
        if not matched and session.messages and len(text) <= self._settings.followup_max_chars:
            context = self._last_user_message(session)
            if context:
                text = f"{text} {context[: self._settings.session_context_max_chars]}".strip()
        if ph.terms:
            text = f"{text} {' '.join(t.strip() for t in ph.terms if t.strip())}".strip()

        filters = QueryFilters(
            account_id=ctx.account_id,
            owner_space=owner_space,
            time_range=ph.time_range,
        )
        out = [
            TypedQuery(
                text=text,
                context_type=ctype,
                categories=list(categories) or list(self._settings.default_categories.get(ctype, ())),
                target_uri=_text(target_uri),
                top_k=top_k,
                filters=filters,
                hints=QueryHints(
                    intent=intent, must_have_terms=list(ph.must_have_terms), exclude_terms=list(ph.exclude_terms)
                ),
            )
            for ctype in types
        ]
        if trace is not None:
            trace.event("planner", "planned", typed_queries=len(out), intent=intent)
            trace.detail("planner", "matched_keywords", matched)
            trace.detail("planner", "intent", intent)
            trace.detail("planner", "context_types", list(types))
            trace.detail("planner", "preferred", [t for t in types if t in preferred_types(out)])
            trace.detail("planner", "text_extended", text != " ".join(query.split()))
        return out

    def fallback(
        self,
        query: str,
        ctx: RequestContext,
        *,
        top_k: int = TOP_K_DEFAULT,
        categories: Sequence[str] = (),
        target_uri: ContextURI | str | None = None,
        owner_space: str | None = None,
    ) -> list[TypedQuery]:
        """The plan of seed 000 §7 for a planner fault (``RET-4221``, recorded by the caller): one typed query per
        context type in the order memory > skill > resource, ranked equally (intent ``"fallback"``), or only the
        target's type when ``target_uri`` lies inside a type root. No rule, hint or session is read, so it cannot
        fail where :meth:`plan` did; the caller's narrowing (categories, target, owner space) is kept."""
        target_type = parse_uri(target_uri).context_type if target_uri else None
        types = [target_type] if target_type is not None else list(CONTEXT_TYPE_ORDER)
        filters = QueryFilters(account_id=ctx.account_id, owner_space=owner_space)
        return [
            TypedQuery(
                text=" ".join(query.split()),
                context_type=ctype,
                categories=list(categories) or list(self._settings.default_categories.get(ctype, ())),
                target_uri=_text(target_uri),
                top_k=top_k,
                filters=filters,
                hints=QueryHints(intent="fallback"),
            )
            for ctype in types
        ]

    def _decide(
        self,
        matched: dict[ContextTypeName, list[str]],
        ph: PlannerHints,
        session: SessionArchive,
        target: ContextURI | None,
    ) -> tuple[list[ContextTypeName] | None, str]:
        """The caller's types (``hint:``/``target:`` labels, exclusive) or the preferred types and the intent label,
        or ``(None, "")`` when nothing is preferred."""
        if target is not None:
            target_type = target.context_type
            if target_type is not None:
                return [target_type], f"target:{target_type}"
        forced = ([ph.intent] if ph.intent else []) + list(ph.context_types)
        if forced:
            types = [t for t in CONTEXT_TYPE_ORDER if t in forced]
            return types, "hint:" + "+".join(types)
        if matched and len(matched) < len(CONTEXT_TYPE_ORDER):
            types = [t for t in CONTEXT_TYPE_ORDER if t in matched]
            return types, "+".join(types)
        if not matched:
            for message in self._recent_user_messages(session):
                found = classify(message)
                if found and len(found) < len(CONTEXT_TYPE_ORDER):
                    types = [t for t in CONTEXT_TYPE_ORDER if t in found]
                    return types, "session:" + "+".join(types)
        return None, ""

    def _recent_user_messages(self, session: SessionArchive) -> list[str]:
        """Newest first, at most ``session_max_messages``, then the summary."""
        users = [m.content for m in session.messages if m.role == "user" and m.content.strip()]
        out = list(reversed(users))[: self._settings.session_max_messages]
        if session.summary and session.summary.strip():
            out.append(session.summary)
        return out

    def _last_user_message(self, session: SessionArchive) -> str:
        recent = self._recent_user_messages(session)
        return " ".join(recent[0].split()) if recent else ""
