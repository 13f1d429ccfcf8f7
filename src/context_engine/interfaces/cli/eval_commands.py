"""Evaluation commands: ``eval`` (offline, fixture or live) and ``eval-traces`` (DESIGN §11). Thin over
:mod:`context_engine.eval`."""

from __future__ import annotations

import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.common import app, emit, fail, out, progress_bar, state


def _settings(keyword_options: list[str], hybrid: str | None = None) -> Any:
    from context_engine.settings import load_settings

    settings = load_settings(state.home) if state.home else load_settings()
    if keyword_options:
        updates: dict[str, Any] = {}
        for opt in keyword_options:
            key, sep, value = opt.partition("=")
            if not sep or key not in type(settings.keyword).model_fields:
                raise ContextEngineError(
                    ErrorCode.CONFIG_INVALID, f"--keyword takes KEY=VALUE of the keyword section, got {opt!r}"
                )
            updates[key] = value
        merged = {**settings.keyword.model_dump(), **updates}
        settings = settings.model_copy(update={"keyword": type(settings.keyword).model_validate(merged)})
    if hybrid is not None:
        if hybrid not in ("on", "off"):
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, f"--hybrid is on or off, got {hybrid!r}")
        on = hybrid == "on"
        rs = settings.retrieval
        settings = settings.model_copy(
            update={
                "knowledge": settings.knowledge.model_copy(update={"hybrid": on}),
                "retrieval": rs.model_copy(update={"seed": rs.seed.model_copy(update={"hybrid": on})}),
            }
        )
    return settings


@app.command("eval")
def eval_command(
    dataset: Annotated[
        Path, typer.Option("--dataset", help="A BEIR folder, the runbooks folder, or a golden JSON file.")
    ],
    split: Annotated[str | None, typer.Option(help="Qrels split (test, train, dev, prometheus-operator, ...).")] = None,
    method: Annotated[
        list[str] | None,
        typer.Option(
            "--method",
            help="dense, bm25, rrf, weighted, convex, all (those five), or a pipeline: lookup_knowledge, "
            "search_memory (repeatable; default all).",
        ),
    ] = None,
    embedder: Annotated[
        list[str] | None,
        typer.Option(
            "--embedder",
            help="Embedding backend(s) for the dense side (repeatable; default: the configured one and "
            "eval.reference_embedders, i.e. MiniLM).",
        ),
    ] = None,
    mode: Annotated[str, typer.Option(help="offline (in-process or --candidates) or live (--url).")] = "offline",
    url: Annotated[str | None, typer.Option(help="Live mode: the server's base URL.")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="CE_EVAL_API_KEY", help="Live mode: API key.")] = None,
    strip_prefix: Annotated[str | None, typer.Option(help="Live mode: prefix removed from returned doc ids.")] = None,
    candidates: Annotated[
        Path | None, typer.Option(help="Offline fixture mode: score this TREC run file (no engine, no model).")
    ] = None,
    half: Annotated[str | None, typer.Option(help="Keep the dev or test half of the queries.")] = None,
    query_field: Annotated[str | None, typer.Option(help="Runbooks: query field (text, description_clean).")] = None,
    limit_queries: Annotated[int | None, typer.Option(help="Evaluate only the first N queries (by id).")] = None,
    max_docs: Annotated[
        int | None, typer.Option(help="Cut the corpus to the judged documents plus distractors, N in all.")
    ] = None,
    rrf_k: Annotated[int | None, typer.Option(help="RRF constant (default: keyword.rrf_k).")] = None,
    dense_weight: Annotated[
        float | None, typer.Option(help="Weighted fusion: dense weight (default: keyword.dense_weight).")
    ] = None,
    keyword: Annotated[
        list[str] | None, typer.Option("--keyword", help="Override a keyword setting, KEY=VALUE (repeatable).")
    ] = None,
    hybrid: Annotated[
        str | None,
        typer.Option(
            help="Pipelines: on/off overrides knowledge.hybrid and retrieval.seed.hybrid (default: as configured)."
        ),
    ] = None,
    variant: Annotated[str, typer.Option(help="A label for this configuration (keys the baseline entries).")] = "",
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Report folder (default <home>/eval-reports/<run>).")
    ] = None,
    baselines: Annotated[Path | None, typer.Option(help="Baselines folder (default ./eval/baselines).")] = None,
    update_baselines: Annotated[bool, typer.Option(help="Record these results as the expected values.")] = False,
    cache_dir: Annotated[Path | None, typer.Option(help="Document-vector cache (default <home>/eval-cache).")] = None,
    conversation: Annotated[
        list[str] | None,
        typer.Option(
            "--conversation", help="Conversation datasets: evaluate only these conversation ids (repeatable)."
        ),
    ] = None,
    perturb: Annotated[
        str | None,
        typer.Option(
            help="Conversation datasets: 'acks' inserts an assistant acknowledgement after every turn (at load time)."
        ),
    ] = None,
) -> None:
    """Evaluate retrieval on a dataset: print the side-by-side table, write markdown+JSON reports and TREC runs,
    and check the baselines (exit 1 when a check FAILs).

    A conversation folder (turns.jsonl + qa.jsonl, e.g. LoCoMo) runs the conversational evaluation instead: the
    turns written with add_messages and asked through search_memory, beside BM25 and dense over the same turns,
    per question category (methods search_memory, bm25, dense; see eval/README.md)."""
    from context_engine.eval import EvalOptions, load_dataset, run_eval
    from context_engine.eval.conversations import is_conversation_folder
    from context_engine.eval.runner import ALL_METHODS, default_baselines_dir

    if is_conversation_folder(dataset):
        given = {
            "--split": split,
            "--half": half,
            "--query-field": query_field,
            "--max-docs": max_docs,
            "--candidates": candidates,
            "--url": url,
            "--rrf-k": rrf_k,
            "--dense-weight": dense_weight,
        }
        _eval_conversations(
            dataset,
            [k for k, v in given.items() if v is not None] + (["--mode"] if mode != "offline" else []),
            method=method,
            embedder=embedder,
            limit_queries=limit_queries,
            conversation=conversation,
            perturb=perturb,
            keyword=keyword,
            hybrid=hybrid,
            variant=variant,
            out_dir=out_dir,
            baselines=baselines,
            update_baselines=update_baselines,
            cache_dir=cache_dir,
        )
        return
    try:
        if conversation or perturb:
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID, "--conversation/--perturb need a conversation dataset folder"
            )
        if half not in (None, "dev", "test"):
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "--half is dev or test")
        if mode not in ("offline", "live"):
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "--mode is offline or live")
        # the checked texts as the literal types the options are declared with
        checked_half: Literal["dev", "test"] | None = None if half is None else ("dev" if half == "dev" else "test")
        checked_mode: Literal["offline", "live"] = "live" if mode == "live" else "offline"
        settings = _settings(keyword or [], hybrid)
        methods = [m for m in (method or ["all"])]
        if "all" in methods:  # the document-level set, plus any pipeline named beside it
            methods = list(ALL_METHODS) + [m for m in methods if m != "all" and m not in ALL_METHODS]
        ds = load_dataset(
            dataset,
            split,
            query_field=query_field,
            half=checked_half,
            limit_queries=limit_queries,
            max_docs=max_docs,
        )
        options = EvalOptions(
            methods=methods,
            embedders=embedder or None,
            mode=checked_mode,
            url=url,
            api_key=api_key,
            strip_prefix=strip_prefix,
            candidates=candidates,
            rrf_k=rrf_k,
            dense_weight=dense_weight,
            cache_dir=cache_dir,
            variant=variant,
        )
        base_dir = baselines or default_baselines_dir()
        # The command that reproduces these numbers (recorded in the report and the baseline file).
        command = "context-engine " + " ".join(shlex.quote(a) for a in sys.argv[1:] if a != "--update-baselines")
        with progress_bar() as tick:
            report = run_eval(
                ds,
                settings,
                options,
                baselines_dir=base_dir,
                update_baselines=update_baselines,
                command=command,
                progress=tick,
            )
    except ContextEngineError as e:
        fail(e)
        return
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = out_dir or settings.home_path / "eval-reports" / f"{ds.slug}-{stamp}"
    paths = report.write(target)
    failed = any(c.status == "FAIL" for c in report.checks)
    if state.json:
        emit({**report.to_json(per_query=False), "report_paths": {k: str(v) for k, v in paths.items()}})
    else:
        _print(report)
        out.print(f"reports: {paths['markdown']} {paths['json']}")
    if failed:
        raise typer.Exit(1)


def _eval_conversations(
    dataset: Path,
    unsupported: list[str],
    *,
    method: list[str] | None,
    embedder: list[str] | None,
    limit_queries: int | None,
    conversation: list[str] | None,
    perturb: str | None,
    keyword: list[str] | None,
    hybrid: str | None,
    variant: str,
    out_dir: Path | None,
    baselines: Path | None,
    update_baselines: bool,
    cache_dir: Path | None,
) -> None:
    """``eval`` on a conversation folder (:func:`context_engine.eval.conversation_eval.run_conversation_eval`)."""
    from context_engine.eval.conversation_eval import (
        CONVERSATION_METHODS,
        ConversationEvalOptions,
        run_conversation_eval,
    )
    from context_engine.eval.conversations import load_conversations
    from context_engine.eval.runner import default_baselines_dir

    try:
        if unsupported:
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID,
                f"{', '.join(unsupported)} do(es) not apply to a conversation dataset (offline, turn-level qrels)",
            )
        settings = _settings(keyword or [], hybrid)
        methods = list(method or ["all"])
        if "all" in methods:
            methods = list(CONVERSATION_METHODS)
        conv = load_conversations(
            dataset, conversations=conversation or None, limit_queries=limit_queries, perturb=perturb
        )
        options = ConversationEvalOptions(
            methods=methods, embedders=embedder or None, cache_dir=cache_dir, variant=variant
        )
        command = "context-engine " + " ".join(shlex.quote(a) for a in sys.argv[1:] if a != "--update-baselines")
        with progress_bar() as tick:
            report = run_conversation_eval(
                conv,
                settings,
                options,
                baselines_dir=baselines or default_baselines_dir(),
                update_baselines=update_baselines,
                command=command,
                progress=tick,
            )
    except ContextEngineError as e:
        fail(e)
        return
    ds = conv.dataset
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = out_dir or settings.home_path / "eval-reports" / f"{ds.slug}-{stamp}"
    paths = report.write(target)
    if state.json:
        emit({**report.to_json(per_query=False), "report_paths": {k: str(v) for k, v in paths.items()}})
    else:
        _print(report)
        out.print(f"reports: {paths['markdown']} {paths['json']}")
    if any(c.status == "FAIL" for c in report.checks):
        raise typer.Exit(1)


def _print(report: Any) -> None:
    """The side-by-side table and the baseline checks as markdown (copy-pastable; never cut to the terminal width)."""
    info = report.dataset_info()
    lines = [
        (
            f"{info['key']} — {info['documents']} docs, {info['queries']} queries, sha256 {info['hash'][:12]}, "
            f"git {(report.git_sha or 'unknown')[:12]}"
        ),
        "",
        "| " + " | ".join(report.table_header()) + " |",
        "|" + "---|" * len(report.table_header()),
    ]
    for res, row in zip(report.results, report.table_rows(), strict=True):
        row[0] = res.method + (f" ({res.variant})" if res.variant else "")
        lines.append("| " + " | ".join(row) + " |")
    if hasattr(report, "category_table"):  # the conversational evaluation
        lines += ["", *report.category_table()]
        if getattr(report, "no_answer", None):
            lines += ["", *report.no_answer_table()]
    reasons = {c.reason for c in report.checks if c.status == "SKIP"}
    if report.checks and len(reasons) == 1 and all(c.status == "SKIP" for c in report.checks):
        # one reason for every check (a --limit-queries slice, another configuration): one line, not a table of it
        lines += ["", f"baseline {report.baseline_path}: {len(report.checks)} checks skipped ({reasons.pop()})"]
    elif report.checks:
        lines += [
            "",
            f"baseline {report.baseline_path}:",
            "",
            "| run | metric | kind | expected | actual | diff | status |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in report.checks:
            lines.append(
                f"| {c.label} | {c.metric} | {c.kind} | {'—' if c.expected is None else f'{c.expected:.4f}'} | "
                f"{c.actual:.4f} | {'—' if c.diff is None else f'{c.diff:+.4f}'} | {c.status}"
                + (f" ({c.reason})" if c.status == "SKIP" else "")
                + " |"
            )
    elif report.baseline_path is None:
        lines += ["", "no baseline file for this dataset (use --update-baselines to record one)"]
    out.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)


@app.command("eval-traces")
def eval_traces(
    file: Annotated[Path, typer.Argument(help="tool_invocation records as JSON (a list) or JSON lines.")],
    tool: Annotated[str, typer.Option(help="Tool whose records are inspected.")] = "lookup_knowledge",
) -> None:
    """Trace inspection: every lookup's tool_invocation complete, evidence refs present (exit 1 on a problem)."""
    from context_engine.eval.traces import inspect_traces, load_invocations

    try:
        report = inspect_traces(load_invocations(file), tool_name=tool)
    except ContextEngineError as e:
        fail(e)
        return
    if state.json:
        emit({**report.model_dump(), "ok": report.ok})
    else:
        out.print(
            f"records={report.records} lookups={report.lookups} complete={report.complete} "
            f"with_evidence={report.with_evidence} no_evidence={report.no_evidence} failed_calls={report.failed_calls}"
        )
        for issue in report.issues:
            out.print(f"  [red]{issue.invocation_id}[/]: {issue.problem}")
        out.print("[green]OK[/]" if report.ok else f"[red]{len(report.issues)} problem(s)[/]")
    if not report.ok:
        raise typer.Exit(1)
