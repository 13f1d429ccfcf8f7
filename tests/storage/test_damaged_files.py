"""Damaged derived files, at the adapter level (issue 27; docs/derived_indexes.md, "Faults"): a LanceDB table whose
files are damaged is refused at open with ``IDX-5031`` (never opened with the stale count of its manifest), can be
dropped without being opened, and a derived file that fails its checks is reported until it is written anew. The
service-level scenario (stats, /readyz, ``reindex --full``) is tests/integration/test_damaged_indexes.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.settings import VectorSettings
from context_engine.storage.derived_files import DerivedFiles
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.vector.lancedb_index import LanceDBVectorIndex, drop_table
from context_engine.storage.vector.lazy import LazyVectorIndex
from tests.storage.test_derived_files import DIM, records


@pytest.fixture
def table(tmp_path) -> Path:
    path = tmp_path / "vectors"
    index = LanceDBVectorIndex(path, DIM, VectorSettings())
    for start in range(0, 12, 4):  # three commits: three data files
        index.upsert(records(12)[start : start + 4])
    assert index.count() == 12
    return path


def _damage(path: Path, how: str) -> None:
    files = sorted(path.glob("*.lance/data/*.lance"))
    assert len(files) >= 2
    if how == "zeroed":
        files[1].write_bytes(b"\0" * files[1].stat().st_size)
    elif how == "truncated":
        os.truncate(files[1], files[1].stat().st_size - 7)
    elif how == "deleted":
        files[1].unlink()
    else:
        for manifest in path.glob("*.lance/_versions/*.manifest"):
            manifest.write_bytes(b"\0" * manifest.stat().st_size)


@pytest.mark.parametrize("how", ["zeroed", "truncated", "deleted", "manifests-zeroed"])
def test_a_damaged_lancedb_table_is_refused_at_open_and_dropped_without_opening(table, how):
    _damage(table, how)
    with pytest.raises(ContextEngineError) as info:
        LanceDBVectorIndex(table, DIM, VectorSettings())
    assert info.value.code is ErrorCode.INDEX_DAMAGED
    assert "reindex --full" in info.value.message and info.value.details["path"] == str(table)

    lazy = LazyVectorIndex(
        "lancedb",
        lambda: LanceDBVectorIndex(table, DIM, VectorSettings()),
        dropper=lambda: drop_table(table, VectorSettings().table_name),
    )
    with pytest.raises(ContextEngineError) as again:  # a failed open is not kept: every call tries again
        lazy.check()
    assert again.value.code is ErrorCode.INDEX_DAMAGED
    assert lazy.drop() is True
    assert lazy.count() == 0  # opened anew: an empty table
    lazy.upsert(records(3))
    lazy.check()
    assert lazy.count() == 3


def test_a_whole_table_passes_the_check(table):
    index = LanceDBVectorIndex(table, DIM, VectorSettings())
    index.check()
    assert drop_table(table, "no_such_table") is False


def test_a_damaged_derived_file_is_reported_until_it_is_written_anew(tmp_path):
    store = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    try:
        files = DerivedFiles(tmp_path / "derived", store)
        arrays = {"x": np.arange(1000, dtype=np.float32)}
        path = files.save("l0", "acc", 1, {"p": 1}, {}, arrays)
        assert path is not None and files.check("l0", "acc") is None and files.current_problems() == []
        assert files.check("bm25", "acc") is None  # absent: nothing to report
        data = bytearray(path.read_bytes())
        data[-10] ^= 0xFF  # one flipped byte in an array
        path.write_bytes(bytes(data))
        assert files.check("l0", "acc") == "checksum mismatch in array x"
        assert files.current_problems() == []  # check() only reports: it records nothing
        assert files.load("l0", "acc", {"p": 1}) is None
        assert [p.split(": ", 1)[0] for p in files.current_problems()] == [str(path)]
        assert files.save("l0", "acc", 1, {"p": 1}, {}, arrays) is not None
        assert files.current_problems() == [] and files.check("l0", "acc") is None
        shutil.rmtree(tmp_path / "derived")
        read_only = DerivedFiles(tmp_path / "derived", store, read_only=True)
        assert read_only.save("l0", "acc", 1, {"p": 1}, {}, arrays) is None
        assert not (tmp_path / "derived").exists()
    finally:
        store.close()
