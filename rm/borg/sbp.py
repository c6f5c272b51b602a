"""Stochastic bin packing admission (design.md §3b): a task fits a node when the node's
predicted usage, with the task added, overflows the node's capacity with probability below
η = 1 − slo. One resource at a time (each must pass). The estimators:

- ``av``: f·(Σμ) ≤ c (the lecture's f ∈ {1.0, 1.25, 2.0});
- ``perc``: Σ p-th percentiles of the tasks' usage ≤ c;
- ``gpa-g``: μ = Σμᵢ, σ = √Σσᵢ², μ + z_p·σ ≤ c (Gaussian percentile approximation);
- ``gpa-sqrt``: fit a normal to √(node usage) over time; (μ + z_p·σ)² ≤ c;
- ``cantelli``: μ + b·σ ≤ c with 1/(1 + b²) = η (Cantelli: P(X > μ + bσ) < 1/(1 + b²));
- ``emp-perc``: the p-th percentile of the node's observed usage plus the task's ≤ c.

The pure functions take plain numbers (tests and the offline E5 experiment use them); the
``Admission`` object applies them to what the RM observed: each running task's reported usage
(``rm.state.observed_usage.Observations``) and each node's usage over time. A task not observed yet
counts as its request, with no variance (a new task starts from its request), and so does one observed fewer
than ``min_samples`` times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from rm.scheduler.borg_config import AdmissionConfig
from rm.state.cluster import NodeRecord
from rm.state.operations import Operation

_EPS = 1e-9


def z(p: float) -> float:
    """The standard normal's p-quantile."""
    return NormalDist().inv_cdf(p)


def cantelli_b(eta: float) -> float:
    """b with 1/(1 + b²) = η."""
    return math.sqrt(1.0 / eta - 1.0)


def percentile(values: Sequence[float], p: float) -> float:
    """The p-quantile (0 < p < 1) by the nearest-rank rule on the sorted values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(p * len(ordered)) - 1))
    return ordered[k]


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    m = sum(values) / n
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / n)


def fits_av(means: Sequence[float], f: float, cap: float) -> bool:
    return f * sum(means) <= cap + _EPS


def fits_perc(percentiles: Sequence[float], cap: float) -> bool:
    return sum(percentiles) <= cap + _EPS


def fits_gpa_g(means: Sequence[float], sds: Sequence[float], slo: float, cap: float) -> bool:
    return sum(means) + z(slo) * math.sqrt(sum(s * s for s in sds)) <= cap + _EPS


def fits_cantelli(means: Sequence[float], sds: Sequence[float], slo: float, cap: float) -> bool:
    return sum(means) + cantelli_b(1.0 - slo) * math.sqrt(sum(s * s for s in sds)) <= cap + _EPS


def fits_gpa_sqrt(series: Sequence[float], slo: float, cap: float) -> bool:
    m, s = mean_sd([math.sqrt(max(0.0, x)) for x in series])
    return (m + z(slo) * s) ** 2 <= cap + _EPS


def fits_emp_perc(series: Sequence[float], slo: float, cap: float) -> bool:
    return percentile(series, slo) <= cap + _EPS


class _NodeStats:
    """One node's terms for one resource, without the new task's (the sums are taken with it
    first, in the same order as ever, so a cached pass decides exactly as an uncached one)."""

    __slots__ = ("fixed", "means", "percs", "sds", "sums")

    def __init__(self) -> None:
        self.means: list[float] = []
        self.sds: list[float] = []
        self.percs: list[float] = []
        self.fixed: list[float] = []  # requests of the tasks not observed yet (node series)
        self.sums: list[float] = []  # the observed tasks' summed reports (node series)


class Admission:
    """The RM's admission test for one method, on what its nodes reported. Between
    ``begin_pass`` and ``end_pass`` (one placement pass: nothing changes on the nodes) each node's
    statistics are computed once instead of once per task tried."""

    def __init__(self, config: AdmissionConfig) -> None:
        self.config = config
        # Fits are monotone in the task's demand (a larger task fits no node a smaller one did
        # not) for every method but gpa-sqrt (the normal fitted to √(usage + task) may narrow).
        self.monotone = config.method != "gpa-sqrt"
        self._cache: dict[tuple[int, int], _NodeStats] | None = None
        self._z = z(config.slo)
        self._b = cantelli_b(1.0 - config.slo)

    def begin_pass(self) -> None:
        self._cache = {}

    def end_pass(self) -> None:
        self._cache = None

    def admits(self, node: NodeRecord, op: Operation) -> bool:
        if self.config.method == "request":
            return True
        return self._fits(node, op, 0) and self._fits(node, op, 1)

    def _stats(self, node: NodeRecord, r: int) -> _NodeStats:
        cache = self._cache
        if cache is not None:
            hit = cache.get((node.machine_id, r))
            if hit is not None:
                return hit
        st = _NodeStats()
        cfg = self.config
        least = cfg.min_samples
        if cfg.method in ("gpa-sqrt", "emp-perc"):
            datas = []
            for a in node.containers.values():
                data = a.observed.of(r) if a.observed is not None else None
                if data and len(data) >= least:
                    datas.append(data)
                else:
                    st.fixed.append(a.op.demand.cpu if r == 0 else a.op.demand.ram_gib)
            if datas:
                n = min(len(d) for d in datas)
                st.sums = [sum(d[len(d) - n + i] for d in datas) for i in range(n)]
                if cfg.method == "emp-perc":  # the percentile of fixed + sums is fixed + this
                    st.percs = [percentile(st.sums, cfg.slo)]
        else:
            for alloc in node.containers.values():
                obs = alloc.observed
                data = obs.of(r) if obs is not None else None
                if not data or len(data) < least:
                    req = alloc.op.demand.cpu if r == 0 else alloc.op.demand.ram_gib
                    st.means.append(req)
                    st.sds.append(0.0)
                    st.percs.append(req)
                    continue
                assert obs is not None
                memo = obs.memo
                ms = memo.get(r)
                if ms is None:
                    ms = memo[r] = mean_sd(data)
                st.means.append(ms[0])
                st.sds.append(ms[1])
                if cfg.method == "perc":
                    p = memo.get((r, cfg.slo))
                    if p is None:
                        p = memo[(r, cfg.slo)] = percentile(data, cfg.slo)
                    st.percs.append(p)
        if cache is not None:
            cache[(node.machine_id, r)] = st
        return st

    def _fits(self, node: NodeRecord, op: Operation, r: int) -> bool:
        cfg = self.config
        cap = node.total.cpu if r == 0 else node.total.ram_gib
        new = op.demand.cpu if r == 0 else op.demand.ram_gib
        method = cfg.method
        st = self._stats(node, r)
        if method in ("gpa-sqrt", "emp-perc"):
            fixed = new
            for req in st.fixed:
                fixed += req
            if not st.sums:
                series = [fixed]
            elif method == "emp-perc":
                return fixed + st.percs[0] <= cap + _EPS
            else:
                series = [fixed + x for x in st.sums]
            return (fits_gpa_sqrt if method == "gpa-sqrt" else fits_emp_perc)(series, cfg.slo, cap)
        means = [new, *st.means]
        sds = [0.0, *st.sds]
        if method == "av":
            return fits_av(means, cfg.av_factor, cap)
        if method == "perc":
            return fits_perc([new, *st.percs], cap)
        if method == "gpa-g":
            return sum(means) + self._z * math.sqrt(sum(s * s for s in sds)) <= cap + _EPS
        return sum(means) + self._b * math.sqrt(sum(s * s for s in sds)) <= cap + _EPS


def node_series(node: NodeRecord, r: int, new: float) -> list[float]:
    """The node's load over its recent reports, from the tasks on it now: the sum of their last
    L reports (L: the shortest history among them; reports of one node arrive together, so the
    i-th from the end are of one time in periodic mode), a task not observed yet counting as its
    request, plus ``new``."""
    fixed = new
    datas = []
    for a in node.containers.values():
        data = a.observed.of(r) if a.observed is not None else None
        if data:
            datas.append(data)
        else:
            fixed += a.op.demand.cpu if r == 0 else a.op.demand.ram_gib
    if not datas:
        return [fixed]
    n = min(len(d) for d in datas)
    return [fixed + sum(d[len(d) - n + i] for d in datas) for i in range(n)]
