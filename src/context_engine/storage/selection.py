"""Selection of the best scores of a large array, shared by the level-0 matrix and BM25 (issue 26).

:func:`kth_largest` is the threshold both use to keep "the k best, and every row tied with the k-th" without sorting:
a search asks it of a whole owner-space segment's similarities (up to ~325k rows on the 1M-node bench home) several
times a request.
"""

from __future__ import annotations

import numpy as np

__all__ = ["kth_largest"]

_SAMPLE = 4096  # strided sample that guesses a threshold just below the k-th largest


def kth_largest(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (1-D, ``1 <= k <= values.size``), ties counted: the least of the ``k`` best,
    as ``np.partition(values, n - k)[n - k]`` gives it (NaN ranks above every number, as there).

    On a large array with ``k`` at most an eighth of it, a strided sample of 4,096 values guesses a threshold ``t``
    that about ``2k`` values reach; when at least ``k`` do, the answer is the ``k``-th largest of those (every value
    above the answer is at least ``t``), found by partitioning them alone; otherwise (a sample that misjudged the
    order of the rows) the whole array is partitioned. The result is the same either way: 0.11 instead of 1.9 ms on
    325k float32 scores (a copy and an introselect of the whole array), 0.05 instead of 0.4 ms on 70k; k = 4,000 of
    243k (the level-0 matrix's partial scan, ``cascade_depth``) 0.4 instead of 1.5 ms.

    Raises:
        ValueError: ``k`` outside ``1..values.size``.
    """
    n = values.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be within 1..{n}, got {k}")
    if n >= 16 * _SAMPLE and 8 * k <= n:
        sample = values[:: n // _SAMPLE]
        m = sample.shape[0]
        reach = min(m, 2 * k * m // n + 16)
        t = np.partition(sample, m - reach)[m - reach]
        keep = values < t
        np.logical_not(keep, out=keep)  # values >= t, and NaN (which compares false with everything)
        above = values[keep]
        if above.shape[0] >= k:
            at = above.shape[0] - k
            return float(np.partition(above, at)[at])
    at = n - k
    return float(np.partition(values, at)[at])
