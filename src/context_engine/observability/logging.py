"""Structured JSON logs (DESIGN.md §9) with structlog.

The library never configures logging (STYLE.md): the process entry points (``context-engine serve``,
``context-engine mcp``) call :func:`configure_logging` once. It sends structlog events *and* standard-library records
(uvicorn, the MCP SDK, model loading) through one formatter to one stream, stderr by default, one JSON object per
line. stdout is never written, so the MCP stdio transport owns it.

Every line carries ``timestamp`` (UTC, ISO 8601), ``level``, ``event`` and ``logger``, plus whatever the request has
bound with :func:`bind_request`: ``request_id, account_id, role, effective_owner_spaces``. The retrieval
pipelines add the seed 000 §8 fields (``query_hash, typed_query_count, top_k, seed_count, final_count, warnings,
recheck_drop_reasons``), either as structlog fields or as a standard record's ``extra={"ce_event": {...}}``, which is
lifted into the event. Query text is not logged unless ``logging.log_query_text`` is set (:func:`query_fields`); API
keys and request bodies never are. Every line passes :func:`context_engine.redaction.redact_log_event` last, so a
secret that reaches a message or field anyway (a URI, an error text, a logged query) is written redacted.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

import structlog

if TYPE_CHECKING:  # types only: importing the logger must not build the schema and settings models (cold start)
    from context_engine.schema.context import RequestContext
    from context_engine.settings import LoggingSettings

_HANDLER_NAME = "context-engine"
# Third-party loggers routed to the one handler (their own handlers are removed so nothing is printed twice).
_ADOPTED_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "mcp", "httpx", "sentence_transformers")


def configure_logging(settings: LoggingSettings | None = None, *, stream: TextIO | None = None) -> None:
    """Route structlog and standard logging to ``stream`` (default ``sys.stderr``) as JSON lines (or console text).

    Idempotent: a second call replaces the handler installed by the first. Side effects: the root logger's level
    and this module's handler; uvicorn's and the MCP SDK's loggers propagate to it.
    """
    if settings is None:
        from context_engine.settings import LoggingSettings

        settings = LoggingSettings()
    from context_engine.redaction import redact_log_event

    cfg = settings
    level = getattr(logging, cfg.level)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        _merge_ce_event,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer(ensure_ascii=False)
        if cfg.format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            redact_log_event,  # last before rendering: the message, every field and a formatted traceback
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        # ours from an earlier call, and plain console handlers (logging.basicConfig) that would print twice
        if old.get_name() == _HANDLER_NAME or type(old) is logging.StreamHandler or type(old).__name__ == "RichHandler":
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in _ADOPTED_LOGGERS:
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
        lg.setLevel(logging.NOTSET)
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)  # the HTTP layer writes its own access line


def _merge_ce_event(logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """Lift the fields of a standard-library record's ``extra={"ce_event": {...}}`` into the event.

    A field the request already bound (e.g. ``request_id``) keeps the bound value; a different value from the
    record is kept as ``engine_<field>``.
    """
    record = event_dict.get("_record")
    fields = getattr(record, "ce_event", None)
    if isinstance(fields, Mapping):
        for key, value in fields.items():
            if key in event_dict and event_dict[key] != value:
                event_dict[f"engine_{key}"] = value
            else:
                event_dict[key] = value
    return event_dict


def current_request_id() -> str | None:
    """The request id bound by the interface serving this call (:func:`bind_request`), or ``None``.

    The engine may use it as its own request id so that responses, audit rows and log lines share one id.
    """
    value = structlog.contextvars.get_contextvars().get("request_id")
    return value if isinstance(value, str) else None


def get_logger(name: str) -> Any:
    """A structlog logger; silent until an entry point calls :func:`configure_logging` (stdlib default: warnings)."""
    return structlog.stdlib.get_logger(name)


def query_hash(text: str) -> str:
    """First 16 hex characters of the SHA-256 of the query text: correlates requests without logging the text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def query_fields(text: str | None, settings: LoggingSettings) -> dict[str, Any]:
    """``{"query_hash": ...}``, plus ``"query"`` only when ``log_query_text`` is enabled."""
    if text is None:
        return {}
    out: dict[str, Any] = {"query_hash": query_hash(text)}
    if settings.log_query_text:
        out["query"] = text
    return out


def context_fields(ctx: RequestContext) -> dict[str, Any]:
    """``account_id, role, effective_owner_spaces`` (``["*"]`` for an admin, who sees every space of the account)."""
    spaces = ctx.visible_owner_spaces()
    return {"account_id": ctx.account_id, "role": ctx.role, "effective_owner_spaces": spaces or ["*"]}


@contextmanager
def bind_request(request_id: str, ctx: RequestContext | None = None, **extra: Any) -> Iterator[None]:
    """Bind ``request_id`` (and the caller's context fields) to every log line written inside the block."""
    fields: dict[str, Any] = {"request_id": request_id, **extra}
    if ctx is not None:
        fields.update(context_fields(ctx))
    tokens = structlog.contextvars.bind_contextvars(**fields)
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)
