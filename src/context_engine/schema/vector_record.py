"""The vector index's row model (DESIGN.md §3), in a module of its own: it is the one schema model with a numpy
field, so :mod:`context_engine.schema.nodes` (which re-exports it on first access) and the models built on it load
without numpy."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

__all__ = ["VectorRecord"]


class VectorRecord(BaseModel):
    """One row of the vector index (DESIGN §3): a node's abstract at ``level=0`` or an L2 chunk at ``level=2``.

    ``vector`` is an L2-normalised float32 array of shape ``(dim,)``.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    id: str
    vector: np.ndarray
    uri: str
    parent_uri: str | None
    account_id: str
    owner_space: str
    context_type: str
    category: str = ""
    level: int
    doc_id: str = ""
    chunk_index: int = 0
    text: str = ""
    breadcrumb: str = ""  # display form; the list lives in the content store
    # Indexed with the text but never shown: a message's preceding turn(s) of its session, which make a reply such
    # as "Yes, I went there yesterday" findable (embedding input and BM25 text; ingest/pipeline.py).
    context: str = ""
