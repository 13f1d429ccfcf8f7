#!/usr/bin/env python
"""lookup_knowledge on the runbook golden set (DESIGN.md §11): quality table and threshold calibration.

Corpora (``../shared/data/runbooks``, see SOURCES.md):

* ``po108``: ``prometheus-operator/`` (108 runbooks) at ``ctx://resources/runbooks/prometheus-operator/``;
* ``po+os380``: the same plus ``openshift/`` (272 files) at ``ctx://resources/runbooks/openshift/``;
* ``kubesphere-zh``: the 49 Chinese KubeSphere runbooks (English summaries as queries: cross-lingual).

Queries (``queries.jsonl``): ``summary`` (the alert rule's summary, the query text), ``description`` (its
``description_clean``) and ``alert`` (the alert name itself, a sanity row for the hint layer). Qrels: doc ids are
paths relative to ``runbooks/``; a result URI ``ctx://resources/runbooks/<path>`` maps to ``<path>``.

Variants: ``semantic`` (hint layer off: no domain filter, no boost), ``hint-boost`` (boost only),
``hint-filter+boost`` (the domain filter of ``single_domain_or_null`` plus the boost), all three with hybrid off, and
``hint-filter+boost+hybrid`` (the defaults: BM25 fused into the semantic layer). Metrics are computed per
query by ir-measures (pytrec_eval); queries without results score 0 (DESIGN §11), then averaged.

Usage::

    python scripts/eval_runbooks.py                # the quality table (markdown) + JSON next to it
    python scripts/eval_runbooks.py --calibrate    # similarity distributions behind the level thresholds
    python scripts/eval_runbooks.py --floors --embedder use-multilingual   # per-model floors on the dev halves
    python scripts/eval_runbooks.py --acceptance   # issue 11: po108 at the defaults, top_k=10, + the ZH query

Ingested corpora are kept in ``--work-dir`` and reused (re-adding unchanged files is a no-op).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import ir_measures
from ir_measures import R, nDCG

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "runbooks"
URI_ROOT = "ctx://resources/runbooks/"
CORPORA = {
    "po108": (["prometheus-operator"], "prometheus-operator.tsv"),
    "po+os380": (["prometheus-operator", "openshift"], "prometheus-operator+openshift.tsv"),
    "kubesphere-zh": (["kubesphere-zh"], "kubesphere-zh.tsv"),
}
DEV_SETS = [("po108", "summary"), ("po+os380", "description"), ("kubesphere-zh", "summary")]
"""The three runbook sets of the evaluation (context_engine.eval.datasets.RUNBOOK_QUERY_FIELDS), by corpus/field."""
FLOOR_GRID = [round(0.025 * i, 3) for i in range(25)]
CRASH_QUERY = "KubePodCrashLooping 告警怎么处理"
CRASH_DOC = "prometheus-operator/kubernetes/KubePodCrashLooping.md"
VARIANTS = {
    "semantic": {"hint_filter": False, "hint_boost": False, "hybrid": False},
    "hint-boost": {"hint_filter": False, "hint_boost": True, "hybrid": False},
    "hint-filter+boost": {"hint_filter": True, "hint_boost": True, "hybrid": False},
    "hint-filter+boost+hybrid": {"hint_filter": True, "hint_boost": True, "hybrid": True},
}
MEASURES = [R @ 5, R @ 10, nDCG @ 10]
NONSENSE = [
    "qwxz blorf zzkj 9f8a",
    "lorem ipsum dolor sit amet",
    "how do I bake sourdough bread",
    "best hiking trails in the alps",
    "什么是量子纠缠",
    "今天晚饭吃什么",
    "asdf asdf asdf",
    "the quick brown fox jumps over the lazy dog",
]


def load_queries(data: Path) -> list[dict]:
    return [json.loads(line) for line in (data / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]


def load_qrels(data: Path, name: str) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with (data / "qrels" / name).open(encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = int(row["score"])
    return qrels


def query_text(q: dict, field: str) -> str:
    if field == "summary":
        return q["text"]
    if field == "description":
        return q["metadata"]["description_clean"]
    return q["metadata"]["alert"]


def open_engine(home: Path, embedder, **knowledge):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    return ContextEngineService(load_settings(home, knowledge=knowledge), embedder=embedder)


def ensure_corpus(work: Path, data: Path, name: str, embedder) -> Path:
    home = work / name
    dirs, _ = CORPORA[name]
    engine = open_engine(home, embedder)
    try:
        for d in dirs:
            start = time.perf_counter()
            report = engine.add_resource(data / d, f"{URI_ROOT}{d}/")
            print(
                f"[{name}] {d}: nodes={report.nodes} unchanged={report.unchanged} failed={report.failed} "
                f"({time.perf_counter() - start:.1f} s)",
                file=sys.stderr,
            )
    finally:
        engine.close()
    return home


def run_queries(engine, queries: Iterable[dict], field: str, top_k: int = 10, **kw) -> dict[str, list]:
    """qid -> evidence blocks (rank order)."""
    out: dict[str, list] = {}
    for q in queries:
        result = engine.lookup_knowledge(query_text(q, field), top_k=top_k, **kw)
        out[q["_id"]] = result.evidence_blocks
    return out


def to_run(blocks_by_q: dict[str, list]) -> dict[str, dict[str, float]]:
    """A TREC-style run; scores are rank-derived so the library keeps our order exactly (ties included)."""
    run: dict[str, dict[str, float]] = {}
    for qid, blocks in blocks_by_q.items():
        docs = {}
        for rank, b in enumerate(blocks):
            if b.doc_id.startswith(URI_ROOT):
                docs.setdefault(b.doc_id[len(URI_ROOT) :], float(1000 - rank))
        if docs:
            run[qid] = docs
    return run


def evaluate(qrels: dict, run: dict) -> dict[str, float]:
    """Mean per-query values from ir-measures; queries of the qrels without results count 0."""
    per_query: dict[str, dict[str, float]] = {str(m): {} for m in MEASURES}
    for metric in ir_measures.iter_calc(MEASURES, qrels, run):
        per_query[str(metric.measure)][metric.query_id] = metric.value
    return {name: sum(values.get(q, 0.0) for q in qrels) / len(qrels) for name, values in per_query.items()}


def quality(args, embedder) -> dict:
    data = Path(args.data)
    queries = load_queries(data)
    results: dict = {"rows": [], "settings": {}}
    for corpus in CORPORA:
        home = ensure_corpus(Path(args.work_dir), data, corpus, embedder)
        qrels = load_qrels(data, CORPORA[corpus][1])
        qs = [q for q in queries if q["_id"] in qrels]
        for variant, knowledge in VARIANTS.items():
            engine = open_engine(home, embedder, **knowledge)
            try:
                results["settings"] = engine.settings.knowledge.model_dump(exclude={"domains"})
                for field in ("summary", "description", "alert"):
                    start = time.perf_counter()
                    blocks = run_queries(engine, qs, field)
                    scores = evaluate(qrels, to_run(blocks))
                    levels = _level_precision(blocks, qrels)
                    row = {
                        "corpus": corpus,
                        "field": field,
                        "variant": variant,
                        "queries": len(qs),
                        "R@5": round(scores["R@5"], 4),
                        "nDCG@10": round(scores["nDCG@10"], 4),
                        "seconds": round(time.perf_counter() - start, 1),
                        "levels": levels,
                    }
                    results["rows"].append(row)
                    print(json.dumps(row), file=sys.stderr)
            finally:
                engine.close()
    return results


def _level_precision(blocks_by_q: dict[str, list], qrels: dict) -> dict[str, dict[str, float]]:
    """For each level: how many blocks got it and which share of them is relevant."""
    counts: dict[str, list[int]] = {}
    for qid, blocks in blocks_by_q.items():
        for b in blocks:
            rel = 1 if qrels.get(qid, {}).get(b.doc_id[len(URI_ROOT) :], 0) > 0 else 0
            counts.setdefault(b.relevance_level.value, []).append(rel)
    return {k: {"blocks": len(v), "precision": round(sum(v) / len(v), 3)} for k, v in sorted(counts.items())}


def calibrate(args, embedder) -> dict:
    """Best-chunk similarity of relevant vs. non-relevant documents, and of nonsense queries."""
    data = Path(args.data)
    queries = load_queries(data)
    report: dict = {}
    for corpus, field in (("po108", "summary"), ("po+os380", "description"), ("po+os380", "summary")):
        home = ensure_corpus(Path(args.work_dir), data, corpus, embedder)
        qrels = load_qrels(data, CORPORA[corpus][1])
        qs = [q for q in queries if q["_id"] in qrels]
        # hybrid off: a block's raw_score must be its document's best chunk similarity, not the best fused chunk's
        engine = open_engine(home, embedder, hint_filter=False, hint_boost=False, hybrid=False)
        try:
            blocks = run_queries(engine, qs, field, top_k=50, min_similarity=-1.0)
            nonsense = [engine.lookup_knowledge(q, top_k=1, min_similarity=-1.0).evidence_blocks for q in NONSENSE]
        finally:
            engine.close()
        engine = open_engine(home, embedder)  # the configured defaults
        try:
            support = _support_table(engine, qs, field, qrels)
        finally:
            engine.close()
        relevant, top_nonrel, all_nonrel, rank1 = [], [], [], []
        for qid, bl in blocks.items():
            rel_docs = qrels[qid]
            rel_sims = [b.raw_score for b in bl if b.doc_id[len(URI_ROOT) :] in rel_docs]
            non = [b.raw_score for b in bl if b.doc_id[len(URI_ROOT) :] not in rel_docs]
            relevant.extend(rel_sims[:1])
            top_nonrel.extend(non[:1])
            all_nonrel.extend(non[:10])
            if bl:
                rank1.append((bl[0].raw_score, bl[0].doc_id[len(URI_ROOT) :] in rel_docs))
        nonsense_top = [b[0].raw_score for b in nonsense if b]
        bins = {}
        for lo in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65):
            sel = [ok for s, ok in rank1 if s >= lo]
            bins[f">={lo:.2f}"] = {"rank1": len(sel), "precision": round(sum(sel) / len(sel), 3) if sel else None}
        report[f"{corpus}/{field}"] = {
            "relevant_best": _pcts(relevant),
            "nonrelevant_best": _pcts(top_nonrel),
            "nonrelevant_top10": _pcts(all_nonrel),
            "nonsense_best": _pcts(nonsense_top),
            "rank1_precision_by_similarity": bins,
            "precision_by_hint_and_similarity": support,
        }
        print(json.dumps({f"{corpus}/{field}": report[f"{corpus}/{field}"]}, indent=1), file=sys.stderr)
    report["suggested_scale"] = suggest_scale(report)
    print(json.dumps({"suggested_scale": report["suggested_scale"]}), file=sys.stderr)
    return report


# all-MiniLM-L6-v2's medians on these three rows (this script, --embedder sentence-transformers): the reference scale.
REFERENCE_NONSENSE_MEDIAN = 0.158
REFERENCE_RELEVANT_MEDIAN = 0.685


def suggest_scale(report: dict) -> dict:
    """The affine ``SimilarityScale(low, high)`` sending this model's mean nonsense-query median and mean
    relevant-document median (raw cosines, over the three rows) to MiniLM's (schema/similarity.py)."""
    rows = [v for k, v in report.items() if "/" in k]
    nonsense = statistics.mean(r["nonsense_best"]["median"] for r in rows)
    relevant = statistics.mean(r["relevant_best"]["median"] for r in rows)
    slope = (REFERENCE_RELEVANT_MEDIAN - REFERENCE_NONSENSE_MEDIAN) / (relevant - nonsense)
    low = nonsense - REFERENCE_NONSENSE_MEDIAN / slope
    return {
        "low": round(low, 3),
        "high": round(low + 1.0 / slope, 3),
        "nonsense_median": nonsense,
        "relevant_median": relevant,
    }


# ---- threshold policy (issue 11): per-model floors on the dev halves, and the acceptance figures -------------------
def _recall_at_10(blocks_by_q: dict[str, list], qrels: dict) -> float:
    return evaluate(qrels, to_run({q: b[:10] for q, b in blocks_by_q.items()}))["R@10"]


def _precision(blocks: list[tuple[float, bool]], floor: float) -> tuple[int, float | None]:
    sel = [rel for sim, rel in blocks if sim >= floor]
    return len(sel), (round(sum(sel) / len(sel), 3) if sel else None)


def floors(args, embedder) -> dict:
    """Choose the model's level floors on the dev halves of the three runbook sets (docs/lookup_knowledge.md).

    Rules (no set-specific tuning; grid step 0.025 on the calibrated scale):

    * ``reference`` (the usual floor, which labels and never drops at the defaults): the lowest floor that at most
      one of the 8 nonsense/off-topic queries (:data:`NONSENSE`) reaches on any dev corpus: under it a candidate is
      no more similar than what an unrelated question finds;
    * ``filter_safe``: the highest floor at which filtering the thresholds-off ranking by it (strong matches exempt,
      as for a caller's ``min_similarity``) keeps Recall@10 within 0.01 of thresholds off on every dev set (what a
      caller can pass without losing recall; printed, not a default);
    * ``highly_relevant`` / ``precise`` stay at the calibrated scale's 0.50 / 0.40 (docs/lookup_knowledge.md); the
      share of relevant top-10 blocks by floor is printed beside them.

    Also measured: Recall@10 at the defaults against thresholds off, per set (the acceptance: within 0.01).
    """
    from context_engine.eval.datasets import half_of

    data = Path(args.data)
    queries = load_queries(data)
    runs: dict[str, dict] = {}
    for corpus, field in DEV_SETS:
        home = ensure_corpus(Path(args.work_dir), data, corpus, embedder)
        qrels_all = load_qrels(data, CORPORA[corpus][1])
        qs = [q for q in queries if q["_id"] in qrels_all and half_of(q["_id"]) == "dev"]
        qrels = {q["_id"]: qrels_all[q["_id"]] for q in qs}
        engine = open_engine(home, embedder)
        try:
            off = run_queries(engine, qs, field, top_k=50, min_similarity=-1.0)
            off10 = run_queries(engine, qs, field, top_k=10, min_similarity=-1.0)
            default = run_queries(engine, qs, field, top_k=10)
            nonsense = [engine.lookup_knowledge(q, top_k=1, min_similarity=-1.0).evidence_blocks for q in NONSENSE]
            model_floors = engine.knowledge.floors
        finally:
            engine.close()
        runs[f"{corpus}/{field}"] = {
            "qrels": qrels,
            "off": off,
            "off10": off10,
            "default": default,
            "nonsense": sorted((b[0].similarity for b in nonsense if b), reverse=True),
        }
    report: dict = {"model": embedder.model_name, "floors_in_force": dataclasses.asdict(model_floors), "sets": {}}
    ok_floor = None
    sweep: dict[str, dict[str, float]] = {}
    for f in FLOOR_GRID:
        row = {}
        for key, r in runs.items():
            kept = {q: [b for b in bl if b.similarity >= f or b.strong_match][:10] for q, bl in r["off"].items()}
            row[key] = round(_recall_at_10(kept, r["qrels"]) - _recall_at_10(r["off"], r["qrels"]), 4)
        sweep[f"{f:.3f}"] = row
        if all(v >= -0.01 for v in row.values()):
            ok_floor = f
    pooled_all: list[tuple[float, bool]] = []
    pooled_hint: list[tuple[float, bool]] = []
    for key, r in runs.items():
        for q, bl in r["off10"].items():
            for b in bl:
                rel = b.doc_id[len(URI_ROOT) :] in r["qrels"][q]
                pooled_all.append((b.similarity, rel))
                if b.strong_match != "named" and (b.hint_boost > 0 or b.strong_match == "identifier"):
                    pooled_hint.append((b.similarity, rel))
        report["sets"][key] = {
            "queries": len(r["qrels"]),
            "R@10_thresholds_off": round(_recall_at_10(r["off10"], r["qrels"]), 4),
            "R@10_defaults": round(_recall_at_10(r["default"], r["qrels"]), 4),
            "short_results_defaults": sum(1 for bl in r["default"].values() if len(bl) < 10),
            "weak_blocks_defaults": sum(1 for bl in r["default"].values() for b in bl if b.below_floor),
            "weak_evidence_results_defaults": sum(
                1 for bl in r["default"].values() if bl and all(b.below_floor and not b.strong_match for b in bl)
            ),
            "nonsense_best": [round(x, 3) for x in r["nonsense"]],
        }
    reference = next(
        (f for f in FLOOR_GRID if all(sum(x >= f for x in r["nonsense"]) <= 1 for r in runs.values())), None
    )
    report["recall_delta_by_floor"] = sweep
    report["precision_by_floor"] = {
        f"{f:.3f}": {"all": _precision(pooled_all, f), "hint_supported": _precision(pooled_hint, f)} for f in FLOOR_GRID
    }
    report["chosen"] = {"reference": reference, "filter_safe": ok_floor}
    print(json.dumps({"chosen": report["chosen"], "sets": report["sets"]}, indent=1), file=sys.stderr)
    return report


def acceptance(args, embedder) -> dict:
    """Issue 11's lookup acceptance on po108 (all 104 summary queries) at the defaults with top_k=10."""
    data = Path(args.data)
    home = ensure_corpus(Path(args.work_dir), data, "po108", embedder)
    qrels = load_qrels(data, CORPORA["po108"][1])
    qs = [q for q in load_queries(data) if q["_id"] in qrels]
    engine = open_engine(home, embedder)
    try:
        short, found, weak, missed = 0, 0, 0, []
        for q in qs:
            result = engine.lookup_knowledge(query_text(q, "summary"), top_k=10)
            visible = len(result.evidence_blocks) + result.traces.dropped.get("beyond_top_k", 0)
            short += len(result.evidence_blocks) < min(10, visible)
            weak += result.evidence_status == "weak_evidence"
            docs = [b.doc_id[len(URI_ROOT) :] for b in result.evidence_blocks]
            if set(docs) & set(qrels[q["_id"]]):
                found += 1
            else:
                missed.append(q["_id"])
        crash = engine.lookup_knowledge(CRASH_QUERY, top_k=10)
        first = crash.evidence_blocks[0] if crash.evidence_blocks else None
    finally:
        engine.close()
    report = {
        "model": embedder.model_name,
        "queries": len(qs),
        "short_results": short,
        "relevant_in_top10": found,
        "missed": missed,
        "weak_evidence_results": weak,
        "crash_query": {
            "status": crash.evidence_status,
            "first": first.doc_id[len(URI_ROOT) :] if first else None,
            "level": first.relevance_level.value if first else None,
            "similarity": first.similarity if first else None,
            "ok": bool(first and first.doc_id.endswith(CRASH_DOC) and first.relevance_level.rank <= 1),
        },
    }
    print(json.dumps(report, indent=1, ensure_ascii=False), file=sys.stderr)
    return report


def _support_table(engine, qs: list[dict], field: str, qrels: dict) -> dict[str, dict[str, float]]:
    """Share of returned documents (top 10) that are relevant, by hint support and similarity band: the evidence
    behind PRECISE (hint support from 0.40) versus HIGHLY_RELEVANT (0.50 without support)."""
    cells: dict[str, list[int]] = {}
    for q in qs:
        result = engine.lookup_knowledge(query_text(q, field), top_k=10)
        strength = {m.uri: m.strength for m in result.hints.matches}
        for b in result.evidence_blocks:
            band = ">=0.50" if b.similarity >= 0.5 else ("0.40-0.50" if b.similarity >= 0.4 else "0.30-0.40")
            key = f"{strength.get(b.doc_id, 'none')} {band}"
            cells.setdefault(key, []).append(1 if b.doc_id[len(URI_ROOT) :] in qrels[q["_id"]] else 0)
    return {k: {"blocks": len(v), "precision": round(sum(v) / len(v), 3)} for k, v in sorted(cells.items())}


def _pcts(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    qs = statistics.quantiles(values, n=20, method="inclusive") if len(values) > 1 else [values[0]] * 19
    return {
        "n": len(values),
        "min": round(min(values), 3),
        "p05": round(qs[0], 3),
        "p25": round(qs[4], 3),
        "median": round(statistics.median(values), 3),
        "p75": round(qs[14], 3),
        "max": round(max(values), 3),
    }


def table(results: dict) -> str:
    lines = [
        "| corpus | queries | variant | R@5 | nDCG@10 |",
        "|---|---|---|---|---|",
    ]
    order = [
        ("po108", "summary"),
        ("po+os380", "description"),
        ("po+os380", "summary"),
        ("po108", "description"),
        ("po108", "alert"),
        ("po+os380", "alert"),
    ]
    for corpus, field in order:
        for row in results["rows"]:
            if row["corpus"] == corpus and row["field"] == field:
                lines.append(
                    f"| {corpus} | {field} ({row['queries']}) | {row['variant']} | {row['R@5']:.3f} | "
                    f"{row['nDCG@10']:.3f} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--work-dir", default=None, help="Default: /tmp/context-engine-eval-<embedder>.")
    parser.add_argument("--embedder", default="sentence-transformers", help="embedding.backend to measure.")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--floors", action="store_true", help="Choose the model's level floors on the dev halves.")
    parser.add_argument("--acceptance", action="store_true", help="Issue 11's po108 acceptance at the defaults.")
    parser.add_argument("--out", default=None, help="Write the JSON report here.")
    args = parser.parse_args()

    from context_engine.providers.embedder import build_embedder
    from context_engine.settings import EmbeddingSettings

    args.work_dir = args.work_dir or f"/tmp/context-engine-eval-{args.embedder}"
    embedder = build_embedder(EmbeddingSettings(backend=args.embedder))
    embedder.warm_up()
    if args.calibrate:
        report = calibrate(args, embedder)
        print(json.dumps(report, indent=1))
    elif args.floors:
        report = floors(args, embedder)
        print(json.dumps(report, indent=1))
    elif args.acceptance:
        report = acceptance(args, embedder)
        print(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        report = quality(args, embedder)
        print(table(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
