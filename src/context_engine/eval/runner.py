"""One evaluation from options to report: which methods, which embedders, which mode (DESIGN §11).

``offline``: dense (per embedder), BM25, and their fusions (``rrf``, ``weighted``) in process; or, with
``candidates``, a stored TREC run scored with no engine at all. ``live``: the server at ``url`` through
``POST /api/search/similar``. The result is an :class:`~context_engine.eval.report.EvalReport`, checked against the
dataset's baseline file when one exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.eval.baselines import BaselineFile, check_results, find_baseline, skipped_checks
from context_engine.eval.datasets import EvalDataset
from context_engine.eval.harness import MethodResult, fuse_runs, progress_ticker, run_retriever
from context_engine.eval.pipelines import PIPELINE_METHODS, PipelineRetriever
from context_engine.eval.report import EvalReport
from context_engine.eval.retrievers import BM25Retriever, DenseRetriever, FixtureRetriever, LiveRetriever
from context_engine.schema.similarity import dense_weight_of, scale_of
from context_engine.settings import Settings
from context_engine.storage.protocols import Embedder

__all__ = ["ALL_METHODS", "METHODS", "EvalOptions", "default_baselines_dir", "run_eval"]

ALL_METHODS = ("dense", "bm25", "rrf", "weighted", "convex")
"""The document-level methods (``--method all``)."""
METHODS = ALL_METHODS + PIPELINE_METHODS
"""Every offline method: the document-level ones and the engine's pipelines (``lookup_knowledge``,
``search_memory``)."""
_FUSIONS: tuple[Literal["rrf", "weighted", "convex"], ...] = ("rrf", "weighted", "convex")


@dataclass
class EvalOptions:
    """What to run. Defaults come from ``Settings.eval`` and ``Settings.keyword`` when left ``None``.

    Attributes:
        methods: offline methods: ``dense``, ``bm25``, ``rrf``, ``weighted`` (document-level) and the pipelines
            ``lookup_knowledge``, ``search_memory`` (the corpus ingested through the write path, see
            :mod:`context_engine.eval.pipelines`; their retrieval settings come from ``settings``).
        embedders: embedding backends for the dense side (default: the configured one, then
            ``eval.reference_embedders``).
        mode: ``offline`` or ``live``.
        url, api_key, strip_prefix: live mode (see :class:`LiveRetriever`).
        candidates: a TREC run file to score instead of retrieving (offline, no engine).
        rrf_k, dense_weight, depth: fusion parameters.
        top_k, context_k: results kept per query; results counted as context.
        cache_dir: document-vector cache.
        variant: a label for this configuration (keys the baseline entries together with method and model).
    """

    methods: Sequence[str] = ALL_METHODS
    embedders: Sequence[str] | None = None
    mode: Literal["offline", "live"] = "offline"
    url: str | None = None
    api_key: str | None = None
    strip_prefix: str | None = None
    candidates: Path | None = None
    rrf_k: int | None = None
    dense_weight: float | None = None
    depth: int | None = None
    top_k: int | None = None
    context_k: int | None = None
    cache_dir: Path | None = None
    variant: str = ""


def default_baselines_dir() -> Path | None:
    """``./eval/baselines`` when it exists, else the repository's ``eval/baselines`` (source checkouts)."""
    for cand in (Path.cwd() / "eval" / "baselines", Path(__file__).resolve().parents[3] / "eval" / "baselines"):
        if cand.is_dir():
            return cand
    return None


def run_eval(
    dataset: EvalDataset,
    settings: Settings,
    options: EvalOptions,
    *,
    embedder_factory: Callable[[str], Embedder] | None = None,
    baselines_dir: Path | None = None,
    update_baselines: bool = False,
    command: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> EvalReport:
    """Run the methods of ``options`` on ``dataset`` and return the report (baseline checks included).

    Args:
        dataset: the test set.
        settings: engine settings (embedding, keyword, eval sections).
        options: see :class:`EvalOptions`.
        embedder_factory: backend name -> embedder (default: :func:`build_embedder` on ``settings``).
        baselines_dir: where ``<dataset slug>.json`` baselines live (``None``: no checks).
        update_baselines: write the results as the new expected values (references kept).
        command: the command line, recorded in the report and the baseline file.
        progress: ``(stage, done, total)`` callback.

    Raises:
        ContextEngineError: ``WRT-4002`` invalid options (live without url, unknown method, dense without corpus).
    """
    ev, kw = settings.eval, settings.keyword
    p = _Params(
        top_k=options.top_k or ev.top_k,
        context_k=options.context_k or ev.context_k,
        rrf_k=options.rrf_k or kw.rrf_k,
        configured_weight=options.dense_weight if options.dense_weight is not None else kw.dense_weight,
        depth=options.depth or kw.fusion_depth,
        tick=progress_ticker(progress),
    )
    results: list[MethodResult]
    if options.mode == "live":
        if not options.url:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "live mode needs --url")
        live = LiveRetriever(
            options.url, api_key=options.api_key, timeout_s=ev.live_timeout_s, strip_prefix=options.strip_prefix
        )
        progress_live = p.tick("live", len(dataset.queries))
        results = [run_retriever(dataset, live, top_k=p.top_k, context_k=p.context_k, progress=progress_live)]
    elif options.candidates is not None:
        fixture = FixtureRetriever(options.candidates)
        results = [run_retriever(dataset, fixture, top_k=p.top_k, context_k=p.context_k)]
    else:
        results = _offline_results(dataset, settings, options, p, embedder_factory)
    for r in results:
        r.variant = options.variant
    order = {m: i for i, m in enumerate((*METHODS, "live", "fixture"))}
    results.sort(key=lambda r: (r.model or "", order.get(r.method, 99)))
    report = EvalReport(
        dataset, results, options.mode if options.candidates is None else "offline-fixture", command=command
    )
    if baselines_dir is not None:
        _check_baselines(report, dataset, settings, baselines_dir, update_baselines=update_baselines)
    return report


@dataclass
class _Params:
    """The resolved run parameters of :func:`run_eval` (options over settings) and its progress ticker."""

    top_k: int
    context_k: int
    rrf_k: int
    configured_weight: float | None
    depth: int
    tick: Callable[[str, int], Callable[[int], None]]


def _offline_results(
    dataset: EvalDataset,
    settings: Settings,
    options: EvalOptions,
    p: _Params,
    embedder_factory: Callable[[str], Embedder] | None,
) -> list[MethodResult]:
    """The offline methods of ``options`` on ``dataset``: BM25 once, then the dense side per embedding backend."""
    ev, kw = settings.eval, settings.keyword
    unknown = [m for m in options.methods if m not in METHODS]
    if unknown:
        raise ContextEngineError(
            ErrorCode.REQUEST_INVALID, f"unknown method(s) {unknown}; use all or any of {', '.join(METHODS)}"
        )
    if not dataset.corpus:
        raise ContextEngineError(ErrorCode.REQUEST_INVALID, f"{dataset.key} has no corpus: run it live")
    wanted = set(options.methods)
    need_dense = bool(wanted & {"dense", "rrf", "weighted", "convex", *PIPELINE_METHODS})
    need_bm25 = bool(wanted & {"bm25", "rrf", "weighted", "convex"})
    results: list[MethodResult] = []
    bm25_res = None
    if need_bm25:
        bm25 = BM25Retriever(kw)
        bm25_res = run_retriever(
            dataset,
            bm25,
            top_k=max(p.top_k, p.depth),
            context_k=p.context_k,
            progress=p.tick("bm25", len(dataset.queries)),
        )
        bm25.close()
        if "bm25" in wanted:
            results.append(_cut(bm25_res, p.top_k, dataset, p.context_k))
    if need_dense:
        factory = embedder_factory or _default_factory(settings)
        default = [settings.embedding.backend, *ev.reference_embedders]
        for backend in options.embedders or list(dict.fromkeys(default)):
            embedder = factory(backend)
            results += _backend_results(dataset, settings, options, p, embedder, backend, wanted, bm25_res)
    return results


def _backend_results(
    dataset: EvalDataset,
    settings: Settings,
    options: EvalOptions,
    p: _Params,
    embedder: Embedder,
    backend: str,
    wanted: set[str],
    bm25_res: MethodResult | None,
) -> list[MethodResult]:
    """One embedding backend's results: the pipelines, dense, and dense fused with ``bm25_res``."""
    ev = settings.eval
    results: list[MethodResult] = []
    # the model's tuned weights unless given
    dense_weight = dense_weight_of(embedder, p.configured_weight, "weighted")
    convex_weight = dense_weight_of(embedder, p.configured_weight, "convex")
    cache = options.cache_dir or ev.cache_dir or settings.home_path / "eval-cache"
    dense_res = None
    if wanted & {"dense", "rrf", "weighted", "convex"}:
        dense = DenseRetriever(embedder, cache_dir=cache, progress=p.tick(f"embed {backend}", len(dataset.corpus)))
        try:
            dense_res = run_retriever(
                dataset,
                dense,
                top_k=max(p.top_k, p.depth),
                context_k=p.context_k,
                progress=p.tick(f"dense {backend}", len(dataset.queries)),
            )
        finally:
            dense.close()
    for method in PIPELINE_METHODS:
        if method in wanted:
            pipe = PipelineRetriever(method, embedder, settings, cache_dir=cache)
            try:
                results.append(
                    run_retriever(
                        dataset,
                        pipe,
                        top_k=p.top_k,
                        context_k=p.context_k,
                        progress=p.tick(f"{method} {backend}", len(dataset.queries)),
                    )
                )
            finally:
                pipe.close()
    if dense_res is None:
        return results
    if "dense" in wanted:
        results.append(_cut(dense_res, p.top_k, dataset, p.context_k))
    for fusion in _FUSIONS:
        if fusion in wanted and bm25_res is not None:
            results.append(
                fuse_runs(
                    dataset,
                    dense_res,
                    bm25_res,
                    method=fusion,
                    rrf_k=p.rrf_k,
                    dense_weight=convex_weight if fusion == "convex" else dense_weight,
                    scale=scale_of(embedder),
                    depth=p.depth,
                    top_k=p.top_k,
                    context_k=p.context_k,
                )
            )
    return results


def _check_baselines(
    report: EvalReport, dataset: EvalDataset, settings: Settings, baselines_dir: Path, *, update_baselines: bool
) -> None:
    """Compare ``report``'s results with the dataset's baseline file (written first with ``update_baselines``)."""
    results, command = report.results, report.command
    path = find_baseline(baselines_dir, dataset.slug)
    if update_baselines:
        base = BaselineFile.read(path) if path.is_file() else BaselineFile(dataset=dataset.key)
        base.update(results, dataset_hash=dataset.hash, command=command)
        base.write(path)
    if path.is_file():
        base = BaselineFile.read(path)
        report.checks = check_results(base, results, dataset_hash=dataset.hash, tolerance=settings.eval.tolerance)
        report.baseline_path = str(path)
    elif dataset.query_limit and (whole := find_baseline(baselines_dir, dataset.whole_slug)).is_file():
        # A --limit-queries slice without a baseline of its own: the whole set's baseline holds aggregates over
        # every query, not per-query values, so it cannot be restricted to the slice. Say so, compare nothing.
        reason = (
            f"--limit-queries {dataset.query_limit}: the baseline holds the whole query set's means, not "
            f"per-query values, so it cannot be restricted to these {len(dataset.queries)} queries (record a "
            "baseline of this slice with --update-baselines)"
        )
        report.checks = skipped_checks(BaselineFile.read(whole), results, reason)
        report.baseline_path = str(whole)


def _cut(res: MethodResult, top_k: int, dataset: EvalDataset, context_k: int) -> MethodResult:
    """The result with each query's list cut to ``top_k`` (the component runs are fetched deeper for fusion)."""
    if res.config.get("top_k") == top_k:
        return res
    from context_engine.eval.harness import score_run

    run = {q: r[:top_k] for q, r in res.run.items()}
    config = {**res.config, "top_k": top_k}
    return score_run(
        dataset,
        run,
        res.latencies,
        method=res.method,
        model=res.model,
        config=config,
        context_k=context_k,
        prepare_s=res.prepare_s,
    )


def _default_factory(settings: Settings) -> Callable[[str], Embedder]:
    from context_engine.providers.embedder import build_embedder

    def make(backend: str) -> Embedder:
        emb_settings = settings.embedding.model_copy(update={"backend": backend})
        return build_embedder(emb_settings, home=settings.home_path)

    return make
