#!/usr/bin/env python
"""lookup_knowledge latency, warm and in-process, over the runbook queries on the 380-document corpus.

Every call is the real service method (hint layer, one query embedding, LanceDB search, hydration, expansion,
session dedup, context packing and the tool_invocation row with its ledger marks). Prints p50/p95/p99 and mean of
the whole call and of each stage (from ``LookupResult.traces``), over ``--rounds`` passes of the summary and
description queries (2 x 104 queries per round). Sessions are unique per call, so nothing is deduped and every
call writes its ledger marks.

Usage::

    python bench/lookup_knowledge.py                          # corpus kept in /tmp/context-engine-eval/po+os380
    python bench/lookup_knowledge.py --rounds 5 --mode fallback

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

STAGES = ("hint_ms", "embed_ms", "semantic_ms", "hydrate_ms", "post_ms", "dedup_ms", "pack_ms", "record_ms")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def main() -> None:
    from eval_runbooks import DEFAULT_DATA, ensure_corpus, load_queries, open_engine

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--work-dir", default="/tmp/context-engine-eval")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="auto", choices=["auto", "primary", "fallback"])
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default)")
    args = parser.parse_args()

    import torch

    from context_engine.knowledge.tokenize import warm_up
    from context_engine.providers.embedder import SentenceTransformerEmbedder
    from context_engine.settings import EmbeddingSettings

    if args.threads:
        torch.set_num_threads(args.threads)
    embedder = SentenceTransformerEmbedder(EmbeddingSettings())
    embedder.warm_up()
    warm_up()
    home = ensure_corpus(Path(args.work_dir), Path(args.data), "po+os380", embedder)
    engine = open_engine(home, embedder)
    queries = load_queries(Path(args.data))
    texts = [q["text"] for q in queries] + [q["metadata"]["description_clean"] for q in queries]
    try:
        for text in texts[:20]:  # warm: caches, LanceDB table, hint index, SQLite pages
            engine.lookup_knowledge(text, session_id=f"warm-{uuid.uuid4().hex}")
        total: list[float] = []
        stages: dict[str, list[float]] = {s: [] for s in STAGES}
        statuses: dict[str, int] = {}
        retries = 0
        started = time.perf_counter()
        for _ in range(args.rounds):
            for text in texts:
                t0 = time.perf_counter()
                result = engine.lookup_knowledge(text, session_id=uuid.uuid4().hex, mode=args.mode)
                total.append((time.perf_counter() - t0) * 1000.0)
                for s in STAGES:
                    stages[s].append(getattr(result.traces, s))
                statuses[result.evidence_status] = statuses.get(result.evidence_status, 0) + 1
                retries += sum(1 for a in result.traces.attempts if a.reason == "filtered_unusable")
        wall = time.perf_counter() - started
    finally:
        engine.close()
    report = {
        "corpus": "po+os380 (380 runbooks)",
        "calls": len(total),
        "mode": args.mode,
        "throughput_per_s": round(len(total) / wall, 1),
        "total_ms": {
            "p50": round(pct(total, 50), 2),
            "p95": round(pct(total, 95), 2),
            "p99": round(pct(total, 99), 2),
            "mean": round(statistics.fmean(total), 2),
        },
        "stages_ms": {s: {"p50": round(pct(v, 50), 2), "p95": round(pct(v, 95), 2)} for s, v in stages.items()},
        "evidence_status": statuses,
        "filtered_unusable_retries": retries,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
