"""The evaluation reports that ``context-engine eval`` writes, read for the console (no FastAPI here).

``eval`` writes one folder per run under ``<home>/eval-reports/<dataset>-<time>/`` (unless ``--out`` names another
folder): ``report.json``, ``report.md``, ``qrels.txt`` and ``runs/<method>[-<variant>][-<backend>].trec``
(:meth:`context_engine.eval.report.EvalReport.write`). ``eval.reports_dirs`` adds folders such as ``eval/reports``
(where ``eval/run_full.sh`` writes). The console lists the folders that hold a ``report.json`` and accepts only
those names, so a request can never point outside them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.eval.metrics import evaluate
from context_engine.eval.trec import read_qrels, read_run

#: Cut-offs of the Recall@K curve (computed from the TREC run files when they are there).
RECALL_CUTOFFS: tuple[int, ...] = (1, 2, 3, 5, 10, 20, 50, 100)
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$")


@dataclass(frozen=True)
class ReportSummary:
    """One line of the report list."""

    name: str  # the folder name under eval-reports/
    dataset: str
    mode: str
    created_at: str
    methods: list[str]
    queries: int
    checks: dict[str, int] = field(default_factory=dict)


@dataclass
class ReportView:
    """A loaded report: the JSON as written, plus what the console derives from the run files.

    Attributes:
        name: the folder name.
        data: ``report.json`` as written (``results[i]`` has ``method``, ``model``, ``metrics``, ``latency_ms``,
            ``per_query`` and, since issue 16, ``latencies_ms`` per query).
        recall_curves: ``{result label: [(K, mean Recall@K over judged queries)]}``, K in :data:`RECALL_CUTOFFS`,
            from ``runs/*.trec`` + ``qrels.txt`` (ir-measures); falls back to the report's own ``R@k`` values when
            the files are missing.
    """

    name: str
    data: dict[str, Any]
    recall_curves: dict[str, list[tuple[int, float]]]

    @property
    def labels(self) -> list[str]:
        return [result_label(r) for r in self.data.get("results", [])]


def result_label(result: dict[str, Any]) -> str:
    """``method``, ``(variant)`` and ``[model]`` as the CLI's table names a result row."""
    label = result.get("method", "?")
    if result.get("variant"):
        label += f" ({result['variant']})"
    if result.get("model"):
        label += f" [{result['model']}]"
    return label


def _run_stem(result: dict[str, Any]) -> str:
    # The file name EvalReport.write gives a result's run.
    model = (result.get("model") or "").split(":", 1)[0]
    return "-".join(x for x in (result.get("method"), result.get("variant"), model) if x)


class EvalReports:
    """The report folders below one or more roots: ``<home>/eval-reports`` first, then ``eval.reports_dirs``.

    A report's name is the path of its folder relative to its root (``po-bm25``, ``pipelines/golden-on``); a name
    found under an earlier root hides the same name under a later one.

    Args:
        roots: folders to search recursively for ``report.json``; a missing folder has no reports.
    """

    def __init__(self, *roots: Path) -> None:
        self.roots = roots

    def _folders(self) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for root in self.roots:
            if not root.is_dir():
                continue
            for path in sorted(root.rglob("report.json")):
                name = path.parent.relative_to(root).as_posix()
                if name != "." and all(_RUN_NAME.match(part) for part in name.split("/")):
                    found.setdefault(name, path.parent)
        return found

    def list(self) -> list[ReportSummary]:
        """Every readable report, newest first (``created_at``, then name). Unreadable files are left out."""
        out: list[ReportSummary] = []
        for name, folder in self._folders().items():
            try:
                data = json.loads((folder / "report.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            results = data.get("results") or []
            out.append(
                ReportSummary(
                    name=name,
                    dataset=str((data.get("dataset") or {}).get("key", "?")),
                    mode=str(data.get("mode", "")),
                    created_at=str(data.get("created_at", "")),
                    methods=[result_label(r) for r in results],
                    queries=int((data.get("dataset") or {}).get("queries", 0)),
                    checks=dict(data.get("check_summary") or {}),
                )
            )
        return sorted(out, key=lambda r: (r.created_at, r.name), reverse=True)

    def load(self, name: str) -> ReportView:
        """The report named ``name`` (one of :meth:`list`'s names; nothing else is looked up).

        Raises:
            ContextEngineError: ``WRT-4041`` when no such report exists (any other name, a path, a traversal).
        """
        folder = self._folders().get(name)
        if folder is None:
            raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, "no such evaluation report", {"run": name})
        try:
            data = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"report {name!r} cannot be read: {err}") from err
        return ReportView(name=name, data=data, recall_curves=_recall_curves(folder, data))


def _recall_curves(folder: Path, data: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    qrels_path = folder / "qrels.txt"
    qrels = read_qrels(qrels_path) if qrels_path.is_file() else None
    measures = [f"R@{k}" for k in RECALL_CUTOFFS]
    curves: dict[str, list[tuple[int, float]]] = {}
    for result in data.get("results") or []:
        run_path = folder / "runs" / f"{_run_stem(result)}.trec"
        if qrels is not None and run_path.is_file():
            agg = evaluate(qrels, read_run(run_path), measures).aggregate
            curves[result_label(result)] = [(k, agg[f"R@{k}"]) for k in RECALL_CUTOFFS]
        else:
            points = []
            for name, value in (result.get("metrics") or {}).items():
                m = re.fullmatch(r"R@(\d+)", name)
                if m:
                    points.append((int(m.group(1)), float(value)))
            curves[result_label(result)] = sorted(points)
    return curves
