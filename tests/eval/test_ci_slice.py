"""The CI slice of the golden checks (DESIGN §11): small sets through the real models, checked against the baseline
files in eval/baselines/ with their tolerance. The full run (SciFact, CMRC, every model) is
``bash eval/run_full.sh`` and ``bash eval/run_pipelines.sh``; see eval/README.md.

* runbooks/prometheus-operator (108 English runbooks, 104 alert-summary queries): the default model
  (use-multilingual) dense, BM25 and convex fusion; MiniLM dense (the published-reference path).
* runbooks/kubesphere-zh (49 Chinese runbooks, 45 English queries) and the Chinese->English golden set (40 Chinese
  questions, 108 English runbooks): the default model, dense and convex fusion.
* lookup_knowledge through the engine (write path, hybrid on, as configured by default) on the test half of
  runbooks/prometheus-operator.

No vector cache (CI has none); every corpus embeds in seconds with the default model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from context_engine.eval import EvalOptions, load_dataset, run_eval
from context_engine.providers.embedder import build_embedder
from context_engine.settings import EmbeddingSettings, Settings
from tests.conftest import REPO, shared_data

BASELINES = REPO / "eval" / "baselines"
ZH_EN = REPO / "eval" / "golden" / "runbooks-zh-en.json"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dataset", "half", "backend", "methods", "variant"),
    [
        ("prometheus-operator", None, "use-multilingual", ["dense", "bm25", "convex"], ""),
        ("prometheus-operator", None, "sentence-transformers", ["dense"], ""),
        ("kubesphere-zh", None, "use-multilingual", ["dense", "convex"], ""),
        ("zh-en", None, "use-multilingual", ["dense", "convex"], ""),
        ("prometheus-operator", "test", "use-multilingual", ["lookup_knowledge"], "hybrid-on"),
    ],
)
def test_golden_slice_matches_the_baselines(dataset, half, backend, methods, variant, embedder, tmp_path: Path):
    if dataset == "zh-en":
        shared_data("runbooks")  # the golden set's corpus is read in place from ../shared
        ds = load_dataset(ZH_EN)
    else:
        ds = load_dataset(shared_data("runbooks"), dataset, half=half)
    settings = Settings(home=tmp_path / "home")
    assert settings.knowledge.hybrid, "the pipeline row measures the default: hybrid on"

    def factory(name: str):
        return embedder if name == "sentence-transformers" else build_embedder(EmbeddingSettings(backend=name))

    report = run_eval(
        ds,
        settings,
        EvalOptions(methods=methods, embedders=[backend], cache_dir=tmp_path / "cache", variant=variant),
        embedder_factory=factory,
        baselines_dir=BASELINES,
    )
    assert report.baseline_path is not None, f"no baseline file for {ds.slug} in {BASELINES}"
    checked = {(c.method, c.model) for c in report.checks if c.kind == "baseline"}
    assert checked == {(r.method, r.model) for r in report.results}, "every method run here has a baseline entry"
    bad = [c for c in report.checks if c.status not in ("OK", "OKish")]
    assert not bad, "\n".join(
        f"{c.label} {c.metric} {c.kind}: expected {c.expected} got {c.actual:.4f} ({c.status} {c.reason})" for c in bad
    )
