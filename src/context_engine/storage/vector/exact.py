"""Exact (brute-force) cosine search over the vectors kept in the metadata store (DESIGN.md §3, §7.2).

The reference implementation that the other vector indexes are tested against, and the ``auto`` fallback path of
lookup_knowledge: the matrix index (:mod:`context_engine.storage.vector.matrix`) over every level, kept current
from the metadata store's change log (docs/derived_indexes.md).
"""

from __future__ import annotations

from context_engine.storage.changes import VectorMatrix
from context_engine.storage.protocols import MetadataStore
from context_engine.storage.vector.matrix import MatrixVectorIndex

__all__ = ["ExactVectorIndex", "VectorMatrix"]


class ExactVectorIndex(MatrixVectorIndex):
    """:class:`~context_engine.storage.protocols.VectorIndex` by brute force over every level of every account.

    Args:
        metadata: the metadata store holding the vectors.
        max_cached_accounts: how many accounts' matrices stay in memory (least recently used are dropped).
    """

    name = "exact"

    def __init__(self, metadata: MetadataStore, *, max_cached_accounts: int = 8) -> None:
        super().__init__(metadata, levels=None, max_cached_accounts=max_cached_accounts)
