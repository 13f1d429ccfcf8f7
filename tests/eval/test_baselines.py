from pathlib import Path

from context_engine.eval.baselines import BaselineFile, BaselineRun, Reference, check_results, status_of
from context_engine.eval.harness import MethodResult


def result(ndcg: float, *, method="bm25", model=None, config_hash="h1", variant="") -> MethodResult:
    return MethodResult(
        method=method,
        model=model,
        config={},
        config_hash=config_hash,
        metrics={"nDCG@10": ndcg, "R@10": 0.8},
        per_query={},
        latency_ms={},
        context_tokens={},
        run={},
        latencies={},
        variant=variant,
    )


def test_status_ok_okish_fail():
    assert status_of(0.66512, 0.6651, 0.0005) == "OK"
    assert status_of(0.6655, 0.6651, 0.0005) == "OKish"
    assert status_of(0.6651 - 0.0005, 0.6651, 0.0005) == "OKish"
    assert status_of(0.6660, 0.6651, 0.0005) == "FAIL"


def test_check_results_against_baseline_and_reference():
    base = BaselineFile(
        dataset="scifact/test",
        dataset_hash="abc",
        runs=[
            BaselineRun(
                method="bm25",
                config_hash="h1",
                metrics={"nDCG@10": 0.6878},
                reference={"nDCG@10": Reference(value=0.679, tolerance=0.015, source="Anserini")},
            )
        ],
    )
    checks = check_results(base, [result(0.68781), result(0.7, method="dense", model="m")], dataset_hash="abc")
    assert [(c.kind, c.status) for c in checks] == [("baseline", "OK"), ("reference", "OK")]
    checks = check_results(base, [result(0.60)], dataset_hash="abc")
    assert [c.status for c in checks] == ["FAIL", "FAIL"]


def test_changed_data_or_config_is_skipped_not_failed():
    base = BaselineFile(
        dataset="d", dataset_hash="abc", runs=[BaselineRun(method="bm25", config_hash="h1", metrics={"nDCG@10": 0.5})]
    )
    assert check_results(base, [result(0.9)], dataset_hash="other")[0].status == "SKIP"
    assert check_results(base, [result(0.9, config_hash="h2")], dataset_hash="abc")[0].status == "SKIP"


def test_variants_are_separate_entries(tmp_path: Path):
    base = BaselineFile(dataset="d")
    base.update([result(0.6878), result(0.6762, variant="plain", config_hash="h2")], dataset_hash="abc", command="c")
    base.write(tmp_path / "d.json")
    back = BaselineFile.read(tmp_path / "d.json")
    assert back.find("bm25", None).metrics["nDCG@10"] == 0.6878
    assert back.find("bm25", None, "plain").metrics["nDCG@10"] == 0.6762
    # an update keeps the published reference of an entry
    back.runs[0].reference = {"nDCG@10": Reference(value=0.679, tolerance=0.015)}
    back.update([result(0.69)], dataset_hash="abc")
    assert back.find("bm25", None).reference["nDCG@10"].value == 0.679 and len(back.runs) == 2
