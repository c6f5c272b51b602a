"""E4's recommenders, vectorised over jobs: Autopilot's statistics on decaying windowed histograms
(the lecture's S_max and the load-adjusted percentile S_pj, h[k] = b[k]·Σ w[τ]·s[t−τ][k]) and
the ML recommender (models by decay and margin, chosen by the cost of over- and under-provisioning
and of limit and model changes). One row per job; bucket k of a job stands for its upper bound
b[k] = (k + 1) × the job's width. rm/borg/autopilot.py is the RM's per-group version of the same
statistics; this one keeps a whole cell's jobs in arrays so that days of 5-minute windows are cheap."""

from __future__ import annotations

import math

import numpy as np

from emulator.models.overcommit.config import E4Config
from emulator.models.overcommit.usage import F, Ints


def window_counts(width: F, k: int, rows: Ints, values: F) -> F:
    """s[t][k] summed over a job's replicas: one window's histogram per row."""
    counts = np.zeros((len(width), k))
    b = np.clip(np.ceil(values / width[rows] - 1e-9).astype(np.int64) - 1, 0, k - 1)
    np.add.at(counts, (rows, b), 1.0)
    return counts


def load_adjusted_percentile(bounds: F, hist: F, j: float) -> F:
    """S_pj per row: the j-th percentile of h[k] = b[k]·hist[k] (nan for an empty row)."""
    cum = np.cumsum(bounds * hist, axis=1)
    total = cum[:, -1]
    idx = np.argmax(cum >= (j / 100.0) * total[:, None] * (1 - 1e-12), axis=1)
    out = bounds[np.arange(len(bounds)), idx]
    return np.where(total > 0, out, np.nan)


class AutopilotStats:
    """RAM limits by OOM tolerance (0 low: S_p98, 1 minimal: S_max, 2 medium: max(S_p60, 0.5·S_max)),
    +margin, then the maximum over the last ``hold_s``."""

    def __init__(self, cfg: E4Config, width: F, tolerance: Ints) -> None:
        n, k = len(width), cfg.buckets
        self.cfg, self.k, self.tolerance = cfg, k, tolerance
        self.width = width.copy()
        self.decay = 2.0 ** (-cfg.window_s / cfg.ram_half_life_s)
        self.hist = np.zeros((n, k))
        self.top = np.full((n, cfg.max_windows), -1, dtype=np.int64)  # top bucket of recent windows
        self.hold = np.full((n, max(1, round(cfg.hold_s / cfg.window_s))), np.nan)
        self.seen = np.zeros(n, dtype=np.int64)
        self.need = math.ceil(cfg.min_history_s / cfg.window_s)
        self.young = math.ceil(cfg.young_history_s / cfg.window_s)

    def reset(self, rows: Ints, width: F) -> None:
        self.width[rows] = width
        self.hist[rows] = 0.0
        self.top[rows] = -1
        self.hold[rows] = np.nan
        self.seen[rows] = 0

    def bounds(self) -> F:
        return (np.arange(self.k) + 1.0)[None, :] * self.width[:, None]

    def close(self, counts: F) -> F:
        """A window ends: each job's recommendation (nan until it has min_history_s of samples)."""
        self.hist = self.hist * self.decay + counts
        any_ = counts > 0
        top = np.where(any_.any(axis=1), self.k - 1 - np.argmax(any_[:, ::-1], axis=1), -1)
        self.top = np.roll(self.top, 1, axis=1)
        self.top[:, 0] = top
        self.seen += any_.any(axis=1)
        b = self.bounds()
        best = self.top.max(axis=1)
        s_max = np.where(best >= 0, (best + 1.0) * self.width, np.nan)
        p98 = load_adjusted_percentile(b, self.hist, 98.0)
        p60 = load_adjusted_percentile(b, self.hist, 60.0)
        rec = np.select([self.tolerance == 0, self.tolerance == 1], [p98, s_max], np.fmax(p60, 0.5 * s_max))
        # A young history has not yet shown the job's range: not below its largest sample.
        rec = np.where(self.seen < self.young, np.fmax(rec, s_max), rec)
        self.hold = np.roll(self.hold, 1, axis=1)
        self.hold[:, 0] = rec * (1 + self.cfg.margin)
        out: F = np.where(self.seen >= self.need, np.nanmax(np.where(np.isnan(self.hold), -1.0, self.hold),
                                                            axis=1), np.nan)
        return np.where(out > 0, out, np.nan)


class MLRecommender:
    """Models (half-life h, margin m): limit = argmin_L over(L) + under(L) + change, + margin, on
    the model's decayed histogram; over(L): the share of samples above L (the lecture: how many
    are above the limit), under(L): memory unused below L relative to the memory used."""

    def __init__(self, cfg: E4Config, width: F) -> None:
        n, k = len(width), cfg.buckets
        self.cfg, self.k = cfg, k
        self.width = width.copy()
        self.decays = np.array([2.0 ** (-cfg.window_s / (h * 3600)) for h in cfg.ml_half_lives_h])
        self.margins = np.array(cfg.ml_margins)
        self.hists = np.zeros((len(self.decays), n, k))
        models = len(self.decays) * len(self.margins)
        self.base = np.full((len(self.decays), n), -1, dtype=np.int64)  # argmin bucket per half-life
        self.limits = np.full((n, models), np.nan)
        self.cost = np.zeros((n, models))
        self.weight = np.zeros(n)
        self.chosen = np.full(n, -1, dtype=np.int64)
        self.current = np.full(n, np.nan)
        self.cost_decay = 2.0 ** (-cfg.window_s / cfg.ml_cost_half_life_s)
        self.seen = np.zeros(n, dtype=np.int64)
        self.need = math.ceil(cfg.min_history_s / cfg.window_s)

    def reset(self, rows: Ints, width: F) -> None:
        self.width[rows] = width
        self.hists[:, rows] = 0.0
        self.base[:, rows] = -1
        self.limits[rows] = np.nan
        self.cost[rows] = 0.0
        self.weight[rows] = 0.0
        self.chosen[rows] = -1
        self.current[rows] = np.nan
        self.seen[rows] = 0

    def _over_under(self, b: F, hist: F, limit: F) -> tuple[F, F]:
        """Samples above each of a row's limits, and GiB unused below it."""
        gap = b[:, None, :] - limit[:, :, None]
        over = (hist[:, None, :] * (gap > 1e-12)).sum(axis=2)
        under = (hist[:, None, :] * np.maximum(-gap, 0)).sum(axis=2)
        return over, under

    def close(self, counts: F, applied: F) -> F:
        cfg = self.cfg
        b = (np.arange(self.k) + 1.0)[None, :] * self.width[:, None]
        used, samples = (counts * b).sum(axis=1), counts.sum(axis=1)
        has = used > 0
        # Each model's last limit, priced on this window: the share of samples above it and the
        # memory unused below it relative to the memory used.
        known = ~np.isnan(self.limits)
        over, under = self._over_under(b, counts, np.where(known, self.limits, 0.0))
        realised = (cfg.ml_over_cost * over / np.where(has, samples, 1.0)[:, None]
                    + cfg.ml_under_cost * under / np.where(has, used, 1.0)[:, None])
        self.cost = self.cost * self.cost_decay + np.where(known & has[:, None], realised, 0.0)
        self.weight = self.weight * self.cost_decay + has
        self.seen += has
        # Each half-life's limit: the bucket with the least cost on its decayed histogram.
        margins = len(self.margins)
        for i, d in enumerate(self.decays):
            self.hists[i] = self.hists[i] * d + counts
            h = self.hists[i]
            s0, s1 = np.cumsum(h, axis=1), np.cumsum(h * b, axis=1)
            t0 = s0[:, -1:] - s0  # samples above bucket k
            total, n = s1[:, -1], s0[:, -1]
            cand = (cfg.ml_over_cost * t0 / np.where(n > 0, n, 1.0)[:, None]
                    + cfg.ml_under_cost * (b * s0 - s1) / np.where(total > 0, total, 1.0)[:, None])
            prev = self.base[i]
            moved = np.arange(self.k)[None, :] != prev[:, None]
            cand = cand + cfg.ml_change_cost * (moved & (prev[:, None] >= 0))
            pick = np.argmin(cand, axis=1)
            self.base[i] = np.where(total > 0, pick, prev)
            lim = np.where(self.base[i] >= 0, (self.base[i] + 1.0) * self.width, np.nan)
            self.limits[:, i * margins:(i + 1) * margins] = lim[:, None] * (1 + self.margins[None, :])
        # The model: least decayed average cost, + change cost if its limit differs from the
        # applied one, + switch cost if it is not the model chosen last.
        avg = self.cost / np.where(self.weight > 0, self.weight, 1.0)[:, None]
        cur = np.where(np.isnan(applied), -1.0, applied)
        differs = ~np.isclose(self.limits, cur[:, None])
        switch = np.arange(self.limits.shape[1])[None, :] != self.chosen[:, None]
        switch &= self.chosen[:, None] >= 0
        score = avg + cfg.ml_change_cost * differs + cfg.ml_switch_cost * switch
        score = np.where(np.isnan(self.limits), np.inf, score)
        ready = (self.seen >= self.need) & np.isfinite(score).any(axis=1)
        choice = np.argmin(score, axis=1)
        self.chosen = np.where(ready, choice, self.chosen)
        out: F = np.where(ready, self.limits[np.arange(len(choice)), choice], np.nan)
        return out
