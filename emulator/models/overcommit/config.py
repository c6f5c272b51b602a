"""E4's cell model: what is drawn and how Borg and Autopilot behave (design.md §3b).

Every number here is an input, chosen before the run and named in docs/borg.md; the lecture's
figures (``LECTURE``) are only compared against, never fitted to, except the users' limit factors,
which the issue asks to draw so that hard- and soft-limit jobs have the lecture's median slack."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Mode = Literal["hard", "soft", "autopilot", "ml"]
MODES: tuple[Mode, ...] = ("hard", "soft", "autopilot", "ml")

# Google production (the lecture, 003:172-179): median relative slack (limit − usage)/limit,
# share of jobs without an OOM, OOMs per task-day. The lecture gives no OOM-free share for ML.
LECTURE: dict[str, dict[str, float | None]] = {
    "hard": {"slack": 0.60, "jobs_oom_free": 0.987, "ooms_per_task_day": 0.069},
    "soft": {"slack": 0.46, "jobs_oom_free": 0.975, "ooms_per_task_day": 0.19},
    "autopilot": {"slack": 0.31, "jobs_oom_free": 0.995, "ooms_per_task_day": 0.002},
    "ml": {"slack": 0.23, "jobs_oom_free": None, "ooms_per_task_day": 0.013},
}

Pos = Annotated[float, msgspec.Meta(gt=0, le=1e9)]
Share = Annotated[float, msgspec.Meta(ge=0, le=1)]
Count = Annotated[int, msgspec.Meta(ge=1, le=100_000)]


class E4Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    seed: Annotated[int, msgspec.Meta(ge=0)] = 1  # the draws (a study's `seed` axis sets it)
    # The run: windows of the lecture's 5 min; the first day fills the cell and the histograms and
    # is not measured.
    days: Pos = 5.0
    warmup_days: Annotated[float, msgspec.Meta(ge=0, le=1e3)] = 1.0
    window_s: Pos = 300.0
    machines: Count = 20
    machine_ram_gib: Pos = 256.0
    # Job slots per mode (each mode a population of its own in the same cell); a batch job ends
    # after a lognormal lifetime and a new job is drawn into its slot.
    jobs_per_mode: Count = 40
    prod_share: Share = 0.35
    replicas_min: Count = 2
    replicas_max: Count = 24
    batch_hours_median: Pos = 6.0
    # Usage per replica: level × diurnal cycle × exp(drift + steps + job noise + replica noise)
    # × replica factor; the noises are AR(1) at window resolution.
    ram_median_gib: Pos = 2.0
    ram_sigma: Pos = 0.8
    diurnal_max: Share = 0.25
    batch_diurnal: bool = True  # batch jobs have a cycle of their own (random phase)
    phase_jitter_h: Annotated[float, msgspec.Meta(ge=0, le=24)] = 2.0
    noise_sd_min: Share = 0.02
    noise_sd_max: Share = 0.08
    noise_tau_s: Pos = 1800.0
    replica_sd: Share = 0.03
    replica_noise_sd: Share = 0.02
    drift_sd_per_day: Share = 0.05
    steps_per_day: Annotated[float, msgspec.Meta(ge=0, le=1e3)] = 0.3
    step_sd: Share = 0.15
    # Within a window (the lecture samples about every second): peak_samples samples per replica,
    # each the window's mean × (1 + sd·z), sd per job uniform in [peak_sd_min, peak_sd_max], z
    # shared by a job's replicas with correlation peak_job_corr. Hard limits and machines are
    # judged at these samples, the histograms count them; reservations follow the window mean
    # (what the Borglet reports). peak_samples = 1: the window mean only.
    peak_samples: Count = 10
    peak_sd_min: Share = 0.01
    peak_sd_max: Share = 0.05
    peak_job_corr: Share = 0.5
    # Off by default (not in the lecture): the share of production jobs' bursts common to the cell.
    peak_cell_corr: Share = 0.0
    # Recurring batch jobs: a new batch job re-runs its slot's previous job (same usage profile and
    # user limit) with this probability; Autopilot and ML start it from the prior execution's
    # limit and histograms (history about prior executions, as Autopilot uses).
    recurring_share: Share = 0.5
    # Task-days, the OOM rate's denominator: windows a task runs ("running") or windows from its
    # first start to its job's end, restarts and their backoff included ("started", as a
    # crash-looping Borg task stays a task of its job).
    task_days: Literal["running", "started"] = "started"
    # Users' limits: mean usage × a lognormal factor (median 1 / (1 − target slack)); a share of
    # jobs is under-provisioned: factor uniform in [low, high] (below the job's daily peak).
    hard_limit_factor: Pos = 2.5
    soft_limit_factor: Pos = 1.85
    limit_sigma: Pos = 0.3
    underprovisioned: Share = 0.02
    underprovisioned_low: Pos = 0.9
    underprovisioned_high: Pos = 1.3
    # Borg: reservations start at the limit and, after reclaim_after_s (start-up), decay toward
    # usage × (1 + margin) (reclamation);
    # production is placed within capacity by limits, batch into what was reclaimed. A task killed
    # restarts after 1, 2, 4, ... windows (at most restart_backoff_max) and its count of
    # consecutive kills resets after an hour alive.
    reclaim_after_s: Annotated[float, msgspec.Meta(ge=0, le=1e9)] = 300.0
    reclaim_tau_s: Pos = 3600.0
    reclaim_margin: Share = 0.05
    restart_backoff_max: Count = 12
    # Autopilot statistics (lecture): k buckets up to range × the user's limit, RAM half-life 48 h,
    # S_max over the last max_windows windows (the lecture's N; not given there),
    # S_p98 / S_max / max(S_p60, 0.5 S_max) by OOM tolerance, +margin, max over hold_s; the user's
    # limit until min_history_s of samples. After an OOM the limit is bumped to the usage that
    # killed × (1 + oom_bump), a floor that decays with the RAM half-life.
    buckets: Annotated[int, msgspec.Meta(ge=2, le=1000)] = 400
    range_factor: Pos = 4.0
    ram_half_life_s: Pos = 48 * 3600.0
    max_windows: Count = 288  # S_max over the last day: minimal tolerance covers the daily cycle
    margin: Share = 0.15
    hold_s: Pos = 3600.0
    min_history_s: Annotated[float, msgspec.Meta(ge=0, le=1e9)] = 3600.0
    # A job with less than young_history_s of samples (its own or its prior executions'): the
    # recommendation is not below S_max of that short history (a percentile of a few hours does
    # not yet describe the job); one day, the S_max window.
    young_history_s: Annotated[float, msgspec.Meta(ge=0, le=1e9)] = 86400.0
    tolerance_low: Share = 0.8
    tolerance_minimal: Share = 0.1  # the rest: medium
    oom_bump: Share = 0.2
    # ML: models (decay half-life, margin); each model's limit minimises over-cost × the share of
    # samples above it + under-cost × memory unused / memory used + change_cost if it moves; the
    # model with the least decayed realised cost (+ change_cost if the limit moves, + switch_cost
    # if the model changes) wins.
    ml_half_lives_h: tuple[float, ...] = (1.0, 6.0, 24.0)
    ml_margins: tuple[float, ...] = (0.0, 0.05, 0.1)
    ml_over_cost: Pos = 20.0
    ml_under_cost: Pos = 1.0
    ml_change_cost: Annotated[float, msgspec.Meta(ge=0, le=1e6)] = 0.02
    ml_switch_cost: Annotated[float, msgspec.Meta(ge=0, le=1e6)] = 0.02
    ml_cost_half_life_s: Pos = 12 * 3600.0

    def __post_init__(self) -> None:
        if self.warmup_days >= self.days:
            raise ValueError(f"`days` must exceed the {self.warmup_days:g} warm-up day(s) (`warmup_days`)")

    @property
    def windows(self) -> int:
        return round(self.days * 86400 / self.window_s)

    @property
    def warmup_windows(self) -> int:
        return round(self.warmup_days * 86400 / self.window_s)
