"""Node, chunk and vector-record models shared by the stores and the pipelines (DESIGN.md §3-4). Pure data.

:class:`VectorRecord`, the one model with a numpy field, lives in :mod:`context_engine.schema.vector_record` and is
re-exported here on first access (PEP 562): the models an HTTP client decodes (:class:`IngestReport`, through the
memory models) do not import numpy (issue 29: a ``--url`` command starts without it).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from context_engine.schema.levels import Level as Level  # re-exported; its own module keeps the CLI light
from context_engine.schema.uri import ContextType

if TYPE_CHECKING:
    from context_engine.schema.vector_record import VectorRecord as VectorRecord

IndexStatus = Literal["indexed", "pending"]


class NodeRecord(BaseModel):
    """One node's metadata row (DESIGN §3). ``uri`` is the canonical URI string (directories end with ``/``)."""

    model_config = ConfigDict(extra="forbid")

    account_id: str
    uri: str
    parent_uri: str | None
    owner_space: str
    context_type: ContextType | None
    category: str | None = None
    is_dir: bool
    title: str = ""
    has_overview: bool = False
    has_content: bool = False
    content_hash: str | None = None
    index_status: IndexStatus = "indexed"
    source: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    # memories (issue 11): when the remembered thing happened, a small JSON object, and the version counter
    occurred_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    version: int = 1


class NodeHead(NamedTuple):
    """The columns of a node that a search reads, as a plain tuple (``MetadataStore.get_node_heads``): the values of
    the :class:`NodeRecord` fields of the same names, without the rest of the row (title, hash, timestamps of
    creation, JSON metadata) and without building a model (a search hydrates ~40 nodes a request, issue 26)."""

    uri: str
    parent_uri: str | None
    owner_space: str
    context_type: ContextType | None
    category: str | None
    is_dir: bool
    has_overview: bool
    has_content: bool
    index_status: IndexStatus
    updated_at: datetime | None
    occurred_at: datetime | None


class Relation(BaseModel):
    """A directed edge between two nodes of one account."""

    model_config = ConfigDict(extra="forbid")

    from_uri: str
    to_uri: str
    relation_type: str
    weight: float = 1.0


class Chunk(BaseModel):
    """One L2 chunk of a document (DESIGN §4). ``breadcrumb`` is the heading path, a list so no separator is lost."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str
    chunk_index: int
    total_chunks: int
    title: str
    breadcrumb: list[str]
    text: str
    category: str | None = None
    source: str | None = None
    token_estimate: int = 0


class VectorFilter(BaseModel):
    """A pre-filter every vector search must apply. ``account_id`` is mandatory (tenancy, DESIGN §1).

    ``None`` for a field means no restriction on it; an empty list means nothing matches. ``uri_prefix`` restricts to
    a subtree (a directory URI ending with ``/``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    account_id: str
    owner_spaces: list[str] | None = None
    levels: list[int] | None = None
    context_types: list[str] | None = None
    categories: list[str] | None = None
    uri_prefix: str | None = None
    parent_uris: list[str] | None = None
    doc_ids: list[str] | None = None


class VectorHit(BaseModel):
    """A search hit. ``score`` is cosine similarity in [-1, 1], higher is better (``score_label='similarity'``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    score: float
    score_label: Literal["similarity"] = "similarity"
    uri: str
    parent_uri: str | None
    owner_space: str
    context_type: str
    category: str
    level: int
    doc_id: str
    chunk_index: int
    text: str
    breadcrumb: str = ""


SKIPPED_FILES_LISTED = 100
"""At most this many skipped files are named in an :class:`IngestReport` (a folder may hold thousands)."""


class IngestReport(BaseModel):
    """Counts at the end of a write (DESIGN §4): what was written, skipped and why something failed."""

    nodes: int = 0
    directories: int = 0
    chunks: int = 0
    vectors: int = 0
    skipped: int = 0
    unchanged: int = 0
    failed: int = 0
    pending: int = 0
    duplicates: int = 0  # memories not written because a near-duplicate is stored (policy skip; uris names it)
    failures: list[dict[str, str]] = Field(default_factory=list)
    skipped_paths: list[dict[str, str]] = Field(
        default_factory=list,
        description="Entries of an added folder that were not read, with the reason ({path, reason}; path relative "
        "to the folder): another file type, a symbolic link leading outside the folder. The first "
        "SKIPPED_FILES_LISTED (100) of them; `skipped` counts them all.",
    )
    uris: list[str] = Field(default_factory=list)


def __getattr__(name: str) -> Any:
    """``VectorRecord``, imported (with numpy) when first asked for."""
    if name == "VectorRecord":
        from context_engine.schema.vector_record import VectorRecord

        globals()[name] = VectorRecord  # later lookups skip this function
        return VectorRecord
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
