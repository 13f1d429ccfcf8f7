"""kth_largest (storage/selection.py): the k-th largest score as np.partition gives it, on the sampled fast path and
on the fallback, with ties, NaN and rows in an order the strided sample misjudges."""

from __future__ import annotations

import numpy as np
import pytest

from context_engine.storage import selection
from context_engine.storage.selection import kth_largest


def reference(values: np.ndarray, k: int) -> float:
    at = values.shape[0] - k
    return float(np.partition(values, at)[at])


def spy_on_fallback(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of the arrays np.partition is asked to partition inside kth_largest."""
    sizes: list[int] = []
    real = np.partition

    def partition(a, kth, *args, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(int(a.shape[0]))
        return real(a, kth, *args, **kwargs)

    monkeypatch.setattr(selection.np, "partition", partition)
    return sizes


@pytest.mark.parametrize("n", [70_000, 325_000])
@pytest.mark.parametrize("k", [1, 10, 200, 400, 4_000])
def test_the_kth_largest_of_a_large_array_is_partitions_on_a_few_values(
    n: int, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = np.random.default_rng(n + k).normal(0.3, 0.1, n).astype(np.float32)
    want = reference(values, k)
    sizes = spy_on_fallback(monkeypatch)
    assert kth_largest(values, k) == want
    # the sample and the values above its threshold (about 2k): never the whole array
    assert max(sizes) < min(n // 5, max(2 * 4_096, 3 * k))


def test_ties_at_the_kth_value_are_counted() -> None:
    values = np.repeat(np.random.default_rng(3).normal(0.3, 0.1, 40_000).astype(np.float32), 8)  # 320k, 8 copies
    for k in (1, 7, 8, 9, 200, 401):
        got = kth_largest(values, k)
        assert got == reference(values, k)
        assert int((values > got).sum()) < k <= int((values >= got).sum())


def test_a_sample_that_misjudges_the_order_of_the_rows_falls_back_to_the_whole_array(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n, k = 100_000, 200  # stride 24: the sample is every 24th row, and about 2k values should reach its threshold
    values = np.random.default_rng(4).normal(0.0, 0.1, n)
    values[::24] = 10.0 + np.arange(values[::24].shape[0])  # the sampled rows are the largest: 32 reach the guess
    want = reference(values, k)
    sizes = spy_on_fallback(monkeypatch)
    assert kth_largest(values, k) == want
    assert sizes[-1] == n  # fewer than k reached the threshold: the whole array was partitioned
    values[::24] = 0.0  # an ordinary sample: its threshold is reached by thousands of rows
    want = reference(values, k)
    sizes.clear()
    assert kth_largest(values, k) == want
    assert n not in sizes


def test_nan_ranks_above_every_number_as_in_np_partition() -> None:
    values = np.random.default_rng(5).normal(0.0, 1.0, 100_000)
    values[[17, 4_000, 99_999]] = np.nan
    for k in (1, 3):
        assert np.isnan(kth_largest(values, k)) and np.isnan(reference(values, k))
    assert kth_largest(values, 4) == reference(values, 4)


def test_small_arrays_and_large_k_take_the_plain_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(9).normal(0.0, 1.0, 50_000).astype(np.float32)
    big = np.random.default_rng(10).normal(0.0, 1.0, 100_000)
    wants = reference(values, 10), reference(big, 12_501)
    sizes = spy_on_fallback(monkeypatch)
    assert kth_largest(values, 10) == wants[0]  # below 16 x 4,096 rows
    assert kth_largest(big, 12_501) == wants[1]  # k over n / 8
    assert sizes == [50_000, 100_000]


@pytest.mark.parametrize("k", [0, -1, 11])
def test_k_outside_the_array_is_refused(k: int) -> None:
    with pytest.raises(ValueError, match="k must be within 1..10"):
        kth_largest(np.arange(10, dtype=np.float32), k)
