"""Trace-like task demand for E5 (issue 33): a generator calibrated to what the Borg lecture
publishes about the Google trace, and the measurement of each of those properties.

A task has a CPU request (a fraction of a machine: lognormal, truncated, heavy-tailed), a RAM
request (lognormal, correlated with CPU) and CPU usage at 5-minute intervals (the trace's
windows) as a fraction of its request. Usage is bounded by the request (Borg caps CPU at the
limit) and its per-interval distribution is a Beta(a, b) with a and b drawn per task from a
log-uniform range: left-skewed (near the limit), symmetric, right-skewed and U-shaped tasks all
occur. A share of tasks is time-dependent: a daily cycle around its mean with peaks clustered
around one hour of the day, plus AR(1) noise; the others draw every interval independently.
A job's scale (replicas × intervals run: a truncated Pareto up to 10,000 tasks for 30 days)
enters only the per-job consumption whose C² the lecture quotes; the packed tasks run throughout.

The properties measured (``properties``), each beside the lecture's value:
- C² = variance / mean² of per-job consumption (CPU and RAM request × mean usage × job scale)
  over a large population; the lecture writes C² = variance / mean and calls it scale-free, which
  only variance / mean² is. Also the share of consumption of the largest 1% of jobs.
- the share of tasks whose usage is not time-independent: lag-1 autocorrelation beyond
  3/√n (a false-alarm rate of 0.27% for an independent series).
- the share of random bins of 50 (and 500) tasks whose summed usage is not normal: Jarque–Bera
  at 5% (χ² with 2 degrees of freedom: p = exp(−JB/2)) on the bin's history.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import msgspec
import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

INTERVAL_S = 300.0  # the trace's 5-minute windows
DAY = int(86400 / INTERVAL_S)
LECTURE = {
    "cpu_c2": 23_000.0, "ram_c2": 43_000.0, "top1_share_min": 0.99,
    "time_dependent_share": (0.25, 1 / 3), "non_normal_50": 0.78, "non_normal_500": 0.33,
}
JB_CRITICAL = -2.0 * math.log(0.05)  # Jarque–Bera at 5%: χ²₂ tail exp(−x/2)

Pos = Annotated[float, msgspec.Meta(gt=0)]
Share = Annotated[float, msgspec.Meta(ge=0, le=1)]


class Lognormal(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A lognormal truncated to [min, max] (by redrawing outside values' quantiles)."""

    median: Pos
    sigma: Annotated[float, msgspec.Meta(ge=0, le=6)]
    min: Pos
    max: Pos

    def __post_init__(self) -> None:
        if not self.min <= self.median <= self.max:
            raise ValueError("expected `min` <= `median` <= `max`")


class Demand(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    cpu_size: Lognormal  # CPU request, fraction of a machine
    ram_size: Lognormal  # RAM request, fraction of a machine
    ram_cpu_correlation: Annotated[float, msgspec.Meta(ge=-1, le=1)] = 0.5
    # A job's scale in task-intervals (replicas × 5-minute intervals run): truncated Pareto on
    # [1, job_scale_max]; only the per-job consumption's C² depends on it (packed tasks run throughout).
    job_scale_alpha: Annotated[float, msgspec.Meta(gt=0, le=3)] = 0.54
    job_scale_max: Annotated[float, msgspec.Meta(gt=1)] = 10_000 * 30 * DAY  # 10,000 tasks, 30 days
    shape_min: Pos = 0.5  # Beta(a, b) of usage / request: a, b log-uniform in [shape_min, shape_max]
    shape_max: Pos = 8.0
    time_dependent_share: Share = 0.3
    daily_amplitude: Share = 0.4  # of the task's mean usage, time-dependent tasks
    peak_hour_sd: Annotated[float, msgspec.Meta(ge=0, le=24)] = 5.0  # peaks cluster around 14:00
    ar_rho: Annotated[float, msgspec.Meta(ge=0, lt=1)] = 0.9  # per 5 minutes
    population: Annotated[int, msgspec.Meta(ge=1000, le=5_000_000)] = 2_000_000  # jobs, for C²

    def __post_init__(self) -> None:
        if self.shape_max < self.shape_min:
            raise ValueError("expected `shape_min` <= `shape_max`")
        if self.cpu_size.max > 1 or self.ram_size.max > 1:
            raise ValueError("a request is a fraction of a machine: `cpu_size.max`, `ram_size.max` <= 1")


def _lognormal(rng: np.random.Generator, m: Lognormal, normal: Array) -> Array:
    """A lognormal truncated to [min, max]: a standard normal outside the range is redrawn
    (independently, so a correlated draw loses its correlation only there)."""
    if m.sigma == 0:
        return np.full(normal.shape, m.median)
    zlo, zhi = math.log(m.min / m.median) / m.sigma, math.log(m.max / m.median) / m.sigma
    z = normal.copy()
    bad = np.flatnonzero((z < zlo) | (z > zhi))
    while bad.size:
        z[bad] = rng.standard_normal(bad.size)
        bad = bad[(z[bad] < zlo) | (z[bad] > zhi)]
    return np.asarray(m.median * np.exp(m.sigma * z), dtype=np.float64)


class Tasks:
    """N tasks: requests, Beta shapes, time dependence, and a stream of usage (absolute, in
    machines) interval by interval; the stream continues where the last call left it."""

    def __init__(self, d: Demand, n: int, seed: int) -> None:
        rng = np.random.default_rng([seed, 5, 1])
        self._rng = rng
        g1 = rng.standard_normal(n)
        self.size = _lognormal(rng, d.cpu_size, g1)
        lo, hi = math.log(d.shape_min), math.log(d.shape_max)
        self.a = np.exp(rng.uniform(lo, hi, n))
        self.b = np.exp(rng.uniform(lo, hi, n))
        self.mean_frac = self.a / (self.a + self.b)
        s = self.a + self.b
        self.sd_frac = np.sqrt(self.a * self.b / (s * s * (s + 1)))
        self.dependent = rng.random(n) < d.time_dependent_share
        self.amplitude = d.daily_amplitude * self.mean_frac
        self.peak = (14.0 + d.peak_hour_sd * rng.standard_normal(n)) * (3600 / INTERVAL_S)
        self.rho = d.ar_rho
        self._ar = rng.standard_normal(n)
        self.t = 0

    def next(self, k: int) -> Array:
        """The next k intervals of every task's usage: an (n, k) array in machines."""
        rng = self._rng
        n = self.size.size
        frac = rng.beta(self.a[:, None], self.b[:, None], size=(n, k))
        dep = np.flatnonzero(self.dependent)
        if dep.size:
            noise = np.empty((dep.size, k))
            ar = self._ar[dep]
            innov = math.sqrt(1 - self.rho * self.rho)
            eps = rng.standard_normal((dep.size, k))
            for j in range(k):  # AR(1), stationary sd 1
                ar = self.rho * ar + innov * eps[:, j]
                noise[:, j] = ar
            self._ar[dep] = ar
            t = self.t + np.arange(k)
            cycle = np.sin(2 * np.pi * (t[None, :] - self.peak[dep, None]) / DAY + np.pi / 2)
            frac[dep] = np.clip(self.mean_frac[dep, None] + self.amplitude[dep, None] * cycle
                                + self.sd_frac[dep, None] * noise, 0.0, 1.0)
        self.t += k
        return np.asarray(self.size[:, None] * frac, dtype=np.float64)


# ---- the lecture's properties, measured -----------------------------------------------------------


def c2(x: Array) -> float:
    """Squared coefficient of variation: variance / mean²."""
    m = float(x.mean())
    return float(x.var()) / (m * m)


def top_share(x: Array, top: float = 0.01) -> float:
    k = max(1, round(top * x.size))
    return float(np.sort(x)[-k:].sum() / x.sum())


def consumption(d: Demand, seed: int) -> dict[str, float]:
    """C² and the largest 1%'s share of per-job CPU and RAM consumption (request × mean usage ×
    job scale) over ``population`` jobs. The scale's uniforms are stratified (one per 1/n of the
    range, so the rare largest jobs are always represented); sizes and usage are independent draws."""
    rng = np.random.default_rng([seed, 5, 2])
    n = d.population
    g1, g2 = rng.standard_normal(n), rng.standard_normal(n)
    r = d.ram_cpu_correlation
    cpu = _lognormal(rng, d.cpu_size, g1)
    ram = _lognormal(rng, d.ram_size, r * g1 + math.sqrt(1 - r * r) * g2)
    lo, hi = math.log(d.shape_min), math.log(d.shape_max)
    a, b = np.exp(rng.uniform(lo, hi, (2, n))), np.exp(rng.uniform(lo, hi, (2, n)))
    u = (np.arange(n) + rng.random(n)) / n
    alpha, top = d.job_scale_alpha, d.job_scale_max
    scale = (1.0 - u * (1.0 - top ** -alpha)) ** (-1.0 / alpha)  # inverse CDF, truncated Pareto
    cpu_h, ram_h = cpu * a[0] / (a[0] + b[0]) * scale, ram * a[1] / (a[1] + b[1]) * scale
    return {"cpu_c2": c2(cpu_h), "ram_c2": c2(ram_h), "cpu_top1_share": top_share(cpu_h),
            "ram_top1_share": top_share(ram_h), "population": float(n)}


def lag1(series: Array) -> Array:
    """Lag-1 autocorrelation of each row."""
    x = series - series.mean(axis=1, keepdims=True)
    den = (x * x).sum(axis=1)
    num = (x[:, 1:] * x[:, :-1]).sum(axis=1)
    return np.asarray(np.divide(num, den, out=np.zeros_like(den), where=den > 0), dtype=np.float64)


def time_dependent_share(history: Array) -> float:
    """Share of tasks whose lag-1 autocorrelation rejects independence (|r₁| > 3/√n)."""
    return float(np.mean(np.abs(lag1(history)) > 3.0 / math.sqrt(history.shape[1])))


def jarque_bera(x: Array) -> float:
    n = int(x.size)
    d = x - x.mean()
    m2 = float((d * d).mean())
    if m2 <= 0:
        return math.inf
    skew = float((d ** 3).mean()) / math.pow(m2, 1.5)
    kurt = float((d ** 4).mean()) / (m2 * m2)
    return n / 6.0 * (skew * skew + (kurt - 3.0) ** 2 / 4.0)


def non_normal_share(history: Array, k: int, bins: int, seed: int) -> float:
    """Share of ``bins`` random k-task bins whose summed history fails Jarque–Bera at 5%."""
    rng = np.random.default_rng([seed, 5, 3, k])
    n = history.shape[0]
    rejected = 0
    for _ in range(bins):
        pick = rng.choice(n, size=min(k, n), replace=False)
        rejected += int(jarque_bera(history[pick].sum(axis=0)) > JB_CRITICAL)
    return rejected / bins


def properties(d: Demand, tasks: Tasks, history: Array, seed: int) -> dict[str, Any]:
    """Each published property of the trace, measured on this seed's tasks, beside the lecture."""
    out: dict[str, Any] = consumption(d, seed)
    out["request_cpu_c2"] = c2(tasks.size)  # the packed tasks' sizes
    out["request_top5_share"] = top_share(tasks.size, 0.05)
    out["time_dependent_share"] = time_dependent_share(history)
    out["time_dependent_configured"] = float(np.mean(tasks.dependent))
    out["non_normal_50"] = non_normal_share(history, 50, 200, seed)
    out["non_normal_500"] = non_normal_share(history, 500, 100, seed)
    out["history_intervals"] = history.shape[1]
    return out
