"""Warm what the first requests of a serving process need, before it says ready (issue 26; docs/interfaces.md).

Opening an engine is cheap on purpose (issue 12: a one-shot CLI command pays only for what it uses), so the first
``lookup_knowledge`` and ``search_memory`` of a fresh server used to pay for the rest: the model's first inference,
jieba's dictionary (the hint layer's domain rules and Chinese queries), the secret scanner's plugins, opening the
vector index (``import lancedb`` alone is 2-4 s) and its first query, and each account's BM25 postings, level-0
matrix and hint index. :func:`warm_up` does that work once, in the HTTP app's lifespan, before ``/readyz`` answers.

In order:

1. the model (:meth:`~context_engine.storage.protocols.Embedder.warm_up`, else one query embedded); a failure here
   fails the start, as it always did;
2. the process-wide parts: jieba's dictionary and its proper nouns (the names of a Chinese question, for
   ``match_quality``), the hint layer's compiled domain rules, the redactors (the detect-secrets plugins and the
   pattern pass);
3. the vector index: opened and checked (what ``/readyz`` asks), then one query of the first account, which opens the
   table's files and indexes (LanceDB) or loads the collection (Milvus);
4. per account (:meth:`~context_engine.storage.protocols.MetadataStore.accounts`, at most ``max_accounts``, while
   ``budget_s`` of loading lasts: the waits of step 5 count in its own budget): the hint index snapshot, the BM25
   postings and the level-0 matrix, each exactly as the account's first request would load it (from its derived
   file and caught up, or wholesale), so a request finds them held;
5. the derived files of the accounts loaded wholesale (a fresh home's first start), written and read back in their
   place, so that the first requests neither share the machine with the saves nor hold the arrays built in memory
   (at 1M nodes: 3.1 GB resident instead of 4.8 GB): each load's before the next load starts (:func:`_settle`), the
   rest at the end (:func:`_saves`), all of them within ``budget_s`` again (a large account's load runs in a
   child process that writes its file, which is then opened: nothing to wait for; docs/derived_indexes.md);
6. a full garbage collection, then :func:`gc.freeze` of what is alive (the structures just loaded), so that later
   full collections do not walk them during requests (:func:`_freeze`).

Not warmed (said in the report and the ``warm_up`` log line): accounts past ``max_accounts`` (the level-0 matrix holds
at most that many) or reached after ``budget_s`` (an account load that has started runs to its end, so the warm-up
may pass the budget by one account's load); the level-0 matrix of an account that ``retrieval.l0_source = "auto"``
leaves to the vector index (over ``memory_load_now_rows`` vector rows with no derived file: it loads in the background
after ``memory_warm_after_searches`` searches, as without a warm-up); vector index queries of the other accounts;
the exact fallback of lookup_knowledge (used when the vector index fails). Every step but the model's is guarded: a
failure is logged and reported, the step is skipped and the server starts (a damaged vector index is reported by
``/readyz`` as ``degraded``, and the request that needs the part meets the error as it would have).
"""

from __future__ import annotations

import functools
import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from context_engine.schema.nodes import VectorFilter

if TYPE_CHECKING:
    from context_engine.service import ContextEngineService

__all__ = ["MAX_ACCOUNTS", "WarmUpReport", "warm_up"]

_LOG = logging.getLogger("context_engine.warm_up")

MAX_ACCOUNTS = 64
"""Accounts warmed at most: the level-0 matrix holds 64 accounts at once (more would drop the first ones again)."""


@dataclass
class WarmUpReport:
    """What :func:`warm_up` did.

    Attributes:
        steps: seconds per step, in order (``model``, ``tokenizer``, ``hint rules``, ``redaction``, ``accounts
            list``, ``vector index``, ``accounts``, ``derived files``, ``gc freeze``).
        accounts: the accounts whose hint index, BM25 postings and level-0 matrix were warmed (each as far as it
            goes: see the module docstring).
        not_warmed: what was left for the first request, one line each (an account past the limit or the budget,
            a step that failed and why).
    """

    steps: dict[str, float] = field(default_factory=dict)
    accounts: list[str] = field(default_factory=list)
    not_warmed: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """The whole warm-up."""
        return sum(self.steps.values())


def warm_up(engine: ContextEngineService, *, budget_s: float = 30.0, max_accounts: int = MAX_ACCOUNTS) -> WarmUpReport:
    """Warm what the first requests need (module docstring); returns the report and logs one ``warm_up`` line.

    Args:
        engine: the open service.
        budget_s: seconds the per-account loads may start within (``http.warm_up_s``); ``0``: no account is warmed.
        max_accounts: accounts warmed at most.

    Raises:
        ContextEngineError: when the model cannot be loaded (``CFG-4001``, ``EMB-5001``); nothing else raises.
    """
    report = WarmUpReport()
    started = time.perf_counter()
    _timed(report, "model", lambda: _model(engine))
    _guarded(report, "tokenizer", _tokenizer)
    _guarded(report, "hint rules", lambda: engine.hint_index.resolver)
    _guarded(report, "redaction", lambda: _redactor(engine))
    accounts = _guarded(report, "accounts list", engine.metadata.accounts) or []
    _guarded(report, "vector index", lambda: _vector_index(engine, accounts[0] if accounts else None))
    t = time.perf_counter()
    report.steps["accounts"] = 0.0  # its place in the step order: the waits between loads add "derived files"
    for n, account in enumerate(accounts):
        if n >= max_accounts:
            report.not_warmed.append(f"{len(accounts) - n} accounts past the first {max_accounts}")
            break
        if time.perf_counter() - t - report.steps.get("derived files", 0.0) >= budget_s:
            report.not_warmed.append(f"{len(accounts) - n} accounts after the {budget_s:g} s budget")
            break
        if _account(engine, account, report, budget_s):
            report.accounts.append(account)
    report.steps["accounts"] = time.perf_counter() - t - report.steps.get("derived files", 0.0)
    if report.accounts:
        _guarded(report, "derived files", lambda: _saves(engine, budget_s, report))
    _timed(report, "gc freeze", _freeze)
    engine.gc_frozen = True
    _LOG.info(
        "warm_up %.2f s (%s); %d of %d accounts%s",
        time.perf_counter() - started,
        ", ".join(f"{k} {v:.2f} s" for k, v in report.steps.items()),
        len(report.accounts),
        len(accounts),
        "; not warmed: " + "; ".join(report.not_warmed) if report.not_warmed else "",
    )
    return report


def _saves(engine: ContextEngineService, budget_s: float, report: WarmUpReport) -> None:
    """Wait, at most ``budget_s`` seconds, for the derived files that wholesale loads are writing (an account with
    no file yet: a fresh home's first start) and for those accounts to be read back from them
    (:meth:`~context_engine.storage.derived.base.DerivedIndex.wait_for_saves`); past that they go on in the
    background, as they did before."""
    t = time.perf_counter() - report.steps.get("derived files", 0.0)  # the waits between accounts' loads count
    for part, index in (("BM25", engine.keyword_index), ("level-0 matrix", engine.l0_source)):
        if not index.wait_for_saves(max(0.0, budget_s - (time.perf_counter() - t))):
            report.not_warmed.append(f"{part} files still being written after the {budget_s:g} s budget")


def _settle(index: Any, budget_s: float, report: WarmUpReport) -> None:
    """Wait for the derived files ``index`` is writing (a wholesale load's, then its read-back: a fresh home's first
    start; or an account caught up far past its file) before the next load starts, out of the derived files'
    ``budget_s`` (the time waited is the ``derived files`` step's).

    Why: a load that runs while another's file is written and read back interleaves its objects with the other's,
    and Python's heap stays fragmented once the built ones are freed. At 1M nodes, a fresh home warmed with a budget
    that reaches its three accounts, one start each way (docs/derived_indexes.md): anonymous memory after the
    warm-up and 300 searches 1,349 -> 1,274 MB, the RSS during the warm-up 2.5 -> 1.7 GB at most; the warm-up takes
    longer (203 -> 253 and 283 s), as the saves no longer overlap the loads."""
    index.wait_for_saves(max(0.0, budget_s - report.steps.get("derived files", 0.0)))


def _freeze() -> None:
    """Collect, then move every object alive now (the model, the modules, the warmed indexes: about 230k objects
    at 100k nodes) out of the cyclic collector's generations (:func:`gc.freeze`), so that a full collection during
    a request no longer walks them: those collections were the 150 ms outliers of lookup_knowledge at 100k nodes
    (p95 80 -> 63 ms, docs/lookup_knowledge.md). Frozen objects are still freed when nothing refers to them; only a
    reference cycle among them outlives its last use, until the engine's ``close`` thaws them (:func:`gc.unfreeze`)."""
    gc.collect()
    gc.freeze()


def _timed(report: WarmUpReport, step: str, run: Callable[[], Any]) -> Any:
    t = time.perf_counter()
    try:
        return run()
    finally:
        report.steps[step] = report.steps.get(step, 0.0) + time.perf_counter() - t


def _guarded(report: WarmUpReport, step: str, run: Callable[[], Any]) -> Any:
    """``run()`` timed; a failure is logged and reported, never raised (the request meets it as it would have)."""
    try:
        return _timed(report, step, run)
    except Exception as err:  # broad on purpose: a warm-up must not stop a server that can serve
        report.not_warmed.append(f"{step}: {_describe(err)}")
        _LOG.warning("warm_up: %s not warmed: %s", step, _describe(err))
        return None


def _describe(err: Exception) -> str:
    message = getattr(err, "message", None) or str(err)
    code = getattr(getattr(err, "code", None), "value", None)
    return f"{code}: {message}" if code else f"{type(err).__name__}: {message}"


def _model(engine: ContextEngineService) -> None:
    warm = getattr(engine.embedder, "warm_up", None)
    if callable(warm):
        warm()
    else:
        engine.embedder.embed_query("warm up")


def _tokenizer() -> None:
    from context_engine.storage.keyword.tokenize import jieba_proper_nouns, jieba_tokenizer

    jieba_tokenizer()
    jieba_proper_nouns()  # match_quality's names of a Chinese question: 0.2 s and 15 MB, read once


def _redactor(engine: ContextEngineService) -> None:
    # imports detect-secrets and compiles the patterns (process-wide: lookup_knowledge's redactor then only builds
    # its plugin objects, in microseconds)
    engine.redactor.redact("warm up")


def _vector_index(engine: ContextEngineService, account: str | None) -> None:
    engine.index.check()  # opens a lazily opened index (LanceDB) and checks its files, as /readyz does
    if account is not None:
        vector = engine.embedder.embed_query("warm up")
        engine.index.search(vector, 1, VectorFilter(account_id=account, levels=[2]))


def _account(engine: ContextEngineService, account: str, report: WarmUpReport, budget_s: float) -> bool:
    ok = True
    steps: tuple[tuple[str, Callable[[], Any], Any], ...] = (
        ("hint index", lambda: engine.hint_index.snapshot(account), None),
        ("BM25", lambda: engine.keyword_index.warm(account), engine.keyword_index),
        ("level-0 matrix", lambda: engine.l0_source.warm(account), engine.l0_source),
    )
    for part, run, index in steps:
        try:
            run()
        except Exception as err:  # broad on purpose, as in _guarded
            ok = False
            report.not_warmed.append(f"{part} of one account: {_describe(err)}")
            _LOG.warning("warm_up: %s of one account not warmed: %s", part, _describe(err))
        if index is not None:
            _guarded(report, "derived files", functools.partial(_settle, index, budget_s, report))
    return ok
