"""The scoring and report of the conversational evaluation (:mod:`context_engine.eval.conversation_eval`).

:func:`score_conversation_run` scores a finished run (:data:`CONVERSATION_MEASURES` overall and per category, latency,
context tokens), :func:`no_answer_summary` and :func:`assistant_turn_share` add what the no-answer questions and the
assistant turns show, and :class:`ConversationReport` renders it all. Split out of that module (issue 28: no module
over 800 lines), which re-exports these names.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from context_engine.eval.conversations import ConversationDataset
from context_engine.eval.harness import MethodResult, _stats, config_hash
from context_engine.eval.metrics import evaluate
from context_engine.eval.report import EvalReport
from context_engine.eval.trec import Run
from context_engine.ingest.parse import estimate_tokens

CONVERSATION_MEASURES: tuple[str, ...] = ("P@1", "R@3", "R@5", "R@10", "RR@10", "nDCG@10")
NA = "n/a"
"""What a share reads when the engine's responses carry no ``match_quality``."""


class AnsweredQuestions(Protocol):
    """What :func:`no_answer_summary` reads of the engine that answered (the conversation retriever of
    :mod:`context_engine.eval.conversation_eval`, which imports this module): per question asked, the response's
    ``match_quality`` (``None`` when the response has none)."""

    @property
    def match_quality(self) -> dict[str, str | None]: ...


def none_share(qualities: Sequence[str | None]) -> float | str | None:
    """The share of ``"none"`` among ``match_quality`` values: :data:`NA` when none of them is set (the engine's
    response has no such field), ``None`` when there are no questions."""
    if not qualities:
        return None
    if all(q is None for q in qualities):
        return NA
    return sum(1 for q in qualities if q == "none") / len(qualities)


def no_answer_summary(
    conversations: ConversationDataset, engine: AnsweredQuestions, detail: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The engine's answer to "did it say it found nothing?": ``{no_answer_questions, no_answer_match_none,
    answerable_questions, answerable_match_none, no_answer_with_turns, match_quality: {value: count}}``; shares are
    floats, :data:`NA` or ``None`` (:func:`none_share`); the answerable ones are the judged questions asked."""
    asked = [q for q in conversations.dataset.queries if q in engine.match_quality]
    counts: dict[str, int] = {}
    for d in detail.values():
        key = str(d["match_quality"]) if d["match_quality"] is not None else NA
        counts[key] = counts.get(key, 0) + 1
    return {
        "no_answer_questions": len(detail),
        "no_answer_match_none": none_share([d["match_quality"] for d in detail.values()]),
        "answerable_questions": len(asked),
        "answerable_match_none": none_share([engine.match_quality[q] for q in asked]),
        "no_answer_with_turns": (sum(1 for d in detail.values() if d["turns"]) / len(detail)) if detail else None,
        "match_quality": dict(sorted(counts.items())),
    }


def assistant_turn_share(conversations: ConversationDataset, run: Run) -> dict[str, float]:
    """How much of a run is non-user turns (assistant replies, inserted acknowledgements): ``{"assistant_at_1": share
    of the judged questions whose first turn is one, "assistant_returned": share of them among all turns
    returned}``."""
    queries = list(conversations.dataset.queries)
    first = returned = other = 0
    for q in queries:
        docs = [d for d, _ in run.get(q, [])]
        roles = [t.role if (t := conversations.turn(d)) else "user" for d in docs]
        first += bool(roles) and roles[0] != "user"
        returned += len(roles)
        other += sum(1 for r in roles if r != "user")
    return {
        "assistant_at_1": round(first / len(queries), 4) if queries else 0.0,
        "assistant_returned": round(other / returned, 4) if returned else 0.0,
    }


def score_conversation_run(
    conversations: ConversationDataset,
    run: Run,
    latencies: dict[str, float],
    *,
    method: str,
    model: str | None,
    config: dict[str, Any],
    context_k: int = 5,
    prepare_s: float = 0.0,
) -> MethodResult:
    """Score a finished run: :data:`CONVERSATION_MEASURES` overall and per category (ir-measures), latency, context.

    ``metrics`` holds ``{measure: mean over all judged questions}`` and ``{"<measure>[<category>]": mean over that
    category's questions}``; a question absent from ``run`` or with an empty list scores 0. Context tokens: the
    estimate (``ingest.parse.estimate_tokens``) of the top ``context_k`` turns' ``speaker: text``.
    """
    ds = conversations.dataset
    scored = evaluate(ds.qrels, run, CONVERSATION_MEASURES)
    metrics = dict(scored.aggregate)
    by_cat: dict[str, list[str]] = {}
    for q in conversations.questions:
        by_cat.setdefault(q.category_name, []).append(q.qa_id)
    for cat, qids in sorted(by_cat.items()):
        for m in CONVERSATION_MEASURES:
            metrics[f"{m}[{cat}]"] = sum(scored.per_query[q][m] for q in qids) / len(qids)
    tokens: dict[str, int] = {}

    def ctx_tokens(results: list[tuple[str, float]]) -> float:
        total = 0
        for doc_id, _ in results[:context_k]:
            if doc_id not in tokens:
                doc = ds.corpus.get(doc_id)
                tokens[doc_id] = estimate_tokens(doc.text) if doc else 0
            total += tokens[doc_id]
        return float(total)

    return MethodResult(
        method=method,
        model=model,
        config=config,
        config_hash=config_hash(config),
        metrics=metrics,
        per_query=scored.per_query,
        latency_ms=_stats([latencies[q] for q in ds.queries if q in latencies]),
        context_tokens=_stats([ctx_tokens(run.get(q, [])) for q in ds.queries]),
        run=run,
        latencies=latencies,
        empty_queries=sum(1 for q in ds.queries if not run.get(q)),
        prepare_s=prepare_s,
    )



@dataclass
class ConversationReport(EvalReport):
    """An :class:`EvalReport` of a conversational evaluation: the table shows :data:`CONVERSATION_MEASURES`, and
    the markdown and JSON add the per-category table, the counts of conversations/turns/questions and, per method,
    the text it indexes.

    Attributes:
        conversations: the dataset.
        notes: per result label, facts about the run (``cached``, ``ingest_s``, ``warnings``, ...).
        no_answer: per engine result label, :func:`no_answer_summary`.
        no_answer_detail: per engine result label, :func:`ask_no_answer` (``{qa_id: {...}}``).
    """

    conversations: ConversationDataset | None = None
    notes: dict[str, dict[str, Any]] = field(default_factory=dict)
    no_answer: dict[str, dict[str, Any]] = field(default_factory=dict)
    no_answer_detail: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    @staticmethod
    def table_header() -> list[str]:
        return ["method", "model", *CONVERSATION_MEASURES, "p50 ms", "p95 ms", "ctx tokens"]

    def table_rows(self) -> list[list[str]]:
        return [
            [r.method + (f" ({r.variant})" if r.variant else ""), r.model or "—"]
            + [f"{r.metrics[m]:.4f}" for m in CONVERSATION_MEASURES]
            + [f"{r.latency_ms['p50']:.1f}", f"{r.latency_ms['p95']:.1f}", f"{r.context_tokens['mean']:.0f}"]
            for r in self.results
        ]

    def categories(self) -> dict[str, int]:
        """Judged questions per category."""
        return self.conversations.categories() if self.conversations else {}

    def per_category(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{result label: {category: {measure: value}}}``."""
        return {
            r.label: {
                cat: {m: r.metrics[f"{m}[{cat}]"] for m in CONVERSATION_MEASURES if f"{m}[{cat}]" in r.metrics}
                for cat in self.categories()
            }
            for r in self.results
        }

    def category_table(self) -> list[str]:
        """Markdown lines: one row per (category, method), the :data:`CONVERSATION_MEASURES`."""
        lines = [
            "| category | questions | method | model | " + " | ".join(CONVERSATION_MEASURES) + " |",
            "|" + "---|" * (4 + len(CONVERSATION_MEASURES)),
        ]
        for cat, n in self.categories().items():
            for r in self.results:
                vals = [f"{r.metrics.get(f'{m}[{cat}]', 0.0):.4f}" for m in CONVERSATION_MEASURES]
                label = r.method + (f" ({r.variant})" if r.variant else "")
                lines.append(f"| {cat} | {n} | {label} | {r.model or '—'} | " + " | ".join(vals) + " |")
        return lines

    def no_answer_table(self) -> list[str]:
        """Markdown lines: per engine result, the share of no-answer and of answerable questions whose response says
        ``match_quality == "none"`` (``n/a`` when the responses carry none); empty when nothing was asked."""
        if not self.no_answer:
            return []
        header = (
            "| method | model | no-answer questions | match_quality none (no-answer) | answerable questions "
            "| match_quality none (answerable) | no-answer with turns returned |"
        )
        lines = [header, "|---|---|---|---|---|---|---|"]
        by_label = {r.label: r for r in self.results}
        for label, s in self.no_answer.items():
            r = by_label.get(label)
            name = (r.method + (f" ({r.variant})" if r.variant else "")) if r else label
            cells = [_share(s["no_answer_match_none"]), str(s["answerable_questions"])]
            cells += [_share(s["answerable_match_none"]), _share(s["no_answer_with_turns"])]
            model = (r.model if r else None) or "—"
            lines.append(f"| {name} | {model} | {s['no_answer_questions']} | " + " | ".join(cells) + " |")
        return lines

    def dataset_info(self) -> dict[str, Any]:
        info = super().dataset_info()
        c = self.conversations
        if c is not None:
            info.update(
                {
                    "conversations": len(c.conversations),
                    "turns": sum(len(t) for t in c.turns.values()),
                    "sessions": sum(len(c.sessions(x)) for x in c.conversations),
                    "categories": c.categories(),
                    "unknown_evidence": c.unknown_evidence,
                    "unjudged_questions": c.unjudged_questions,
                    "no_answer_questions": len(c.no_answer),
                    "perturbation": c.perturbation,
                }
            )
        return info

    def to_json(self, *, per_query: bool = True) -> dict[str, Any]:
        out = super().to_json(per_query=per_query)
        out["measures"] = list(CONVERSATION_MEASURES)
        out["per_category"] = self.per_category()
        out["index_text"] = {r.label: r.config.get("doc_input") for r in self.results}
        out["notes"] = self.notes
        out["no_answer"] = self.no_answer
        if per_query:
            out["no_answer_per_query"] = self.no_answer_detail
        return out

    def to_markdown(self) -> str:
        base = super().to_markdown().rstrip("\n").split("\n")
        info = self.dataset_info()
        head = [
            (
                f"- conversations: {info.get('conversations')}, sessions {info.get('sessions')}, turns "
                f"{info.get('turns')}; judged questions {info['queries']} (no-answer questions, not judged: "
                f"{info.get('no_answer_questions')}; left out, no known evidence: {info.get('unjudged_questions')}; "
                f"unknown evidence ids dropped: {info.get('unknown_evidence')})"
            ),
            "- each question searches only its own conversation; turn-level qrels = the evidence turns",
        ]
        if info.get("perturbation") == "acks":
            head.append(
                "- perturbation `acks`: an assistant acknowledgement inserted after every turn (never evidence)"
            )
        idx = [f"- `{r.label}` indexes: {r.config.get('doc_input')}" for r in self.results]
        notes = [f"- `{label}`: {json.dumps(n, sort_keys=True)}" for label, n in self.notes.items()]
        table_at = next(i for i, line in enumerate(base) if line.startswith("| method |"))
        body = base[: table_at - 1] + head + base[table_at - 1 :]
        cut = next((i for i, line in enumerate(body) if line == "Configs:"), len(body))
        extra = ["## Per category", "", *self.category_table(), ""]
        if self.no_answer:
            extra += ["## No-answer questions", "", *self.no_answer_table(), ""]
        extra += ["What each method indexes:", "", *idx]
        if notes:
            extra += ["", "Run notes:", "", *notes]
        return "\n".join(body[:cut] + extra + [""] + body[cut:]) + "\n"


def _share(value: float | str | None) -> str:
    """A share as a table cell: ``0.1234``, ``n/a`` or ``—`` (no questions)."""
    if value is None:
        return "—"
    return value if isinstance(value, str) else f"{value:.4f}"
