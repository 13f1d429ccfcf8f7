"""Expected scores kept in files and checked with a tolerance (DESIGN §11; the Pyserini regression convention).

A baseline file (``eval/baselines/<dataset slug>.json``) holds, for one dataset key, the expected metrics of each
``(method, model, variant)`` run, the command that reproduces them, and optionally a published ``reference`` to
reproduce::

    {"dataset": "scifact/test", "dataset_hash": "...", "tolerance": 0.0005,
     "command": "context-engine eval --dataset ../shared/data/scifact --split test",
     "runs": [{"method": "dense", "model": "sentence-transformers:sentence-transformers/all-MiniLM-L6-v2",
               "config_hash": "...", "metrics": {"nDCG@10": 0.6451, ...},
               "reference": {"nDCG@10": {"value": 0.645, "tolerance": 0.01, "source": "MTEB"}}}]}

Statuses per metric: ``OK`` (equal when rounded to 4 decimals), ``OKish`` (within the tolerance, default 0.0005),
``FAIL`` (beyond). A run whose dataset hash or config hash differs from the baseline's is ``SKIP``ped with the reason
(the numbers are not comparable). A reference check is ``OK`` within its own tolerance, else ``FAIL``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.eval.harness import MethodResult

__all__ = [
    "BaselineCheck",
    "BaselineFile",
    "BaselineRun",
    "Reference",
    "check_results",
    "find_baseline",
    "skipped_checks",
    "status_of",
]

Status = Literal["OK", "OKish", "FAIL", "SKIP"]


class Reference(BaseModel):
    """A published number to reproduce, e.g. SciFact BM25 nDCG@10 0.665 within 0.015."""

    model_config = ConfigDict(extra="forbid")

    value: float
    tolerance: float = Field(ge=0.0)
    source: str = ""


class BaselineRun(BaseModel):
    """Expected metrics of one ``(method, model)`` on the file's dataset."""

    model_config = ConfigDict(extra="forbid")

    method: str
    variant: str = ""
    model: str | None = None
    config_hash: str | None = None
    metrics: dict[str, float]
    tolerance: float | None = Field(None, ge=0.0, description="Overrides the file's tolerance for this run.")
    reference: dict[str, Reference] = Field(default_factory=dict)
    command: str = Field("", description="The command that produced these values (when it differs from the file's).")
    note: str = ""


class BaselineFile(BaseModel):
    """One dataset's baselines (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    dataset_hash: str | None = None
    tolerance: float = Field(0.0005, ge=0.0)
    command: str = ""
    runs: list[BaselineRun] = Field(default_factory=list)
    note: str = ""

    @classmethod
    def read(cls, path: Path) -> BaselineFile:
        """Parse a baseline file. Raises ``CFG-4001`` when it is not valid."""
        try:
            return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))
        except ValueError as err:
            raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"invalid baseline file {path}: {err}") from err

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.model_dump(mode="json", exclude_none=True), indent=2) + "\n", encoding="utf-8")

    def find(self, method: str, model: str | None, variant: str = "") -> BaselineRun | None:
        """The entry of ``(method, model, variant)``, or ``None``."""
        for r in self.runs:
            if r.method == method and r.model == model and r.variant == variant:
                return r
        return None

    def update(self, results: Sequence[MethodResult], *, dataset_hash: str, command: str | None = None) -> None:
        """Record ``results`` as the expected values (metrics rounded to 4 decimals); references are kept."""
        self.dataset_hash = dataset_hash
        if command and not self.command:
            self.command = command
        for res in results:
            old = self.find(res.method, res.model, res.variant)
            new = BaselineRun(
                method=res.method,
                variant=res.variant,
                model=res.model,
                config_hash=res.config_hash,
                metrics={k: round(v, 4) for k, v in res.metrics.items()},
                tolerance=old.tolerance if old else None,
                reference=old.reference if old else {},
                command=command or (old.command if old else ""),
                note=old.note if old else "",
            )
            if old is None:
                self.runs.append(new)
            else:
                self.runs[self.runs.index(old)] = new


class BaselineCheck(BaseModel):
    """One metric of one run against its baseline (or its published reference when ``kind='reference'``)."""

    label: str
    method: str
    model: str | None
    metric: str
    kind: Literal["baseline", "reference"] = "baseline"
    expected: float | None
    actual: float
    diff: float | None
    tolerance: float | None
    status: Status
    reason: str = ""


def status_of(actual: float, expected: float, tolerance: float) -> Status:
    """``OK`` when equal at 4 decimals, ``OKish`` within ``tolerance``, else ``FAIL``."""
    if round(actual, 4) == round(expected, 4):
        return "OK"
    return "OKish" if abs(actual - expected) <= tolerance + 1e-12 else "FAIL"


def check_results(
    baseline: BaselineFile, results: Sequence[MethodResult], *, dataset_hash: str, tolerance: float | None = None
) -> list[BaselineCheck]:
    """Check each result that has a baseline run; results without one are not reported.

    Args:
        baseline: the dataset's baseline file.
        results: method results on the same dataset.
        dataset_hash: the hash of the data actually measured.
        tolerance: overrides the file's tolerance (a run's own tolerance still wins).
    """
    checks: list[BaselineCheck] = []
    for res in results:
        run = baseline.find(res.method, res.model, res.variant)
        if run is None:
            continue
        tol = (
            run.tolerance if run.tolerance is not None else (tolerance if tolerance is not None else baseline.tolerance)
        )
        reason = ""
        if baseline.dataset_hash and baseline.dataset_hash != dataset_hash:
            reason = "dataset differs from the baseline's (hash)"
        elif run.config_hash and run.config_hash != res.config_hash:
            reason = "configuration differs from the baseline's (config hash)"
        for metric, expected in run.metrics.items():
            actual = res.metrics.get(metric)
            if actual is None:
                continue
            status: Status = "SKIP" if reason else status_of(actual, expected, tol)
            checks.append(
                BaselineCheck(
                    label=res.label,
                    method=res.method,
                    model=res.model,
                    metric=metric,
                    expected=expected,
                    actual=actual,
                    diff=actual - expected,
                    tolerance=tol,
                    status=status,
                    reason=reason,
                )
            )
        for metric, ref in run.reference.items():
            actual = res.metrics.get(metric)
            if actual is None:
                continue
            ok = abs(actual - ref.value) <= ref.tolerance + 1e-12
            checks.append(
                BaselineCheck(
                    label=res.label,
                    method=res.method,
                    model=res.model,
                    metric=metric,
                    kind="reference",
                    expected=ref.value,
                    actual=actual,
                    diff=actual - ref.value,
                    tolerance=ref.tolerance,
                    status="OK" if ok else "FAIL",
                    reason=ref.source,
                )
            )
    return checks


def skipped_checks(baseline: BaselineFile, results: Sequence[MethodResult], reason: str) -> list[BaselineCheck]:
    """Every metric of each result that has a run in ``baseline``, as ``SKIP`` with ``reason`` (nothing compared):
    says which baseline exists and why it does not apply, instead of reporting nothing."""
    checks: list[BaselineCheck] = []
    for res in results:
        run = baseline.find(res.method, res.model, res.variant)
        if run is None:
            continue
        for metric, expected in run.metrics.items():
            actual = res.metrics.get(metric)
            if actual is None:
                continue
            checks.append(
                BaselineCheck(
                    label=res.label,
                    method=res.method,
                    model=res.model,
                    metric=metric,
                    expected=expected,
                    actual=actual,
                    diff=None,
                    tolerance=None,
                    status="SKIP",
                    reason=reason,
                )
            )
    return checks


def find_baseline(directory: Path, slug: str) -> Path:
    """``<directory>/<slug>.json`` (it may not exist yet)."""
    return Path(directory) / f"{slug}.json"


def summarize(checks: Sequence[BaselineCheck]) -> dict[str, Any]:
    """Counts by status and whether any check failed."""
    counts: dict[str, int] = {}
    for c in checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    return {"counts": counts, "failed": counts.get("FAIL", 0) > 0}
