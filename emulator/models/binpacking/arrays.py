"""E5's admission and per-machine SLO on arrays (issue 33): the inequalities of
rm/borg/sbp.py (the RM's admission test), taken against every open machine at once, and
the judgment of a packing on the tasks' future usage, machine by machine.

Capacity is 1 (a machine). Best-fit: a task goes to the machine with the largest estimated mean
load among those its admission test accepts, or opens a new one; nothing moves once placed.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from rm import sbp

Array = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
EPS = 1e-9  # rm/borg/sbp.py's tolerance


def rank_index(p: float, n: int) -> int:
    """The nearest-rank index of the p-quantile of n sorted values (sbp.percentile's)."""
    return max(0, min(n - 1, math.ceil(p * n) - 1))


class TaskStats:
    """What the scheduler knows of each task: its request and its history's statistics."""

    def __init__(self, request: Array, history: Array, slo: float) -> None:
        self.request = request
        self.history = history
        self.mean = history.mean(axis=1)
        self.sd = history.std(axis=1)  # population sd, as sbp.mean_sd
        k = rank_index(slo, history.shape[1])
        self.perc = np.partition(history, k, axis=1)[:, k]


class Machines:
    """Open machines' sums (grown as machines open)."""

    def __init__(self, h: int, cap: int) -> None:
        self.n = 0
        self.mean = np.zeros(cap)
        self.var = np.zeros(cap)
        self.request = np.zeros(cap)
        self.perc = np.zeros(cap)
        self.series = np.zeros((cap, h))

    def add(self, m: int, st: TaskStats, i: int) -> None:
        self.mean[m] += st.mean[i]
        self.var[m] += st.sd[i] ** 2
        self.request[m] += st.request[i]
        self.perc[m] += st.perc[i]
        self.series[m] += st.history[i]


def fits(ms: Machines, st: TaskStats, i: int, method: str, slo: float, f: float) -> npt.NDArray[np.bool_]:
    """Which open machines admit task i: the same inequalities as rm/borg/sbp.py."""
    n = ms.n
    cap = 1.0 + EPS
    if method == "request":
        return np.asarray(ms.request[:n] + st.request[i] <= cap)
    mu = ms.mean[:n] + st.mean[i]
    if method == "av":
        return np.asarray(f * mu <= cap)
    if method == "perc":
        return np.asarray(ms.perc[:n] + st.perc[i] <= cap)
    sd = np.sqrt(ms.var[:n] + st.sd[i] ** 2)
    if method == "gpa-g":
        return np.asarray(mu + sbp.z(slo) * sd <= cap)
    if method == "cantelli":
        return np.asarray(mu + sbp.cantelli_b(1.0 - slo) * sd <= cap)
    series = ms.series[:n] + st.history[i]
    if method == "gpa-sqrt":
        root = np.sqrt(np.maximum(series, 0.0))
        return np.asarray((root.mean(axis=1) + sbp.z(slo) * root.std(axis=1)) ** 2 <= cap)
    if method == "emp-perc":
        k = rank_index(slo, series.shape[1])
        return np.asarray(np.partition(series, k, axis=1)[:, k] <= cap)
    raise ValueError(f"unknown admission method {method!r}")


def pack(st: TaskStats, method: str, slo: float, f: float = 1.0) -> Ints:
    """Best-fit in arrival (index) order; returns each task's machine."""
    n_tasks = st.request.size
    ms = Machines(st.history.shape[1], n_tasks)
    where = np.zeros(n_tasks, dtype=np.int64)
    for i in range(n_tasks):
        ok = fits(ms, st, i, method, slo, f) if ms.n else np.zeros(0, dtype=bool)
        if ok.any():
            m = int(np.flatnonzero(ok)[np.argmax(ms.mean[:ms.n][ok])])
        else:
            m = ms.n
            ms.n += 1
        ms.add(m, st, i)
        where[i] = m
    return where


class Judge:
    """Per-machine overflow of one packing, fed the future chunk by chunk: for each machine the
    number of intervals its tasks' summed usage exceeded capacity."""

    def __init__(self, where: Ints) -> None:
        self.where = where
        self.order = np.argsort(where, kind="stable")
        machines, self.starts = np.unique(where[self.order], return_index=True)
        self.over = np.zeros(machines.size, dtype=np.int64)
        self.intervals = 0

    def sums(self, usage: Array) -> Array:
        """Each machine's summed usage: (machines, intervals)."""
        return np.asarray(np.add.reduceat(usage[self.order], self.starts, axis=0), dtype=np.float64)

    def feed(self, usage: Array) -> None:
        self.over += (self.sums(usage) > 1.0 + EPS).sum(axis=1)
        self.intervals += usage.shape[1]

    def shares(self) -> Array:
        return np.asarray(self.over / max(1, self.intervals), dtype=np.float64)


def significant_count(target: float, intervals: int) -> int:
    """The fewest overflows a machine exactly at the target reaches in at most 5% of runs of
    ``intervals`` intervals: the Poisson tail summed from far above its mean downwards."""
    lam = target * intervals
    j = math.ceil(lam + 12.0 * math.sqrt(lam) + 30.0)  # the tail beyond is negligible
    tail = 0.0
    while j >= 0:
        tail += math.exp(j * math.log(lam) - lam - math.lgamma(j + 1)) if lam > 0 else float(j == 0)
        if tail > 0.05:
            return j + 1
        j -= 1
    return 0


def skewness(sums: Array) -> Array:
    """Each row's skewness (0 for a constant row)."""
    d = sums - sums.mean(axis=1, keepdims=True)
    m2 = (d * d).mean(axis=1)
    m3 = (d * d * d).mean(axis=1)
    return np.asarray(np.divide(m3, m2 ** 1.5, out=np.zeros_like(m2), where=m2 > 0), dtype=np.float64)


def shape_check(over: Ints, skew: Array, significant: int) -> dict[str, float | None]:
    """Whether the machines over their target are those whose load is right-skewed (a heavier
    upper tail than the normal the estimators assume): the correlation of each machine's overflow
    count with the skewness of its summed history, and the mean skewness of the machines
    significantly over beside the others'."""
    bad = over >= significant
    corr = None if over.std() == 0 or skew.std() == 0 else float(np.corrcoef(over, skew)[0, 1])
    return {"skew_overflow_corr": corr,
            "skew_significantly_over": float(skew[bad].mean()) if bad.any() else None,
            "skew_others": float(skew[~bad].mean()) if (~bad).any() else None}


def per_machine(over: Ints, intervals: int, target: float) -> dict[str, float]:
    """The per-machine SLO: machine-intervals over capacity, machine by machine. A machine is
    over the target when its share exceeds it, significantly over when its count is one a machine
    exactly at the target would reach in at most 5% of runs."""
    share = over / intervals
    return {
        "machines": float(over.size),
        "overflow": float(over.sum() / (over.size * intervals)),  # pooled machine-intervals
        "worst": float(share.max()),
        "p50": float(np.quantile(share, 0.5)),
        "p90": float(np.quantile(share, 0.9)),
        "machines_over_target": float(np.mean(share > target)),
        "machines_significantly_over": float(np.mean(over >= significant_count(target, intervals))),
    }
