"""The conversational evaluation (DESIGN §11; issue 11 item 5): memories written by ``add_messages``, asked through
``search_memory``, scored at turn level beside BM25 and dense-only baselines over the same turns.

Methods (one ranked list of turn ids per question, each question searching only its own conversation):

* ``search_memory``: the engine. Each conversation is written into its own user space
  (``RequestContext(account_id="eval", role="user", user_space=<conversation>)``, :func:`user_space_of`) with
  ``add_messages``, one call per session (split at :data:`MAX_BATCH` messages, or ``memory.max_batch_items`` when
  smaller): the turn's ``role`` (``user`` unless the file says otherwise), its ``speaker`` when it has one (an
  empty speaker is not sent: the engine then shows the role), the
  session time as ``timestamp`` and ``metadata={"turn_id": dia_id}``. ``report.uris`` (in the order given) map each
  message URI back to its turn. Each question goes through ``search_memory`` at the request defaults (``top_k`` 10,
  the configured score threshold) under its conversation's context, so tenancy does the scoping. Hits that are not
  message nodes (a session directory) are skipped; a query with nothing returned scores 0.
* ``bm25``: :class:`~context_engine.eval.retrievers.BM25Retriever` (the engine's BM25 index, keyword settings as
  configured) over ``speaker: text`` of each turn, one index per conversation.
* ``dense``: :class:`~context_engine.eval.retrievers.DenseRetriever` (the engine's embedder and LanceDB) over the same
  ``speaker: text``, one index per conversation.

Measures (ir-measures, :func:`~context_engine.eval.metrics.evaluate`): ``P@1`` (the first returned turn is an
evidence turn), ``R@3``, ``R@5``, ``R@10``, ``RR@10`` (MRR@10), ``nDCG@10`` over the evidence turns (grade 1), the
mean over every judged question, overall and per question category (``<measure>[<category>]`` in
:attr:`MethodResult.metrics`, so the baseline file checks categories too).

No-answer questions (:attr:`~context_engine.eval.conversations.ConversationDataset.no_answer`: category
``unanswerable`` or no evidence) are not judged; they go through ``search_memory`` only, and the report gives the
share of them whose response says ``match_quality == "none"`` beside the same share over the answerable questions
(``"n/a"`` when the response has no ``match_quality``). Where the dataset holds assistant turns (its own, or the
``acks`` perturbation's), each method's notes give the share of questions whose first turn is an assistant turn and
the share of assistant turns among all turns returned.

The engine's ingest is cached: ``<cache>/conversations/<dataset>-<turns sha256[:12]>-<key>/`` where ``key`` hashes the
model, every settings section that shapes what is written (all but ``retrieval``, ``keyword``, ``eval``, ``http``,
``logging`` and ``home``) and the source of the write path (``ingest/``, ``schema/{nodes,memory,conversation}.py``
and the keyword rules ``storage/keyword/{content_words,tokenize}.py``), so a changed write path is not measured on a
stale home (a change elsewhere that alters what is written, in ``service.py`` say, needs another ``--cache-dir`` or
the home deleted). ``ingested.json`` (turn id -> URI) is written
last; a home without it is rebuilt from scratch.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.eval.baselines import BaselineFile, check_results, find_baseline
from context_engine.eval.conversation_report import (
    CONVERSATION_MEASURES,
    NA,
    ConversationReport,
    assistant_turn_share,
    no_answer_summary,
    none_share,
    score_conversation_run,
)
from context_engine.eval.conversations import ConversationDataset, Turn
from context_engine.eval.datasets import EvalDataset
from context_engine.eval.harness import WRITE_LIMITS, MethodResult, config_hash, progress_ticker
from context_engine.eval.retrievers import BM25Retriever, DenseRetriever, Retriever, embedder_label
from context_engine.eval.trec import Run, rank_order
from context_engine.schema.context import RequestContext
from context_engine.schema.query import TOP_K_DEFAULT, TOP_K_MAX
from context_engine.settings import Settings
from context_engine.storage.protocols import Embedder

__all__ = [
    "ACCOUNT_ID",
    "CONVERSATION_MEASURES",
    "CONVERSATION_METHODS",
    "MAX_BATCH",
    "NA",
    "ConversationEvalOptions",
    "ConversationReport",
    "EngineConversationRetriever",
    "ScopedRetriever",
    "ask_no_answer",
    "assistant_turn_share",
    "no_answer_summary",
    "none_share",
    "run_conversation_eval",
    "score_conversation_run",
    "user_space_of",
]

CONVERSATION_METHODS = ("search_memory", "bm25", "dense")
"""The methods of the conversational evaluation (``--method all``)."""
ACCOUNT_ID = "eval"
MAX_BATCH = 500
"""The most messages one ``add_messages`` call takes; longer sessions are split."""

TURN_INPUT = "speaker + ': ' + text (the turn alone)"
TURN_INPUT_ROLES = "(speaker or role) + ': ' + text (the turn alone)"
ENGINE_INPUT = "add_messages per session (role user, speaker, session time, metadata.turn_id); search_memory defaults"
ENGINE_INPUT_ROLES = (
    "add_messages per session (role from the file, speaker when given, session time, metadata.turn_id); "
    "search_memory defaults"
)
_NOT_INGEST = ("home", "retrieval", "keyword", "eval", "http", "logging")
_SRC = Path(__file__).resolve().parents[1]


def user_space_of(conv_id: str) -> str:
    """The user space of a conversation: ``conv_id`` when it is a safe path segment of letters, digits, ``_.-``,
    else its safe characters plus ``-`` and 8 hex digits of its SHA-1 (distinct conversations never share a space)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", conv_id).strip("-.")[:48]
    if safe == conv_id and safe not in ("", ".", ".."):
        return safe
    return f"{safe or 'conv'}-{hashlib.sha1(conv_id.encode('utf-8')).hexdigest()[:8]}"


def context_of(conv_id: str, account_id: str = ACCOUNT_ID) -> RequestContext:
    """The request context a conversation is written and asked under (role ``user``, its own user space)."""
    return RequestContext(account_id=account_id, role="user", user_space=user_space_of(conv_id))


class ScopedRetriever:
    """A document-level retriever built once per conversation: each question searches its conversation's index only.

    Args:
        conversations: the dataset.
        factory: builds one fresh retriever (``BM25Retriever``, ``DenseRetriever``); one is built per conversation.
        doc_input: what each turn's document holds (recorded in the config).
    """

    def __init__(
        self, conversations: ConversationDataset, factory: Callable[[], Retriever], *, doc_input: str = TURN_INPUT
    ) -> None:
        self._conv = conversations
        self._factory = factory
        self._probe: Retriever | None = factory()
        self.method = self._probe.method
        if doc_input == TURN_INPUT and conversations.has_anonymous_turns():
            doc_input = TURN_INPUT_ROLES
        self._config = {**self._probe.config, "doc_input": doc_input, "scope": "one index per conversation"}
        self._by_conv: dict[str, Retriever] = {}

    @property
    def config(self) -> dict[str, Any]:
        return self._config

    def prepare(self, dataset: EvalDataset | None = None) -> None:
        """Index each conversation's turns (``dataset`` is ignored: the conversations given at construction count)."""
        self.close()
        for conv_id in self._conv.conversations:
            retriever = self._probe if self._probe is not None else self._factory()
            self._probe = None
            retriever.prepare(self._conv.scoped(conv_id))
            self._by_conv[conv_id] = retriever

    def search(self, query_id: str, query: str, top_k: int) -> list[tuple[str, float]]:
        """The question's conversation's results, ``(turn doc id, score)`` best first. Raises ``KeyError`` for an
        unknown question."""
        return self._by_conv[self._conv.conversation_of(query_id)].search(query_id, query, top_k)

    def close(self) -> None:
        for r in self._by_conv.values():
            r.close()
        self._by_conv = {}


def _source_hash() -> str:
    """SHA-256 (16 hex) of the write path's source: ``ingest/``, the node, memory and conversation schemas, and the
    keyword rules that decide what a message is indexed with (``storage/keyword/content_words.py``, ``tokenize.py``)."""
    h = hashlib.sha256()
    keyword = _SRC / "storage" / "keyword"
    files = sorted(
        [
            *(_SRC / "ingest").rglob("*.py"),
            *(_SRC / "schema" / f for f in ("nodes.py", "memory.py", "conversation.py")),
            keyword / "content_words.py",
            keyword / "tokenize.py",
        ]
    )
    for p in files:
        if p.is_file():
            h.update(p.relative_to(_SRC).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


class EngineConversationRetriever:
    """The engine: conversations written with ``add_messages``, questions asked with ``search_memory``.

    Args:
        conversations: the dataset.
        embedder: the embedding model (shared; not closed here).
        settings: engine settings; ``home`` is replaced by the cached home (see the module docstring).
        cache_dir: root of the cached homes.
        engine_factory: ``settings -> service`` (default :func:`~context_engine.engine_factory.build_engine` with
            ``embedder``); the service needs ``add_messages(messages, conversation_id, ctx)`` returning a report with
            ``uris`` (one per message, in order), ``search_memory(query, ctx, top_k=...)`` and ``close()``.
        account_id: the account every conversation is written under.
        progress: called with the number of turns written after each ``add_messages`` call.

    Attributes (after :meth:`prepare`):
        home: the engine home used; ``cached``: whether its ingest was reused; ``ingest_s``: seconds spent writing
        (0 when cached); ``collapsed``: turns that share a URI with an earlier turn (a hit on it counts for all);
        ``warnings``: ``search_memory`` trace warnings by code, over every query; ``match_quality``: per question
        asked, the response's ``match_quality`` (``None`` when the response has none).
    """

    method = "search_memory"

    def __init__(
        self,
        conversations: ConversationDataset,
        embedder: Embedder,
        settings: Settings,
        *,
        cache_dir: Path,
        engine_factory: Callable[[Settings], Any] | None = None,
        account_id: str = ACCOUNT_ID,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self._conv = conversations
        self.embedder = embedder
        self._settings = settings
        self._cache_dir = Path(cache_dir)
        self._factory = engine_factory
        self.account_id = account_id
        self._progress = progress
        self._engine: Any = None
        self._uri_to_docs: dict[str, list[str]] = {}
        self.home: Path | None = None
        self.cached = False
        self.ingest_s = 0.0
        self.collapsed = 0
        self.warnings: dict[str, int] = {}
        self.match_quality: dict[str, str | None] = {}

    @property
    def config(self) -> dict[str, Any]:
        s = self._settings
        return {
            "method": self.method,
            "model": embedder_label(self.embedder),
            "dim": self.embedder.dim,
            # match_quality labels an answer and never ranks: tuning it keeps the baselines' ranking checks in force
            "retrieval": s.retrieval.model_dump(mode="json", exclude={"match_quality"}),
            "keyword": s.keyword.model_dump(mode="json"),
            # write limits bound a request's work and never change what is stored or ranked
            "ingest": s.ingest.model_dump(mode="json", exclude=set(WRITE_LIMITS)),
            "doc_input": ENGINE_INPUT_ROLES if self._plain_roles_differ() else ENGINE_INPUT,
            "scope": "one user space per conversation",
        }

    def _plain_roles_differ(self) -> bool:
        """Whether some turn is not a plain named user turn (another role, or no speaker)."""
        return self._conv.has_assistant_turns() or self._conv.has_anonymous_turns()

    def ingest_key(self) -> str:
        """10 hex digits keying the cached home: model, the ingest-shaping settings and the write path's source."""
        s = self._settings.model_dump(mode="json", exclude=set(_NOT_INGEST))
        label = f"{embedder_label(self.embedder)}|{self.embedder.dim}|{config_hash(s)}|{_source_hash()}"
        return hashlib.sha1(label.encode("utf-8")).hexdigest()[:10]

    def _open(self, home: Path) -> Any:
        settings = self._settings.model_copy(update={"home": home})
        if self._factory is not None:
            return self._factory(settings)
        from context_engine.engine_factory import build_engine

        return build_engine(settings, embedder=self.embedder)

    def prepare(self, dataset: EvalDataset | None = None) -> None:
        """Open the cached home, or write every conversation into a fresh one (see the module docstring).

        Raises:
            ContextEngineError: ``WRT-4002`` when the engine has no ``add_messages``, or a report's ``uris`` do not
                match the messages sent; whatever ``add_messages`` raises.
        """
        self.close()
        ds = self._conv.dataset
        home = self._cache_dir / "conversations" / f"{ds.name}-{ds.corpus_hash[:12]}-{self.ingest_key()}"
        marker = home / "ingested.json"
        self.home = home
        if marker.is_file():
            saved = json.loads(marker.read_text(encoding="utf-8"))
            uris: dict[str, str] = saved.get("uris", {})
            if all(t.doc_id in uris for ts in self._conv.turns.values() for t in ts):
                self._engine = self._open(home)
                self.cached, self.ingest_s = True, 0.0
                self._index_uris(uris)
                return
        shutil.rmtree(home, ignore_errors=True)  # a partial or foreign ingest is rebuilt from scratch
        home.mkdir(parents=True, exist_ok=True)
        self._engine = self._open(home)
        if not hasattr(self._engine, "add_messages"):
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "this engine has no add_messages (conversation ingest)")
        t0 = time.perf_counter()
        uris = {}
        memory = getattr(self._settings, "memory", None)
        batch_max = min(MAX_BATCH, int(getattr(memory, "max_batch_items", MAX_BATCH)))
        for conv_id in self._conv.conversations:
            ctx = context_of(conv_id, self.account_id)
            for session_id, turns in self._conv.sessions(conv_id):
                for start in range(0, len(turns), batch_max):
                    batch = turns[start : start + batch_max]
                    report = self._engine.add_messages([_message(t) for t in batch], session_id, ctx)
                    got = list(getattr(report, "uris", None) or [])
                    if len(got) != len(batch):
                        raise ContextEngineError(
                            ErrorCode.REQUEST_INVALID,
                            f"add_messages returned {len(got)} URIs for {len(batch)} messages ({conv_id}/{session_id})",
                        )
                    uris.update({t.doc_id: str(u) for t, u in zip(batch, got, strict=True)})
                    if self._progress:
                        self._progress(len(batch))
        self.ingest_s = time.perf_counter() - t0
        self.cached = False
        self._index_uris(uris)
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"uris": uris, "turns": len(uris), "ingest_s": round(self.ingest_s, 3)}, indent=0) + "\n",
            encoding="utf-8",
        )
        tmp.replace(marker)

    def _index_uris(self, uris: dict[str, str]) -> None:
        self._uri_to_docs = {}
        for doc_id, uri in uris.items():
            self._uri_to_docs.setdefault(uri, []).append(doc_id)
        self.collapsed = len(uris) - len(self._uri_to_docs)

    def search(self, query_id: str, query: str, top_k: int) -> list[tuple[str, float]]:
        """``search_memory`` under the question's conversation context at the request defaults but ``top_k``;
        returns ``(turn doc id, rank-derived score)`` in the engine's order (message hits only)."""
        if self._engine is None:
            raise RuntimeError("prepare() first")
        ctx = context_of(self._conv.conversation_of(query_id), self.account_id)
        response = self._engine.search_memory(query, ctx, top_k=max(1, min(top_k, TOP_K_MAX)))
        quality = getattr(response, "match_quality", None)
        self.match_quality[query_id] = None if quality is None else str(getattr(quality, "value", quality))
        for w in getattr(getattr(response, "trace", None), "warnings", None) or []:
            code = str(w).split(":", 1)[0]
            self.warnings[code] = self.warnings.get(code, 0) + 1
        docs: list[str] = []
        for hit in response.hits:
            for doc in self._uri_to_docs.get(hit.uri, ()):
                if doc not in docs:
                    docs.append(doc)
        return [(d, float(len(docs) - i)) for i, d in enumerate(docs)]

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None


def _message(turn: Turn) -> dict[str, Any]:
    """A turn as an ``add_messages`` message (``schema.memory.Message`` fields): ``{role, content, [speaker],
    timestamp, metadata: {turn_id}}``; an empty speaker is left out (the engine then uses the role)."""
    message: dict[str, Any] = {"role": turn.role, "content": turn.text}
    if turn.speaker:
        message["speaker"] = turn.speaker
    message["timestamp"] = turn.timestamp.isoformat() if turn.timestamp else None
    message["metadata"] = {"turn_id": turn.dia_id}
    return message


def ask_no_answer(
    conversations: ConversationDataset, engine: EngineConversationRetriever, *, top_k: int
) -> dict[str, dict[str, Any]]:
    """Each no-answer question through the (prepared) engine: ``{qa_id: {"match_quality": str | None, "turns": number
    of turns returned, "top": the first turn's doc id or None}}``, in file order."""
    out: dict[str, dict[str, Any]] = {}
    for q in conversations.no_answer:
        hits = engine.search(q.qa_id, q.question, top_k)
        out[q.qa_id] = {
            "match_quality": engine.match_quality.get(q.qa_id),
            "turns": len(hits),
            "top": hits[0][0] if hits else None,
        }
    return out


def _run(
    conversations: ConversationDataset,
    retriever: Retriever,
    *,
    top_k: int,
    context_k: int,
    progress: Callable[[int], None] | None = None,
) -> MethodResult:
    ds = conversations.dataset
    t0 = time.perf_counter()
    retriever.prepare(ds)
    prepare_s = time.perf_counter() - t0
    run: Run = {}
    latencies: dict[str, float] = {}
    for qid, query in ds.queries.items():
        t1 = time.perf_counter()
        results = retriever.search(qid, query, top_k)
        latencies[qid] = (time.perf_counter() - t1) * 1000.0
        run[qid] = rank_order(results)[:top_k]
        if progress:
            progress(1)
    config = {**retriever.config, "top_k": top_k}
    model = config.get("model") if isinstance(config.get("model"), str) else None
    return score_conversation_run(
        conversations,
        run,
        latencies,
        method=retriever.method,
        model=model,
        config=config,
        context_k=context_k,
        prepare_s=prepare_s,
    )


@dataclass
class ConversationEvalOptions:
    """What to run.

    Attributes:
        methods: any of :data:`CONVERSATION_METHODS`.
        embedders: backends for ``dense`` and ``search_memory`` (default: the configured one only; the engine's
            ingest costs minutes per model).
        top_k: results per question for every method (default 10, ``search_memory``'s default; at most 50).
        context_k: results counted as a question's context.
        cache_dir: vector cache and engine homes (default ``eval.cache_dir`` or ``<home>/eval-cache``).
        variant: a label for this configuration (keys the baseline entries with method and model).
    """

    methods: Sequence[str] = CONVERSATION_METHODS
    embedders: Sequence[str] | None = None
    top_k: int | None = None
    context_k: int | None = None
    cache_dir: Path | None = None
    variant: str = ""


def run_conversation_eval(
    conversations: ConversationDataset,
    settings: Settings,
    options: ConversationEvalOptions | None = None,
    *,
    embedder_factory: Callable[[str], Embedder] | None = None,
    engine_factory: Callable[[Settings], Any] | None = None,
    baselines_dir: Path | None = None,
    update_baselines: bool = False,
    command: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> ConversationReport:
    """Run the conversational evaluation and return its report (baseline checks included).

    Args:
        conversations: the dataset (:func:`~context_engine.eval.conversations.load_conversations`).
        settings: engine settings (embedding, keyword, retrieval, eval sections).
        options: see :class:`ConversationEvalOptions`.
        embedder_factory: backend name -> embedder (default: ``build_embedder`` on ``settings``).
        engine_factory: settings -> engine service (default: the real one; tests pass a fake).
        baselines_dir: where ``<dataset slug>.json`` lives (``None``: no checks).
        update_baselines: record these results as the expected values (references kept).
        command: the command line, recorded in the report and the baseline file.
        progress: ``(stage, done, total)`` callback.

    Raises:
        ContextEngineError: ``WRT-4002`` an unknown method or a ``top_k`` outside 1..50.
    """
    options = options or ConversationEvalOptions()
    top_k = _checked_top_k(options)
    context_k = options.context_k or settings.eval.context_k
    cache = options.cache_dir or settings.eval.cache_dir or settings.home_path / "eval-cache"
    ds = conversations.dataset
    n_q, n_t = len(ds.queries), len(ds.corpus)
    wanted = set(options.methods)
    results: list[MethodResult] = []
    run_notes: dict[int, dict[str, Any]] = {}
    no_answer: dict[int, tuple[dict[str, Any], dict[str, dict[str, Any]]]] = {}
    tick = progress_ticker(progress)

    if "bm25" in wanted:
        kw = settings.keyword
        bm25 = ScopedRetriever(conversations, lambda: BM25Retriever(kw))
        try:
            results.append(_run(conversations, bm25, top_k=top_k, context_k=context_k, progress=tick("bm25", n_q)))
        finally:
            bm25.close()
    if wanted & {"dense", "search_memory"}:
        factory = embedder_factory or _default_factory(settings)
        for backend in options.embedders or [settings.embedding.backend]:
            embedder = factory(backend)
            if "dense" in wanted:
                embed_tick = tick(f"embed {backend}", n_t)
                dense = ScopedRetriever(
                    conversations, functools.partial(DenseRetriever, embedder, cache_dir=cache, progress=embed_tick)
                )
                try:
                    results.append(
                        _run(
                            conversations,
                            dense,
                            top_k=top_k,
                            context_k=context_k,
                            progress=tick(f"dense {backend}", n_q),
                        )
                    )
                finally:
                    dense.close()
            if "search_memory" in wanted:
                engine = EngineConversationRetriever(
                    conversations,
                    embedder,
                    settings,
                    cache_dir=cache,
                    engine_factory=engine_factory,
                    progress=tick(f"add_messages {backend}", n_t),
                )
                search_tick = tick(f"search_memory {backend}", n_q)
                res, engine_notes, summary = _engine_result(
                    conversations, engine, top_k=top_k, context_k=context_k, progress=search_tick
                )
                results.append(res)
                run_notes[id(res)] = engine_notes
                no_answer[id(res)] = summary
    for r in results:
        r.variant = options.variant
    order = {m: i for i, m in enumerate(CONVERSATION_METHODS)}
    results.sort(key=lambda r: (r.model or "", order.get(r.method, 99)))
    if conversations.has_assistant_turns():
        for r in results:
            run_notes.setdefault(id(r), {})["assistant_turns"] = assistant_turn_share(conversations, r.run)
    notes = {r.label: run_notes[id(r)] for r in results if id(r) in run_notes}
    report = ConversationReport(
        ds,
        results,
        "offline",
        command=command,
        conversations=conversations,
        notes=notes,
        no_answer={r.label: no_answer[id(r)][0] for r in results if id(r) in no_answer},
        no_answer_detail={r.label: no_answer[id(r)][1] for r in results if id(r) in no_answer},
    )
    if baselines_dir is not None:
        _check_baselines(report, baselines_dir, settings, update_baselines=update_baselines)
    return report


def _checked_top_k(options: ConversationEvalOptions) -> int:
    """The run's ``top_k``; ``WRT-4002`` for an unknown method or a ``top_k`` outside 1..50."""
    unknown = [m for m in options.methods if m not in CONVERSATION_METHODS]
    if unknown:
        raise ContextEngineError(
            ErrorCode.REQUEST_INVALID,
            f"unknown method(s) {unknown} for a conversation dataset; "
            f"use all or any of {', '.join(CONVERSATION_METHODS)}",
        )
    top_k = options.top_k or TOP_K_DEFAULT
    if not 1 <= top_k <= TOP_K_MAX:
        raise ContextEngineError(ErrorCode.REQUEST_INVALID, f"top_k is 1..{TOP_K_MAX}, got {top_k}")
    return top_k


def _engine_result(
    conversations: ConversationDataset,
    engine: EngineConversationRetriever,
    *,
    top_k: int,
    context_k: int,
    progress: Callable[[int], None],
) -> tuple[MethodResult, dict[str, Any], tuple[dict[str, Any], dict[str, dict[str, Any]]]]:
    """search_memory through the engine: its result, its run notes and its no-answer summary and detail (the engine
    is closed after)."""
    try:
        res = _run(conversations, engine, top_k=top_k, context_k=context_k, progress=progress)
        detail = ask_no_answer(conversations, engine, top_k=top_k)
    finally:
        engine.close()
    notes = {
        "home": str(engine.home),
        "ingest_cached": engine.cached,
        "ingest_s": round(engine.ingest_s, 1),
        "turns_sharing_a_uri": engine.collapsed,
        "trace_warnings": dict(sorted(engine.warnings.items())),
    }
    return res, notes, (no_answer_summary(conversations, engine, detail), detail)


def _check_baselines(
    report: ConversationReport, baselines_dir: Path, settings: Settings, *, update_baselines: bool
) -> None:
    """Compare ``report``'s results with the dataset's baseline file (written first with ``update_baselines``)."""
    ds, results, command = report.dataset, report.results, report.command
    path = find_baseline(baselines_dir, ds.slug)
    if update_baselines:
        base = BaselineFile.read(path) if path.is_file() else BaselineFile(dataset=ds.key)
        base.update(results, dataset_hash=ds.hash, command=command)
        base.write(path)
    if path.is_file():
        base = BaselineFile.read(path)
        report.checks = check_results(base, results, dataset_hash=ds.hash, tolerance=settings.eval.tolerance)
        report.baseline_path = str(path)


def _default_factory(settings: Settings) -> Callable[[str], Embedder]:
    from context_engine.providers.embedder import build_embedder

    def make(backend: str) -> Embedder:
        return build_embedder(settings.embedding.model_copy(update={"backend": backend}), home=settings.home_path)

    return make
