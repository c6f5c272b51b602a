"""Autopilot vertical scaling (design.md §3b; the lecture's Autopilot slides).

Per task group and resource, the usage its tasks report goes into a histogram of the current
window (``window_s``; k buckets of equal width up to ``range_factor`` × the request); closed
windows are kept and weighted by age, w = 2^(−age/t½) (t½: ``cpu_half_life_s``,
``ram_half_life_s``). Statistics, a bucket standing for its upper bound:

- S_max: the largest bucket with samples in the last ``max_windows`` windows;
- S_avg: the weighted mean;
- S_pj: the j-th percentile of the weighted histogram; load-adjusted (the lecture's
  h[k] = b[k]·Σ w[τ]·s[t−τ][k]: a bucket weighs its samples times its value, so the percentile
  is of the load, not of the samples) unless ``percentile = "samples"``.

Recommendations: CPU of batch groups S_avg, of serving groups S_p95 (``serving_percentile``);
RAM by OOM tolerance: low S_p98, minimal S_max, medium max(S_p60, 0.5·S_max). Post-processing:
+``margin``, then the maximum of the recommendations of the last ``hold_s``. A group's limit is
its request until its first recommendation. Google's windows are 5 min and half-lives 12 h / 48 h
over weeks of history; emulated runs last hours, so scenarios scale them down (and say so).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Literal

from rm.protocol import Resources
from rm.scheduler.borg_config import AutopilotConfig

JobClass = Literal["batch", "serving"]
OOMTolerance = Literal["low", "minimal", "medium"]


class DecayingHistogram:
    """Windowed usage histogram with exponentially decaying window weights."""

    def __init__(self, width: float, buckets: int, half_life_s: float, keep_s: float) -> None:
        self.width = width
        self.k = buckets
        self.half_life_s = half_life_s
        self.keep_s = keep_s
        self.current = [0.0] * buckets
        self.windows: deque[tuple[float, list[float]]] = deque()  # (closed at, counts)

    def bucket(self, value: float) -> int:
        return min(self.k - 1, max(0, math.ceil(value / self.width - 1e-9) - 1))

    def value(self, b: int) -> float:
        """What bucket ``b`` stands for: its upper bound."""
        return (b + 1) * self.width

    def add(self, value: float, weight: float = 1.0) -> None:
        self.current[self.bucket(value)] += weight

    def close(self, now: float) -> None:
        if any(self.current):
            self.windows.append((now, self.current))
        self.current = [0.0] * self.k
        while self.windows and now - self.windows[0][0] > self.keep_s:
            self.windows.popleft()

    def weighted(self, now: float) -> list[float]:
        out = [0.0] * self.k
        for t, counts in self.windows:
            w = 2.0 ** (-(now - t) / self.half_life_s)
            for b, c in enumerate(counts):
                if c:
                    out[b] += w * c
        return out

    def s_max(self, last: int) -> float:
        top = -1
        for _, counts in list(self.windows)[-last:]:
            for b in range(self.k - 1, top, -1):
                if counts[b]:
                    top = b
                    break
        return self.value(top) if top >= 0 else 0.0

    def s_avg(self, now: float) -> float:
        w = self.weighted(now)
        total = sum(w)
        return sum(self.value(b) * x for b, x in enumerate(w)) / total if total > 0 else 0.0

    def s_pct(self, now: float, j: float, load_adjusted: bool = False) -> float:
        w = self.weighted(now)
        if load_adjusted:
            w = [self.value(b) * x for b, x in enumerate(w)]
        total = sum(w)
        if total <= 0:
            return 0.0
        need = total * j / 100.0
        acc = 0.0
        for b, x in enumerate(w):
            acc += x
            if acc >= need - 1e-12:
                return self.value(b)
        return self.value(self.k - 1)


def recommend_cpu(h: DecayingHistogram, job_class: JobClass, now: float, serving_pct: float,
                  load_adjusted: bool = False) -> float:
    return h.s_avg(now) if job_class == "batch" else h.s_pct(now, serving_pct, load_adjusted)


def recommend_ram(h: DecayingHistogram, tolerance: OOMTolerance, now: float, max_windows: int,
                  load_adjusted: bool = False) -> float:
    if tolerance == "low":
        return h.s_pct(now, 98.0, load_adjusted)
    if tolerance == "minimal":
        return h.s_max(max_windows)
    return max(h.s_pct(now, 60.0, load_adjusted), 0.5 * h.s_max(max_windows))


class GroupAutopilot:
    """One task group: its histograms, recent recommendations and current limits."""

    def __init__(self, cfg: AutopilotConfig, request: Resources, job_class: JobClass,
                 tolerance: OOMTolerance) -> None:
        self.cfg = cfg
        self.job_class = job_class
        self.tolerance = tolerance
        k = cfg.buckets
        self.cpu = DecayingHistogram(request.cpu * cfg.range_factor / k, k, cfg.cpu_half_life_s,
                                     cfg.keep_half_lives * cfg.cpu_half_life_s)
        self.ram = DecayingHistogram(request.ram_gib * cfg.range_factor / k, k, cfg.ram_half_life_s,
                                     cfg.keep_half_lives * cfg.ram_half_life_s)
        self.history: deque[tuple[float, float, float]] = deque()
        self.limits = request  # until the first recommendation: what the user asked for

    def observe(self, cpu: float, ram: float) -> None:
        self.cpu.add(cpu)
        self.ram.add(ram)

    def tick(self, now: float) -> bool:
        """Close the window and recommend; returns True if the limits changed."""
        self.cpu.close(now)
        self.ram.close(now)
        if not self.cpu.windows:
            return False
        cfg = self.cfg
        up = 1.0 + cfg.margin
        load = cfg.percentile == "load-adjusted"
        cpu = recommend_cpu(self.cpu, self.job_class, now, cfg.serving_percentile, load) * up
        ram = recommend_ram(self.ram, self.tolerance, now, cfg.max_windows, load) * up
        self.history.append((now, cpu, ram))
        while self.history and now - self.history[0][0] > cfg.hold_s:
            self.history.popleft()
        new = Resources(max(c for _, c, _ in self.history), max(r for _, _, r in self.history))
        changed = new != self.limits
        self.limits = new
        return changed


class Autopilot:
    def __init__(self, cfg: AutopilotConfig) -> None:
        self.cfg = cfg
        self.groups: dict[str, GroupAutopilot] = {}

    def group(self, name: str, request: Resources, job_class: JobClass,
              tolerance: OOMTolerance) -> GroupAutopilot:
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = GroupAutopilot(self.cfg, request, job_class, tolerance)
        return g

    def limits(self, name: str) -> Resources | None:
        g = self.groups.get(name)
        return g.limits if g is not None and g.history else None

    def tick(self, now: float) -> list[str]:
        """A window ends: the groups whose limits changed."""
        return [name for name, g in self.groups.items() if g.tick(now)]
