"""Compact columns of the in-memory derived rows (storage/strings.py): packed strings and the hashed id map."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from context_engine.storage import strings
from context_engine.storage.strings import HashedIds, PackedStrings, best_by_score

WORDS = ["", "a", "abc", "ctx://resources/a/b.md", "ünïcødé", "中文路径/文件.md", "emoji 🚀", "\ud800 lone", "x" * 300]


def packed(values: list[str], batches: int = 3, head: int = 0) -> PackedStrings:
    """A column of ``values``: the first ``head`` as a head read from arrays (a derived file), the rest appended to
    its tail in ``batches``."""
    col = PackedStrings.from_arrays(*PackedStrings(values[:head]).arrays()) if head else PackedStrings()
    step = max(1, (len(values) - head) // batches)
    for i in range(head, len(values), step):
        col.extend(values[i : i + step])
    return col


@given(st.lists(st.text(), max_size=60), st.integers(1, 7), st.integers(0, 60))
def test_rows_read_back_one_by_one_in_slices_and_in_order(values: list[str], batches: int, head: int) -> None:
    col = packed(values, batches, min(head, len(values)))
    assert len(col) == len(values)
    assert [col[i] for i in range(len(values))] == values
    assert list(col) == values == col[:]
    assert col[1:-1] == values[1:-1] and col[::3] == values[::3] and col[5:2] == []
    if values:
        assert col[-1] == values[-1]
    with pytest.raises(IndexError):
        col[len(values)]
    for n in {0, len(values) // 2, min(head, len(values)), len(values)}:  # every split of the head and the tail
        assert list(PackedStrings.from_arrays(*col.arrays(n))) == values[:n]


def test_non_ascii_empty_and_lone_surrogates_round_trip_through_the_arrays() -> None:
    col = packed(WORDS * 5)
    data, offsets = col.arrays()
    assert data.dtype == np.uint8 and offsets.dtype == np.int64 and offsets.shape == (len(WORDS) * 5 + 1,)
    assert int(offsets[-1]) == data.shape[0]  # byte offsets, not characters
    assert list(PackedStrings.from_arrays(data.copy(), offsets.copy())) == WORDS * 5
    first, off3 = col.arrays(3)
    assert list(PackedStrings.from_arrays(first, off3)) == WORDS[:3]


def test_none_is_refused_and_nothing_of_the_batch_is_appended() -> None:
    col = PackedStrings(["a"])
    with pytest.raises(TypeError):
        col.extend(["b", None])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        col.append(None)  # type: ignore[arg-type]
    assert list(col) == ["a"]


def test_from_arrays_is_zero_copy_until_an_append_grows_it() -> None:
    data, offsets = PackedStrings(WORDS).arrays()
    data, offsets = data.copy(), offsets.copy()
    before = (data.copy(), offsets.copy())
    col = PackedStrings.from_arrays(data, offsets)
    assert np.shares_memory(col.arrays()[0], data) and np.shares_memory(col.arrays()[1], offsets)
    col.extend(["new", "ë"])
    assert list(col) == [*WORDS, "new", "ë"] and col[len(WORDS)] == "new" and col[len(WORDS) - 1] == WORDS[-1]
    assert np.array_equal(data, before[0]) and np.array_equal(offsets, before[1])  # the file's arrays are untouched
    assert np.shares_memory(col.arrays(len(WORDS))[0], data)  # appends go to the tail: the head is never copied
    assert not np.shares_memory(col.arrays()[0], data)  # a snapshot of both parts joins them


@pytest.mark.parametrize(
    ("data", "offsets"),
    [
        (np.zeros(3, dtype=np.uint8), np.array([0, 2], dtype=np.int64)),  # does not span the bytes
        (np.zeros(3, dtype=np.uint8), np.array([0, 2, 1, 3], dtype=np.int64)),  # not ascending
        (np.zeros(3, dtype=np.int8), np.array([0, 3], dtype=np.int64)),  # dtype
        (np.zeros(3, dtype=np.uint8), np.array([1, 3], dtype=np.int64)),  # not from 0
        (np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64)),  # no offsets at all
    ],
)
def test_from_arrays_refuses_arrays_that_are_not_a_column(data: np.ndarray, offsets: np.ndarray) -> None:
    with pytest.raises(ValueError):
        PackedStrings.from_arrays(data, offsets)


def test_a_reader_holding_a_count_reads_the_same_rows_while_the_writer_grows_the_buffer() -> None:
    col = PackedStrings([f"row {i} ü" for i in range(10)])
    n = len(col)
    held = col.arrays(n)  # what a reader took before the writer grew
    for i in range(10, 5000):  # many growths of both arrays
        col.append(f"row {i} ü")
        assert col[n - 1] == f"row {n - 1} ü"
    assert list(PackedStrings.from_arrays(*held)) == [f"row {i} ü" for i in range(10)]
    assert list(col) == [f"row {i} ü" for i in range(5000)]


def append_while_reading(
    col: PackedStrings,
    value_of: Callable[[int], str],
    batch: int,
    check: Callable[[int, np.random.Generator], str | None],
) -> list[str]:
    """Append rows ``len(col)`` .. 20,000 in batches, publishing the count after each (the owner's ``n``), while
    three readers call ``check(n, rng)`` below the published count; the errors they report."""
    published = [len(col)]
    stop = threading.Event()
    errors: list[str] = []

    def read() -> None:
        rng = np.random.default_rng(threading.get_ident() % 2**32)
        while not stop.is_set():
            n = published[0]
            if n and (error := check(n, rng)) is not None:
                errors.append(error)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    for start in range(len(col), 20_000, batch):
        col.extend([value_of(i) for i in range(start, start + batch)])
        published[0] = len(col)
    stop.set()
    for t in readers:
        t.join()
    return errors


def accented(i: int) -> str:
    return f"{i}:{'é' * (i % 7)}"


@pytest.mark.parametrize("head", [0, 100])
def test_concurrent_readers_below_a_published_count_never_see_a_half_written_row(head: int) -> None:
    col = packed([accented(i) for i in range(head)], head=head)

    def check(n: int, rng: np.random.Generator) -> str | None:
        i = int(rng.integers(0, n))
        if col[i] != accented(i):
            return f"row {i} read {col[i]!r}"
        if col[max(0, n - 50) : n] != [accented(j) for j in range(max(0, n - 50), n)]:
            return f"slice below {n}"
        return None

    assert append_while_reading(col, accented, 37, check) == []


@given(
    st.lists(st.sampled_from(WORDS + ["ctx://resources/a/", "ctx://resources/ab", "中文"]), max_size=40),
    st.integers(0, 40),
)
def test_equal_and_prefix_rows_compare_bytes_like_str(values: list[str], head: int) -> None:
    col = packed(values, head=min(head, len(values)))
    default = strings._MATCH_DECODED
    try:
        for strings._MATCH_DECODED in (0, 10**6):  # the vectorised comparison, then the one-by-one one
            for probe in ["", "a", "ctx://resources/a", "ctx://resources/a/b.md", "中", "中文路径/文件.md", "\ud800"]:
                equal = col.equal_rows(range(len(values)), probe)
                assert equal.dtype == np.int64 and equal.tolist() == [i for i, v in enumerate(values) if v == probe]
                backwards = list(range(len(values)))[::-1]  # the order given is kept across the head and the tail
                assert col.equal_rows(backwards, probe).tolist() == [i for i in backwards if values[i] == probe]
                assert col.find(backwards, probe) == [i for i in backwards if values[i] == probe]
                expected = [i for i, v in enumerate(values) if v.startswith(probe)]
                assert col.prefix_rows(probe, 0, len(values)).tolist() == expected
                assert col.prefix_rows(probe, 2, len(values)).tolist() == [i for i in expected if i >= 2]
            assert col.equal_rows([], "a").dtype == np.int64
            with pytest.raises(IndexError):
                col.find([len(values)], "a")
    finally:
        strings._MATCH_DECODED = default


@given(
    st.lists(st.sampled_from(["a", "b", "é"]), min_size=1, max_size=30),
    st.lists(st.sampled_from(["0", "1", "中"]), min_size=1, max_size=12),
)
def test_long_values_that_differ_before_or_inside_the_probe_compare_like_str(
    heads: list[str], tails: list[str]
) -> None:
    # values of one length that differ only in their first bytes, or only in their last ones (the probed bytes)
    values = [f"ctx://resources/{h * 8}/{t * 6}.md" for h in heads for t in tails]
    values += [f"ctx://resources/{heads[0] * 8}/{tails[0] * 6}.md"]  # a repeated value
    col = packed(values, head=len(values) // 2)
    rows = np.arange(len(values))
    for probe in {values[0], values[-2], f"ctx://resources/{'b' * 8}/{'1' * 6}.md", values[0][:-1] + "x"}:
        assert col.equal_rows(rows, probe).tolist() == [i for i, v in enumerate(values) if v == probe]
        prefix = probe[: len(probe) - 4]
        assert col.prefix_rows(prefix, 0, len(values)).tolist() == [
            i for i, v in enumerate(values) if v.startswith(prefix)
        ]


def test_equal_rows_compares_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strings, "_MATCH_CHUNK_BYTES", 16)
    values = [f"ctx://resources/d/{i % 7}.md" for i in range(100)]
    col = PackedStrings(values)
    assert col.equal_rows(np.arange(100), "ctx://resources/d/3.md").tolist() == list(range(3, 100, 7))
    assert col.prefix_rows("ctx://resources/d/", 10, 90).tolist() == list(range(10, 90))


def test_hashed_ids_give_every_candidate_of_a_colliding_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strings, "_hash", lambda _value: 7)
    m = HashedIds()
    m.reset(["a", "b", "c"], np.array([0, 1, 2]))
    assert sorted(m.candidates("a")) == [0, 1, 2] == sorted(m.candidates("zzz"))
    m.set("d", 9)
    assert m.candidates("d")[0] == 9 and sorted(m.candidates("d")[1:]) == [0, 1, 2]
    m.discard("d")
    assert sorted(m.candidates("d")) == [0, 1, 2]
    assert len(m) == 3 and m.nbytes == 3 * 12


def test_hashed_ids_without_collisions() -> None:
    m = HashedIds()
    assert m.candidates("x") == []
    ids = [f"{i:032x}" for i in range(1000)]
    m.reset(ids, np.arange(1000) * 2)
    assert all(m.candidates(rid) == [2 * i] for i, rid in enumerate(ids))
    assert m.candidates("absent") == []


@given(
    st.lists(st.tuples(st.sampled_from([0.5, 0.25, -0.0, 0.0, 1.0]), st.text(max_size=3)), max_size=30),
    st.integers(0, 35),
)
def test_best_by_score_orders_like_a_sort_by_score_then_value(pairs: list[tuple[float, str]], k: int) -> None:
    col = PackedStrings([v for _, v in pairs])
    scores = {row: s for row, (s, _) in enumerate(pairs)}
    assert best_by_score(scores, col, k) == sorted(scores, key=lambda r: (-scores[r], col[r]))[:k]


def test_equal_rows_by_end_keys_follow_appends_and_short_rows() -> None:
    """The last-8-bytes keys are built at the first lookup and extended as rows are appended: a row appended after
    a lookup is found, rows shorter than the key and rows sharing a value's last 8 bytes are compared whole."""
    values = ["short", "x", "ctx://r/a/1.md", "ctx://r/bb/1.md", "ctx://r/a/1.md", "é/a/1.md"]
    col = packed(values, head=3)
    rows = np.arange(len(values))
    assert col.equal_rows(rows, "ctx://r/a/1.md").tolist() == [2, 4]  # same last 8 bytes as row 3, not equal
    assert col.equal_rows(rows, "é/a/1.md").tolist() == [5]
    col.extend(["ctx://r/c/9.md", "ctx://r/a/1.md"])
    rows = np.arange(len(col))
    assert col.equal_rows(rows, "ctx://r/c/9.md").tolist() == [6]
    assert col.equal_rows(rows[::-1], "ctx://r/a/1.md").tolist() == [7, 4, 2]  # the order given
    assert col.equal_rows(rows, "\x00" * 8).tolist() == []  # a short row's key is 0: compared whole, not equal
    with pytest.raises(IndexError):
        col.equal_rows([0, len(col)], "ctx://r/a/1.md")


def test_equal_rows_while_a_writer_appends() -> None:
    def uri(i: int) -> str:
        return f"ctx://resources/dir/{i:06d}.md"

    col = PackedStrings([uri(i) for i in range(500)])

    def check(n: int, rng: np.random.Generator) -> str | None:
        i = int(rng.integers(0, n))
        rows = np.arange(max(0, i - 40), min(n, i + 40))
        return None if col.equal_rows(rows, uri(i)).tolist() == [i] else f"row {i} of {n}"

    assert append_while_reading(col, uri, 53, check) == []
