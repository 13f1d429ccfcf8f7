"""Per-request traces of the retrieval pipelines (DESIGN.md §5, §9).

A :class:`TraceRecorder` lives for one request. Stages call it to time themselves, to record degradations
(``warn``: a ``"<code>: <message>"`` line in ``trace.warnings`` plus the ``retrieval.fallback.count`` metric), drops
(``drop``: a candidate removed, with its ``exclude_reason``) and decisions (``detail``: the stage-by-stage
``thinking_trace``). Events are always counted; their content is kept only when the trace is ``detailed``, so a basic
request pays for counters, not for copies. Query text is never put into an event by this module.

Thread-safe: the search pipeline may expand several typed queries at once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from context_engine.errors import ErrorCode
from context_engine.observability.metrics import Metrics


class TraceRecorder:
    """Timings, warnings, drops and (when ``detailed``) decisions of one request.

    Args:
        detailed: keep event contents and stage details for ``thinking_trace``.
        metrics: where stage durations and degradations are counted (``None``: nowhere, e.g. in unit tests).
    """

    def __init__(self, *, detailed: bool = False, metrics: Metrics | None = None) -> None:
        self.detailed = detailed
        self._metrics = metrics
        self._lock = threading.Lock()
        self.timings_ms: dict[str, float] = {}
        self.warnings: list[str] = []
        self.codes: list[ErrorCode] = []
        self.event_count = 0
        self.events: list[dict[str, Any]] = []
        self.drops: Counter[tuple[str, str]] = Counter()  # (stage, reason without its ":<detail>") -> count
        self.details: dict[str, dict[str, Any]] = {}

    # ---- timing ---------------------------------------------------------------------------------------------------
    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a block as stage ``name`` (milliseconds, accumulated if the stage runs more than once)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            with self._lock:
                self.timings_ms[name] = self.timings_ms.get(name, 0.0) + elapsed * 1e3
            if self._metrics is not None:
                self._metrics.stage_duration.labels(stage=name).observe(elapsed)

    def ms(self, name: str) -> int:
        """The stage's time, rounded to whole milliseconds (0 when it did not run)."""
        return round(self.timings_ms.get(name, 0.0))

    # ---- events ---------------------------------------------------------------------------------------------------
    def event(self, stage: str, kind: str, **data: Any) -> None:
        """Count one event; keep ``data`` only in a detailed trace."""
        with self._lock:
            self.event_count += 1
            if self.detailed:
                self.events.append({"stage": stage, "event": kind, **data})

    def warn(self, code: ErrorCode, message: str, *, stage: str, **data: Any) -> None:
        """Record a degradation: ``"<code>: <message>"`` in ``warnings`` and counted by code in the metrics, once per
        distinct line (three typed queries failing the same way are one degradation of the request)."""
        line = f"{code.value}: {message}"
        with self._lock:
            new = line not in self.warnings
            if new:
                self.warnings.append(line)
            self.codes.append(code)
        if new and self._metrics is not None:
            self._metrics.fallbacks.labels(code=code.value).inc()
        self.event(stage, "warning", code=code.value, message=message, **data)

    def drop(self, stage: str, uri: str, reason: str) -> None:
        """Record that ``stage`` removed the candidate ``uri`` because of ``reason`` (its ``exclude_reason``)."""
        key = reason.split(":", 1)[0]
        with self._lock:
            self.drops[(stage, key)] += 1
        self.event(stage, "drop", uri=uri, exclude_reason=reason)

    def detail(self, stage: str, key: str, value: Any) -> None:
        """Set ``thinking_trace[stage][key]`` (ignored unless detailed; pass cheap values or build them lazily)."""
        if not self.detailed:
            return
        with self._lock:
            self.details.setdefault(stage, {})[key] = value

    def drop_reasons(self, stage: str | None = None) -> dict[str, int]:
        """Drop counts by reason (without its ``:<detail>``), of one stage or of all."""
        with self._lock:
            out: Counter[str] = Counter()
            for (st, reason), count in self.drops.items():
                if stage is None or st == stage:
                    out[reason] += count
            return dict(out)

    def has(self, code: ErrorCode) -> bool:
        """Whether a warning with ``code`` was recorded."""
        with self._lock:
            return code in self.codes

    def thinking_trace(self) -> dict[str, Any]:
        """The detailed decisions: ``{"stages": {...}, "events": [...], "timings_ms": {...}}``."""
        with self._lock:
            return {
                "stages": {k: dict(v) for k, v in self.details.items()},
                "events": list(self.events),
                "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
                "drops": {f"{st}:{reason}": n for (st, reason), n in sorted(self.drops.items())},
            }
