"""The query-vector check every vector index adapter applies before it searches (DESIGN §3)."""

from __future__ import annotations

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode

__all__ = ["query_vector"]


def query_vector(vector: np.ndarray, dim: int) -> np.ndarray:
    """``vector`` as a float32 array of shape ``(dim,)``.

    Raises:
        ContextEngineError: ``IDX-4091`` when its shape is not ``(dim,)`` (another model's vector); ``RET-5001`` (not
            retryable) when it holds NaN or infinity.
    """
    query = np.asarray(vector, dtype=np.float32)
    if query.shape != (dim,):
        raise ContextEngineError(
            ErrorCode.INDEX_MODEL_MISMATCH,
            f"Query vector has shape {query.shape}, the index holds {dim}-dimensional vectors.",
            {"expected_dim": dim, "got_shape": list(query.shape)},
        )
    if not np.isfinite(query).all():
        raise ContextEngineError(ErrorCode.VECTOR_SEARCH_FAILED, "The query vector must be finite (no NaN or inf).")
    return query
