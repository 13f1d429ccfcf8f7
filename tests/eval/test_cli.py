import json
from pathlib import Path

from typer.testing import CliRunner

from context_engine.eval import write_run
from context_engine.interfaces.cli.app import app

runner = CliRunner()


def test_eval_prints_the_table_writes_reports_and_records_baselines(tiny_beir: Path, tmp_path: Path):
    args = [
        "--home",
        str(tmp_path / "home"),
        "eval",
        "--dataset",
        str(tiny_beir),
        "--split",
        "test",
        "--method",
        "bm25",
        "--out",
        str(tmp_path / "out"),
        "--baselines",
        str(tmp_path / "base"),
    ]
    res = runner.invoke(app, [*args, "--update-baselines"])
    assert res.exit_code == 0, res.output
    assert "bm25" in res.output and "nDCG@10" in res.output
    assert (tmp_path / "out" / "report.md").is_file() and (tmp_path / "out" / "report.json").is_file()
    assert json.loads((tmp_path / "base" / "tiny-test.json").read_text())["runs"][0]["method"] == "bm25"
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "OK" in res.output


def test_eval_exits_1_when_a_baseline_fails(tiny_beir: Path, tmp_path: Path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "tiny-test.json").write_text(
        json.dumps({"dataset": "tiny/test", "runs": [{"method": "bm25", "metrics": {"nDCG@10": 0.1}}]})
    )
    res = runner.invoke(
        app,
        [
            "--home",
            str(tmp_path / "h"),
            "eval",
            "--dataset",
            str(tiny_beir),
            "--method",
            "bm25",
            "--out",
            str(tmp_path / "o"),
            "--baselines",
            str(base),
        ],
    )
    assert res.exit_code == 1 and "FAIL" in res.output


def test_eval_json_output_and_fixture_mode(tiny_beir: Path, tmp_path: Path):
    write_run({"q1": [("d1", 1.0)]}, tmp_path / "c.trec")
    res = runner.invoke(
        app,
        [
            "--home",
            str(tmp_path / "h"),
            "--json",
            "eval",
            "--dataset",
            str(tiny_beir),
            "--candidates",
            str(tmp_path / "c.trec"),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["mode"] == "offline-fixture" and data["results"][0]["metrics"]["RR@10"] == 0.25


def test_eval_keyword_override_and_bad_options(tiny_beir: Path, tmp_path: Path):
    base = [
        "--home",
        str(tmp_path / "h"),
        "--json",
        "eval",
        "--dataset",
        str(tiny_beir),
        "--method",
        "bm25",
        "--out",
        str(tmp_path / "o"),
    ]
    res = runner.invoke(app, [*base, "--keyword", "split_identifiers=false", "--keyword", "k1=1.2"])
    assert res.exit_code == 0, res.output
    cfg = json.loads(res.output)["results"][0]["config"]
    assert cfg["split_identifiers"] is False and cfg["k1"] == 1.2
    assert runner.invoke(app, [*base, "--keyword", "nope=1"]).exit_code == 2
    assert runner.invoke(app, [*base, "--mode", "live"]).exit_code == 2
    assert runner.invoke(app, [*base, "--half", "middle"]).exit_code == 2


def test_eval_traces_command(tmp_path: Path):
    good = {
        "invocation_id": "i",
        "tool_name": "lookup_knowledge",
        "retrieval_layer": "semantic",
        "l0_match_count": 0,
        "l1_match_count": 0,
        "relevance_level": "NONE",
        "output_preview": "",
        "duration_ms": 1.0,
        "success": True,
        "retrieval_details": {"evidence_refs": [{"raw_path": "$.no_evidence", "text": ""}]},
    }
    (tmp_path / "ok.json").write_text(json.dumps([good]))
    assert runner.invoke(app, ["eval-traces", str(tmp_path / "ok.json")]).exit_code == 0
    (tmp_path / "bad.json").write_text(json.dumps([{**good, "retrieval_details": {}}]))
    res = runner.invoke(app, ["eval-traces", str(tmp_path / "bad.json")])
    assert res.exit_code == 1 and "no evidence_refs" in res.output


def test_eval_hybrid_option_is_on_or_off(tiny_beir: Path, tmp_path: Path):
    base = ["--home", str(tmp_path / "h"), "eval", "--dataset", str(tiny_beir), "--method", "bm25"]
    res = runner.invoke(app, [*base, "--hybrid", "maybe", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--hybrid is on or off" in res.output
    assert runner.invoke(app, [*base, "--method", "nope", "--out", str(tmp_path / "o")]).exit_code == 2


def test_limit_queries_is_compared_like_for_like_or_skipped_with_the_reason(tiny_beir: Path, tmp_path: Path):
    """A --limit-queries slice is never checked against the whole set's means (issue 15): the full-set baseline
    (which the first query alone would FAIL) is reported as SKIP with the reason; a baseline recorded for the slice
    is its own file (key ~q<N>) and is checked like for like."""
    base = tmp_path / "base"

    def run(*extra: str) -> tuple[int, str]:
        res = runner.invoke(
            app,
            [
                "--home",
                str(tmp_path / "home"),
                "eval",
                "--dataset",
                str(tiny_beir),
                "--method",
                "bm25",
                "--out",
                str(tmp_path / "out"),
                "--baselines",
                str(base),
                *extra,
            ],
        )
        return res.exit_code, res.output

    assert run("--update-baselines")[0] == 0
    whole = json.loads((base / "tiny-test.json").read_text())["runs"][0]["metrics"]
    code, output = run("--limit-queries", "1")
    assert code == 0, output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["dataset"]["key"] == "tiny/test~q1"
    sliced = report["results"][0]["metrics"]
    assert sliced["RR@10"] == 1.0 and whole["RR@10"] < 1.0  # the slice's mean differs: a check would FAIL
    statuses = {(c["metric"], c["status"]) for c in report["checks"]}
    assert statuses == {(m, "SKIP") for m in whole}
    assert "cannot be restricted to these 1 queries" in output and "FAIL" not in output
    # one reason for every check: one line says so, not a table repeating it (issue 29, the README's eval example)
    assert f"{len(whole)} checks skipped (--limit-queries 1:" in output and "| status |" not in output
    assert run("--limit-queries", "1", "--update-baselines")[0] == 0
    assert json.loads((base / "tiny-test-q1.json").read_text())["dataset"] == "tiny/test~q1"
    code, output = run("--limit-queries", "1")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 0 and {c["status"] for c in report["checks"]} == {"OK"}
    assert run("--limit-queries", "4")[0] == 0  # every query: the whole set, checked against its baseline
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["dataset"]["key"] == "tiny/test" and {c["status"] for c in report["checks"]} == {"OK"}
