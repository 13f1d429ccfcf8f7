"""The one ``Settings`` object (STYLE.md, Config; DESIGN.md §10).

Sources, highest first: constructor arguments, ``CE_`` environment variables (``__`` for nesting, e.g.
``CE_INGEST__MAX_FILE_BYTES``), then ``<home>/config.toml``. The embedded default needs no configuration.
Unknown keys are rejected. This is the only module that reads the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

DEFAULT_HOME = Path("~/.context-engine")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbeddingSettings(_Section):
    backend: Literal["sentence-transformers"] = Field(
        "sentence-transformers", description="Embedder implementation (DESIGN §14)."
    )
    model_name: str = Field("all-MiniLM-L6-v2", description="Model id recorded in the index stamp.")
    batch_size: int = Field(64, ge=1, le=4096, description="Texts per forward pass.")
    device: str = Field("cpu", description="torch device.")
    num_threads: int = Field(0, ge=0, le=256, description="torch intra-op threads; 0 keeps torch's default.")


class VectorSettings(_Section):
    backend: Literal["lancedb", "exact"] = Field("lancedb", description="Primary vector index (DESIGN §3).")
    table_name: str = Field("context_vectors", description="LanceDB table name.")
    ann_index_min_rows: int = Field(
        50_000, ge=256, description="Create an ANN index (IVF_SQ) once the table holds at least this many rows."
    )
    compact_every_writes: int = Field(
        50, ge=1, description="Compact the table after this many small write operations."
    )
    nprobes: int = Field(32, ge=1, le=1024, description="IVF partitions probed per query once an ANN index exists.")
    refine_factor: int = Field(4, ge=1, le=100, description="ANN candidates re-ranked exactly per result.")


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


class DomainVocabulary(_Section):
    """One knowledge domain for lookup_knowledge's hint layer (DESIGN §7.1); see ``knowledge/domains.py``."""

    path_aliases: tuple[str, ...] = Field((), description="Directory names whose documents belong to the domain.")
    title_prefixes: tuple[str, ...] = Field((), description="Alert-name prefixes, e.g. 'Kube' (CamelCase boundary).")
    terms: tuple[str, ...] = Field((), description="Query words/phrases (English or Chinese) naming the domain.")


class KnowledgeSettings(_Section):
    """lookup_knowledge (DESIGN §7). Similarity thresholds are cosine similarities of the query and a level=2 chunk,
    calibrated on the runbook golden set with ``scripts/eval_runbooks.py --calibrate`` (see docs/lookup_knowledge.md).
    """

    mode: Literal["auto", "primary", "fallback"] = Field(
        "auto", description="Semantic layer: auto (vector index, exact search on error), primary or fallback (exact)."
    )
    top_k: int = Field(5, ge=1, le=50, description="Evidence blocks (documents) returned by default.")
    candidate_chunks: int = Field(40, ge=1, le=500, description="level=2 chunks fetched per semantic attempt.")
    context_types: tuple[str, ...] = Field(("resource",), description="Context types searched (level=2 chunks).")
    min_similarity: float = Field(
        0.30, ge=-1.0, le=1.0, description="REFERENCE floor: chunks below it are dropped (the search threshold)."
    )
    highly_relevant_min_similarity: float = Field(
        0.50, ge=-1.0, le=1.0, description="HIGHLY_RELEVANT from this cosine similarity."
    )
    precise_min_similarity: float = Field(
        0.50, ge=-1.0, le=1.0, description="PRECISE from this similarity when the hint layer matched the document."
    )
    hint_filter: bool = Field(True, description="Restrict the first attempt to single_domain_or_null's documents.")
    hint_boost: bool = Field(True, description="Add the hint boosts below to the ranking score (not to the scores).")
    hint_boost_strong: float = Field(
        0.05, ge=0.0, le=0.5, description="Rank boost for documents named by the query (alert, title, code, metric)."
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
        64, ge=1, le=4096, description="A block cut to fit the budget keeps at least this many tokens, else is left out."
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
    embedding: EmbeddingSettings = EmbeddingSettings()
    vector: VectorSettings = VectorSettings()
    ingest: IngestSettings = IngestSettings()
    knowledge: KnowledgeSettings = KnowledgeSettings()

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
    """Build the settings once at the composition root. ``home`` overrides ``CE_HOME`` and the default."""
    if home is not None:
        overrides["home"] = Path(home)
    return Settings(**overrides)
