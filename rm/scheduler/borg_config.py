"""Scheduler settings of the Borg lecture's systems (design.md §3b): priority tiers, placement
policies with overcommit, stochastic-bin-packing admission and Autopilot. Embedded in
``SchedulerConfig`` as ``[scheduler.tiers]``, ``[scheduler.placement]``, ``[scheduler.admission]``
and ``[scheduler.autopilot]``; the layer itself is in ``rm/borg/``."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Positive = Annotated[float, msgspec.Meta(gt=0, le=1e9)]
TierName = Literal["free", "batch", "mid", "production", "monitoring"]
PlacementName = Literal["default", "next-fit", "first-fit", "best-fit", "worst-fit"]
AdmissionMethod = Literal["request", "av", "perc", "gpa-g", "gpa-sqrt", "cantelli", "emp-perc"]


class TiersConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Tiers order scheduling (higher first; the policy orders within a tier) and operations of
    ``preempt_from`` or higher preempt lower tiers' tasks when they fit nowhere."""

    enabled: bool = False
    preempt_from: TierName = "production"
    check_interval_s: Positive = 5.0
    # At most this many tasks started by preemption per check (bounds a pass's cost).
    max_starts_per_check: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 100


class PlacementConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Which node a task goes to. ``default``: the policy fills the node whose heartbeat it is
    handling (as before). The others choose over the whole cluster, operations in tier then
    dominant-share order: next-fit (the node after the last used), first-fit (the earliest
    registered node that fits), best-fit (the most loaded node that fits), worst-fit (spread)."""

    policy: PlacementName = "default"
    # Tasks of tiers below ``overcommit_below`` may be reserved up to this × a node's capacity;
    # tasks of that tier and above only within its capacity (Borg allocates beyond 100%).
    overcommit: Annotated[float, msgspec.Meta(ge=1, le=100)] = 1.0
    overcommit_below: TierName = "production"


class AdmissionConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Stochastic bin packing: a task fits a node when the node's predicted usage overflows its
    capacity with probability below 1 − ``slo`` (per resource). ``request``: requests only.
    Tasks' statistics come from the usage their nodes report (a task not yet seen: its request)."""

    method: AdmissionMethod = "request"
    slo: Annotated[float, msgspec.Meta(gt=0, lt=1)] = 0.99
    # av: f·mean (the lecture's f ∈ {1.0, 1.25, 2.0}).
    av_factor: Annotated[float, msgspec.Meta(gt=0, le=100)] = 1.25
    # Observed samples kept per task and per node (emp-perc, gpa-sqrt, perc).
    history: Annotated[int, msgspec.Meta(ge=2, le=100_000)] = 120
    # A task observed fewer times than this still counts as its request (young statistics:
    # a few samples of a bursty task may all be quiet ones).
    min_samples: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1


class AutopilotConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """``[scheduler.autopilot]``: applies to operations whose usage table says ``autopilot = true``."""

    enabled: bool = False
    window_s: Positive = 300.0
    cpu_half_life_s: Positive = 12 * 3600.0
    ram_half_life_s: Positive = 48 * 3600.0
    buckets: Annotated[int, msgspec.Meta(ge=2, le=400)] = 400
    range_factor: Annotated[float, msgspec.Meta(gt=0, le=1000)] = 4.0
    max_windows: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 12
    # Windows older than this many half-lives weigh < 2^-k and are dropped.
    keep_half_lives: Annotated[float, msgspec.Meta(gt=0, le=64)] = 10.0
    serving_percentile: Annotated[float, msgspec.Meta(gt=0, le=100)] = 95.0
    margin: Annotated[float, msgspec.Meta(ge=0, le=10)] = 0.15
    hold_s: Annotated[float, msgspec.Meta(ge=0, le=1e9)] = 3600.0
    # "load-adjusted": S_pj of h[k] = b[k]·(weighted count) as in the lecture; "samples": of the counts.
    percentile: Literal["load-adjusted", "samples"] = "load-adjusted"
