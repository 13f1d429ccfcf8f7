"""The engine opened on a background thread, for the MCP stdio server (issue 12, cold start).

``context-engine mcp`` used to open the engine (stores and vector index, a few seconds) and load the embedding model
(seconds more) in the server's lifespan, before the first message was read: a client's ``initialize`` waited for
all of it (about 11 s on the 2-core reference machine). :class:`BackgroundEngine` starts the opening on a thread and
returns at once, so ``initialize`` and ``tools/list`` are answered while it runs; a tool call waits in its worker
thread until the engine is open, and a call that embeds text then waits on the embedder's own lock until the model
has loaded.

No MCP, FastAPI or service import at module level: the caller passes the function that opens the service.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.observability.logging import get_logger

__all__ = ["BackgroundEngine", "EngineState"]

log = get_logger("context_engine.mcp")

EngineState = Literal["opening", "loading_model", "ready", "failed"]
"""``opening``: the stores and index are being opened; ``loading_model``: open (tool calls run), the embedding model
still loading; ``ready``: both done; ``failed``: opening or the model load raised (tool calls get that error)."""


class BackgroundEngine:
    """Opens a service on a daemon thread and hands it to tool calls once it is open.

    Args:
        open_service: builds the service (``build_engine(settings)``); runs on the background thread.

    The thread opens the service, then loads its embedding model (``service.embedder.warm_up()``, when the embedder
    has one). :meth:`get` blocks until the service is open (not until the model has loaded: read-only tools that
    embed nothing need not wait for it). :meth:`close` waits for the thread and closes the service.
    """

    def __init__(self, open_service: Callable[[], Any]) -> None:
        self._open_service = open_service
        self._service: Any = None
        self._error: ContextEngineError | None = None
        self._state: EngineState = "opening"
        self._opened = threading.Event()  # set once the service is open or opening failed
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="context-engine-open", daemon=True)

    def start(self) -> None:
        """Start opening (once); returns at once."""
        self._thread.start()

    @property
    def state(self) -> EngineState:
        """Where the opening stands (see :data:`EngineState`)."""
        with self._lock:
            return self._state

    def status(self) -> dict[str, Any]:
        """``{"engine": state, "model_loaded": bool}``, plus ``"error"`` (the error code) once failed. JSON-ready."""
        with self._lock:
            status: dict[str, Any] = {"engine": self._state, "model_loaded": self._state == "ready"}
            if self._error is not None:
                status["error"] = self._error.code.value
            return status

    def get(self) -> Any:
        """The open service; blocks until it is open.

        Raises:
            ContextEngineError: the error that opening the engine or loading the model raised (the same code each
                call), or ``API-5001`` for an unexpected failure (its traceback is logged once).
        """
        self._opened.wait()
        with self._lock:
            error, service = self._error, self._service
        if error is not None:
            raise ContextEngineError(error.code, error.message, error.details, retryable=error.retryable)
        return service

    def close(self) -> None:
        """Skip the model load if it has not begun, wait for the thread, and close the service (idempotent)."""
        self._closing.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            service, self._service = self._service, None
        if service is not None:
            service.close()

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            service = self._open_service()
        except Exception as err:  # noqa: BLE001 - recorded; every tool call returns it (an unexpected one as API-5001)
            self._fail(err, "engine_open_failed")
            self._opened.set()
            return
        with self._lock:
            self._service = service
            self._state = "loading_model"
        self._opened.set()
        log.info("engine_opened", open_ms=round((time.perf_counter() - started) * 1000, 1))
        if self._closing.is_set():
            return
        warm = getattr(service.embedder, "warm_up", None)
        loading = time.perf_counter()
        try:
            if callable(warm):
                warm()
        except Exception as err:  # noqa: BLE001 - recorded as for opening: no tool call runs on a broken model
            self._fail(err, "model_load_failed")
            return
        with self._lock:
            self._state = "ready"
        log.info("model_loaded", load_ms=round((time.perf_counter() - loading) * 1000, 1))

    def _fail(self, err: Exception, event: str) -> None:
        if isinstance(err, ContextEngineError):
            error = err
            log.error(event, code=err.code.value, message=err.message)
        else:
            error = ContextEngineError(ErrorCode.INTERNAL, "the engine failed to start; see the server log")
            log.exception(event)
        with self._lock:
            self._error = error
            self._state = "failed"
