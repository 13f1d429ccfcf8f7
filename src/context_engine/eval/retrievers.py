"""What the harness evaluates: a :class:`Retriever` turns one query into a ranked list of ``(doc_id, score)``.

* :class:`DenseRetriever` — offline, in process: the engine's embedder and vector index (LanceDB by default), one
  document-level record per corpus document, embedding input ``title + " " + text``. Document vectors are cached as
  ``.npy`` files keyed by model, dataset corpus hash and input format (:func:`vector_cache_path`).
* :class:`BM25Retriever` — offline: the engine's :class:`~context_engine.storage.keyword.BM25Index` over the same
  ``title + " " + text``.
* :class:`FixtureRetriever` — offline with no engine at all: stored candidates (a TREC run file) per query id.
* :class:`LiveRetriever` — against a running server: ``POST {url}/api/search/similar`` (contract in eval/README.md).

Fusion of dense and BM25 is applied to the two runs afterwards (:func:`context_engine.eval.harness.fuse_runs`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.eval.datasets import EvalDataset
from context_engine.eval.trec import Run, rank_order, read_run
from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.settings import KeywordSettings, VectorSettings
from context_engine.storage.keyword.bm25_index import BM25Index, KeywordDoc
from context_engine.storage.protocols import Embedder, VectorIndex

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "FixtureRetriever",
    "LiveRetriever",
    "Retriever",
    "embedder_label",
    "vector_cache_path",
]

_ACCOUNT = "eval"
_DOC_INPUT = "title+' '+text"


class Retriever(Protocol):
    """One retrieval method under evaluation."""

    @property
    def method(self) -> str:
        """The method's name in reports (``bm25``, ``dense``, ``search_memory``...)."""
        ...

    @property
    def config(self) -> dict[str, Any]:
        """Everything that decides the ranking (hashed into the report's config hash)."""
        ...

    def prepare(self, dataset: EvalDataset) -> None:
        """Index the corpus (a no-op for live and fixture retrievers)."""
        ...

    def search(self, query_id: str, query: str, top_k: int) -> list[tuple[str, float]]:
        """At most ``top_k`` ``(doc_id, score)`` pairs, best first."""
        ...

    def close(self) -> None: ...


def embedder_label(embedder: Embedder) -> str:
    """``backend:model`` (e.g. ``onnx:all-MiniLM-L6-v2``; the model name without its organisation), the model column
    of reports and the key of baseline runs."""
    backend = getattr(embedder, "backend", type(embedder).__name__)
    return f"{backend}:{embedder.model_name.rsplit('/', 1)[-1]}"


def vector_cache_path(cache_dir: Path, dataset: EvalDataset, embedder: Embedder) -> Path:
    """``<cache_dir>/<dataset name>-<corpus hash 12>-<sha1(label, dim, input) 10>.npy``."""
    key = hashlib.sha1(f"{embedder_label(embedder)}|{embedder.dim}|{_DOC_INPUT}".encode()).hexdigest()[:10]
    return cache_dir / f"{dataset.name}-{dataset.corpus_hash[:12]}-{key}.npy"


class DenseRetriever:
    """Dense retrieval through the engine's :class:`Embedder` and :class:`VectorIndex` (see the module docstring).

    Args:
        embedder: any embedder of the engine (``providers``).
        cache_dir: where document vectors are cached (``None``: no cache).
        index_factory: builds the vector index in a directory for a dimension; default LanceDB.
        progress: called with the number of documents embedded after each slice.
    """

    method = "dense"

    def __init__(
        self,
        embedder: Embedder,
        *,
        cache_dir: Path | None = None,
        index_factory: Callable[[Path, int], VectorIndex] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.embedder = embedder
        self.cache_dir = cache_dir
        self._factory = index_factory or _lancedb_index
        self._progress = progress
        self._tmp: Path | None = None
        self._index: VectorIndex | None = None
        self.embed_s = 0.0
        self.index_s = 0.0
        self.cached = False

    @property
    def config(self) -> dict[str, Any]:
        return {
            "method": "dense",
            "model": embedder_label(self.embedder),
            "dim": self.embedder.dim,
            "doc_input": _DOC_INPUT,
            "record": "document-level, level=0",
        }

    def document_vectors(self, dataset: EvalDataset) -> np.ndarray:
        """Shape ``(len(corpus), dim)`` in corpus order; read from or written to the cache."""
        path = vector_cache_path(self.cache_dir, dataset, self.embedder) if self.cache_dir else None
        n = len(dataset.corpus)
        if path is not None and path.is_file():
            matrix = np.load(path)
            if matrix.shape == (n, self.embedder.dim):
                self.cached = True
                return matrix.astype(np.float32, copy=False)
        t0 = time.perf_counter()
        texts = [d.content() for d in dataset.corpus.values()]
        matrix = self.embedder.embed_documents(texts, progress=self._progress)
        self.embed_s = time.perf_counter() - t0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, matrix)
            tmp.replace(path)
        return matrix

    def prepare(self, dataset: EvalDataset) -> None:
        matrix = self.document_vectors(dataset)
        self.close()
        self._tmp = Path(tempfile.mkdtemp(prefix="ce-eval-"))
        self._index = self._factory(self._tmp, self.embedder.dim)
        records = [
            VectorRecord(
                id=hashlib.sha1(doc_id.encode("utf-8")).hexdigest()[:32],
                vector=vec,
                uri=f"ctx://resources/{dataset.name}/{i}",
                parent_uri=f"ctx://resources/{dataset.name}/",
                account_id=_ACCOUNT,
                owner_space="shared",
                context_type="resource",
                category=dataset.name,
                level=0,
                doc_id=doc_id,
                text=doc.title[:200],
            )
            for i, ((doc_id, doc), vec) in enumerate(zip(dataset.corpus.items(), matrix, strict=True))
        ]
        t0 = time.perf_counter()
        for start in range(0, len(records), 10_000):
            self._index.upsert(records[start : start + 10_000])
        self.index_s = time.perf_counter() - t0
        # Load the model and open the table now, so the first timed query does not pay for it.
        self._index.search(self.embedder.embed_query("warm up"), 1, VectorFilter(account_id=_ACCOUNT))

    def search(self, query_id: str, query: str, top_k: int) -> list[tuple[str, float]]:
        if self._index is None:
            raise RuntimeError("prepare() first")
        hits = self._index.search(self.embedder.embed_query(query), top_k, VectorFilter(account_id=_ACCOUNT))
        return [(h.doc_id, h.score) for h in hits]

    def close(self) -> None:
        self._index = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def _lancedb_index(path: Path, dim: int) -> VectorIndex:
    from context_engine.storage.vector.lancedb_index import LanceDBVectorIndex

    return LanceDBVectorIndex(path / "vectors", dim, VectorSettings())


class BM25Retriever:
    """BM25 through :class:`BM25Index` over ``title + " " + text`` per document."""

    method = "bm25"

    def __init__(self, settings: KeywordSettings | None = None) -> None:
        self.settings = settings or KeywordSettings()
        self.index: BM25Index | None = None
        self.index_s = 0.0

    @property
    def config(self) -> dict[str, Any]:
        s = self.settings
        return {
            "method": "bm25",
            "k1": s.k1,
            "b": s.b,
            "bm25_variant": s.method,
            "stem": s.stem,
            "stopwords": s.stopwords,
            "split_identifiers": s.split_identifiers,
            "cjk": s.cjk,
            "doc_input": _DOC_INPUT,
        }

    def prepare(self, dataset: EvalDataset) -> None:
        t0 = time.perf_counter()
        index = BM25Index(self.settings)
        index.upsert(
            KeywordDoc(id=doc_id, text=doc.content(), account_id=_ACCOUNT, uri=doc_id, level=0, doc_id=doc_id)
            for doc_id, doc in dataset.corpus.items()
        )
        index.optimize()
        self.index = index
        self.index_s = time.perf_counter() - t0

    def search(self, query_id: str, query: str, top_k: int) -> list[tuple[str, float]]:
        if self.index is None:
            raise RuntimeError("prepare() first")
        # coverage (BM25 over its upper bound for the query) orders exactly like the score and is what convex
        # fusion needs; min-max fusions are unchanged by the per-query division.
        return [(h.doc_id, h.coverage) for h in self.index.search(query, top_k, VectorFilter(account_id=_ACCOUNT))]

    def close(self) -> None:
        self.index = None


class FixtureRetriever:
    """Stored candidates: the results of a TREC run file, looked up by query id (no engine, no model)."""

    method = "fixture"

    def __init__(self, run_path: Path) -> None:
        self.run_path = Path(run_path)
        self._run: Run = read_run(self.run_path)

    @property
    def config(self) -> dict[str, Any]:
        digest = hashlib.sha256(self.run_path.read_bytes()).hexdigest()
        return {"method": "fixture", "run_file": self.run_path.name, "run_sha256": digest}

    def prepare(self, dataset: EvalDataset) -> None:
        return None

    def search(self, query_id: str, query: str, top_k: int) -> list[tuple[str, float]]:
        return self._run.get(query_id, [])[:top_k]

    def close(self) -> None:
        return None


class LiveRetriever:
    """A running server's raw semantic search: ``POST {url}/api/search/similar`` with ``{"query", "top_k"}``.

    The response must be ``{"results": [{"doc_id": str, "score": float}, ...]}`` (extra fields ignored), best first.
    ``strip_prefix`` is removed from the front of returned doc ids (e.g. ``ctx://resources/runbooks/`` so engine
    URIs match the dataset's ids); results are reduced to one per doc id (the best).

    Args:
        url: the server's base URL (``http://127.0.0.1:8080``).
        api_key: sent as ``Authorization: Bearer <key>`` when given.
        timeout_s: per-request timeout in seconds.
        max_top_k: the server's top_k cap (DESIGN §8: 1..50); requests never ask for more.

    Raises (from :meth:`search`):
        ContextEngineError: ``RET-5001`` (retryable) when the server is unreachable, answers non-2xx or malformed.
    """

    method = "live"

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        strip_prefix: str | None = None,
        max_top_k: int = 50,
    ) -> None:
        self.url = url.rstrip("/") + "/api/search/similar"
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.strip_prefix = strip_prefix
        self.max_top_k = max_top_k

    @property
    def config(self) -> dict[str, Any]:
        return {"method": "live", "url": self.url, "strip_prefix": self.strip_prefix, "max_top_k": self.max_top_k}

    def prepare(self, dataset: EvalDataset) -> None:
        return None

    def search(self, query_id: str, query: str, top_k: int) -> list[tuple[str, float]]:
        body = json.dumps({"query": query, "top_k": min(top_k, self.max_top_k)}).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                payload = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            raise ContextEngineError(
                ErrorCode.VECTOR_SEARCH_FAILED,
                f"live search returned HTTP {err.code}",
                {"url": self.url},
                retryable=True,
            ) from err
        except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ContextEngineError(
                ErrorCode.VECTOR_SEARCH_FAILED,
                f"live search failed: {type(err).__name__}: {err}",
                {"url": self.url},
                retryable=True,
            ) from err
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise ContextEngineError(
                ErrorCode.VECTOR_SEARCH_FAILED,
                "live search response has no 'results' list",
                {"url": self.url},
                retryable=True,
            )
        out: list[tuple[str, float]] = []
        for r in results:
            try:
                doc_id, score = str(r["doc_id"]), float(r["score"])
            except (KeyError, TypeError, ValueError) as err:
                raise ContextEngineError(
                    ErrorCode.VECTOR_SEARCH_FAILED,
                    "a live result lacks doc_id/score",
                    {"url": self.url},
                    retryable=True,
                ) from err
            if self.strip_prefix and doc_id.startswith(self.strip_prefix):
                doc_id = doc_id[len(self.strip_prefix) :]
            out.append((doc_id, score))
        return rank_order(out)[:top_k]

    def close(self) -> None:
        return None
