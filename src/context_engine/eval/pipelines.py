"""Evaluation through the engine's own pipelines: ``lookup_knowledge`` and ``search_memory`` (DESIGN §5, §7, §11).

The document-level methods of :mod:`context_engine.eval.retrievers` measure retrieval models; a
:class:`PipelineRetriever` measures what a caller of the engine gets. It writes every corpus document as a markdown
file, ingests the folder through the real write path (markdown chunking, L0/L1 summaries, embedding, LanceDB, BM25,
hint index) at ``ctx://resources/eval/``, then answers each query with the pipeline, as :data:`EVAL_CALLER` (the
admin of account ``default``: the engine comes from ``build_engine``, which binds no default caller):

* ``lookup_knowledge``: the evidence blocks (one per document) in rank order; chunks below the similarity threshold
  are dropped by the pipeline, so a query with nothing above it scores 0;
* ``search_memory``: the file hits (directories are skipped) in rank order, after the score threshold.

Files: ``<cache>/pipelines/<dataset>-<corpus sha256[:12]>/docs/`` (the markdown, shared by every model) and
``.../<model key>/`` (an engine home per embedding model, so an index is never queried with another model). Both are
reused: re-ingesting unchanged files is a no-op. Retrieval settings (``keyword.hybrid``, ``knowledge``,
``retrieval``) come from the settings given, so one home serves every configuration of a model.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from context_engine.eval.datasets import Document, EvalDataset
from context_engine.eval.harness import WRITE_LIMITS
from context_engine.eval.retrievers import embedder_label
from context_engine.schema.context import DEFAULT_CONTEXT, RequestContext
from context_engine.settings import Settings
from context_engine.storage.protocols import Embedder

__all__ = ["PIPELINE_METHODS", "PipelineRetriever", "document_markdown"]

PipelineMethod = Literal["lookup_knowledge", "search_memory"]
PIPELINE_METHODS: tuple[PipelineMethod, ...] = ("lookup_knowledge", "search_memory")
URI_ROOT = "ctx://resources/eval/"
EVAL_CALLER: RequestContext = DEFAULT_CONTEXT
"""Who writes the corpus and asks the queries: the admin of account ``default``."""


def document_markdown(doc: Document) -> str:
    """The file written for ``doc``: its text when it already opens with a heading (markdown corpora), else
    ``# title`` followed by the text (BEIR passages)."""
    text = doc.text.strip()
    if text.startswith("#") or not doc.title:
        return text + "\n"
    return f"# {doc.title}\n\n{text}\n"


def _file_name(doc_id: str) -> str:
    return doc_id if doc_id.endswith(".md") else f"{doc_id}.md"


# IngestSettings fields that refuse or queue a write but never change what it stores (issues 26, 27)


class PipelineRetriever:
    """One pipeline (``lookup_knowledge`` or ``search_memory``) of an engine built on the dataset's corpus.

    Args:
        method: ``lookup_knowledge`` or ``search_memory``.
        embedder: the embedding model (shared with other retrievers; not closed here).
        settings: engine settings; ``home`` is replaced by the cache folder of this corpus and model.
        cache_dir: root of the ingested corpora (see the module docstring).
        progress: called with the number of documents ingested (once, after ingestion).
    """

    def __init__(
        self,
        method: PipelineMethod,
        embedder: Embedder,
        settings: Settings,
        *,
        cache_dir: Path,
        progress: Any = None,
    ) -> None:
        if method not in PIPELINE_METHODS:
            raise ValueError(f"unknown pipeline {method!r}")
        self.method = method
        self.embedder = embedder
        self._settings = settings
        self._cache_dir = cache_dir
        self._progress = progress
        self._engine: Any = None
        self._uri_to_doc: dict[str, str] = {}

    @property
    def config(self) -> dict[str, Any]:
        s = self._settings
        section = s.knowledge if self.method == "lookup_knowledge" else s.retrieval
        # match_quality labels an answer and hint_max_weak_matches cuts a list after ranking: neither ranks, so tuning
        # them keeps the baselines' ranking checks in force
        exclude = {"match_quality"} if self.method == "search_memory" else {"hint_max_weak_matches"}
        return {
            "method": self.method,
            "model": embedder_label(self.embedder),
            "dim": self.embedder.dim,
            "keyword": s.keyword.model_dump(mode="json"),
            self.method: section.model_dump(mode="json", exclude=exclude),
            # write limits bound a request's work and never change what is stored or ranked
            "ingest": s.ingest.model_dump(mode="json", exclude=set(WRITE_LIMITS)),
            "doc_input": "markdown file through the write path",
        }

    def prepare(self, dataset: EvalDataset) -> None:
        """Write the corpus as markdown (once) and ingest it into this model's engine home (idempotent)."""
        from context_engine.engine_factory import build_engine

        base = self._cache_dir / "pipelines" / f"{dataset.name}-{dataset.corpus_hash[:12]}"
        docs_dir = base / "docs"
        for doc_id, doc in dataset.corpus.items():
            path = docs_dir / _file_name(doc_id)
            body = document_markdown(doc)
            if not path.is_file() or path.read_text(encoding="utf-8") != body:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(body, encoding="utf-8")
            self._uri_to_doc[URI_ROOT + _file_name(doc_id)] = doc_id
        label = embedder_label(self.embedder)
        key = hashlib.sha1(f"{label}|{self.embedder.dim}".encode()).hexdigest()[:10]
        home = base / key
        settings = self._settings.model_copy(update={"home": home})
        self._engine = build_engine(settings, embedder=self.embedder)
        self._engine.add_resource(docs_dir, URI_ROOT, EVAL_CALLER)
        if self._progress:
            self._progress(len(dataset.corpus))

    def search(self, query_id: str, query: str, top_k: int) -> list[tuple[str, float]]:
        """The pipeline's documents for ``query``, best first, as ``(doc_id, rank-derived score)`` (so the
        harness keeps the pipeline's own order, ties included)."""
        if self._engine is None:
            raise RuntimeError("prepare() first")
        k = max(1, min(top_k, 50))  # both APIs cap top_k at 50
        if self.method == "lookup_knowledge":
            result = self._engine.lookup_knowledge(query, EVAL_CALLER, top_k=k)
            uris = [b.doc_id for b in result.evidence_blocks]
        else:
            response = self._engine.search_memory(query, EVAL_CALLER, top_k=k)
            uris = [h.uri for h in response.hits]
        docs: list[str] = []
        for uri in uris:
            doc = self._uri_to_doc.get(uri)
            if doc is not None and doc not in docs:
                docs.append(doc)
        return [(d, float(len(docs) - i)) for i, d in enumerate(docs)]

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
