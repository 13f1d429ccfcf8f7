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

EngineState = Literal["opening", "loading_model", "warming", "ready", "failed"]
"""``opening``: the stores and index are being opened; ``loading_model``: open (tool calls run), the embedding model
still loading; ``warming``: the model loaded, the rest of what first requests need being loaded (``warm_up``, issue
26); ``ready``: all done; ``failed``: opening or the model load raised (tool calls get that error)."""


class BackgroundEngine:
    """Opens a service on a daemon thread and hands it to tool calls once it is open.

    Args:
        open_service: builds the service (``build_engine(settings)``); runs on the background thread.
        warm_up: called with the open service once the model has loaded, on the same thread, to load what the first
            requests need (``context_engine.warm_up.warm_up``: the tokenizer, the vector index, each account's
            derived indexes); it must not raise for a part it cannot load (a raise is logged, and the engine is
            ready all the same). ``None``: the model only.

    The thread opens the service, then loads its embedding model (``service.embedder.warm_up()``, when the embedder
    has one), then runs ``warm_up``. :meth:`get` blocks until the service is open (not until the model has loaded:
    read-only tools that embed nothing need not wait for it). :meth:`close` waits for the thread and closes the service.
    """

    def __init__(self, open_service: Callable[[], Any], warm_up: Callable[[Any], Any] | None = None) -> None:
        self._open_service = open_service
        self._warm_up = warm_up
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
            loaded = self._state in ("warming", "ready")
            status: dict[str, Any] = {"engine": self._state, "model_loaded": loaded}
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
        """Skip the model load and the warm-up if they have not begun, wait for the thread, and close the service
        (idempotent)."""
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
        log.info("model_loaded", load_ms=round((time.perf_counter() - loading) * 1000, 1))
        if self._warm_up is not None and not self._closing.is_set():
            with self._lock:
                self._state = "warming"
            warming = time.perf_counter()
            try:
                self._warm_up(service)
            except Exception as err:  # noqa: BLE001 - a part not warmed loads on its first request, as before
                log.warning("warm_up_failed", error=type(err).__name__)
            log.info("warmed_up", warm_ms=round((time.perf_counter() - warming) * 1000, 1))
        with self._lock:
            self._state = "ready"

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
