"""Tune the fusion parameters (RRF k, weighted-fusion dense weight) on the tuning side only (issue: hybrid retrieval).

    python bench/tune_fusion.py [--matrix bench/.cache/matrix] [--backend sentence-transformers]

Reads the dense TREC runs that ``bench/eval_matrix.py`` wrote (BM25 is recomputed here, cheaply, so its scores are
the ``coverage`` that convex fusion needs), and scores every grid point on SciFact
**train** and on the **dev half** (``context_engine.eval.datasets.half_of``) of each runbook set; the objective is the
mean nDCG@10 over those four sets. Test queries (SciFact test, runbook test halves, CMRC dev) are never read here.
Then prints, for the chosen parameters, the held-out comparison with dense.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from context_engine.eval import evaluate, load_dataset, read_run
from context_engine.eval.harness import run_retriever
from context_engine.eval.retrievers import BM25Retriever
from context_engine.providers.embedder import build_embedder
from context_engine.retrieval.fusion import convex_inputs, rrf, weighted_fusion
from context_engine.schema.similarity import scale_of
from context_engine.settings import EmbeddingSettings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
TUNE = [
    ("scifact", "train", None),
    ("runbooks", "prometheus-operator", "dev"),
    ("runbooks", "prometheus-operator+openshift", "dev"),
    ("runbooks", "kubesphere-zh", "dev"),
]
HELD_OUT = [
    ("scifact", "test", None),
    ("runbooks", "prometheus-operator", "test"),
    ("runbooks", "prometheus-operator+openshift", "test"),
    ("runbooks", "kubesphere-zh", "test"),
    ("cmrc2018_zh", "dev", None),
]
RRF_K = [1, 5, 10, 20, 30, 45, 60, 80, 100, 150]
WEIGHTS = [round(0.05 * i, 2) for i in range(21)]


def load(matrix: Path, backend: str, name: str, split: str, half: str | None):
    full = load_dataset(DATA / name, split)
    ds = full.halved(half) if half else full
    folder = matrix / full.slug / backend / "runs"
    dense = read_run(next(folder.glob("dense*.trec")))
    bm25 = run_retriever(ds, BM25Retriever(), top_k=100).run  # scores = coverage
    return ds, dense, bm25


def ndcg(ds, run) -> float:
    return evaluate(ds.qrels, run, ["nDCG@10"]).aggregate["nDCG@10"]


SCALE = None  # the backend's similarity scale (convex fusion), set in main()


def fuse(ds, dense, bm25, method: str, param: float):
    out = {}
    for q in ds.queries:
        lists = [dense.get(q, []), bm25.get(q, [])]
        if method == "rrf":
            out[q] = rrf(lists, k=int(param), top_k=100)
        elif method == "convex":
            inputs = convex_inputs(lists[0], lists[1], SCALE)
            out[q] = weighted_fusion(inputs, [param, 1 - param], normalization="none", top_k=100)
        else:
            out[q] = weighted_fusion(lists, [param, 1 - param], top_k=100)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrix", type=Path, default=ROOT / "bench" / ".cache" / "matrix")
    ap.add_argument("--backend", default="sentence-transformers")
    args = ap.parse_args()
    global SCALE
    SCALE = scale_of(build_embedder(EmbeddingSettings(backend=args.backend)))  # class attributes only: no model load
    sets = [load(args.matrix, args.backend, *t) for t in TUNE]
    print(f"backend {args.backend}; tuning sets: " + ", ".join(ds.key for ds, _, _ in sets))
    base = [ndcg(ds, d) for ds, d, _ in sets]
    bm = [ndcg(ds, b) for ds, _, b in sets]
    print(f"dense    mean {sum(base) / len(base):.4f}  " + "  ".join(f"{v:.4f}" for v in base))
    print(f"bm25     mean {sum(bm) / len(bm):.4f}  " + "  ".join(f"{v:.4f}" for v in bm))
    best = {}
    for method, grid in (("rrf", RRF_K), ("weighted", WEIGHTS), ("convex", WEIGHTS)):
        for p in grid:
            vals = [ndcg(ds, fuse(ds, d, b, method, p)) for ds, d, b in sets]
            mean = sum(vals) / len(vals)
            print(f"{method:8s} {p:<6} mean {mean:.4f}  " + "  ".join(f"{v:.4f}" for v in vals))
            if mean > best.get(method, (None, -1.0))[1]:
                best[method] = (p, mean)
    print("best:", best)
    print("\nheld-out (never used above): nDCG@10")
    for t in HELD_OUT:
        try:
            ds, d, b = load(args.matrix, args.backend, *t)
        except (StopIteration, FileNotFoundError):
            continue
        methods = ("rrf", "weighted", "convex")
        row = [ndcg(ds, d), ndcg(ds, b)] + [ndcg(ds, fuse(ds, d, b, m, best[m][0])) for m in methods]
        print(
            f"{ds.key:45s} dense {row[0]:.4f} bm25 {row[1]:.4f} rrf {row[2]:.4f} weighted {row[3]:.4f} "
            f"convex {row[4]:.4f}"
        )


if __name__ == "__main__":
    main()
