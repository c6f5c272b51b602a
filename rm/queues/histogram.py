"""A log-bucketed histogram: constant memory, ~4% relative error on quantiles."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

_BUCKETS_PER_OCTAVE = 16
_MIN = 1e-9


class LogHistogram:
    __slots__ = ("_buckets", "count", "max", "sum", "zeros")

    def __init__(self) -> None:
        self._buckets: dict[int, int] = {}
        self.count = 0
        self.zeros = 0
        self.sum = 0.0
        self.max = 0.0

    def add(self, value: float) -> None:
        if value == 0.0:  # most waits (what ``sum`` and ``max`` would do with it: nothing)
            self.count += 1
            self.zeros += 1
            return
        self.count += 1
        self.sum += value
        if value > self.max:
            self.max = value
        if value <= _MIN:
            self.zeros += 1
            return
        b = math.floor(math.log2(value) * _BUCKETS_PER_OCTAVE)
        self._buckets[b] = self._buckets.get(b, 0) + 1

    def add_many(self, value: float, n: int) -> None:
        """``n`` observations of ``value`` (as ``n`` calls of ``add``, in one)."""
        if n <= 0:
            return
        self.count += n
        self.sum += value * n
        if value > self.max:
            self.max = value
        if value <= _MIN:
            self.zeros += n
            return
        b = math.floor(math.log2(value) * _BUCKETS_PER_OCTAVE)
        self._buckets[b] = self._buckets.get(b, 0) + n

    def add_values(self, values: Sequence[float] | np.ndarray) -> None:
        """Every value of ``values`` (as a call of ``add`` for each), bucketed with numpy: a batch of
        wall-time samples costs no Python call per sample."""
        arr = np.asarray(values, dtype=np.float64)
        if not len(arr):
            return
        self.count += len(arr)
        self.sum += float(arr.sum())
        top = float(arr.max())
        if top > self.max:
            self.max = top
        kept = arr[arr > _MIN]
        self.zeros += len(arr) - len(kept)
        if not len(kept):
            return
        # ``add``'s bucket of each value, counted by offset from the lowest (no sort, as unique's).
        ids = np.floor(np.log2(kept) * _BUCKETS_PER_OCTAVE).astype(np.int64)
        low = int(ids.min())
        counts = np.bincount(ids - low)
        seen = np.flatnonzero(counts)
        buckets = self._buckets
        for b, n in zip((seen + low).tolist(), counts[seen].tolist(), strict=True):  # a few dozen
            buckets[b] = buckets.get(b, 0) + n

    @classmethod
    def merged(cls, parts: Iterable[LogHistogram]) -> LogHistogram:
        """One histogram of every observation of ``parts``."""
        out = cls()
        buckets = out._buckets
        for h in parts:
            out.count += h.count
            out.zeros += h.zeros
            out.sum += h.sum
            out.max = max(out.max, h.max)
            for b, n in h._buckets.items():
                buckets[b] = buckets.get(b, 0) + n
        return out

    def mean(self) -> float:
        return self.sum / self.count if self.count else 0.0

    def quantile(self, q: float) -> float:
        """Upper edge of the bucket holding the q-quantile (0 for an empty histogram)."""
        if not self.count:
            return 0.0
        rank = q * self.count
        seen = self.zeros
        if seen >= rank:
            return 0.0
        for b in sorted(self._buckets):
            seen += self._buckets[b]
            if seen >= rank:
                return min(self.max, 2 ** ((b + 1) / _BUCKETS_PER_OCTAVE))
        return self.max

    def summary(self) -> dict[str, float]:
        return {
            "count": self.count,
            "mean": self.mean(),
            "p50": self.quantile(0.5),
            "p99": self.quantile(0.99),
            "max": self.max,
        }
