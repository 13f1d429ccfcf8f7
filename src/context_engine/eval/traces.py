"""Trace inspection for lookup_knowledge runs (DESIGN §7.6, §11; seed 001 §9 "trace inspection").

Checks that every ``tool_invocation`` record of a lookup is complete and that its evidence is citable: the fields of
DESIGN §7.6 are present, ``retrieval_details`` holds at least one evidence ref, each ref has a ``raw_path`` and
``text``, a ``$.evidence_blocks[i]`` path points at a block that the record summarises, and ``$.no_evidence`` is used
only when no block was returned. Records are read as JSON (the output of ``context-engine invocations --json`` or of
``GET /api/v1/tool_invocations``), so this module does not depend on the audit store's classes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from context_engine.errors import ContextEngineError, ErrorCode

__all__ = ["REQUIRED_FIELDS", "TraceIssue", "TraceReport", "inspect_traces", "load_invocations"]

#: Fields every tool_invocation row must carry (DESIGN §7.6).
REQUIRED_FIELDS = (
    "invocation_id",
    "tool_name",
    "retrieval_layer",
    "l0_match_count",
    "l1_match_count",
    "retrieval_details",
    "relevance_level",
    "output_preview",
    "duration_ms",
    "success",
)
_BLOCK_PATH_RE = re.compile(r"^\$\.evidence_blocks\[(\d+)\]$")


class TraceIssue(BaseModel):
    """One problem found in one record."""

    invocation_id: str | None
    problem: str


class TraceReport(BaseModel):
    """Counts and problems over the inspected records; ``ok`` when there are none."""

    records: int = 0
    lookups: int = 0
    complete: int = 0
    with_evidence: int = 0
    no_evidence: int = 0
    failed_calls: int = 0
    issues: list[TraceIssue] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.issues


def load_invocations(path: Path) -> list[dict[str, Any]]:
    """Records from a JSON file: a list, ``{"invocations": [...]}`` or ``{"items": [...]}``; or JSON lines.

    Raises:
        ContextEngineError: ``WRT-4221`` when the file holds neither.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as err:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}: not JSON or JSON lines") from err
    if isinstance(data, dict):
        data = data.get("invocations", data.get("items", [data]))
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}: expected a list of tool_invocation records")
    return data


def inspect_traces(records: Iterable[Mapping[str, Any]], *, tool_name: str = "lookup_knowledge") -> TraceReport:
    """Inspect the ``tool_name`` records among ``records`` (others are counted, not checked).

    A failed call (``success`` false) must carry an ``error_code``; its evidence is not required.
    """
    report = TraceReport()
    for rec in records:
        report.records += 1
        if rec.get("tool_name") != tool_name:
            continue
        report.lookups += 1
        inv = rec.get("invocation_id")
        problems = [f"missing field {f}" for f in REQUIRED_FIELDS if rec.get(f) is None]
        if rec.get("success") is False:
            report.failed_calls += 1
            if not rec.get("error_code"):
                problems.append("failed call without error_code")
        else:
            problems += _evidence_problems(rec, report)
        if problems:
            report.issues += [TraceIssue(invocation_id=inv, problem=p) for p in problems]
        else:
            report.complete += 1
    return report


def _evidence_problems(rec: Mapping[str, Any], report: TraceReport) -> list[str]:
    details = rec.get("retrieval_details")
    if not isinstance(details, Mapping):
        return ["retrieval_details is not an object"]
    refs = details.get("evidence_refs")
    if not isinstance(refs, list) or not refs:
        return ["no evidence_refs"]
    blocks = details.get("evidence_blocks") or []
    problems: list[str] = []
    no_evidence = False
    for i, ref in enumerate(refs):
        if not isinstance(ref, Mapping) or not ref.get("raw_path") or ref.get("text") is None:
            problems.append(f"evidence_refs[{i}] lacks raw_path or text")
            continue
        path = str(ref["raw_path"])
        if path == "$.no_evidence":
            no_evidence = True
            continue
        m = _BLOCK_PATH_RE.match(path)
        if m is None:
            problems.append(f"evidence_refs[{i}] has an unknown raw_path {path!r}")
        elif int(m.group(1)) >= len(blocks):
            problems.append(f"evidence_refs[{i}] points at block {m.group(1)} but {len(blocks)} were recorded")
        elif not str(ref["text"]).strip():
            problems.append(f"evidence_refs[{i}] has empty text")
    if no_evidence:
        report.no_evidence += 1
        if blocks:
            problems.append("$.no_evidence recorded although evidence blocks were returned")
    else:
        report.with_evidence += 1
    return problems
