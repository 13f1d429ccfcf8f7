"""BackgroundEngine (the stdio server's engine, opened off the handshake): states, errors and closing, with fakes."""

from __future__ import annotations

import threading
import time

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.mcp.background import BackgroundEngine


def _eventually(check, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class FakeEmbedder:
    def __init__(self, gate: threading.Event | None = None, error: Exception | None = None) -> None:
        self.gate, self.error, self.warmed = gate, error, 0
        self.loading = threading.Event()

    def warm_up(self) -> None:
        self.loading.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.error is not None:
            raise self.error
        self.warmed += 1


class FakeService:
    def __init__(self, embedder: FakeEmbedder) -> None:
        self.embedder, self.closed = embedder, 0

    def close(self) -> None:
        self.closed += 1


def test_tool_calls_get_the_service_once_open_and_the_status_follows_the_model():
    gate = threading.Event()
    service = FakeService(FakeEmbedder(gate))
    engine = BackgroundEngine(lambda: service)
    assert engine.status() == {"engine": "opening", "model_loaded": False}
    engine.start()
    assert engine.get() is service  # open: calls run while the model still loads
    assert engine.status() == {"engine": "loading_model", "model_loaded": False}
    assert service.embedder.loading.wait(10)
    gate.set()
    engine.close()  # waits for the model
    assert engine.status() == {"engine": "ready", "model_loaded": True}
    assert service.embedder.warmed == 1 and service.closed == 1
    engine.close()  # idempotent
    assert service.closed == 1


def test_an_opening_error_is_every_call_s_answer():
    def fail() -> FakeService:
        raise ContextEngineError(ErrorCode.INDEX_MODEL_MISMATCH, "indexed with another model", {"index_dim": "384"})

    engine = BackgroundEngine(fail)
    engine.start()
    for _ in range(2):
        with pytest.raises(ContextEngineError) as err:
            engine.get()
        assert err.value.code is ErrorCode.INDEX_MODEL_MISMATCH and err.value.details == {"index_dim": "384"}
    assert engine.status() == {"engine": "failed", "model_loaded": False, "error": "IDX-4091"}
    engine.close()


def test_an_unexpected_error_becomes_api_5001():
    service = FakeService(FakeEmbedder(error=RuntimeError("weights file truncated")))
    engine = BackgroundEngine(lambda: service)
    engine.start()
    assert service.embedder.loading.wait(10)
    engine.close()  # the service was opened, so it is closed even though the model failed
    assert service.closed == 1
    with pytest.raises(ContextEngineError) as err:
        engine.get()
    assert err.value.code is ErrorCode.INTERNAL and "weights" not in err.value.message
    assert engine.status()["engine"] == "failed"


def test_closing_before_the_model_load_begins_skips_it():
    opened, release = threading.Event(), threading.Event()
    service = FakeService(FakeEmbedder())

    def slow_open() -> FakeService:
        opened.set()
        assert release.wait(10)
        return service

    engine = BackgroundEngine(slow_open)
    engine.start()
    assert opened.wait(10)
    closer = threading.Thread(target=engine.close)
    closer.start()  # the client hung up while the stores were opening
    assert _eventually(engine._closing.is_set)
    release.set()
    closer.join(10)
    assert service.closed == 1 and service.embedder.warmed == 0


def test_the_warm_up_runs_after_the_model_and_the_status_says_so():
    gate, warmed = threading.Event(), []
    service = FakeService(FakeEmbedder())

    def warm(s: FakeService) -> None:
        assert gate.wait(10)
        warmed.append(s)

    engine = BackgroundEngine(lambda: service, warm_up=warm)
    engine.start()
    assert _eventually(lambda: engine.state == "warming")
    assert engine.status() == {"engine": "warming", "model_loaded": True}
    assert engine.get() is service  # tool calls run while the rest warms
    gate.set()
    assert _eventually(lambda: engine.state == "ready")
    assert warmed == [service] and service.embedder.warmed == 1
    engine.close()


def test_a_failing_warm_up_still_ends_ready():
    service = FakeService(FakeEmbedder())

    def warm(_: FakeService) -> None:
        raise RuntimeError("jieba dictionary missing")

    engine = BackgroundEngine(lambda: service, warm_up=warm)
    engine.start()
    assert _eventually(lambda: engine.state == "ready")
    assert engine.get() is service and engine.status() == {"engine": "ready", "model_loaded": True}
    engine.close()
    assert service.closed == 1
