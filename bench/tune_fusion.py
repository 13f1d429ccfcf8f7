"""Tune the fusion parameters (RRF k, weighted-fusion dense weight) on the tuning side only (issue: hybrid retrieval).

    python bench/tune_fusion.py [--matrix bench/.cache/matrix] [--backend sentence-transformers]

Reads the dense and BM25 TREC runs that ``bench/eval_matrix.py`` wrote, and scores every grid point on SciFact
**train** and on the **dev half** (``context_engine.eval.datasets.half_of``) of each runbook set; the objective is the
mean nDCG@10 over those four sets. Test queries (SciFact test, runbook test halves, CMRC dev) are never read here.
Then prints, for the chosen parameters, the held-out comparison with dense.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from context_engine.eval import evaluate, load_dataset, read_run
from context_engine.retrieval.fusion import rrf, weighted_fusion

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
    bm25 = read_run(folder / "bm25.trec")
    return ds, dense, bm25


def ndcg(ds, run) -> float:
    return evaluate(ds.qrels, run, ["nDCG@10"]).aggregate["nDCG@10"]


def fuse(ds, dense, bm25, method: str, param: float):
    out = {}
    for q in ds.queries:
        lists = [dense.get(q, []), bm25.get(q, [])]
        out[q] = (
            rrf(lists, k=int(param), top_k=100)
            if method == "rrf"
            else weighted_fusion(lists, [param, 1 - param], top_k=100)
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrix", type=Path, default=ROOT / "bench" / ".cache" / "matrix")
    ap.add_argument("--backend", default="sentence-transformers")
    args = ap.parse_args()
    sets = [load(args.matrix, args.backend, *t) for t in TUNE]
    print(f"backend {args.backend}; tuning sets: " + ", ".join(ds.key for ds, _, _ in sets))
    base = [ndcg(ds, d) for ds, d, _ in sets]
    bm = [ndcg(ds, b) for ds, _, b in sets]
    print(f"dense    mean {sum(base) / len(base):.4f}  " + "  ".join(f"{v:.4f}" for v in base))
    print(f"bm25     mean {sum(bm) / len(bm):.4f}  " + "  ".join(f"{v:.4f}" for v in bm))
    best = {}
    for method, grid in (("rrf", RRF_K), ("weighted", WEIGHTS)):
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
        row = [ndcg(ds, d), ndcg(ds, b)] + [ndcg(ds, fuse(ds, d, b, m, best[m][0])) for m in ("rrf", "weighted")]
        print(f"{ds.key:45s} dense {row[0]:.4f} bm25 {row[1]:.4f} rrf {row[2]:.4f} weighted {row[3]:.4f}")


if __name__ == "__main__":
    main()
