"""Calibrate and check search_memory's ``match_quality`` label on conversation dev sets (docs/search_memory.md).

    python bench/match_quality.py --dataset ../shared/data/locomo_dev [--dataset eval/conversations/agent_dev]
        [--cross auto|on|off] [--top-k 10] [--cache-dir DIR] [--json OUT]

For each dataset (a folder with ``turns.jsonl`` and ``qa.jsonl``, ``eval/conversations.py``), every conversation is
written with ``add_messages`` into its own user space by the conversational evaluation's machinery
(``EngineConversationRetriever``; the ingest is cached under ``<cache>/conversations/``, shared with
``context-engine eval``), and questions go through ``search_memory`` (``top_k`` 10, the defaults otherwise, with the
detailed trace so the rule's features can be read back):

* **answerable**: every judged question (it has evidence turns), asked in its own conversation;
* **unanswerable (in store)**: the dataset's questions whose ``category_name`` is ``unanswerable``, asked in their
  own conversation: the answer is not in the store (a question merely without evidence, as LoCoMo has two, is left
  out: it is not known to be unanswerable);
* **unanswerable (other conversation)**: every judged question asked in the next conversation's user space (the
  questions of conversation i in conversation i+1, the last in the first): the people differ, so the answer is
  nearly always absent there. ``--cross auto`` (the default) asks these only when the dataset has no in-store
  unanswerable questions.

Printed per dataset and group: the distribution (p5 ... p95) of the rule's features (``retrieval/match_quality.py``:
``similarity``, ``evidence``, ``first_vector_score``, and the share of questions with a missing name), the
none / weak / strong rates, the precision of ``strong`` (share of strong answers whose first hit is an evidence turn;
a strong answer to an unanswerable question counts as imprecise) beside the same share for ``weak``, the acceptance
check (none >= 90% of unanswerable, < 5% of answerable), the none rates the other ``none_below_evidence`` and
``none_below_own_text`` values would give (recomputed from the features; nothing is searched again), and the share of
answers the own-text check read. Nothing is asserted: this prints figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from context_engine.eval.conversation_eval import EngineConversationRetriever, context_of
from context_engine.eval.conversations import ConversationDataset, load_conversations, turn_doc_id
from context_engine.providers.embedder import build_embedder
from context_engine.schema.query import SearchMemoryResponse
from context_engine.service import ContextEngineService
from context_engine.settings import MatchQualitySettings, Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
LABELS = ("none", "weak", "strong")
FEATURES = ("similarity", "topic_similarity", "evidence", "first_vector_score")
PERCENTILES = (0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95)
NONE_SWEEP = (0.15, 0.175, 0.20, 0.225, 0.25, 0.30)
OWN_SWEEP = (0.0, 0.1, 0.125, 0.15, 0.175, 0.2)
ANSWERABLE, IN_STORE, OTHER_CONV = "answerable", "unanswerable (in store)", "unanswerable (other conversation)"


@dataclass(frozen=True, slots=True)
class Asked:
    """One question asked once: its group, the label, the rule's features (the detailed trace's
    ``assemble.match_quality``) and whether the first hit is one of its evidence turns."""

    qa_id: str
    group: str
    label: str
    features: dict[str, Any]
    first_is_evidence: bool


@dataclass
class DatasetResult:
    """What one dataset gave: its name, the questions asked (in order) and the ingest facts."""

    name: str
    asked: list[Asked] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def no_answer_questions(folder: Path) -> list[dict[str, Any]]:
    """The rows of ``qa.jsonl`` whose answer is not in the store (``category_name == "unanswerable"``), in file order
    (read here: the loader keeps judged questions only)."""
    rows = [json.loads(line) for line in (folder / "qa.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r.get("category_name") == "unanswerable"]


def ask(service: ContextEngineService, query: str, conv_id: str, top_k: int) -> SearchMemoryResponse:
    """``search_memory`` under the conversation's context with the detailed trace (the rule's features)."""
    return service.search_memory(query, context_of(conv_id), top_k=top_k, include_debug=True, trace_level="detailed")


def features_of(response: SearchMemoryResponse) -> dict[str, Any]:
    """The rule's features from the detailed trace (``{}`` when the response has none, e.g. a degraded search)."""
    stages = (response.thinking_trace or {}).get("stages", {})
    return dict(stages.get("assemble", {}).get("match_quality", {}))


def prepared(
    folder: Path, settings: Settings, cache_dir: Path
) -> tuple[ConversationDataset, EngineConversationRetriever, ContextEngineService]:
    """One conversation dataset loaded and ingested (or its cached ingest reused) by the conversational evaluation's
    machinery, and the service it was written with (open; the caller closes it). Shared with
    ``bench/conversation_search.py``; ``engine.close()`` closes the service."""
    conv = load_conversations(folder)
    embedder = build_embedder(settings.embedding, home=settings.home_path)
    opened: list[ContextEngineService] = []

    def factory(s: Settings) -> ContextEngineService:
        opened.append(ContextEngineService(s, embedder=embedder))
        return opened[-1]

    engine = EngineConversationRetriever(conv, embedder, settings, cache_dir=cache_dir, engine_factory=factory)
    engine.prepare()
    return conv, engine, opened[-1]


def run_dataset(folder: Path, settings: Settings, *, cross: str, top_k: int, cache_dir: Path) -> DatasetResult:
    """Ingest (or reuse) one dataset and ask its question groups (module docstring)."""
    started = time.perf_counter()
    conv, engine, service = prepared(folder, settings, cache_dir)
    result = DatasetResult(folder.name, notes={"home": str(engine.home), "ingest_cached": engine.cached})
    result.notes["prepare_s"] = round(time.perf_counter() - started, 1)
    uris = json.loads((engine.home / "ingested.json").read_text(encoding="utf-8"))["uris"]
    docs_of: dict[str, set[str]] = {}
    for doc, uri in uris.items():
        docs_of.setdefault(uri, set()).add(doc)
    try:
        result.asked = _ask_groups(service, conv, folder, docs_of, cross=cross, top_k=top_k)
    finally:
        engine.close()
    return result


def _ask_groups(
    service: ContextEngineService,
    conv: ConversationDataset,
    folder: Path,
    docs_of: dict[str, set[str]],
    *,
    cross: str,
    top_k: int,
) -> list[Asked]:
    def first_is(response: SearchMemoryResponse, evidence: set[str]) -> bool:
        return bool(response.hits) and bool(docs_of.get(response.hits[0].uri, set()) & evidence)

    out: list[Asked] = []
    for q in conv.questions:
        evidence = {turn_doc_id(q.conv_id, e) for e in q.evidence}
        r = ask(service, q.question, q.conv_id, top_k)
        out.append(Asked(q.qa_id, ANSWERABLE, r.match_quality, features_of(r), first_is(r, evidence)))
    known = set(conv.conversations)
    in_store = [row for row in no_answer_questions(folder) if str(row["conv_id"]) in known]
    for row in in_store:
        r = ask(service, str(row["question"]), str(row["conv_id"]), top_k)
        out.append(Asked(str(row["qa_id"]), IN_STORE, r.match_quality, features_of(r), False))
    ids = conv.conversations
    if len(ids) > 1 and (cross == "on" or (cross == "auto" and not in_store)):
        for q in conv.questions:
            other = ids[(ids.index(q.conv_id) + 1) % len(ids)]
            r = ask(service, q.question, other, top_k)
            out.append(Asked(q.qa_id, OTHER_CONV, r.match_quality, features_of(r), False))
    return out


# ---- report ---------------------------------------------------------------------------------------------------------
def percentiles(values: Sequence[float]) -> list[float]:
    """:data:`PERCENTILES` of ``values`` (nearest rank), rounded to 3 decimals; empty for no values."""
    xs = sorted(values)
    return [round(xs[min(len(xs) - 1, int(p * len(xs)))], 3) for p in PERCENTILES] if xs else []


def rates(asked: Sequence[Asked]) -> dict[str, float]:
    """Share of each label among ``asked`` (0 for none asked)."""
    n = len(asked) or 1
    return {label: sum(1 for a in asked if a.label == label) / n for label in LABELS}


def precision(asked: Sequence[Asked], label: str) -> tuple[float | None, int]:
    """Share of the ``label`` answers whose first hit is an evidence turn, and how many such answers there are."""
    chosen = [a for a in asked if a.label == label]
    return (sum(a.first_is_evidence for a in chosen) / len(chosen) if chosen else None), len(chosen)


def relabel(asked: Sequence[Asked], none_below: float, own_below: float) -> Callable[[Asked], bool]:
    """Whether an answer would be ``none`` with ``none_below_evidence = none_below`` and ``none_below_own_text =
    own_below`` (from its features; the own-text check's outcome is read where it ran, so a ``none_below`` other
    than the setting's does not add or remove checked answers: an approximation)."""

    def is_none(a: Asked) -> bool:
        f = a.features
        if not f or not f.get("hits") or float(f.get("evidence", 0.0)) < none_below:
            return True
        own = f.get("own_text_evidence")
        return own is not None and float(own) < own_below

    return is_none


def summary(result: DatasetResult, rule: MatchQualitySettings) -> dict[str, Any]:
    """The figures of one dataset as JSON-ready values (what :func:`print_summary` prints); ``rule``: the
    thresholds the answers were labelled with (each sweep varies one of them)."""
    groups = {g: [a for a in result.asked if a.group == g] for g in (ANSWERABLE, IN_STORE, OTHER_CONV)}
    groups = {g: xs for g, xs in groups.items() if xs}
    out: dict[str, Any] = {"dataset": result.name, "notes": result.notes, "groups": {}}
    for group, xs in groups.items():
        strong, n_strong = precision(xs, "strong")
        weak, n_weak = precision(xs, "weak")
        out["groups"][group] = {
            "questions": len(xs),
            "rates": rates(xs),
            "features": {f: percentiles([float(a.features.get(f, 0.0)) for a in xs]) for f in FEATURES},
            "missing_name_share": sum(1 for a in xs if a.features.get("missing_names")) / len(xs),
            "strong_first_hit_evidence": strong,
            "weak_first_hit_evidence": weak,
            "strong_answers": n_strong,
            "weak_answers": n_weak,
        }
    every = result.asked
    strong, n_strong = precision(every, "strong")
    out["strong_precision_all"] = {"precision": strong, "strong_answers": n_strong}
    answerable = groups.get(ANSWERABLE, [])
    unanswerable = [a for g, xs in groups.items() if g != ANSWERABLE for a in xs]
    out["sweep_none_below_evidence"] = {
        str(t): {
            "answerable_none": _share(answerable, relabel(answerable, t, rule.none_below_own_text)),
            "unanswerable_none": _share(unanswerable, relabel(unanswerable, t, rule.none_below_own_text)),
        }
        for t in NONE_SWEEP
    }
    out["sweep_none_below_own_text"] = {
        str(t): {
            "answerable_none": _share(answerable, relabel(answerable, rule.none_below_evidence, t)),
            "unanswerable_none": _share(unanswerable, relabel(unanswerable, rule.none_below_evidence, t)),
        }
        for t in OWN_SWEEP
    }
    out["own_text_checked"] = {
        g: _share(xs, lambda a: a.features.get("own_text_evidence") is not None) for g, xs in groups.items()
    }
    out["acceptance"] = {
        "unanswerable_none": _share(unanswerable, lambda a: a.label == "none"),
        "answerable_none": _share(answerable, lambda a: a.label == "none"),
    }
    return out


def _share(xs: Sequence[Asked], pred: Callable[[Asked], bool]) -> float | None:
    return sum(1 for a in xs if pred(a)) / len(xs) if xs else None


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def print_summary(s: dict[str, Any]) -> None:
    """Markdown tables of one dataset's figures."""
    print(f"\n## {s['dataset']}\n")
    print(f"home {s['notes']['home']} (ingest cached: {s['notes']['ingest_cached']})\n")
    print("| group | questions | none | weak | strong | strong: 1st hit is evidence | weak: 1st hit is evidence |")
    print("|---|---|---|---|---|---|---|")
    for group, g in s["groups"].items():
        r = g["rates"]
        print(
            f"| {group} | {g['questions']} | {_pct(r['none'])} | {_pct(r['weak'])} | {_pct(r['strong'])} | "
            f"{_pct(g['strong_first_hit_evidence'])} ({g['strong_answers']}) | "
            f"{_pct(g['weak_first_hit_evidence'])} ({g['weak_answers']}) |"
        )
    p = s["strong_precision_all"]
    print(f"\nprecision of strong over every answer: {_pct(p['precision'])} of {p['strong_answers']} strong answers")
    print("\nFeature distributions (" + ", ".join(f"p{int(100 * q)}" for q in PERCENTILES) + "):\n")
    print("| group | feature | percentiles |")
    print("|---|---|---|")
    for group, g in s["groups"].items():
        for name, values in g["features"].items():
            print(f"| {group} | {name} | {' '.join(f'{v:.3f}' for v in values)} |")
        print(f"| {group} | a name missing | {_pct(g['missing_name_share'])} of questions |")
    print("\nnone rate by none_below_evidence (from the features):\n")
    print("| none_below_evidence | answerable none | unanswerable none |")
    print("|---|---|---|")
    for t, v in s["sweep_none_below_evidence"].items():
        print(f"| {t} | {_pct(v['answerable_none'])} | {_pct(v['unanswerable_none'])} |")
    print("\nnone rate by none_below_own_text (from the features; answers the own-text check read):\n")
    print("| none_below_own_text | answerable none | unanswerable none |")
    print("|---|---|---|")
    for t, v in s["sweep_none_below_own_text"].items():
        print(f"| {t} | {_pct(v['answerable_none'])} | {_pct(v['unanswerable_none'])} |")
    checked = ", ".join(f"{g} {_pct(v)}" for g, v in s["own_text_checked"].items())
    print(f"\nanswers the own-text check read (embedding their first messages alone): {checked}")
    a = s["acceptance"]
    ok = (a["unanswerable_none"] or 0) >= 0.90 and (a["answerable_none"] or 0) < 0.05
    print(
        f"\nacceptance (none >= 90% of unanswerable, < 5% of answerable): unanswerable {_pct(a['unanswerable_none'])}, "
        f"answerable {_pct(a['answerable_none'])} -> {'met' if ok else 'NOT met'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, action="append", required=True, help="A conversation folder (repeat).")
    ap.add_argument("--cross", choices=("auto", "on", "off"), default="auto", help="Ask in another conversation.")
    ap.add_argument("--top-k", type=int, default=10, help="Hits per question (1..50).")
    ap.add_argument("--home", type=Path, default=None, help="Engine home for settings (default: CE_HOME).")
    ap.add_argument("--cache-dir", type=Path, default=None, help="Cached ingests (default: eval.cache_dir).")
    ap.add_argument("--json", type=Path, default=None, help="Also write the figures (and per-question rows) here.")
    args = ap.parse_args()
    settings = load_settings(args.home)
    cache = args.cache_dir or settings.eval.cache_dir or settings.home_path / "eval-cache"
    print(f"match_quality calibration: model {settings.embedding.backend}, top_k {args.top_k}", file=sys.stderr)
    figures: list[dict[str, Any]] = []
    for folder in args.dataset:
        started = time.perf_counter()
        result = run_dataset(folder.expanduser(), settings, cross=args.cross, top_k=args.top_k, cache_dir=cache)
        s = summary(result, settings.retrieval.match_quality)
        s["seconds"] = round(time.perf_counter() - started, 1)
        print_summary(s)
        s["questions"] = [
            {"qa_id": a.qa_id, "group": a.group, "label": a.label, "first_is_evidence": a.first_is_evidence}
            | a.features
            for a in result.asked
        ]
        figures.append(s)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
