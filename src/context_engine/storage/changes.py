"""What the derived indexes read from the metadata store: account snapshots and the change feed (DESIGN.md §3).

The one invalidation rule (docs/derived_indexes.md): every derived structure — the level-0 matrix, the exact
matrix, the BM25 partitions, the hint index — is keyed by the **account generation**, a counter per account kept in
the metadata database (``index_generations``) and bumped in the same transaction as every vector write or delete,
which also appends the ids it touched to the change log (``index_changes``). A reader checks the committed
generation (one primary-key read); when it moved, it reads the changed rows (:class:`IndexDelta`) and applies them,
or reloads the account wholesale (:class:`VectorMatrix`) when the log no longer reaches back far enough. Both are
read in one database snapshot, so what a reader holds is exactly one committed generation of the account.

Every bump also sets a random **token** (:class:`AccountState`): a generation number names a state of the account
only with its token, since a database restored from a backup (or a PostgreSQL failover) may reach the same number
again by another history. Readers compare both, and catch up only from a state whose token the store still logs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from context_engine.schema.nodes import VectorRecord

__all__ = ["STRING_COLUMNS", "AccountState", "IndexDelta", "VectorMatrix"]

STRING_COLUMNS = (
    "uri",
    "parent_uri",
    "owner_space",
    "context_type",
    "category",
    "doc_id",
    "text",
    "breadcrumb",
    "context",
)
"""The text columns of a vector row, in :class:`VectorMatrix` order."""


def _object_array(values: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


class AccountState(NamedTuple):
    """The committed state of an account's vector rows: its generation and that generation's token, read together
    (``VectorRowStore.account_state``: one primary-key read).

    Attributes:
        generation: the account generation (0 before the account's first vector write).
        token: the random token the bump to ``generation`` set (32 hex characters); ``None`` for generation 0 and
            for generations written before tokens existed (schema revision ``0005``). Two states are the same only
            when both fields are equal (``None == None``: a store and a derived file from before tokens agree).
    """

    generation: int
    token: str | None = None


@dataclass(frozen=True, slots=True)
class IndexDelta:
    """The changes of one account between two generations, read in one snapshot.

    Attributes:
        generation: the committed account generation the delta brings a reader to.
        token: the token of ``generation`` (:class:`AccountState`), which the reader holds once it applied the delta
            (or reloaded).
        upserted: the current rows of every id changed since the reader's generation (restricted to the levels the
            reader asked for), ordered by id.
        removed: changed ids that no longer exist, sorted.
        reload: ``True`` when the change log does not reach back to the reader's generation (pruned, or the
            database was replaced), when the reader's state is not one the store's history holds (its token differs:
            the database was rewound), or more ids changed than the reader wanted to apply one by one: the reader
            must reload the account (``load_vector_matrix``); ``upserted`` and ``removed`` are then empty.
    """

    generation: int
    upserted: list[VectorRecord] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    reload: bool = False
    token: str | None = None

    @property
    def empty(self) -> bool:
        return not self.reload and not self.upserted and not self.removed


@dataclass(frozen=True, slots=True, eq=False)
class VectorMatrix:
    """One account's vector rows as columns, rows sorted by ``id`` ascending (code-point order).

    Attributes:
        generation: the account generation the rows are exactly at (read in the same snapshot).
        token: the token of ``generation`` (:class:`AccountState`), read in the same snapshot.
        ids: row ids, ascending; row ``i`` of every column belongs to ``ids[i]``.
        vectors: shape ``(n, dim)``, float32, unit-norm rows (``(n, 0)`` when loaded without vectors, ``(0, 0)``
            when empty).
        uri, parent_uri, owner_space, context_type, category, doc_id, text, breadcrumb, context: object arrays of
            shape ``(n,)`` holding ``str`` (``parent_uri`` may hold ``None``).
        level, chunk_index: int64 arrays of shape ``(n,)``.
    """

    generation: int
    ids: list[str]
    vectors: np.ndarray
    uri: np.ndarray
    parent_uri: np.ndarray
    owner_space: np.ndarray
    context_type: np.ndarray
    category: np.ndarray
    level: np.ndarray
    doc_id: np.ndarray
    chunk_index: np.ndarray
    text: np.ndarray
    breadcrumb: np.ndarray
    context: np.ndarray
    token: str | None = None

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @classmethod
    def empty(cls, generation: int, token: str | None = None) -> VectorMatrix:
        """A matrix with no rows."""
        columns: dict[str, list[Any]] = {c: [] for c in (*STRING_COLUMNS, "level", "chunk_index")}
        return cls.from_columns(generation, ids=[], matrix=np.zeros((0, 0), dtype=np.float32), token=token, **columns)

    @classmethod
    def from_columns(
        cls,
        generation: int,
        *,
        ids: Sequence[str],
        matrix: np.ndarray,
        token: str | None = None,
        **columns: Sequence[Any],
    ) -> VectorMatrix:
        """Build from parallel columns in any row order; rows are sorted by id here.

        Args:
            generation: the account generation of the rows.
            token: the token of ``generation``.
            ids: shape ``(n,)``, unique.
            matrix: shape ``(n, dim)``; converted to float32.
            **columns: every other field (see the class attributes), each of length ``n``; a missing ``context``
                column is read as empty strings.
        """
        id_list = list(ids)
        order: np.ndarray | None = None
        if any(a > b for a, b in itertools.pairwise(id_list)):
            order = np.array(sorted(range(len(id_list)), key=id_list.__getitem__), dtype=np.int64)
            id_list = [id_list[i] for i in order]
        vectors = np.asarray(matrix, dtype=np.float32)
        fields: dict[str, np.ndarray] = {}
        for name in STRING_COLUMNS:
            values = columns.get(name)
            fields[name] = _object_array(values if values is not None else [""] * len(id_list))
        for name in ("level", "chunk_index"):
            fields[name] = np.asarray(columns[name], dtype=np.int64).reshape(-1)
        if order is not None:
            vectors = vectors[order] if vectors.shape[0] == len(id_list) else vectors
            fields = {k: v[order] for k, v in fields.items()}
        return cls(generation=generation, ids=id_list, vectors=vectors, token=token, **fields)

    @classmethod
    def from_records(cls, generation: int, records: Sequence[VectorRecord], token: str | None = None) -> VectorMatrix:
        """Build from vector records (the path for stores without a bulk loader)."""
        if not records:
            return cls.empty(generation, token)
        columns = {name: [getattr(r, name) for r in records] for name in (*STRING_COLUMNS, "level", "chunk_index")}
        matrix = np.stack([np.asarray(r.vector, dtype=np.float32).reshape(-1) for r in records])
        return cls.from_columns(generation, ids=[r.id for r in records], matrix=matrix, token=token, **columns)
