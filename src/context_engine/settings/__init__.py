"""The one ``Settings`` object (STYLE.md, Config; DESIGN.md §10).

Sources, highest first: constructor arguments, ``CE_`` environment variables (``__`` for nesting, e.g.
``CE_INGEST__MAX_FILE_BYTES``), then ``<home>/config.toml``. The embedded default needs no configuration.
Secrets (database URL with its password, S3 keys, the Milvus token) may instead come from files in the directory
``CE_SECRETS_DIR`` names, one file per setting named like its variable (``ce_metadata__url``), e.g. Docker/Kubernetes
secrets mounted at ``/run/secrets``; they rank after the environment and before config.toml.
Unknown keys are rejected. This is the only module that reads the environment.

The sections live in submodules by the part they configure (``storage``, ``ingest``, ``knowledge``, ``retrieval``,
``serving``); every section class is importable from here.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from context_engine.settings.base import SettingsSection
from context_engine.settings.ingest import IngestSettings, MemorySettings
from context_engine.settings.knowledge import DomainVocabulary, KnowledgeSettings
from context_engine.settings.retrieval import (
    AssemblySettings,
    HierarchySettings,
    KeywordSettings,
    MatchQualitySettings,
    PlannerSettings,
    QueryTransformSettings,
    ReadSettings,
    RedactionSettings,
    RetrievalSettings,
    ScoringSettings,
    SeedSettings,
)
from context_engine.settings.serving import EvalSettings, HttpSettings, LoggingSettings
from context_engine.settings.storage import (
    ContentSettings,
    EmbeddingSettings,
    MetadataSettings,
    MilvusSettings,
    VectorSettings,
)

__all__ = [
    "DEFAULT_HOME",
    "AssemblySettings",
    "ContentSettings",
    "DomainVocabulary",
    "EmbeddingSettings",
    "EvalSettings",
    "HierarchySettings",
    "HttpSettings",
    "IngestSettings",
    "KeywordSettings",
    "KnowledgeSettings",
    "LoggingSettings",
    "MatchQualitySettings",
    "MemorySettings",
    "MetadataSettings",
    "MilvusSettings",
    "PlannerSettings",
    "QueryTransformSettings",
    "ReadSettings",
    "RedactionSettings",
    "RetrievalSettings",
    "ScoringSettings",
    "SeedSettings",
    "Settings",
    "SettingsSection",
    "VectorSettings",
    "load_settings",
]

DEFAULT_HOME = Path("~/.context-engine")


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

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, home: Path) -> Path:
        """The home made absolute where the settings are loaded: a child process (derived files, built in the data
        home, ``storage/derived/child.py``) or a later ``chdir`` would otherwise resolve ``--home ./store`` anew."""
        return home.expanduser().resolve()

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
