import json
from pathlib import Path

from context_engine.eval.traces import inspect_traces, load_invocations


def record(**overrides):
    rec = {
        "invocation_id": "i1",
        "tool_name": "lookup_knowledge",
        "retrieval_layer": "semantic",
        "l0_match_count": 0,
        "l1_match_count": 2,
        "relevance_level": "HIGHLY_RELEVANT",
        "output_preview": "...",
        "duration_ms": 12.5,
        "success": True,
        "retrieval_details": {
            "evidence_blocks": [{"doc_id": "a"}, {"doc_id": "b"}],
            "evidence_refs": [
                {"raw_path": "$.evidence_blocks[0]", "text": "x"},
                {"raw_path": "$.evidence_blocks[1]", "text": "y"},
            ],
        },
    }
    rec.update(overrides)
    return rec


def test_complete_records_pass():
    rep = inspect_traces([record(), record(invocation_id="i2", tool_name="search_memory")])
    assert rep.ok and rep.lookups == 1 and rep.complete == 1 and rep.with_evidence == 1 and rep.records == 2


def test_no_evidence_ref_is_accepted_only_without_blocks():
    ok = record(retrieval_details={"evidence_blocks": [], "evidence_refs": [{"raw_path": "$.no_evidence", "text": ""}]})
    assert inspect_traces([ok]).ok and inspect_traces([ok]).no_evidence == 1
    bad = record(
        retrieval_details={
            "evidence_blocks": [{"doc_id": "a"}],
            "evidence_refs": [{"raw_path": "$.no_evidence", "text": ""}],
        }
    )
    assert not inspect_traces([bad]).ok


def test_problems_are_reported():
    rep = inspect_traces(
        [
            record(l1_match_count=None),
            record(invocation_id="i3", retrieval_details={"evidence_blocks": [], "evidence_refs": []}),
            record(
                invocation_id="i4",
                retrieval_details={
                    "evidence_blocks": [{}],
                    "evidence_refs": [{"raw_path": "$.evidence_blocks[3]", "text": "t"}],
                },
            ),
            record(invocation_id="i5", success=False),
        ]
    )
    problems = {(i.invocation_id, i.problem.split(" ")[0]) for i in rep.issues}
    assert ("i1", "missing") in problems and ("i3", "no") in problems and ("i4", "evidence_refs[0]") in problems
    assert ("i5", "failed") in problems and rep.failed_calls == 1


def test_load_invocations_accepts_list_wrapper_and_jsonl(tmp_path: Path):
    (tmp_path / "a.json").write_text(json.dumps({"invocations": [record()]}))
    (tmp_path / "b.jsonl").write_text(json.dumps(record()) + "\n" + json.dumps(record()) + "\n")
    assert len(load_invocations(tmp_path / "a.json")) == 1
    assert len(load_invocations(tmp_path / "b.jsonl")) == 2
