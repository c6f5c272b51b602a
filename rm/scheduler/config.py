"""Scheduler settings (embedded as-is in the scenario schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from rm.scheduler.borg_config import AdmissionConfig, AutopilotConfig, PlacementConfig, TiersConfig

# A registered policy's name (rm/scheduler/registry.py: the built-ins and the `hbemu.policies` entry
# points); the scenario's validation checks it against the registry.
PolicyName = str
HeuristicName = Literal["angle", "angle_length", "drfh", "tetris"]
PresetName = Literal["thesis", "yt", "fit", "fit-fair"]
# How cores and GiB are made comparable before a heuristic looks at them.
Normalisation = Literal["node_mean", "cluster_total"]
AcceptRule = Literal["at_most_k", "fewer_than_k"]
# When every candidate refuses a node: the neediest starts one task and the node's update ends
# (`neediest_stop`, the thesis §2.3), or the candidate whose task packs best starts one and the
# offers go on (`best_continue`, ours), or the neediest starts one and they go on.
AllRefused = Literal["neediest_stop", "neediest_continue", "best_continue"]
# What `share_band` and `below_level_refusals` measure a user against: DRF's level L (one number for
# everyone) or the user's own DRF fair share (progressive filling with its demand, as preemption uses).
BandReference = Literal["level", "fair_share"]

NonNegative = Annotated[float, msgspec.Meta(ge=0)]
Positive = Annotated[float, msgspec.Meta(gt=0)]


class PackingParams(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """The controller's decision rule, fully resolved (seed 000 §3.2; design.md §3)."""

    heuristic: HeuristicName
    # Refuse the first `warmup_refusals` offers (the thesis's s).
    warmup_refusals: Annotated[int, msgspec.Meta(ge=0)]
    # Window of the last `window` offers (n), none older than `max_age_s`.
    window: Annotated[int, msgspec.Meta(ge=1)]
    max_age_s: Positive
    # Accept iff at most k (`at_most_k`, the thesis) / fewer than k (`fewer_than_k`, YT's
    # max_better_past_snapshots) window offers are significantly better than the current one.
    k: Annotated[int, msgspec.Meta(ge=0)]
    accept: AcceptRule
    # significantlyBetter(old, cur) = old < cur - A and old < cur / R; off: plain old < cur.
    significance: bool
    A: NonNegative
    R: Annotated[float, msgspec.Meta(ge=1)]
    # Starvation insurance: accept after this many refusals in a row; None: no limit.
    max_consecutive_refusals: Annotated[int, msgspec.Meta(ge=1)] | None
    normalisation: Normalisation
    all_refused: AllRefused = "neediest_stop"
    # best_continue: the best packer among the first (this fraction, at least one) of the refusers
    # in fairness order (as Tetris's 1 - f).
    fallback_fraction: Annotated[float, msgspec.Meta(gt=0, le=1)] = 1.0
    # Fairness bound (ours, `fit-fair`). L = DRF's level, the mean dominant share / weight of the
    # users (top-level pools) with pending tasks. A refused offer passes down the fairness order only
    # to users at most (1 + share_band) x L; the all-refused choice is made among those. None: no bound.
    share_band: NonNegative | None = None
    # A user below L refuses at most this many offers in a row (then accepts). None: no limit.
    below_level_refusals: Annotated[int, msgspec.Meta(ge=0)] | None = None
    # `fair_share`: both bounds above use each user's own fair share instead of L.
    band_reference: BandReference = "level"
    # Displacement ledger (ours): a task started on a node whose first candidate (DRF's choice) was
    # another user moves its dominant share from that user to the receiver. Per user, the net moved
    # share and all started share decay with `ledger_tau_s`; a user whose net received share exceeds
    # `ledger_cap` x its started share receives no offer out of turn, and one whose net given share
    # exceeds it refuses no more. None: no ledger.
    ledger_cap: NonNegative | None = None
    ledger_tau_s: Positive = 600.0


PRESETS: dict[str, PackingParams] = {
    # Thesis Table 4.2. The thesis asks for a consecutive-refusal limit without giving a number;
    # 50 is ours: at the i.i.d. acceptance rate 3/16 a run of 50 refusals has odds ~3e-5.
    "thesis": PackingParams(
        heuristic="angle_length", warmup_refusals=5, window=15, max_age_s=1200.0, k=2,
        accept="at_most_k", significance=True, A=0.05, R=1.5, max_consecutive_refusals=50,
        normalisation="node_mean",
    ),
    # The production YT scheduler's defaults (fair_share_strategy packing config).
    "yt": PackingParams(
        heuristic="angle_length", warmup_refusals=0, window=10, max_age_s=3600.0, k=2,
        accept="fewer_than_k", significance=True, A=0.05, R=1.5, max_consecutive_refusals=None,
        normalisation="cluster_total",
    ),
    # Ours (docs/packing.md "Beyond the thesis"): the thesis's rule made pickier (accept only an
    # offer no offer of the last 60 beats significantly), and when every candidate refuses a node
    # the one whose task packs best there starts, and the node's offers go on. The window was 30
    # until issue 33: 60 gains more and keeps every user within 10% below its no-packing share.
    "fit": PackingParams(
        heuristic="angle_length", warmup_refusals=5, window=60, max_age_s=1200.0, k=0,
        accept="at_most_k", significance=True, A=0.05, R=1.5, max_consecutive_refusals=50,
        normalisation="node_mean", all_refused="best_continue",
    ),
    # `fit` with a fairness bound (docs/packing.md "A fairness-bounded fit"): a refused offer goes
    # on only to users at most 10% above DRF's level, and a user below it refuses at most 5 in a row.
    # Its window follows `fit`'s (60 since issue 33; the committed 20-seed runs had 30).
    "fit-fair": PackingParams(
        heuristic="angle_length", warmup_refusals=5, window=60, max_age_s=1200.0, k=0,
        accept="at_most_k", significance=True, A=0.05, R=1.5, max_consecutive_refusals=50,
        normalisation="node_mean", all_refused="best_continue", share_band=0.1,
        below_level_refusals=5,
    ),
}


class PackingConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A preset plus optional overrides of single parameters."""

    preset: PresetName = "thesis"
    heuristic: HeuristicName | None = None
    warmup_refusals: Annotated[int, msgspec.Meta(ge=0)] | None = None
    window: Annotated[int, msgspec.Meta(ge=1)] | None = None
    max_age_s: Positive | None = None
    k: Annotated[int, msgspec.Meta(ge=0)] | None = None
    accept: AcceptRule | None = None
    significance: bool | None = None
    A: NonNegative | None = None
    R: Annotated[float, msgspec.Meta(ge=1)] | None = None
    max_consecutive_refusals: Annotated[int, msgspec.Meta(ge=1)] | None = None
    # Explicitly no limit (overrides a preset's limit).
    no_refusal_limit: bool = False
    normalisation: Normalisation | None = None
    all_refused: AllRefused | None = None
    fallback_fraction: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None
    share_band: NonNegative | None = None
    below_level_refusals: Annotated[int, msgspec.Meta(ge=0)] | None = None
    band_reference: BandReference | None = None
    ledger_cap: NonNegative | None = None
    ledger_tau_s: Positive | None = None
    # Packing off for operations in these pools (or below them) and for these workload entries
    # (operation names / looping groups), e.g. a production pool.
    disabled_pools: list[str] = []
    disabled_operations: list[str] = []

    def resolve(self) -> PackingParams:
        base = PRESETS[self.preset]
        changes = {
            f: getattr(self, f)
            for f in PackingParams.__struct_fields__
            if getattr(self, f, None) is not None
        }
        if self.no_refusal_limit:
            changes["max_consecutive_refusals"] = None
        return msgspec.structs.replace(base, **changes)


PreemptionMode = Literal["yt", "full-share"]
# What a preempted task's lost work counts: the CPU it actually used (`consumed`; its request
# where it has no usage model), or its request times the time it ran (`reserved`).
LostWork = Literal["consumed", "reserved"]


class PreemptionConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Starving operations preempt tasks of operations above their fair share (design.md §3).

    ``yt`` (seed 000 §4.1, YT's fair-share strategy of that period): starvation is refreshed every
    ``check_interval_s``; a starving operation preempts inside node updates, on the reporting node
    only, and only until it is back at ``tolerance`` x its fair share; an operation keeps its first
    ``min_unpreemptable_jobs`` running tasks; a node tries preemption at most once per
    ``node_backoff_s``; a new operation is not starving for ``rampup_grace_s`` after submission.
    ``full-share`` (the emulator's first rule, kept for comparison): one cluster-wide pass every
    ``check_interval_s`` tops every starving operation up to its full fair share.
    """

    enabled: bool = False
    mode: PreemptionMode = "yt"
    # An operation below `tolerance` x its fair share for this long is starving (YT's
    # fair_share_preemption_timeout = 30 s, fair_share_starvation_tolerance = 0.8).
    starvation_timeout_s: Positive = 30.0
    tolerance: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.8
    # How often the RM recomputes fair shares and starvation (`full-share`: and preempts).
    check_interval_s: Positive = 5.0
    # `yt` only. YT's max_unpreemptable_running_job_count (10).
    min_unpreemptable_jobs: Annotated[int, msgspec.Meta(ge=0)] = 10
    # YT's preemptive_scheduling_backoff (5 s).
    node_backoff_s: NonNegative = 5.0
    # Ours: a just-submitted operation ramps up through ordinary scheduling first (YT's looping
    # users resubmit; without a grace their new operation preempts before it has had a chance).
    rampup_grace_s: NonNegative = 60.0
    # How a preempted task's lost work is counted (`preempted_cpu_s`): the CPU it used, as the
    # thesis measured it (`consumed`), or its request times the time it ran (`reserved`, the
    # emulator's earlier count).
    lost_work: LostWork = "consumed"


class SchedulerConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    # A registered scheduling policy: the built-ins `drf`, `drfh`, `fifo`, `packing`, `tetris`, or
    # a plug-in's (docs/extending.md).
    policy: PolicyName = "drf"
    # The policy's own parameters, checked against its `Params` struct (the built-ins have none
    # here: packing's are `[scheduler.packing]`, tetris's `tetris_f`).
    params: dict[str, Any] = {}
    # Continuous scheduling: when demand appears (submission, requeue) the RM places tasks on every
    # node with free resources and pushes launches, instead of waiting for each node's heartbeat.
    # None: on in delta heartbeat mode (idle nodes are silent there), off in periodic mode.
    continuous: bool | None = None
    packing: PackingConfig = msgspec.field(default_factory=PackingConfig)
    # Tetris (seed 000 §1.5): among the first (1 - f) of the fairness order take the best packer.
    tetris_f: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.5
    preemption: PreemptionConfig = msgspec.field(default_factory=PreemptionConfig)
    # The Borg lecture's systems (design.md §3b; rm/scheduler/borg_config.py).
    tiers: TiersConfig = msgspec.field(default_factory=TiersConfig)
    placement: PlacementConfig = msgspec.field(default_factory=PlacementConfig)
    admission: AdmissionConfig = msgspec.field(default_factory=AdmissionConfig)
    autopilot: AutopilotConfig = msgspec.field(default_factory=AutopilotConfig)
