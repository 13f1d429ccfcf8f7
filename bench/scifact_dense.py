"""SciFact dense retrieval through the engine's embedder and vector index (issue: foundation acceptance 3).

Indexes ../shared/data/scifact/corpus.jsonl, one record per document with embedding input ``title + " " + text``
(the BEIR/MTEB convention), then scores the test queries with ir-measures. The published all-MiniLM-L6-v2 figure is
nDCG@10 = 0.645 (MTEB); matching it within 0.01 shows the embedding and the index are used correctly.

    python bench/scifact_dense.py [--backend lancedb|exact] [--limit-queries N]

Vectors are cached in bench/.cache/ (keyed by model) so a re-run skips the ~40 s of encoding.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path

import ir_measures
import numpy as np
from ir_measures import RR, R, nDCG

from context_engine.ingest.pipeline import vector_id
from context_engine.providers.embedder import SentenceTransformerEmbedder
from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.settings import EmbeddingSettings, VectorSettings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "scifact"


def load_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["lancedb", "exact"], default="lancedb")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit-queries", type=int, default=0)
    args = ap.parse_args()

    corpus = load_jsonl(args.data / "corpus.jsonl")
    queries = {q["_id"]: q["text"] for q in load_jsonl(args.data / "queries.jsonl")}
    qrels = list(ir_measures.read_trec_qrels(_trec_qrels(args.data / "qrels" / "test.tsv")))
    test_ids = sorted({q.query_id for q in qrels})
    if args.limit_queries:
        test_ids = test_ids[: args.limit_queries]

    emb = SentenceTransformerEmbedder(EmbeddingSettings())
    texts = [f"{d['title']} {d['text']}" for d in corpus]
    cache = ROOT / "bench" / ".cache" / f"scifact-{hashlib.sha1(emb.model_name.encode()).hexdigest()[:8]}.npy"
    t0 = time.perf_counter()
    if cache.exists():
        matrix = np.load(cache)
    else:
        matrix = emb.embed_documents(texts)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, matrix)
    embed_s = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        index = _index(args.backend, Path(tmp), emb.dim)
        records = [
            VectorRecord(
                id=vector_id("scifact", f"ctx://resources/scifact/{d['_id']}", 0, 0),
                vector=vec,
                uri=f"ctx://resources/scifact/{d['_id']}",
                parent_uri="ctx://resources/scifact/",
                account_id="scifact",
                owner_space="shared",
                context_type="resource",
                category="scifact",
                level=0,
                doc_id=str(d["_id"]),
                text=d["title"],
            )
            for d, vec in zip(corpus, matrix, strict=True)
        ]
        t0 = time.perf_counter()
        index.upsert(records)
        index_s = time.perf_counter() - t0
        flt = VectorFilter(account_id="scifact", levels=[0])
        run: dict[str, dict[str, float]] = {}
        lat = []
        for qid in test_ids:
            t0 = time.perf_counter()
            hits = index.search(emb.embed_query(queries[qid]), 100, flt)
            lat.append((time.perf_counter() - t0) * 1000)
            run[qid] = {h.doc_id: h.score for h in hits}
    measures = [nDCG @ 10, R @ 10, R @ 100, RR @ 10]
    agg = ir_measures.calc_aggregate(measures, [q for q in qrels if q.query_id in run], run)
    print(f"SciFact test, {len(test_ids)} queries, {len(corpus)} docs, backend={args.backend}, model={emb.model_name}")
    for m in measures:
        print(f"  {str(m):10s} {agg[m]:.4f}")
    print(
        f"  embed {embed_s:.1f}s{' (cached)' if embed_s < 5 else ''}, index {index_s:.2f}s, "
        f"query p50 {np.percentile(lat, 50):.1f} ms p95 {np.percentile(lat, 95):.1f} ms (embed + search)"
    )


def _trec_qrels(path: Path) -> str:
    """BEIR qrels (header, ``qid\\tdocid\\tscore``) as a TREC qrels file in a temp location."""
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    out = Path(tempfile.mkstemp(suffix=".qrels")[1])
    out.write_text("".join(f"{q} 0 {d} {s}\n" for q, d, s in (ln.split("\t") for ln in lines if ln)))
    return str(out)


def _index(backend: str, path: Path, dim: int):
    if backend == "exact":
        from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
        from context_engine.storage.vector.exact import ExactVectorIndex

        return ExactVectorIndex(SqlMetadataStore.sqlite(path / "meta.db"))
    from context_engine.storage.vector.lancedb_index import LanceDBVectorIndex

    return LanceDBVectorIndex(path / "vectors", dim, VectorSettings())


if __name__ == "__main__":
    main()
