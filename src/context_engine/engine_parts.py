"""The parts an engine is wired from, built over its opened stores (issue 28: the composition root in one place).

:class:`~context_engine.service.ContextEngineService` opens the stores and the embedder, then asks this module for
the vector index (:func:`open_index`), the lookup_knowledge layer (:func:`build_knowledge`), the search_memory and
read_memory pipelines (:func:`build_retrieval`), the memory event history (:func:`build_memory_events`) and runs the
startup check of the write journal (:func:`recover_writes`). :func:`context_engine.engine_factory.build_engine` is the
entry point that opens an engine.

Heavy modules (the retrieval stages, the exact index) are imported when an engine is built, not with this module.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, Protocol

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.journal import WriteJournal
from context_engine.knowledge.hint_index import KnowledgeIndexService
from context_engine.knowledge.lookup import LookupKnowledgeService
from context_engine.knowledge.retrieved_doc_tracker import RetrievedDocTracker
from context_engine.knowledge.search_audit import SearchAudit
from context_engine.knowledge.semantic_search import VectorSearchService
from context_engine.knowledge.tool_invocation_recorder import ToolInvocationRecorder
from context_engine.schema.similarity import SimilarityScale, dense_weight_of, scale_of
from context_engine.settings import KeywordSettings, Settings
from context_engine.storage.factory import open_audit, open_vector_index
from context_engine.storage.protocols import Embedder, VectorIndex

if TYPE_CHECKING:
    from context_engine.ingest.memory_events import MemoryEventReader
    from context_engine.ingest.pipeline import WritePipeline
    from context_engine.observability.metrics import Metrics
    from context_engine.redaction import Redactor
    from context_engine.retrieval.memory_read_service import MemoryReadService
    from context_engine.retrieval.search_memory import ReadMemoryPipeline, SearchMemoryPipeline
    from context_engine.storage.derived.base import FileBuilder
    from context_engine.storage.derived_files import DerivedFiles
    from context_engine.storage.keyword.bm25_index import BM25Index
    from context_engine.storage.protocols import AuditStore, ContentStore, MetadataStore
    from context_engine.storage.vector.l0_source import L0Source
    from context_engine.storage.vector.matrix import MatrixVectorIndex

__all__ = [
    "EngineStores",
    "KnowledgeParts",
    "RetrievalParts",
    "build_knowledge",
    "build_memory_events",
    "build_retrieval",
    "calibrate",
    "open_index",
    "recover_writes",
]

_LOG = logging.getLogger("context_engine.service")  # the startup check logs as the service did


class EngineStores(Protocol):
    """What the builders read of the engine they wire: its settings and what it opened before asking for the parts
    (:class:`~context_engine.service.ContextEngineService` is one; a protocol, so that this module, which the service
    imports, does not import the service back, not even for its annotations)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def metadata(self) -> MetadataStore: ...
    @property
    def content(self) -> ContentStore: ...
    @property
    def index(self) -> VectorIndex: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def pipeline(self) -> WritePipeline: ...
    @property
    def derived_files(self) -> DerivedFiles | None: ...
    @property
    def derived_builder(self) -> FileBuilder | None: ...
    @property
    def keyword_index(self) -> BM25Index: ...
    @property
    def keyword_settings(self) -> KeywordSettings: ...
    @property
    def similarity_scale(self) -> SimilarityScale: ...
    @property
    def knowledge(self) -> LookupKnowledgeService: ...
    @property
    def redactor(self) -> Redactor: ...


class KnowledgeParts(NamedTuple):
    """lookup_knowledge's parts: the audit store, the hint index (a write listener) and the service; and
    search_memory's audit (its rows go through the same recorder)."""

    audit: AuditStore
    hint_index: KnowledgeIndexService
    knowledge: LookupKnowledgeService
    search_audit: SearchAudit


class RetrievalParts(NamedTuple):
    """search_memory's and read_memory's parts: the level-0 matrix and source, the redactor, the reader and the
    two pipelines."""

    l0_matrix: MatrixVectorIndex
    l0_source: L0Source
    redactor: Redactor
    reader: MemoryReadService
    search_pipeline: SearchMemoryPipeline
    read_pipeline: ReadMemoryPipeline


def calibrate(embedder: Embedder, settings: Settings) -> tuple[SimilarityScale, KeywordSettings]:
    """The model's cosine -> the engine's calibrated relevance scale, on which every threshold is set; and the
    keyword section with the fusion weight resolved for this model (``keyword.dense_weight`` or its tuned one).

    Raises:
        ContextEngineError: ``CFG-4001`` when ``embedding.similarity_low/high`` make no scale.
    """
    try:
        scale = scale_of(embedder, settings.embedding.similarity_low, settings.embedding.similarity_high)
    except ValueError as err:
        raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"embedding.similarity_low/high: {err}") from err
    keyword = settings.keyword.model_copy(
        update={"dense_weight": dense_weight_of(embedder, settings.keyword.dense_weight, settings.keyword.fusion)}
    )
    return scale, keyword


def open_index(engine: EngineStores) -> VectorIndex:
    """The vector index the settings name, its retries and failures counted in the engine's metrics."""
    metrics = engine.metrics
    return open_vector_index(
        engine.settings,
        engine.metadata,
        engine.embedder.dim,
        on_retry=metrics.count_vector_commit_retry,
        model_name=engine.embedder.model_name,
        on_failure=partial(metrics.count_storage_failure, "vector"),
    )


def build_knowledge(engine: EngineStores) -> KnowledgeParts:
    """lookup_knowledge (DESIGN §7): the hint index (written inside each write's transaction, so it is added to the
    engine's write pipeline as a listener here), the semantic layer with the exact fallback, session dedup and the
    audit trail, whose tables live in the metadata database."""
    from context_engine.redaction import Redactor
    from context_engine.storage.vector.exact import ExactVectorIndex

    ks = engine.settings.knowledge
    audit = open_audit(engine.metadata)
    audit.read_only = engine.read_only  # lookups are served but not recorded
    hint_index = KnowledgeIndexService(audit, engine.metadata, ks)
    engine.pipeline.add_listener(hint_index)
    # the engine's own index when it is the exact one (no second copy of its matrices), else one over the metadata
    exact = engine.index if isinstance(engine.index, ExactVectorIndex) else ExactVectorIndex(engine.metadata)
    redactor = Redactor(engine.settings.retrieval.redaction, engine.metrics)  # excerpts and audit rows
    knowledge = LookupKnowledgeService(
        ks,
        hints=hint_index,
        search=VectorSearchService(
            engine.index,
            exact,
            scale=engine.similarity_scale,
            keyword=engine.keyword_index,
            keyword_settings=engine.keyword_settings,
            metadata=engine.metadata,
        ),
        metadata=engine.metadata,
        embedder=engine.embedder,
        tracker=RetrievedDocTracker(audit, ks.dedup_ttl_s),
        recorder=ToolInvocationRecorder(audit, ks, redactor, engine.metrics),
        metrics=engine.metrics,
        redactor=redactor,
    )
    # search_memory's rows (one per call, as lookups), recorded by the service around the pipeline's run
    return KnowledgeParts(audit, hint_index, knowledge, SearchAudit(knowledge.recorder, ks))


def build_retrieval(engine: EngineStores) -> RetrievalParts:
    """search_memory / read_memory (DESIGN §5-6): the stages, each with its settings section, and the level-0
    similarity source (vector index, or the in-memory level-0 matrix kept current from the change log)."""
    from context_engine.retrieval.assembler import RetrievalAssembler
    from context_engine.retrieval.candidate_rechecker import CandidateRechecker
    from context_engine.retrieval.hierarchical_searcher import HierarchicalSearcher
    from context_engine.retrieval.l0_retriever import L0Retriever
    from context_engine.retrieval.memory_read_service import MemoryReadService
    from context_engine.retrieval.query_planner import QueryPlanner
    from context_engine.retrieval.redaction import Redactor
    from context_engine.retrieval.scoring import Scorer
    from context_engine.retrieval.search_memory import ReadMemoryPipeline, SearchMemoryPipeline
    from context_engine.storage.factory import open_l0_source

    settings = engine.settings
    rs = settings.retrieval
    l0_matrix, l0_source = open_l0_source(
        rs, engine.index, engine.metadata, engine.derived_files, engine.derived_builder
    )
    redactor = Redactor(rs.redaction, engine.metrics)
    reader = MemoryReadService(engine.content, engine.metadata, redactor, rs.read, engine.metrics)
    scorer = Scorer(
        rs.scoring,
        engine.similarity_scale,
        recency_half_life_days=settings.memory.recency_half_life_days,
        recency_weight=settings.memory.recency_weight,
    )
    search_pipeline = SearchMemoryPipeline(
        planner=QueryPlanner(rs.planner),
        retriever=L0Retriever(
            l0_source,
            engine.metadata,
            engine.embedder,
            rs.seed,
            keyword=engine.keyword_index,
            keyword_settings=engine.keyword_settings,
            scale=engine.similarity_scale,
        ),
        searcher=HierarchicalSearcher(rs.hierarchy, scorer),
        rechecker=CandidateRechecker(),
        scorer=scorer,
        assembler=RetrievalAssembler(rs.assembly, redactor),
        source=l0_source,
        embedder=engine.embedder,
        metadata=engine.metadata,
        redactor=redactor,
        metrics=engine.metrics,
        settings=rs,
    )
    return RetrievalParts(l0_matrix, l0_source, redactor, reader, search_pipeline, ReadMemoryPipeline(reader))


def build_memory_events(engine: EngineStores) -> MemoryEventReader:
    """The memory event history (issue 29): its recorder is added to the engine's write pipeline as a listener (the
    events are written inside each write's transaction); the reader answers ``list_memory_events`` with the
    engine's redactor (built by :func:`build_retrieval`)."""
    from context_engine.ingest.memory_events import MemoryEventReader, MemoryEventRecorder
    from context_engine.storage.factory import open_memory_events

    events = open_memory_events(engine.metadata)
    engine.pipeline.add_listener(MemoryEventRecorder(events, engine.metadata))
    return MemoryEventReader(events, engine.redactor)


def recover_writes(journal: WriteJournal, *, read_only: bool) -> None:
    """The startup check: undo or finish what writes killed mid-way left (the write journal, O(leftovers)).

    A store failure here is logged, not raised: the leftovers stay in the journal for ``reindex`` or the next
    start, and nothing half-written is visible meanwhile (its nodes are ``pending``, or its commit never
    happened and its content is undone by the next write before that write changes anything). A read-only home
    is only checked: its leftovers are logged and left for a writable open.
    """
    if read_only:
        try:
            left = journal.recover(repair=False).leftovers
        except ContextEngineError as err:
            _LOG.warning("startup check of the write journal failed: %s", err.message)
            return
        if left:
            _LOG.warning("read-only home: %d interrupted writes left unrepaired (open it writable to repair)", left)
        return
    try:
        found = journal.recover(repair=True)
    except ContextEngineError as err:
        _LOG.warning("startup check of the write journal failed: %s", err.message)
        return
    if found.leftovers:
        _LOG.warning(
            "startup check: rolled back %d and finished %d interrupted writes, removed %d orphan undo records",
            len(found.rolled_back),
            len(found.finished),
            len(found.orphan_records),
        )
