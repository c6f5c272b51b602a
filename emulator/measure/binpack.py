"""Offline bin packing (design.md §3b): next-fit, first-fit, best-fit and first-fit-decreasing
on vectors of (cpu, ram) demands, and the machines a workload needs.

Worst-case approximation ratios (one resource, identical bins): next-fit 2, first-fit 1.7,
best-fit 1.7, FFD 11/9 (FFD ≤ 11/9·OPT + 6/9). The size bound max_r ⌈Σ demand_r / capacity_r⌉
is a lower bound on OPT; so is ⌈(FFD − 6/9)·9/11⌉, which the report takes the larger of.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

Item = tuple[float, ...]
_EPS = 1e-9


def _fits(load: list[float], item: Item, cap: Item) -> bool:
    return all(load[r] + item[r] <= cap[r] + _EPS for r in range(len(cap)))


def _add(load: list[float], item: Item) -> None:
    for r in range(len(item)):
        load[r] += item[r]


def next_fit(items: Sequence[Item], cap: Item) -> int:
    bins = 0
    load: list[float] = []
    for it in items:
        if not bins or not _fits(load, it, cap):
            bins += 1
            load = [0.0] * len(cap)
        _add(load, it)
    return bins


def first_fit(items: Sequence[Item], cap: Item) -> int:
    loads: list[list[float]] = []
    for it in items:
        for load in loads:
            if _fits(load, it, cap):
                _add(load, it)
                break
        else:
            loads.append(list(it))
    return len(loads)


def _fullness(load: list[float], cap: Item) -> float:
    return max(load[r] / cap[r] for r in range(len(cap)))


def best_fit(items: Sequence[Item], cap: Item) -> int:
    """The fullest bin (dominant share) that fits."""
    loads: list[list[float]] = []
    for it in items:
        best: list[float] | None = None
        for load in loads:
            if _fits(load, it, cap) and (best is None or _fullness(load, cap) > _fullness(best, cap)):
                best = load
        if best is None:
            loads.append(list(it))
        else:
            _add(best, it)
    return len(loads)


def ffd(items: Sequence[Item], cap: Item) -> int:
    """First-fit on the items sorted by decreasing dominant size."""
    return first_fit(sorted(items, key=lambda it: -max(it[r] / cap[r] for r in range(len(cap)))), cap)


def size_bound(items: Sequence[Item], cap: Item) -> int:
    return max(math.ceil(sum(it[r] for it in items) / cap[r] - _EPS) for r in range(len(cap)))


def lower_bound(items: Sequence[Item], cap: Item, ffd_bins: int | None = None) -> int:
    """A lower bound on the optimal number of bins."""
    n = ffd(items, cap) if ffd_bins is None else ffd_bins
    return max(size_bound(items, cap), math.ceil((n - 6 / 9) * 9 / 11 - _EPS))


ALGORITHMS: dict[str, Callable[[Sequence[Item], Item], int]] = {
    "next-fit": next_fit,
    "first-fit": first_fit,
    "best-fit": best_fit,
    "ffd": ffd,
}
# The lecture's worst-case approximation ratios.
RATIOS = {"next-fit": 2.0, "first-fit": 1.7, "best-fit": 1.7, "ffd": 11 / 9}
