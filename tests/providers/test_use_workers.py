"""``embedding.workers`` (issue 26): the default model embeds one call's texts on a thread pool, each worker with
``num_threads`` BLAS threads. The vectors are the serial ones up to float rounding (the same chunks give the same
bits), progress is reported per chunk in order, the process's BLAS setting is left as it was, and a failure is
``EMBEDDING_FAILED`` (retryable) as without workers."""

from __future__ import annotations

import numpy as np
import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.providers.use_embedder import PARALLEL_MIN_TEXTS, USEMultilingualEmbedder
from context_engine.settings import EmbeddingSettings

TEXTS = [f"message {i}: we moved the payments database to PostgreSQL {i % 17} last week" for i in range(150)]


@pytest.fixture(scope="module")
def serial() -> USEMultilingualEmbedder:
    emb = USEMultilingualEmbedder(EmbeddingSettings(workers=1))
    emb.warm_up()
    return emb


@pytest.fixture(scope="module")
def pooled(serial) -> USEMultilingualEmbedder:
    emb = USEMultilingualEmbedder(EmbeddingSettings(workers=2))
    emb._model = serial._model  # the same loaded weights (tests only)
    return emb


def test_vectors_are_the_serial_ones(serial, pooled):
    np.testing.assert_allclose(pooled.embed_documents(TEXTS), serial.embed_documents(TEXTS), atol=1e-6)
    # chunks of the batch size on both sides (a call of 2 x 64 or more texts): bit-identical
    long = TEXTS * 2
    assert np.array_equal(pooled.embed_documents(long[:256]), serial.embed_documents(long[:256]))


def test_progress_per_chunk_in_order(pooled):
    done: list[int] = []
    pooled.embed_documents(TEXTS[:130], progress=done.append)
    assert done == [64, 64, 2]  # min(batch_size 64, ceil(130 / 2)) texts a chunk


def test_the_blas_setting_is_restored(pooled):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [(i["user_api"], i["num_threads"]) for i in threadpoolctl.threadpool_info()]
    pooled.embed_documents(TEXTS)
    assert [(i["user_api"], i["num_threads"]) for i in threadpoolctl.threadpool_info()] == before


def test_a_failing_chunk_fails_the_call(pooled, monkeypatch):
    model = pooled._load()
    real = model.encode

    def encode(texts):
        if "boom" in texts:
            raise ValueError("tokenizer exploded")
        return real(texts)

    monkeypatch.setattr(model, "encode", encode)
    with pytest.raises(ContextEngineError) as info:
        pooled.embed_documents(TEXTS[:70] + ["boom"] + TEXTS[:60])
    assert info.value.code is ErrorCode.EMBEDDING_FAILED and info.value.retryable
    assert pooled.embed_documents(TEXTS[:10]).shape == (10, 512)  # the lock and the pool are usable again


def test_no_workers_without_a_thread_cap(serial):
    """``num_threads = 0`` (every core per call) embeds in the calling thread: no pool is made."""
    emb = USEMultilingualEmbedder(EmbeddingSettings(workers=2, num_threads=0))
    emb._model = serial._model
    emb.embed_documents(TEXTS[:100])
    assert emb._pool is None


def test_a_few_texts_are_embedded_in_the_calling_thread(serial):
    emb = USEMultilingualEmbedder(EmbeddingSettings(workers=2))
    emb._model = serial._model  # the same loaded weights (tests only)
    few = emb.embed_documents(TEXTS[: PARALLEL_MIN_TEXTS - 1])
    assert emb._pool is None  # no worker started for a search's few hit texts
    np.testing.assert_allclose(few, serial.embed_documents(TEXTS[: PARALLEL_MIN_TEXTS - 1]), atol=1e-6)
    emb.embed_documents(TEXTS[:PARALLEL_MIN_TEXTS])
    assert emb._pool is not None
