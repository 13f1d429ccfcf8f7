"""Hit models of seed 000 §3 (field names exactly as the seed defines them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


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
