"""The query embeddings of one search_memory request: each text embedded once, likely texts in one batch.

A search can embed up to three query texts (docs/search_memory.md, "What a search embeds"): the query; when it names
a speaker of the messages it finds, the second search's text (:func:`~context_engine.retrieval.query_transform.
without_speakers`); and the speaker-neutral query of ``match_quality`` (:meth:`~context_engine.retrieval.match_quality.
MatchQualityRater.neutral_query`). The last two are often the same text ("What subject did the user teach?" -> "What
subject did I teach?" both times), and each embedding was a call of its own: on agent_dev a search made 2.7 query
embedding calls on average, about half of its time.

:class:`QueryVectors` keeps every vector a request embedded, so a text is embedded once, and embeds the texts a
request is likely to need in one batch (:meth:`QueryVectors.prefetch`): a batch of three short texts costs about 1.4
times one text with the default model, three calls three times. A batch's vectors equal the single calls' to float
rounding (1e-7). A text guessed and never used costs its share of the batch only.

:class:`TextVectors` does the same for the texts of hits that a search embeds as documents, alone (the own-text
check of ``match_quality``, the current-state rule's same-topic test): they are the store's own messages, which the
next questions about the same conversation find again, so they are kept across requests in a bounded LRU cache
(:data:`TEXT_VECTORS_CACHED` texts, 4 MB with the default model). On the conversation dev sets half or more of
these texts had been embedded by an earlier question (agent_dev 438 texts, 224 distinct; agent_shapes 200, 47).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np
from cachetools import LRUCache

from context_engine.storage.protocols import Embedder

__all__ = ["TEXT_VECTORS_CACHED", "QueryVectors", "TextVectors", "embed_queries"]

#: Texts :class:`TextVectors` keeps (least recently used dropped first): 2 KB each with the default model (512 float32).
TEXT_VECTORS_CACHED = 2048


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray | None:
    """``texts`` embedded as queries in one batch: ``(len(texts), dim)`` float32, unit rows, input order; ``None``
    when the embedder has no ``embed_queries`` (every embedder of ``context_engine.providers`` has it; an embedder of
    the caller's own may not: each text is then embedded when it is needed, and no guess costs a call).

    Raises:
        ContextEngineError: ``WRT-5031`` (retryable) when the model fails; ``ValueError`` when it returns other than
            one row of ``dim`` values a text.
    """
    batch = getattr(embedder, "embed_queries", None)
    if batch is None:
        return None
    out = np.asarray(batch(list(texts)), dtype=np.float32)
    if out.shape != (len(texts), embedder.dim):
        raise ValueError(f"embed_queries returned shape {out.shape} for {len(texts)} texts of {embedder.dim} values")
    return out


class QueryVectors:
    """Query vectors of one request by text, each embedded at most once (module docstring). Thread-safe.

    Args:
        embedder: the engine's embedder.

    Attributes:
        embedded: how many texts were embedded; ``batches``: in how many embedding calls (both for the trace).
    """

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.embedded = 0
        self.batches = 0

    def prefetch(self, texts: Iterable[str]) -> None:
        """Embed those of ``texts`` not embedded yet, in one batch (nothing when the embedder has no batches:
        :func:`embed_queries`). Any failure is left to :meth:`embed_query`: the text a stage needs is embedded again
        there, alone, and fails or falls back as that stage says (the query's own failure is ``RET-5001``, a guessed
        text's falls back: docs/search_memory.md); a model that is down is then called twice for the query."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if not missing:
            return
        try:
            vectors = embed_queries(self._embedder, missing)
        except Exception:  # noqa: BLE001 - a guess never fails a search: each needed text is embedded again alone
            return
        if vectors is None:  # no batches: nothing guessed, each text embedded when needed
            return
        with self._lock:
            self.embedded += len(missing)
            self.batches += 1
            for text, vector in zip(missing, vectors, strict=True):
                self._vectors.setdefault(text, vector.copy())  # a row of its own, not a view of the batch

    def embed_query(self, text: str) -> np.ndarray:
        """The unit query vector of ``text`` (``(dim,)`` float32): the one embedded before, or embedded now.

        Raises:
            ContextEngineError: ``WRT-5031`` (retryable) when the model fails.
        """
        with self._lock:
            found = self._vectors.get(text)
        if found is not None:
            return found
        vector = np.asarray(self._embedder.embed_query(text), dtype=np.float32)
        with self._lock:
            self.embedded += 1
            self.batches += 1
            return self._vectors.setdefault(text, vector)


class TextVectors:
    """Document vectors of texts a search embeds alone, kept across requests (module docstring), by model and text:
    the embedder is given with each call, so an engine whose model is replaced never mixes two models' vectors.
    Thread-safe.

    Args:
        maxsize: texts kept, least recently used dropped first.
    """

    def __init__(self, maxsize: int = TEXT_VECTORS_CACHED) -> None:
        self._cache: LRUCache[tuple[str, str], np.ndarray] = LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """``texts`` embedded as documents by ``embedder`` (``embed_documents``): ``(len(texts), dim)`` float32, unit
        rows, input order; the texts not kept embedded in one call.

        Raises:
            ContextEngineError: ``WRT-5031`` (retryable) when the model fails (nothing is kept then).
        """
        if not texts:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        model = embedder.model_name  # in the key: a text has one vector per model
        with self._lock:
            found = {t: v for t in dict.fromkeys(texts) if (v := self._cache.get((model, t))) is not None}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            vectors = np.asarray(embedder.embed_documents(missing), dtype=np.float32)
            fresh = {t: v.copy() for t, v in zip(missing, vectors, strict=True)}  # rows of their own
            with self._lock:
                for text, vector in fresh.items():
                    self._cache[(model, text)] = vector
            found.update(fresh)
        return np.stack([found[t] for t in texts])
