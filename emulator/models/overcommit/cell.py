"""E4's Borg cell, window by window (design.md §3b, issue 33).

Each window (the lecture's 5 minutes): batch jobs that ended are replaced by new draws or
re-runs; every replica's usage moves (usage.py); pending tasks are placed best-fit by reservation
(production only where the production limits fit the machine, batch into what reclamation
freed); a task with a hard limit whose usage exceeds it at any of the window's samples dies (an
OOM); a machine whose usage exceeds its memory at a sample kills batch before production and,
within a tier, tasks above their soft limit first, largest first, until it fits (also OOMs);
reservations decay toward the window's mean usage + margin; Autopilot's and the ML recommender's
windows close on the samples and their limits (bumped after an OOM) apply to running replicas
and, as their reservations, to the machines."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from emulator.models.overcommit.config import MODES, E4Config
from emulator.models.overcommit.recommend import AutopilotStats, MLRecommender, window_counts
from emulator.models.overcommit.usage import DAY_S, TOLERANCES, B, F, Ints, Jobs

SOFT, AUTOPILOT, ML = MODES.index("soft"), MODES.index("autopilot"), MODES.index("ml")
COUNTERS = ("windows", "usage", "limit", "oom_limit", "oom_shortage", "oom_before_rec", "oom_after_step",
            "oom_young_job")


class Cell:
    def __init__(self, cfg: E4Config, seed: int) -> None:
        self.cfg = cfg
        jobs_seed, place_seed = np.random.SeedSequence(seed).spawn(2)
        self.rng = np.random.default_rng(place_seed)  # placement order among pending tasks
        self.jobs = j = Jobs(cfg, jobs_seed)
        slots, tasks = len(j.mode), len(j.slot)
        self.task_prod = j.prod[j.slot]
        self.task_hard = j.mode[j.slot] != SOFT
        self.ap_rows = np.flatnonzero(j.mode == AUTOPILOT)
        self.ml_rows = np.flatnonzero(j.mode == ML)
        self.ap = AutopilotStats(cfg, self.width(self.ap_rows), j.tolerance[self.ap_rows])
        self.ml = MLRecommender(cfg, self.width(self.ml_rows))
        self.limit = j.user_limit.copy()
        self.floor = np.zeros(slots)  # the OOM bump
        self.recommended = np.zeros(slots, dtype=bool)
        self.machine = np.full(tasks, -1, dtype=np.int64)
        self.ready_at = np.zeros(tasks, dtype=np.int64)
        self.resv = np.zeros(tasks)
        self.kills_in_row = np.zeros(tasks, dtype=np.int64)
        self.placed_at = np.zeros(tasks, dtype=np.int64)
        self.started = np.zeros(tasks, dtype=bool)  # placed once since its job began
        self.acc = {k: np.zeros(slots) for k in COUNTERS}
        self.records: list[dict[str, Any]] = []
        self.short_now = 0
        self.fullest_now = 0.0
        self.ml_choices = np.zeros(len(cfg.ml_half_lives_h) * len(cfg.ml_margins))  # job-windows per model
        self.cell = {"machine_windows": 0, "short_machine_windows": 0, "task_windows": 0,
                     "pending_task_windows": 0, "usage": 0.0, "reserved": 0.0, "fullest_peak": 0.0,
                     "reserved_above_usage_young": 0.0}

    def width(self, rows: Ints) -> F:
        w: F = self.cfg.range_factor * self.jobs.user_limit[rows] / self.cfg.buckets
        return w

    def flush(self, slots: Ints) -> None:
        """Record the jobs now in ``slots`` (they end, or the run does) and clear their counters."""
        j, a = self.jobs, self.acc
        for s in slots[a["windows"][slots] > 0]:
            self.records.append({
                "mode": MODES[j.mode[s]], "tier": "production" if j.prod[s] else "batch",
                "underprovisioned": bool(j.underprovisioned[s]), "tolerance": TOLERANCES[j.tolerance[s]],
                "task_days": a["windows"][s] * self.cfg.window_s / DAY_S, "usage": a["usage"][s],
                "limit": a["limit"][s], "oom_limit": int(a["oom_limit"][s]),
                "oom_shortage": int(a["oom_shortage"][s]), "oom_before_rec": int(a["oom_before_rec"][s]),
                "oom_after_step": int(a["oom_after_step"][s]),
                "oom_young_job": int(a["oom_young_job"][s]),
            })
        for v in a.values():
            v[slots] = 0.0

    def renew(self, slots: Ints, w: int, now: float) -> None:
        j = self.jobs
        self.flush(slots)
        again = j.draw(slots, now)
        tasks = np.isin(j.slot, slots)
        self.machine[tasks] = -1
        self.ready_at[tasks] = w
        self.kills_in_row[tasks] = 0
        self.started[tasks] = False
        # A re-run keeps its limit (the user's, or the recommenders' last for the prior
        # execution), its OOM floor and its recommenders' histories; a new job starts afresh.
        fresh = slots[~again]
        self.limit[fresh] = j.user_limit[fresh]
        self.floor[fresh] = 0.0
        self.recommended[fresh] = False
        for rows, rec in ((self.ap_rows, self.ap), (self.ml_rows, self.ml)):
            hit = np.flatnonzero(np.isin(rows, fresh))
            if len(hit):
                rec.reset(hit, self.width(rows[hit]))

    def place(self, w: int, running: B) -> None:
        cfg, j = self.cfg, self.jobs
        pend = np.flatnonzero(~running & (self.ready_at <= w))
        if not len(pend):
            return
        cap, m = cfg.machine_ram_gib, cfg.machines
        lim = self.limit[j.slot]
        resv = np.bincount(self.machine[running], self.resv[running], minlength=m)
        prod_run = running & self.task_prod
        prod = np.bincount(self.machine[prod_run], lim[prod_run], minlength=m)
        pend = pend[np.lexsort((self.rng.random(len(pend)), ~self.task_prod[pend]))]
        smallest_failed = math.inf  # a batch task this size found no machine: larger ones will not
        for t in pend:
            need = lim[t]
            if not self.task_prod[t] and need >= smallest_failed:
                continue
            free = cap - resv - need
            ok = free >= 0
            if self.task_prod[t]:
                ok &= prod + need <= cap
            if not ok.any():
                if not self.task_prod[t]:
                    smallest_failed = min(smallest_failed, need)
                continue
            best = int(np.argmin(np.where(ok, free, np.inf)))
            self.machine[t] = best
            self.resv[t] = need
            self.placed_at[t] = w
            self.started[t] = True
            resv[best] += need
            if self.task_prod[t]:
                prod[best] += need

    def shortage(self, samples: F, alive: B) -> B:
        """Kills on machines whose usage exceeds their memory at one of the window's samples
        (``samples``: tasks × samples, or one usage per task); judged at the machine's worst."""
        cfg, j = self.cfg, self.jobs
        s = samples if samples.ndim == 2 else samples[:, None]
        n = s.shape[1]
        killed = np.zeros(len(s), dtype=bool)
        self.short_now = 0
        self.fullest_now = 0.0
        cells = (self.machine[alive][:, None] * n + np.arange(n)[None, :]).ravel()
        loads = np.bincount(cells, s[alive].ravel(), minlength=cfg.machines * n).reshape(cfg.machines, n)
        worst = np.argmax(loads, axis=1)
        load = loads[np.arange(cfg.machines), worst]
        self.fullest_now = float(load.max())
        short = np.flatnonzero(load > cfg.machine_ram_gib)
        if not len(short):
            return killed
        lim = self.limit[j.slot]
        for m in short:
            idx = np.flatnonzero(alive & (self.machine == m))
            u = s[idx, worst[m]]
            order = idx[np.lexsort((-u, ~(u > lim[idx]), self.task_prod[idx]))]
            used = s[order, worst[m]]
            excess = load[m] - cfg.machine_ram_gib
            k = int(np.searchsorted(np.cumsum(used), excess - 1e-12)) + 1
            killed[order[:k]] = True
        self.short_now = len(short)
        return killed

    def step(self, w: int) -> None:
        cfg, j, a = self.cfg, self.jobs, self.acc
        now = w * cfg.window_s
        ended = np.flatnonzero(j.ends_at <= now)
        if len(ended):
            self.renew(ended, w, now)
        u = j.advance(now)
        samples = j.samples(u)
        peak = samples.max(axis=1)
        self.place(w, self.machine >= 0)
        run = self.machine >= 0
        lim = self.limit[j.slot]
        over = run & self.task_hard & (peak > lim)
        short = self.shortage(samples, run & ~over)
        killed = over | short
        s = len(j.mode)
        if w >= cfg.warmup_windows:
            counted = run if cfg.task_days == "running" else self.started
            a["windows"] += np.bincount(j.slot[counted], minlength=s)
            a["usage"] += np.bincount(j.slot[run], u[run], minlength=s)
            a["limit"] += np.bincount(j.slot[run], lim[run], minlength=s)
            a["oom_limit"] += np.bincount(j.slot[over], minlength=s)
            a["oom_shortage"] += np.bincount(j.slot[short], minlength=s)
            early = over & ~self.recommended[j.slot] & np.isin(j.mode[j.slot], (AUTOPILOT, ML))
            a["oom_before_rec"] += np.bincount(j.slot[early], minlength=s)
            stepped = over & (now - j.last_step_up[j.slot] <= 3600)  # a step up in the last hour
            a["oom_after_step"] += np.bincount(j.slot[stepped], minlength=s)
            young = over & (now - j.started_at[j.slot] < DAY_S)  # the job's first day
            a["oom_young_job"] += np.bincount(j.slot[young], minlength=s)
            c = self.cell
            c["machine_windows"] += cfg.machines
            c["short_machine_windows"] += self.short_now
            c["fullest_peak"] = max(c["fullest_peak"], self.fullest_now)
            c["task_windows"] += int(run.sum())
            c["pending_task_windows"] += int((~run).sum())
            c["usage"] += float(u[run].sum())
            c["reserved"] += float(self.resv[run].sum())
            young = run & ((w - self.placed_at) * cfg.window_s < 3 * 3600)  # started under 3 h ago
            c["reserved_above_usage_young"] += float((self.resv[young] - u[young]).sum())
        # The OOM bump: Autopilot and ML raise a job's limit above the usage that killed.
        bumped = over & np.isin(j.mode[j.slot], (AUTOPILOT, ML))
        np.maximum.at(self.floor, j.slot[bumped], peak[bumped] * (1 + cfg.oom_bump))
        self.machine[killed] = -1
        self.kills_in_row[killed] += 1
        self.ready_at[killed] = w + np.minimum(2 ** (self.kills_in_row[killed] - 1), cfg.restart_backoff_max)
        alive = run & ~killed
        steady = alive & (w - self.placed_at >= round(3600 / cfg.window_s))
        self.kills_in_row[steady] = 0
        # Reclamation: a reservation decays toward usage + margin (never above the limit).
        target = np.minimum(u * (1 + cfg.reclaim_margin), lim)
        keep = math.exp(-cfg.window_s / cfg.reclaim_tau_s)
        decaying = alive & ((w - self.placed_at) * cfg.window_s >= cfg.reclaim_after_s)
        self.resv = np.where(decaying, np.where(self.resv > target, target + (self.resv - target) * keep,
                                                target), self.resv)
        self.recommend(samples, run)
        if w >= cfg.warmup_windows:
            chosen = self.ml.chosen[self.ml.chosen >= 0]
            self.ml_choices += np.bincount(chosen, minlength=len(self.ml_choices))

    def recommend(self, samples: F, run: B) -> None:
        cfg, j = self.cfg, self.jobs
        n = samples.shape[1]
        for rows, rec in ((self.ap_rows, self.ap), (self.ml_rows, self.ml)):
            if not len(rows):
                continue
            local = np.full(len(j.mode), -1, dtype=np.int64)
            local[rows] = np.arange(len(rows))
            mine = run & (local[j.slot] >= 0)
            if isinstance(rec, AutopilotStats):
                # Autopilot's histograms: every sample of the window (the lecture's s_i[t][k]).
                got = rec.close(window_counts(rec.width, cfg.buckets, np.repeat(local[j.slot[mine]], n),
                                              samples[mine].ravel()))
            else:
                # ML prices the tasks above a limit (the lecture: "tasks above the limit"): one
                # value per task and window, its peak.
                got = rec.close(window_counts(rec.width, cfg.buckets, local[j.slot[mine]],
                                              samples[mine].max(axis=1)), self.limit[rows])
            fresh = ~np.isnan(got)
            self.recommended[rows] |= fresh
            self.limit[rows] = np.fmax(np.where(fresh, got, self.limit[rows]), self.floor[rows])
        self.floor *= 2.0 ** (-cfg.window_s / cfg.ram_half_life_s)
        # Autopilot's limits are reservations: none above its task's limit.
        self.resv = np.minimum(self.resv, self.limit[j.slot])

    def run(self) -> dict[str, Any]:
        for w in range(self.cfg.windows):
            self.step(w)
        self.flush(np.arange(len(self.jobs.mode)))
        return {"jobs": self.records, "cell": self.cell, "ml_choices": self.ml_choices}
