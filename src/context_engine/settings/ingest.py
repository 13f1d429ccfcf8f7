"""The write-path sections of :class:`~context_engine.settings.Settings`: ingest (parsing, chunking, summaries) and
memories."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from context_engine.settings.base import SettingsSection


class IngestSettings(SettingsSection):
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
        4096,
        ge=1,
        le=1_000_000,
        description="Reject a document that would make more L2 chunks than this (WRT-4132, HTTP 413), checked after "
        "chunking and before any embedding: it bounds the work of one request (each chunk is embedded: about 5 ms "
        "per chunk on the quiet 2-core reference machine, up to 90 ms when other jobs hold its cores). A 1 MB "
        "markdown document of runbooks makes about 2,200 chunks (bench/large_document.py); the largest runbook of "
        "../shared/data makes 23.",
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


class MemorySettings(SettingsSection):
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


