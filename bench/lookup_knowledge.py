#!/usr/bin/env python
"""lookup_knowledge latency, warm and in-process, over the runbook queries on the 380-document corpus.

Every call is the real service method (hint layer, one query embedding, LanceDB search, hydration, expansion,
session dedup, context packing and the tool_invocation row with its ledger marks). Prints p50/p95/p99 and mean of
the whole call and of each stage (from ``LookupResult.traces``), over ``--rounds`` passes of the summary and
description queries (2 x 104 queries per round). Sessions are unique per call, so nothing is deduped and every
call writes its ledger marks.

Usage::

    python bench/lookup_knowledge.py                          # default model, hybrid off and on, interleaved
    python bench/lookup_knowledge.py --embedder sentence-transformers --threads 1 --hybrid on
    python bench/lookup_knowledge.py --rounds 5 --mode fallback

With ``--hybrid off on`` both configurations answer every query one after the other (alternating which goes first),
so the machine's background load hits both alike and their ratio is meaningful. The corpus is kept in
``--work-dir`` (default ``/tmp/context-engine-eval-<embedder>``, shared with scripts/eval_runbooks.py).

Target (issue): p95 <= 30 ms. Never run as a test (STYLE.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

STAGES = (
    "hint_ms",
    "embed_ms",
    "semantic_ms",
    "keyword_ms",
    "hydrate_ms",
    "post_ms",
    "dedup_ms",
    "pack_ms",
    "record_ms",
)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def main() -> None:
    from eval_runbooks import DEFAULT_DATA, ensure_corpus, load_queries, open_engine

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--embedder", default="use-multilingual", help="embedding.backend")
    parser.add_argument("--hybrid", nargs="+", default=["off", "on"], choices=["off", "on"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="auto", choices=["auto", "primary", "fallback"])
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="embedding.num_threads (default: the product's; 0: the library's default of every core)",
    )
    args = parser.parse_args()

    from context_engine.knowledge.tokenize import warm_up
    from context_engine.providers.embedder import build_embedder
    from context_engine.settings import EmbeddingSettings

    if args.threads is None:
        args.threads = EmbeddingSettings().num_threads

    embedder = build_embedder(EmbeddingSettings(backend=args.embedder, num_threads=args.threads))
    embedder.warm_up()
    warm_up()
    work = Path(args.work_dir or f"/tmp/context-engine-eval-{args.embedder}")
    home = ensure_corpus(work, Path(args.data), "po+os380", embedder)
    engines = {h: open_engine(home, embedder, hybrid=h == "on") for h in args.hybrid}
    queries = load_queries(Path(args.data))
    texts = [q["text"] for q in queries] + [q["metadata"]["description_clean"] for q in queries]
    runs = {h: {"total": [], "stages": {s: [] for s in STAGES}, "statuses": {}} for h in engines}
    try:
        for engine in engines.values():
            for text in texts[:20]:  # warm: caches, LanceDB table, hint and BM25 indexes, SQLite pages
                engine.lookup_knowledge(text, session_id=f"warm-{uuid.uuid4().hex}")
        started = time.perf_counter()
        order = list(engines)
        for _ in range(args.rounds):
            for i, text in enumerate(texts):
                for h in order if i % 2 == 0 else order[::-1]:
                    t0 = time.perf_counter()
                    result = engines[h].lookup_knowledge(text, session_id=uuid.uuid4().hex, mode=args.mode)
                    runs[h]["total"].append((time.perf_counter() - t0) * 1000.0)
                    for s in STAGES:
                        runs[h]["stages"][s].append(getattr(result.traces, s))
                    st = runs[h]["statuses"]
                    st[result.evidence_status] = st.get(result.evidence_status, 0) + 1
        wall = time.perf_counter() - started
    finally:
        for engine in engines.values():
            engine.close()
    report = {
        "corpus": "po+os380 (380 runbooks)",
        "model": args.embedder,
        "mode": args.mode,
        "calls_per_configuration": len(texts) * args.rounds,
        "wall_s": round(wall, 1),
    }
    for h, r in runs.items():
        total = r["total"]
        report[f"hybrid_{h}"] = {
            "total_ms": {
                "p50": round(pct(total, 50), 2),
                "p95": round(pct(total, 95), 2),
                "p99": round(pct(total, 99), 2),
                "mean": round(statistics.fmean(total), 2),
            },
            "stages_ms": {
                s: {"p50": round(pct(v, 50), 2), "p95": round(pct(v, 95), 2)} for s, v in r["stages"].items()
            },
            "evidence_status": r["statuses"],
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
