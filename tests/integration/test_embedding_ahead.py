"""A write's embedding overlapped with its content and node rows (issue 26 item 1; ingest/pipeline.py).

A small write (at most ``_AHEAD_MAX_CHARS`` characters to embed, no progress callback, no cancel event) is embedded in
a background thread while the calling thread, holding the write lock, writes the nodes' content files and metadata
rows and prepares the directory summaries; the vectors join them in the same transaction. These tests pin what must
not change with it: a failure anywhere (the model mid-batch, the content store while the model still runs) leaves
the store as it was and no embedding running; vectors, URIs and order are those of the input; the overlap really
happens (the model is still embedding when the first content file is written: an event, never a timing). A write
over the bound, or one with a cancel event, is embedded before it opens an intent, as before.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import context_engine.ingest.pipeline as pipeline_module
from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.background import Background
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Level
from tests.integration.test_write_path import snapshot

ALICE = RequestContext(account_id="default", role="user", user_space="alice", agent_space="helper")
SESSION = "ctx://user/alice/memories/sessions/s1/"


def _messages(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "speaker": "Ann" if i % 2 == 0 else "Bot",
         "content": f"Message number {i}: the pottery class moved to room {i % 7}."}
        for i in range(start, start + n)
    ]


class Gate:
    """Wraps an embedder: its first ``embed_documents`` call (a write's documents; the directory summaries come after)
    waits for ``go`` (set by the write's first content file), records whether it was set before the wait timed out
    and in which thread it ran, and with ``fail`` raises then."""

    def __init__(self, real: Any, *, fail: bool = False) -> None:
        self.real, self.model_name, self.dim = real, real.model_name, real.dim
        self.go = threading.Event()
        self.fail = fail
        self.overlapped: list[bool] = []
        self.threads: list[str] = []
        self.returned = threading.Event()

    def embed_documents(self, texts, progress=None):
        try:
            if not self.threads:
                self.threads.append(threading.current_thread().name)
                self.overlapped.append(self.go.wait(timeout=30))
                if self.fail:
                    raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "model crashed mid-batch", retryable=True)
            return self.real.embed_documents(texts, progress=progress)
        finally:
            self.returned.set()

    def embed_query(self, text):
        return self.real.embed_query(text)


def _gate_content(engine, gate: Gate, *, fail_after: int | None = None) -> list[str]:
    """Every content write of the engine sets ``gate.go``; with ``fail_after``, the write after that many raises."""
    content = engine.pipeline._content
    real = content.write_levels
    written: list[str] = []

    def write_levels(account_id, uri, levels):
        if fail_after is not None and len(written) >= fail_after:
            raise ContextEngineError(ErrorCode.STORAGE_FAILED, "disk full", retryable=True)
        real(account_id, uri, levels)
        written.append(uri)
        gate.go.set()

    content.write_levels = write_levels
    return written


def test_the_model_embeds_while_the_content_and_rows_are_written(make_engine):
    engine = make_engine()
    gate = Gate(engine.embedder)
    engine.pipeline._embedder = gate
    _gate_content(engine, gate)
    result = engine.add_messages(_messages(20), "s1", ALICE)
    assert gate.overlapped == [True]  # the first content file was written while the model was embedding
    assert gate.threads == ["ce-embed-ahead"]
    assert result.uris == [f"{SESSION}{i:06d}.md" for i in range(1, 21)]
    nodes = engine.metadata.get_nodes("default", result.uris)
    assert all(nodes[u].index_status == "indexed" for u in result.uris)


def test_vectors_and_order_are_those_of_the_input(make_engine, embedder):
    engine = make_engine()
    msgs = _messages(30)
    result = engine.add_messages(msgs, "s1", ALICE)
    rows = {v.uri: v for v in engine.metadata.get_vectors("default", result.uris) if v.level == 0}
    texts = [f"{rows[u].context}\n{rows[u].text}" if rows[u].context else rows[u].text for u in result.uris]
    expected = embedder.embed_documents(texts)  # one call of the same texts, as the write made it
    for i, uri in enumerate(result.uris):
        assert rows[uri].text.endswith(msgs[i]["content"])
        assert np.array_equal(np.asarray(rows[uri].vector, dtype=np.float32), expected[i])
        assert engine.read(uri, Level.L2) == msgs[i]["content"]
    again = engine.add_messages(_messages(5, start=30), "s1", ALICE)
    assert again.uris == [f"{SESSION}{i:06d}.md" for i in range(31, 36)]


def test_a_model_failure_mid_batch_leaves_nothing_stored(make_engine):
    engine = make_engine()
    engine.add_messages(_messages(4), "s1", ALICE)
    before = snapshot(engine)
    gate = Gate(engine.embedder, fail=True)
    engine.pipeline._embedder = gate
    written = _gate_content(engine, gate)
    with pytest.raises(ContextEngineError) as err:
        engine.add_messages(_messages(10, start=4), "s1", ALICE)
    assert err.value.code is ErrorCode.EMBEDDING_FAILED
    assert gate.overlapped == [True] and written  # content and rows were written before the model failed ...
    assert snapshot(engine) == before  # ... and undone with the transaction
    assert engine.metadata.journal_entries() == []
    engine.pipeline._embedder = engine.embedder
    engine.pipeline._content.write_levels = type(engine.pipeline._content).write_levels.__get__(
        engine.pipeline._content
    )
    again = engine.add_messages(_messages(2, start=4), "s1", ALICE)
    assert again.uris == [f"{SESSION}000005.md", f"{SESSION}000006.md"]  # the numbers were released


def test_a_store_failure_while_the_model_runs_leaves_nothing_stored_and_no_embedding_running(make_engine):
    engine = make_engine()
    engine.add_messages(_messages(4), "s1", ALICE)
    before = snapshot(engine)
    gate = Gate(engine.embedder)
    engine.pipeline._embedder = gate
    _gate_content(engine, gate, fail_after=3)
    with pytest.raises(ContextEngineError) as err:
        engine.add_messages(_messages(10, start=4), "s1", ALICE)
    assert err.value.code is ErrorCode.STORAGE_FAILED
    assert gate.returned.is_set()  # the write waited for its embedding before it raised
    assert snapshot(engine) == before
    assert engine.metadata.journal_entries() == []


def test_a_write_over_the_bound_is_embedded_before_it_opens_an_intent(make_engine, monkeypatch):
    engine = make_engine()
    monkeypatch.setattr(pipeline_module, "_AHEAD_MAX_CHARS", 10)
    gate = Gate(engine.embedder, fail=True)
    gate.go.set()
    engine.pipeline._embedder = gate
    opened: list[str] = []
    real_begin = engine.pipeline.journal.begin
    monkeypatch.setattr(engine.pipeline.journal, "begin", lambda *a: opened.append("begin") or real_begin(*a))
    with pytest.raises(ContextEngineError) as err:
        engine.add_messages(_messages(3), "s1", ALICE)
    assert err.value.code is ErrorCode.EMBEDDING_FAILED
    assert gate.threads == ["MainThread"] and opened == []
    assert engine.metadata.get_node("default", SESSION) is None


def test_background_returns_the_value_or_raises_in_the_caller():
    assert Background(lambda: 41 + 1, "t").result() == 42
    done = threading.Event()

    def boom() -> int:
        done.set()
        raise KeyError("x")

    task = Background(boom, "t")
    task.wait()
    assert done.is_set()
    with pytest.raises(KeyError):
        task.result()


def test_a_message_whose_abstract_redaction_changes_is_embedded_as_stored(make_engine, embedder):
    engine = make_engine()
    msgs = _messages(6)
    msgs[3]["content"] = "the staging db password=hunter2-Xq9 works again"
    result = engine.add_messages(msgs, "s1", ALICE)
    rows = {v.uri: v for v in engine.metadata.get_vectors("default", result.uris) if v.level == 0}
    assert "[REDACTED" in rows[result.uris[3]].text and "hunter2" not in rows[result.uris[3]].text
    texts = [f"{rows[u].context}\n{rows[u].text}" if rows[u].context else rows[u].text for u in result.uris]
    expected = embedder.embed_documents(texts)
    for i, uri in enumerate(result.uris):
        assert np.array_equal(np.asarray(rows[uri].vector, dtype=np.float32), expected[i])
