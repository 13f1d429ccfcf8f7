"""The ``lookup_knowledge`` sections of :class:`~context_engine.settings.Settings`: the domain vocabulary and the
knowledge settings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from context_engine.settings.base import SettingsSection


class DomainVocabulary(SettingsSection):
    """One knowledge domain for lookup_knowledge's hint layer (DESIGN §7.1); see ``knowledge/domains.py``."""

    path_aliases: tuple[str, ...] = Field((), description="Directory names whose documents belong to the domain.")
    title_prefixes: tuple[str, ...] = Field((), description="Alert-name prefixes, e.g. 'Kube' (CamelCase boundary).")
    terms: tuple[str, ...] = Field((), description="Query words/phrases (English or Chinese) naming the domain.")
    cross_cutting: bool = Field(
        False, description="Documents of this domain (e.g. general/) pass every other domain's filter."
    )


class KnowledgeSettings(SettingsSection):
    """lookup_knowledge (DESIGN §7). Similarity floors are calibrated similarities (schema/similarity.py) of the query
    and a level=2 chunk, per embedding model by default (knowledge/relevance.py; ``scripts/eval_runbooks.py --floors``,
    figures in docs/lookup_knowledge.md).
    """

    mode: Literal["auto", "primary", "fallback"] = Field(
        "auto", description="Semantic layer: auto (vector index, exact search on error), primary or fallback (exact)."
    )
    top_k: int = Field(5, ge=1, le=50, description="Evidence blocks (documents) returned by default.")
    candidate_chunks: int = Field(
        20, ge=1, le=500, description="level=2 chunks fetched per semantic attempt: at least this, and 4 per top_k."
    )
    context_types: tuple[str, ...] = Field(("resource",), description="Context types searched (level=2 chunks).")
    min_similarity: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="The usual floor (REFERENCE) on the calibrated scale; None: the embedding model's value "
        "(knowledge/relevance.py MODEL_FLOORS). It labels, it never drops: a weaker candidate is still returned, as "
        "REFERENCE with below_floor; only a request's own min_similarity filters.",
    )
    highly_relevant_min_similarity: float | None = Field(
        None, ge=-1.0, le=1.0, description="HIGHLY_RELEVANT from this similarity; None: the model's value."
    )
    precise_min_similarity: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="PRECISE from this similarity for a hint-supported document the query does not name (a named "
        "one is PRECISE from the usual floor); None: the model's value.",
    )
    bm25_first_ratio: float = Field(
        1.5,
        ge=1.0,
        le=100.0,
        description="BM25 ranks a document first 'by a clear margin' when its best chunk's BM25 score is at least "
        "this multiple of the next document's; such a document is never dropped by a similarity threshold.",
    )
    bm25_first_min_coverage: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="A BM25 first by a clear margin also needs this coverage (its score over the best score the "
        "query could reach), so that one incidental shared word is no margin.",
    )
    hybrid: bool = Field(
        True,
        description="Semantic layer: fuse the dense chunk list with BM25 over the same chunks (keyword.fusion); the "
        "fused score orders the chunks, the calibrated similarity still decides the threshold and the levels.",
    )
    hint_filter: bool = Field(True, description="Restrict the first attempt to single_domain_or_null's documents.")
    hint_boost: bool = Field(True, description="Add the hint boosts below to the ranking score (not to the scores).")
    hint_boost_named: float = Field(
        0.10, ge=0.0, le=0.5, description="Rank boost for documents the query names (alert name or title)."
    )
    hint_boost_strong: float = Field(
        0.05, ge=0.0, le=0.5, description="Rank boost for other strong matches (error code, metric, service, heading)."
    )
    hint_boost_weak: float = Field(
        0.02, ge=0.0, le=0.5, description="Rank boost for documents whose title words the query mostly contains."
    )
    hint_max_doc_freq: int = Field(
        12, ge=1, le=100_000, description="A keyword found in more documents than this is a hint, not a match."
    )
    hint_max_weak_matches: int = Field(
        20,
        ge=0,
        le=100_000,
        description="Weak (title-word) hint matches listed in a lookup's answer and its tool_invocation row, at most; "
        "the rest are counted in hints.omitted_weak_matches. Ranking uses every match, listed or not. A large store "
        "whose titles share words made thousands per query (1,795 at 100k nodes: a 360 KB audit row).",
    )
    neighbour_chunks: int = Field(1, ge=0, le=8, description="Adjacent chunks considered for expansion per side.")
    block_max_tokens: int = Field(
        600, ge=32, le=16_384, description="Token cap of one evidence block after expansion (estimate)."
    )
    context_token_budget: int = Field(
        2000, ge=64, le=200_000, description="Token budget of the context pack (CJK-aware estimate)."
    )
    context_min_block_tokens: int = Field(
        64,
        ge=1,
        le=4096,
        description="A block cut to fit the budget keeps at least this many tokens, else is left out.",
    )
    dedup_ttl_s: int = Field(
        7200, ge=1, le=30 * 86_400, description="How long a document stays 'already retrieved' in a session (s)."
    )
    output_preview_chars: int = Field(
        400, ge=0, le=20_000, description="Characters of the output kept in tool_invocation.output_preview."
    )
    audit_query_text: bool = Field(
        True, description="Keep the query text in tool_invocation.input_params (else only its hash)."
    )
    verify_min_excerpt_chars: int = Field(
        8, ge=1, le=10_000, description="verify_evidence rejects shorter excerpts (after whitespace normalisation)."
    )
    builtin_domains: bool = Field(True, description="Use the built-in domain vocabularies (knowledge/domains.py).")
    domains: dict[str, DomainVocabulary] = Field(
        default_factory=dict, description="Extra or replacing domain vocabularies, by domain name."
    )


