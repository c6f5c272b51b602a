"""E4's jobs and their memory usage with time structure (issue 33): per job a level, a diurnal
cycle, AR(1) noise at window resolution, a slow random-walk drift and occasional steps; per
replica a factor a few percent off the job's and a small AR(1) noise of its own; within a window,
samples around the window's mean (its peaks). Jobs live in slots (a mode, a tier and a replica
count each); a batch job that ends is replaced by a new draw or, recurring, by a re-run of itself."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from emulator.models.overcommit.config import MODES, E4Config

F = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
DAY_S = 86400.0
TOLERANCES = ("low", "minimal", "medium")


class Jobs:
    """Slot arrays (index s) and task arrays (index t, ``slot[t]`` its job's slot)."""

    def __init__(self, cfg: E4Config, seed: np.random.SeedSequence) -> None:
        # One stream each for the jobs' draws, the noise, the steps and the within-window samples:
        # a variant of the cell that changes one of them keeps the others' draws (paired comparisons).
        self.cfg = cfg
        self.rng, self.noise_rng, self.step_rng, self.peak_rng, self.burst_rng = (
            np.random.default_rng(s) for s in seed.spawn(5))
        rng = self.rng
        n = cfg.jobs_per_mode
        self.mode = np.repeat(np.arange(len(MODES)), n)
        slots = len(self.mode)
        self.prod = rng.random(slots) < cfg.prod_share
        self.replicas = rng.integers(cfg.replicas_min, cfg.replicas_max + 1, slots)
        self.slot = np.repeat(np.arange(slots), self.replicas)
        self.rho = math.exp(-cfg.window_s / cfg.noise_tau_s)
        self.job_id = np.full(slots, -1)
        self.next_id = 0
        self.base, self.amp, self.phase, self.noise_sd, self.noise = (np.zeros(slots) for _ in range(5))
        self.drift, self.step, self.user_limit, self.ends_at = (np.zeros(slots) for _ in range(4))
        self.started_at = np.zeros(slots)
        self.peak_sd = np.zeros(slots)
        self.last_step_up = np.full(slots, -math.inf)  # when the level last stepped up
        self.underprovisioned = np.zeros(slots, dtype=bool)
        self.tolerance = np.zeros(slots, dtype=np.int64)
        tasks = len(self.slot)
        self.rep_factor = np.ones(tasks)
        self.rep_noise = np.zeros(tasks)
        self.draw(np.arange(slots), 0.0)

    def draw(self, slots: Ints, now: float) -> B:
        """New jobs in ``slots`` (starting at ``now``); which of them re-run their slot's previous
        job (recurring batch: the same profile, user limit and replicas' factors)."""
        cfg, rng, k = self.cfg, self.rng, len(slots)
        if k == 0:
            return np.zeros(0, dtype=bool)
        again = (~self.prod[slots] & (self.job_id[slots] >= 0)
                 & (rng.random(k) < cfg.recurring_share))
        kept = slots[again]
        old = [a[kept].copy() for a in self._profile()]
        tasks_kept = np.flatnonzero(np.isin(self.slot, kept))
        old_rep = self.rep_factor[tasks_kept].copy()
        self.job_id[slots] = np.arange(self.next_id, self.next_id + k)
        self.started_at[slots] = now
        self.next_id += k
        self.base[slots] = cfg.ram_median_gib * np.exp(cfg.ram_sigma * rng.standard_normal(k))
        amp = rng.uniform(0, cfg.diurnal_max, k)
        self.amp[slots] = np.where(self.prod[slots] | cfg.batch_diurnal, amp, 0.0)
        # Serving load follows the users' day (one phase for the cell, a jitter per job); batch
        # jobs' cycles are their own.
        jitter = 2 * math.pi * cfg.phase_jitter_h / 24 * rng.standard_normal(k)
        self.phase[slots] = np.where(self.prod[slots], jitter, rng.uniform(0, 2 * math.pi, k))
        self.noise_sd[slots] = rng.uniform(cfg.noise_sd_min, cfg.noise_sd_max, k)
        self.noise[slots] = self.noise_sd[slots] * rng.standard_normal(k)
        self.drift[slots] = 0.0
        self.step[slots] = 0.0
        self.last_step_up[slots] = -math.inf
        life = DAY_S * 1e6 * np.ones(k)  # production jobs outlive the run
        batch = ~self.prod[slots]
        life[batch] = cfg.batch_hours_median * 3600 * np.exp(0.5 * rng.standard_normal(int(batch.sum())))
        self.ends_at[slots] = now + life
        # The user's limit: the job's mean usage × a factor (median by mode; soft-limit jobs state
        # tighter limits, as in the lecture); a small share under-provisioned.
        soft = self.mode[slots] == MODES.index("soft")
        median = np.where(soft, cfg.soft_limit_factor, cfg.hard_limit_factor)
        factor = median * np.exp(cfg.limit_sigma * rng.standard_normal(k))
        under = rng.random(k) < cfg.underprovisioned
        factor[under] = rng.uniform(cfg.underprovisioned_low, cfg.underprovisioned_high, int(under.sum()))
        self.underprovisioned[slots] = under
        self.user_limit[slots] = self.base[slots] * self.mean_factor(slots) * factor
        u = rng.random(k)
        self.tolerance[slots] = np.where(u < cfg.tolerance_low, 0,
                                         np.where(u < cfg.tolerance_low + cfg.tolerance_minimal, 1, 2))
        tasks = np.flatnonzero(np.isin(self.slot, slots))
        self.rep_factor[tasks] = 1 + cfg.replica_sd * rng.standard_normal(len(tasks))
        self.rep_noise[tasks] = cfg.replica_noise_sd * rng.standard_normal(len(tasks))
        self.peak_sd[slots] = rng.uniform(cfg.peak_sd_min, cfg.peak_sd_max, k)
        # A re-run: every draw above was made (paired streams), then the previous job's kept.
        for a, v in zip(self._profile(), old, strict=True):
            a[kept] = v
        self.rep_factor[tasks_kept] = old_rep
        return again

    def _profile(self) -> tuple[npt.NDArray[np.generic], ...]:
        """What a recurring job keeps from its previous execution."""
        return (self.base, self.amp, self.phase, self.noise_sd, self.peak_sd, self.user_limit,
                self.underprovisioned, self.tolerance)

    def mean_factor(self, slots: Ints) -> F:
        """E[exp(job noise + replica noise)]: the level's mean multiplier at start."""
        var = self.noise_sd[slots] ** 2 + self.cfg.replica_noise_sd**2
        return np.exp(var / 2)

    def advance(self, now: float) -> F:
        """One window on: every task's memory usage (GiB) at ``now``."""
        cfg, rng = self.cfg, self.noise_rng
        slots, tasks = len(self.mode), len(self.slot)
        innov = math.sqrt(1 - self.rho**2)
        self.noise = self.rho * self.noise + innov * self.noise_sd * rng.standard_normal(slots)
        self.rep_noise = self.rho * self.rep_noise + innov * cfg.replica_noise_sd * rng.standard_normal(tasks)
        per_window = cfg.window_s / DAY_S
        self.drift += cfg.drift_sd_per_day * math.sqrt(per_window) * rng.standard_normal(slots)
        jumps = self.step_rng.random(slots) < cfg.steps_per_day * per_window
        size = np.where(jumps, cfg.step_sd * self.step_rng.standard_normal(slots), 0.0)
        self.step += size
        self.last_step_up[size > 0] = now
        cycle = 1 + self.amp * np.sin(2 * math.pi * now / DAY_S + self.phase)
        level = self.base * cycle * np.exp(self.drift + self.step + self.noise)
        usage: F = level[self.slot] * self.rep_factor * np.exp(self.rep_noise)
        return usage

    def samples(self, usage: F) -> F:
        """Within the window: ``peak_samples`` samples per task (tasks × samples) around its window
        mean ``usage``, their mean exactly that."""
        cfg, rng, n = self.cfg, self.peak_rng, self.cfg.peak_samples
        if n == 1:
            return usage[:, None]
        c = cfg.peak_job_corr
        z = (math.sqrt(c) * rng.standard_normal((len(self.mode), n))[self.slot]
             + math.sqrt(1 - c) * rng.standard_normal((len(self.slot), n)))
        if cfg.peak_cell_corr > 0:  # a burst the whole cell's production shares (users' traffic)
            cell = cfg.peak_cell_corr * self.prod[self.slot][:, None]
            z = np.sqrt(cell) * self.burst_rng.standard_normal(n)[None, :] + np.sqrt(1 - cell) * z
        z -= z.mean(axis=1, keepdims=True)
        out: F = usage[:, None] * np.maximum(0.0, 1 + self.peak_sd[self.slot][:, None] * z)
        return out
