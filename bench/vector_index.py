"""Vector index benchmark: insert time and pre-filtered search latency, LanceDB (flat, ANN) vs exact (DESIGN.md §12,
§14).

Usage::

    python bench/vector_index.py [--rows 100000] [--dim 384] [--accounts 20] [--queries 200] [--clustered]

Writes ``rows`` random unit vectors (``--clustered``: Gaussian blobs, closer to real embeddings) spread over
``accounts`` accounts, half at ``level=0`` and half at ``level=2``, then times ``queries`` searches for the top 10
with the filter ``account_id = A AND level = 0`` (about ``rows / (2 * accounts)`` rows pass). Prints milliseconds
(p50/p95 wall time per search, single thread) and, for the ANN path, recall@10 against exact search. Never run as a
test; figures depend on the machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from lancedb.index import Bitmap

from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.settings import VectorSettings
from context_engine.storage.protocols import VectorIndex
from context_engine.storage.vector.lancedb_index import LanceDBVectorIndex


def make_vectors(rng: np.random.Generator, rows: int, dim: int, clustered: bool) -> np.ndarray:
    """Shape ``(rows, dim)`` float32, unit rows."""
    if clustered:
        centres = rng.standard_normal((max(rows // 200, 1), dim)).astype(np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        vectors = centres[rng.integers(0, len(centres), rows)]
        vectors = vectors + 0.5 / np.sqrt(dim) * rng.standard_normal((rows, dim)).astype(np.float32)
    else:
        vectors = rng.standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def make_records(vectors: np.ndarray, accounts: int) -> list[VectorRecord]:
    return [
        VectorRecord(
            id=f"acc{i % accounts:02d}/n{i:07d}",
            vector=v,
            uri=f"ctx://resources/dir{i % 97}/n{i}.md",
            parent_uri=f"ctx://resources/dir{i % 97}/",
            account_id=f"acc{i % accounts:02d}",
            owner_space="shared",
            context_type="resource",
            level=0 if (i // accounts) % 2 == 0 else 2,
            text=f"abstract of node {i}",
        )
        for i, v in enumerate(vectors)
    ]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def latency(index: VectorIndex, queries: np.ndarray, filters: Sequence[VectorFilter]) -> tuple[float, float, list]:
    """p50 and p95 in milliseconds, and the hit ids per query."""
    index.search(queries[0], 10, filters[0])  # warm caches
    times, results = [], []
    for q, flt in zip(queries, filters, strict=True):
        start = time.perf_counter()
        hits = index.search(q, 10, flt)
        times.append((time.perf_counter() - start) * 1e3)
        results.append([h.id for h in hits])
    return float(np.percentile(times, 50)), float(np.percentile(times, 95)), results


def recall(results: list[list[str]], truth: list[list[str]]) -> float:
    found = sum(len(set(r) & set(t)) for r, t in zip(results, truth, strict=True))
    return found / max(1, sum(len(t) for t in truth))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--accounts", type=int, default=20)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--clustered", action="store_true", help="Gaussian blobs instead of uniform random vectors")
    parser.add_argument("--skip-exact", action="store_true", help="skip the exact index (SQLite load is slow)")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    vectors = make_vectors(rng, args.rows, args.dim, args.clustered)
    t = time.perf_counter()
    records = make_records(vectors, args.accounts)
    print(f"{args.rows} x {args.dim} {'clustered' if args.clustered else 'uniform'} vectors, {args.accounts} accounts")
    print(f"  build VectorRecord objects        {time.perf_counter() - t:8.2f} s")
    queries = make_vectors(rng, args.queries, args.dim, args.clustered)
    filters = [
        VectorFilter(account_id=f"acc{int(a):02d}", levels=[0]) for a in rng.integers(0, args.accounts, args.queries)
    ]

    with tempfile.TemporaryDirectory(prefix="ce-bench-") as tmp:
        root = Path(tmp)
        flat_settings = VectorSettings(ann_index_min_rows=10**12, compact_every_writes=10_000)
        lance = LanceDBVectorIndex(root / "vectors", args.dim, flat_settings)
        print(f"  lancedb insert (append)           {timed(lambda: lance.upsert(records)):8.2f} s")
        update = records[: min(1_000, args.rows)]
        print(f"  lancedb upsert 1k (merge_insert)  {timed(lambda: lance.upsert(update)):8.2f} s")
        print(f"  lancedb upsert all (merge_insert) {timed(lambda: lance.upsert(records)):8.2f} s")
        print(f"  lancedb delete 1k                 {timed(lambda: lance.delete([r.id for r in update])):8.2f} s")
        lance.upsert(update)
        print(f"  lancedb compact (no ANN yet)      {timed(lance._table.optimize):8.2f} s")

        for idx in list(lance._table.list_indices()):  # the adapter built BITMAP indexes past 10k rows
            lance._table.drop_index(idx.name)
        rows = [("lancedb flat, no scalar index", *latency(lance, queries, filters))]
        truth = rows[0][3]
        for column in ("account_id", "level", "owner_space", "context_type"):
            lance._table.create_index(column, config=Bitmap(), replace=True)
        rows.append(("lancedb flat + BITMAP", *latency(lance, queries, filters)))
        lance = LanceDBVectorIndex(root / "vectors", args.dim, VectorSettings(ann_index_min_rows=max(args.rows, 256)))
        print(
            f"  lancedb ANN build (IVF_SQ)        {timed(lance.optimize):8.2f} s  has_ann_index={lance.has_ann_index}"
        )
        rows.append(("lancedb ANN", *latency(lance, queries, filters)))

        if not args.skip_exact:
            from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
            from context_engine.storage.vector.exact import ExactVectorIndex

            store = SqlMetadataStore.sqlite(root / "metadata.db")
            exact = ExactVectorIndex(store, max_cached_accounts=args.accounts)
            print(f"  exact insert (SQLite)             {timed(lambda: exact.upsert(records)):8.2f} s")
            first = timed(lambda: exact.search(queries[0], 10, filters[0]))
            print(f"  exact first search (matrix load)  {first:8.2f} s")
            for flt in {f.account_id: f for f in filters}.values():
                exact.search(queries[0], 10, flt)  # load every account's matrix once
            rows.append(("exact (cached matrices)", *latency(exact, queries, filters)))
            store.close()

    print(f"\n  search top-10, filter account + level=0 ({args.queries} queries)")
    print(f"  {'path':30s} {'p50 ms':>8s} {'p95 ms':>8s} {'recall@10':>10s}")
    for name, p50, p95, results in rows:
        print(f"  {name:30s} {p50:8.2f} {p95:8.2f} {recall(results, truth):10.3f}")


if __name__ == "__main__":
    main()
