"""Hit models of seed 000 §3 and §4.2 (field names exactly as the seed defines them). Pure data, no I/O.

Stage outputs, in pipeline order: :class:`SeedHit` (L0 recall) -> :class:`NodeHit` (hierarchical search, recheck,
scoring; internal) -> :class:`RetrievedBlock` (what callers get).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SeedHit(BaseModel):
    """An L0 hit (seed 000 §3.2): the minimal field set of a first-round candidate.

    ``score`` is cosine similarity of the query and the node's abstract, in [-1, 1], higher is better.
    """

    model_config = ConfigDict(extra="forbid")

    uri: str
    score: float
    category: str
    owner_space: str
    abstract: str
    has_overview: bool
    has_content: bool
    match_reason: str


class NodeHit(BaseModel):
    """A candidate inside the search pipeline (seed 000 §4.2, ``HierarchicalSearcher`` / ``CandidateRechecker``).

    Built from the node's L0 vector record and its metadata row; never from L1 or L2 text.

    Attributes:
        uri, parent_uri, is_dir, context_type, category, owner_space: the node's identity and metadata.
        abstract: the L0 text (the vector record's text).
        has_overview, has_content: whether L1 / L2 exist (metadata).
        updated_at: last write time (metadata); used by the time-range recheck.
        occurred_at: a memory's own time (metadata, issue 11); with ``updated_at`` the recency component's clock.
        recency: the recency component in 0..1 (``0.5 ** (age / half-life)``); 0 when recency scoring is off.
        similarity: raw cosine similarity of the query and the abstract, [-1, 1] (``score_label='similarity'``).
        vector_score: ``max(similarity, 0)``, in 0..1 (see ``retrieval/scoring.py``).
        hierarchy_score: path consistency, in 0..1 (see ``HierarchicalSearcher``).
        category_boost, target_uri_boost: 0..1 components of the final score.
        score: the final score in 0..1 (seed 000 §6); higher is better. The rechecker never changes it.
        source: ``seed`` (L0 recall) or ``expansion`` (found as a child while expanding a directory).
        depth: 0 for seeds; the depth below its start directory for expansion hits.
        match_reason: why it is a candidate, e.g. ``l0_vector`` or ``child_of:ctx://resources/ops/``.
        exclude_reason: set only on candidates a stage dropped (recorded in the trace, never returned).
        reply_to: the asking message this hit answers when its ``vector_score`` was lifted to rank with it
            (``retrieval/replies.py``), else ``None``.
        own_vector_score: the hit's own vector score before that lift (``None`` when not lifted).
    """

    model_config = ConfigDict(extra="forbid")

    uri: str
    parent_uri: str | None = None
    is_dir: bool = False
    context_type: str = ""
    category: str = ""
    owner_space: str
    abstract: str = ""
    has_overview: bool = False
    has_content: bool = False
    updated_at: datetime | None = None
    occurred_at: datetime | None = None
    recency: float = 0.0
    similarity: float = 0.0
    vector_score: float = 0.0
    hierarchy_score: float = 0.0
    category_boost: float = 0.0
    target_uri_boost: float = 0.0
    score: float = 0.0
    source: Literal["seed", "expansion"] = "seed"
    depth: int = 0
    match_reason: str = ""
    exclude_reason: str | None = None
    reply_to: str | None = None
    own_vector_score: float | None = None


class RelationRef(BaseModel):
    """A one-hop relation of a block (seed 000 §3.3 ``relations[]``)."""

    model_config = ConfigDict(extra="forbid")

    to_uri: str
    relation_type: str
    weight: float


class RetrievedBlock(BaseModel):
    """The unified result block (seed 000 §3.3).

    ``search_memory`` fills only L0 data (``level_hit='L0'``, ``overview``/``content_excerpt`` ``None``); only an
    explicit ``read_memory`` fills ``overview`` (L1) or ``content_excerpt`` (L2, secrets redacted). ``score`` is the
    final score in 0..1 for search hits and ``1.0`` for an explicit read (the requested URI itself).
    ``read_recommendation`` says which explicit read is worth its cost next. ``occurred_at`` (UTC): when a memory
    happened, a message's ``timestamp`` or a memory's ``occurred_at`` (issue 25: an agent resolves "last Monday" in a
    hit against it, and orders hits in time, without reading each one); left out of the JSON for any other node and
    for a memory written without a time.
    """

    model_config = ConfigDict(extra="forbid")

    uri: str
    level_hit: Literal["L0", "L1", "L2"]
    score: float
    category: str
    owner_space: str
    abstract: str | None = None
    overview: str | None = None
    content_excerpt: str | None = None
    relations: list[RelationRef] = Field(default_factory=list)
    has_overview: bool
    has_content: bool
    read_recommendation: Literal["none", "read_l1", "read_l2"] = "none"
    match_reason: str
    occurred_at: datetime | None = Field(None, exclude_if=lambda v: v is None)
