"""Derived indexes kept as files (issue 12, docs/derived_indexes.md "Files"): the file layout, its validation, and the
level-0 matrix opened from its file — identical results, catch-up of foreign writes from the change log, no full
reload while the file is current, a rebuild when the file cannot be used."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from hypothesis import given
from hypothesis import strategies as st

from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.storage import derived_files
from context_engine.storage.derived_files import DerivedFiles, PackedValues, pack_strings, unpack_strings
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.vector.matrix import MatrixVectorIndex

DIM = 16
ACC = "acc-a"


def unit(seed: int, n: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def records(n: int, seed: int = 0, prefix: str = "r", account_id: str = ACC) -> list[VectorRecord]:
    """``n`` level-0 rows over two owner spaces and three directories (one a scope root: parent ``None``)."""
    vectors = unit(seed, n)
    out = []
    for i in range(n):
        space = "shared" if i % 3 else "user:alice"
        folder = ("a", "b", None)[i % 3]
        uri = f"ctx://resources/{folder}/{prefix}{i}.md" if folder else f"ctx://user/alice/memories/{prefix}{i}.md"
        parent = f"ctx://resources/{folder}/" if folder else None
        out.append(
            VectorRecord(
                id=f"{prefix}{i:05d}",
                vector=vectors[i],
                uri=uri,
                parent_uri=parent,
                account_id=account_id,
                owner_space=space,
                context_type="resource" if folder else "memory",
                category="ops" if i % 2 else "",
                level=0,
                doc_id=uri,
                text=f"abstract {i} ünïcødé 中文 {prefix}",
                breadcrumb=f"Title {i}",
            )
        )
    return out


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlMetadataStore]:
    s = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    yield s
    s.close()


def l0(store: SqlMetadataStore, root: Path | None, **kw: object) -> MatrixVectorIndex:
    files = DerivedFiles(root, store) if root is not None else None
    return MatrixVectorIndex(store, levels=(0,), files=files, **kw)  # type: ignore[arg-type]


FILTERS = [
    VectorFilter(account_id=ACC),
    VectorFilter(account_id=ACC, owner_spaces=["shared"]),
    VectorFilter(account_id=ACC, owner_spaces=["user:alice"], context_types=["memory"]),
    VectorFilter(account_id=ACC, parent_uris=["ctx://resources/a/"]),
    VectorFilter(account_id=ACC, uri_prefix="ctx://resources/b/", categories=["ops"]),
    VectorFilter(account_id=ACC, doc_ids=["ctx://resources/a/r1.md", "ctx://resources/b/r2.md"]),
]


def results(index: MatrixVectorIndex, seed: int = 99) -> list[list[tuple[str, float, str, str]]]:
    out = []
    for q in unit(seed, 4):
        for flt in FILTERS:
            out.append([(h.id, round(h.score, 6), h.text, h.breadcrumb) for h in index.search(q, 7, flt)])
    return out


# ---- the layout -----------------------------------------------------------------------------------------------------
@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=30))
def test_strings_round_trip(values):
    blob, offsets = pack_strings(values)
    assert unpack_strings(blob, offsets) == values


@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=30), st.integers(-40, 40))
def test_packed_values_read_in_place_as_the_list(values, i):
    packed = PackedValues(*pack_strings(values))
    assert len(packed) == len(values)
    assert list(packed) == values
    assert packed[1:-1] == values[1:-1] and packed[::2] == values[::2]
    if -len(values) <= i < len(values):
        assert packed[i] == values[i]
    else:
        with pytest.raises(IndexError):
            packed[i]


def test_a_file_is_safetensors_and_reads_back_zero_copy(store, tmp_path):
    files = DerivedFiles(tmp_path / "derived", store)
    arrays = {
        "f": unit(1, 5),
        "b": np.array([True, False, True]),
        "u16": np.arange(7, dtype=np.uint16),
        "empty": np.zeros(0, dtype=np.int64),
    }
    path = files.save("l0", "acc", 42, {"p": 1}, {"note": "x"}, arrays)
    assert path is not None and path.parent == tmp_path / "derived" / "l0"
    by_library = safetensors.numpy.load_file(str(path))  # the library reads what we wrote
    snap = files.load("l0", "acc", {"p": 1})
    assert snap is not None and snap.generation == 42 and snap.meta == {"note": "x"}
    for name, arr in arrays.items():
        np.testing.assert_array_equal(snap.arrays[name], arr)
        np.testing.assert_array_equal(by_library[name], arr)
    snap.arrays["b"][0] = False  # private mapping: writable, never written back
    assert files.load("l0", "acc", {"p": 1}).arrays["b"][0]
    assert files.store_id(create=False) == store.get_meta(derived_files.STORE_ID_KEY)


def _rewrite_header(path: Path, change) -> None:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    own = json.loads(header["__metadata__"]["context-engine"])
    change(own)
    header["__metadata__"]["context-engine"] = json.dumps(own)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n :])


@pytest.mark.parametrize(
    "change, params",
    [
        (lambda own: own.update(version=derived_files.FORMAT_VERSION + 1), {"p": 1}),
        (lambda own: own.update(store_id="another-database"), {"p": 1}),
        (lambda own: own.update(account_id="other"), {"p": 1}),
        (lambda own: None, {"p": 2}),  # built with other settings
    ],
    ids=["format-version", "database", "account", "params"],
)
def test_a_file_that_does_not_match_is_not_used(store, tmp_path, change, params):
    files = DerivedFiles(tmp_path / "derived", store)
    path = files.save("l0", "acc", 3, {"p": 1}, {}, {"x": np.arange(3)})
    assert path is not None
    _rewrite_header(path, change)
    assert files.load("l0", "acc", params) is None
    assert files.rejected == 1


@pytest.mark.parametrize("cut", [0, 5, 30, -7])
def test_a_truncated_or_garbled_file_is_not_used(store, tmp_path, cut):
    files = DerivedFiles(tmp_path / "derived", store)
    path = files.save("l0", "acc", 3, {}, {}, {"x": np.arange(100)})
    assert path is not None
    data = path.read_bytes()
    path.write_bytes(data[:cut] if cut >= 0 else data[:cut] + b"\xff" * 3)
    assert files.load("l0", "acc", {}) is None
    assert files.rejected == 1


def test_a_save_removes_temporary_files_of_dead_writers_only(store, tmp_path):
    files = DerivedFiles(tmp_path / "derived", store)
    target = files.save("l0", "acc", 1, {}, {}, {"x": np.arange(3)})
    assert target is not None
    dead = target.with_name(f"{target.name}.tmp.{2**22 + 12345}.abcd")  # above pid_max: never a live process
    live = target.with_name(f"{target.name}.tmp.{os.getppid()}.abcd")
    dead.write_bytes(b"half")
    live.write_bytes(b"half")
    files.save("l0", "acc", 2, {}, {}, {"x": np.arange(3)})
    assert not dead.exists() and live.exists()
    assert files.load("l0", "acc", {}).generation == 2


def test_a_folder_that_cannot_be_written_fails_the_save_not_the_caller(store, tmp_path):
    (tmp_path / "derived").write_text("a file where the folder should be")
    files = DerivedFiles(tmp_path / "derived", store)
    assert files.save("l0", "acc", 1, {}, {}, {"x": np.arange(3)}) is None
    assert files.save_failures == 1


def _flip_byte_in(path: Path, array: str, at: int = 0, value: int = 0xFF) -> None:
    """Overwrite one byte of ``array``'s data in a saved file, leaving the header (and its checksums) as written."""
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    begin, _ = json.loads(data[8 : 8 + n])[array]["data_offsets"]
    data[8 + n + begin + at] = value
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("array", "value"), [("s0.alive", 0), ("s0.uris.utf8", 0xFF), ("s0.ids.utf8", 0xFF)])
def test_a_file_with_a_flipped_byte_is_rebuilt_not_served(store, tmp_path, array, value):
    # a tombstone set on a live row would silently hide it; a byte that is not UTF-8 in a string column would fail
    # every search or catch-up of the account until the file is rewritten: the CRC-32 of each array rejects both
    store.put_vectors(records(300))
    first = l0(store, tmp_path / "derived")
    expected = results(first)
    first.close()
    path = next((tmp_path / "derived" / "l0").glob("*.safetensors"))
    _flip_byte_in(path, array, at=5, value=value)
    second = l0(store, tmp_path / "derived")
    assert results(second) == expected
    assert (second.loads, second.file_loads) == (1, 0)
    assert second._files is not None and second._files.rejected == 1
    store.put_vectors(records(3, seed=5, prefix="new"))  # and the account catches up afterwards
    assert {h.id for h in second.search(records(3, seed=5, prefix="new")[0].vector, 1, FILTERS[0])} == {"new00000"}


def test_a_file_without_checksums_is_not_used(store, tmp_path):
    files = DerivedFiles(tmp_path / "derived", store)
    path = files.save("l0", "acc", 3, {}, {}, {"x": np.arange(100)})
    assert path is not None
    _rewrite_header(path, lambda own: own.pop("crc32"))
    assert files.load("l0", "acc", {}) is None
    assert files.rejected == 1
    assert files.usable("l0", "acc", {})  # the header check alone does not read the arrays


# ---- the level-0 matrix from its file --------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["float32", "half", "projected"])
def test_a_second_index_opens_from_the_file_with_identical_results(store, tmp_path, layout):
    kw: dict = {} if layout == "float32" else {"compress_rows": 50, "compress_dims": 8}
    if layout == "half":
        kw["project_rows"] = 10**6
    store.put_vectors(records(300))
    store.delete_vectors([f"r{i:05d}" for i in range(0, 300, 7)])  # tombstones in the file
    first = l0(store, tmp_path / "derived", **kw)
    expected = results(first)
    first.close()  # waits for the file written after the wholesale load
    assert first.loads == 1 and (tmp_path / "derived" / "l0").is_dir()

    second = l0(store, tmp_path / "derived", **kw)
    assert results(second) == expected
    assert (second.loads, second.file_loads, second.rows_loaded, second.rows_applied) == (0, 1, 0, 0)
    assert {seg.layout for seg, _ in second.view(ACC).segments.values()} == {layout}  # type: ignore[union-attr]
    assert results(l0(store, None, **kw)) == expected  # and a load from the store without files agrees
    built, read = (ix.view(ACC).segments for ix in (l0(store, None, **kw), second))  # type: ignore[union-attr]
    for space, (seg, _) in read.items():
        # a projected segment reads its float16 rows from the file, not the map; its int8 copies are the built ones
        assert (seg.far is not None) == (layout == "projected")
        if seg.far is not None:
            live = np.flatnonzero(seg.alive[: seg.n])
            np.testing.assert_array_equal(seg.far.rows(live[::-1]), seg.full[live[::-1]])
            np.testing.assert_array_equal(seg.q8[: seg.n][live], built[space][0].q8[live])  # type: ignore[index]


def test_file_rows_read_rows_of_the_file_as_opened(store, tmp_path):
    files = DerivedFiles(tmp_path / "derived", store)
    full = unit(3, 50).astype(np.float16)
    files.save("l0", "acc", 1, {}, {}, {"a": np.arange(3, dtype=np.int64), "full": full})
    snap = files.load("l0", "acc", {})
    far = snap.file_rows("full")
    assert far is not None and far.shape == full.shape and far.dtype == np.float16
    at = np.array([49, 0, 7, 7, 12])
    np.testing.assert_array_equal(far.rows(at), full[at])
    np.testing.assert_array_equal(far.whole(), full)
    assert far.rows(np.zeros(0, dtype=np.int64)).shape == (0, full.shape[1])
    for bad in ([50], [-1]):
        with pytest.raises(IndexError):
            far.rows(np.array(bad))
    assert snap.file_rows("a") is None and snap.file_rows("missing") is None  # 1-D, absent
    # a later save replaces the path; rows already opened still come from the file they were opened from
    unopened = files.load("l0", "acc", {})
    files.save("l0", "acc", 2, {}, {}, {"a": np.arange(3, dtype=np.int64), "full": -full})
    np.testing.assert_array_equal(far.rows(at), full[at])
    assert snap.file_rows("full") is not None  # one descriptor per snapshot, opened at the first call
    np.testing.assert_array_equal(files.load("l0", "acc", {}).file_rows("full").rows(at), -full[at])
    # a snapshot whose file was replaced before it opened it reads through its map instead (None), never the new file
    assert unopened.file_rows("full") is None
    np.testing.assert_array_equal(unopened.arrays["full"], full)


@pytest.mark.parametrize("change", ["drop", "shape", "dtype"])
def test_a_projected_segment_whose_int8_copies_do_not_fit_is_rebuilt_not_served(store, tmp_path, change):
    kw: dict = {"compress_rows": 50, "compress_dims": 8}
    store.put_vectors(records(300))
    first = l0(store, tmp_path / "derived", **kw)
    expected = results(first)
    first.close()
    files = DerivedFiles(tmp_path / "derived", store)
    params = first._params()
    snap = files.load("l0", ACC, params)
    arrays = dict(snap.arrays)
    if change == "drop":
        del arrays["s0.q8"]
    elif change == "shape":
        arrays["s0.q8"] = arrays["s0.q8"][:-1]
    else:
        arrays["s0.q8_scale"] = arrays["s0.q8_scale"].astype(np.float16)
    files.save("l0", ACC, snap.generation, params, snap.meta, arrays)  # whole and stamped, but not a segment

    second = l0(store, tmp_path / "derived", **kw)
    assert results(second) == expected
    assert (second.loads, second.file_loads) == (1, 0)  # reloaded from the store
    assert second._files.rejected == 1  # logged and counted, then replaced by the reload's own file


def test_foreign_writes_after_the_save_are_caught_up_from_the_change_log(store, tmp_path):
    store.put_vectors(records(200))
    first = l0(store, tmp_path / "derived")
    first.view(ACC)
    first.close()

    other = SqlMetadataStore.sqlite(tmp_path / "metadata.db")  # another process writes after the file was saved
    try:
        other.put_vectors(records(5, seed=7, prefix="new"))
        other.delete_vectors(["r00001", "r00002", "r00150"])
        other.put_vectors([records(200, seed=8)[10]])  # a row replaced by a new vector
    finally:
        other.close()

    second = l0(store, tmp_path / "derived")
    got = results(second)
    assert (second.loads, second.file_loads, second.rows_applied) == (0, 1, 9)
    assert got == results(l0(store, None))
    ids = {h.id for h in second.search(unit(5, 1)[0], 1000, VectorFilter(account_id=ACC))}
    assert "new00003" in ids and "r00001" not in ids and len(ids) == 200 + 5 - 3


def test_a_file_behind_a_pruned_log_or_a_newer_than_the_database_is_replaced_by_a_reload(store, tmp_path):
    store.put_vectors(records(100))
    first = l0(store, tmp_path / "derived")
    first.view(ACC)
    first.close()
    store.put_vectors(records(100, seed=3), bulk=True)  # a bulk load logs no ids: readers behind it must reload
    second = l0(store, tmp_path / "derived")
    assert results(second) == results(l0(store, None))
    second.close()
    assert (second.loads, second.file_loads) == (1, 0)
    # the reload wrote the file again at the new generation: the next process opens it
    third = l0(store, tmp_path / "derived")
    third.view(ACC)
    assert (third.loads, third.file_loads) == (0, 1)


def test_a_file_from_another_database_is_not_used(store, tmp_path):
    store.put_vectors(records(50))
    first = l0(store, tmp_path / "derived")
    first.view(ACC)
    first.close()
    replaced = SqlMetadataStore.sqlite(tmp_path / "other.db")  # the home's database replaced, generations reused
    try:
        replaced.put_vectors(records(50, seed=11, prefix="x"))
        replaced.put_vectors(records(3, seed=12, prefix="y"))
        index = l0(replaced, tmp_path / "derived")
        assert {h.id[0] for h in index.search(unit(1, 1)[0], 100, VectorFilter(account_id=ACC))} == {"x", "y"}
        assert (index.loads, index.file_loads) == (1, 0)
    finally:
        replaced.close()


def test_a_file_of_another_format_version_is_rebuilt_silently(store, tmp_path):
    store.put_vectors(records(60))
    first = l0(store, tmp_path / "derived")
    expected = results(first)
    first.close()
    path = next((tmp_path / "derived" / "l0").iterdir())
    _rewrite_header(path, lambda own: own.update(version=derived_files.FORMAT_VERSION + 1))

    second = l0(store, tmp_path / "derived")
    assert results(second) == expected
    second.close()
    assert (second.loads, second.file_loads) == (1, 0)
    assert DerivedFiles(tmp_path / "derived", store).load("l0", ACC, second._params()) is not None  # rewritten


def test_many_applied_rows_write_the_file_again(store, tmp_path):
    store.put_vectors(records(100))
    index = l0(store, tmp_path / "derived")
    index.view(ACC)
    files = index._files
    assert files is not None
    index.close()
    saves = files.saves
    store.put_vectors(records(1100, seed=4, prefix="more"))  # past max(1024, rows / 10)
    index.view(ACC)
    index.close()
    assert files.saves == saves + 1
    assert files.load("l0", ACC, index._params()).generation == store.account_generation(ACC)


@pytest.mark.parametrize("layout", ["float32", "projected"])
def test_an_account_opened_from_a_file_keeps_taking_writes(store, tmp_path, layout):
    kw: dict = {} if layout == "float32" else {"compress_rows": 20, "compress_dims": 8}
    store.put_vectors(records(40))
    first = l0(store, tmp_path / "derived", **kw)
    first.view(ACC)
    first.close()
    second = l0(store, tmp_path / "derived", **kw)
    second.view(ACC)
    for round_ in range(3):  # appends grow the arrays read from the file; deletes write tombstones into them
        second.upsert(records(30, seed=20 + round_, prefix=f"g{round_}-"))
        second.delete([f"r{i:05d}" for i in range(round_, 40, 5)])
        assert results(second) == results(l0(store, None, **kw))
    assert second.loads == 0
    assert {seg.layout for seg, _ in second.view(ACC).segments.values()} == {layout}  # type: ignore[union-attr]


def test_has_file_judges_the_header(store, tmp_path):
    store.put_vectors(records(20))
    index = l0(store, tmp_path / "derived")
    assert not index.has_file(ACC)
    index.view(ACC)
    index.close()
    assert index.has_file(ACC) and not index.has_file("another-account")
    path = next((tmp_path / "derived" / "l0").iterdir())
    _rewrite_header(path, lambda own: own.update(version=derived_files.FORMAT_VERSION + 1))
    assert not index.has_file(ACC)  # auto mode then treats the account like one without a file
    assert index._files is not None and index._files.rejected == 0  # a header check logs and counts nothing


def test_background_saves_run_one_save_per_account_at_a_time_and_survive_a_failing_one(caplog):
    import threading

    from context_engine.storage.derived_files import BackgroundSaves

    saves = BackgroundSaves("ce-test-saves", "test")
    release, started, done = threading.Event(), threading.Event(), []

    def slow() -> None:
        started.set()
        release.wait(5)
        done.append("a")

    saves.submit("a", slow)
    assert started.wait(5)
    saves.submit("a", lambda: done.append("a-again"))  # one of "a" is running: dropped
    saves.submit("b", lambda: 1 / 0)  # fails: logged, not raised, and does not stop the worker
    saves.submit("c", lambda: done.append("c"))
    release.set()
    saves.close()  # waits for everything submitted
    assert done == ["a", "c"]
    assert "writing the test file of an account failed" in caplog.text
    saves.submit("a", lambda: done.append("a-later"))  # after the first finished, "a" may be saved again
    saves.close()
    assert done == ["a", "c", "a-later"]


def _file_backed(array: np.ndarray) -> bool:
    """Whether ``array`` is a view of a mapped file (its base chain ends in an ``mmap``)."""
    import mmap

    base = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, mmap.mmap) or (isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap))


@pytest.mark.parametrize("layout", ["float32", "projected"])
def test_a_wholesale_load_is_replaced_by_the_account_read_back_from_its_file(store, tmp_path, layout):
    """After the file of a wholesale load is written, the index holds the account as a restart would open it (its
    arrays mapped from the file, not the ones built in memory), with the same answers and still taking writes."""
    kw: dict = {} if layout == "float32" else {"compress_rows": 50, "compress_dims": 8}
    store.put_vectors(records(300))
    index = l0(store, tmp_path / "derived", **kw)
    expected = results(l0(store, None, **kw))
    built = index.view(ACC)
    assert built is not None
    built_account = index._accounts[ACC]
    assert index.wait_for_saves(30)  # the file, and the account read back from it
    held = index.view(ACC)
    assert held is not None and index.remaps == 1 and index.loads == 1
    assert index._accounts[ACC] is not built_account
    for seg, _ in held.segments.values():
        scanned = seg.vectors if seg.vectors is not None else seg.full
        assert scanned is not None and _file_backed(scanned)
    for seg, _ in built.segments.values():
        assert not _file_backed(seg.vectors if seg.vectors is not None else seg.full)
    assert results(index) == expected
    index.upsert(records(20, seed=7, prefix="late"))
    assert results(index) == results(l0(store, None, **kw))


def test_an_account_that_took_writes_since_its_load_is_not_replaced(store, tmp_path):
    store.put_vectors(records(100))
    index = l0(store, tmp_path / "derived")
    index.view(ACC)
    assert index.wait_for_saves(30)
    assert index.remaps == 1
    held = index._accounts[ACC]
    store.put_vectors(records(5, seed=3, prefix="new"))  # a write since the file: a restore would be behind
    index.view(ACC)  # caught up from the change log
    assert held.unsaved > 0 and index._accounts[ACC] is held
    assert not index._remap(held)
    assert index._accounts[ACC] is held and index.remaps == 1


def test_a_large_account_read_back_from_its_file_hands_the_freed_memory_back(store, tmp_path, monkeypatch):
    from context_engine.storage.derived import base

    released: list[bool] = []
    monkeypatch.setattr(base, "RELEASE_MIN_ROWS", 50)
    monkeypatch.setattr(base, "_release_free_memory", lambda: released.append(True))
    store.put_vectors(records(40, prefix="small", account_id="small-acc"))
    store.put_vectors(records(60))
    index = l0(store, tmp_path / "derived")
    index.view("small-acc")
    index.view(ACC)
    assert index.wait_for_saves(30)
    assert index.remaps == 2 and released == [True]  # the account of 60 rows only


def test_a_closing_index_writes_the_file_but_does_not_read_it_back(store, tmp_path):
    """A one-shot command that loaded an account wholesale exits without paying for the read-back."""
    store.put_vectors(records(60))
    index = l0(store, tmp_path / "derived")
    index.view(ACC)
    index.close()
    assert index.remaps == 0 and index.has_file(ACC)


def test_a_built_account_frozen_by_a_warm_up_is_still_freed_once_read_back(store, tmp_path, monkeypatch):
    """A warm-up that stopped waiting for a save freezes the built account (gc.freeze); its reference cycles are
    collected after the read-back all the same (found by a review: they stayed until close)."""
    import gc
    import threading
    import weakref

    from context_engine.storage.derived import base

    monkeypatch.setattr(base, "RELEASE_MIN_ROWS", 1)
    monkeypatch.setattr(base, "_release_free_memory", lambda: None)
    store.put_vectors(records(60))
    index = l0(store, tmp_path / "derived")
    release = threading.Event()
    save = index._files.save

    def held_save(*args, **kwargs):
        release.wait(10)
        return save(*args, **kwargs)

    monkeypatch.setattr(index._files, "save", held_save)
    index.view(ACC)
    built = weakref.ref(next(iter(index._accounts[ACC].segments.values())))
    assert not index.wait_for_saves(0.1)
    gc.collect()
    gc.freeze()
    try:
        release.set()
        assert index.wait_for_saves(30) and index.remaps == 1
        assert built() is None
    finally:
        gc.unfreeze()


def test_release_free_memory_runs_on_this_platform():
    from context_engine.storage.derived.base import _release_free_memory

    _release_free_memory()  # glibc here; a no-op where malloc_trim / mallopt do not exist
