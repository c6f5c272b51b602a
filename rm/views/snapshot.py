"""What the RM shows of itself: typed, immutable views for metrics, results, checkers and the
status page. Building one never changes the RM; holding one never sees it change."""

from __future__ import annotations

import msgspec

from rm.borg.tiers import TierCounters
from rm.counters import GroupCounters, PreemptionCounters, RMCounters
from rm.protocol import Resources
from rm.queues.dispatcher import DispatcherStatistics
from rm.scheduler.policy import PolicyCounters


class UsageWindow(msgspec.Struct, frozen=True):
    """Time integrals over the measurement window: allocated and schedulable core- and GiB-seconds."""

    used_cpu_s: float
    used_ram_s: float
    cap_cpu_s: float
    cap_ram_s: float

    @property
    def cpu_utilization(self) -> float:
        return self.used_cpu_s / self.cap_cpu_s if self.cap_cpu_s > 0 else 0.0

    @property
    def ram_utilization(self) -> float:
        return self.used_ram_s / self.cap_ram_s if self.cap_ram_s > 0 else 0.0


class MembershipSnapshot(msgspec.Struct, frozen=True):
    version: int
    members: int
    suspects: int
    reports: int
    reports_rejected: int
    probes: int
    refuted: int
    removals: int
    brake_held: int
    deltas: int
    syncs: int
    ring_messages: int
    bytes_join: int
    bytes_removal: int
    # Probe attempts to nodes that turned out alive, lost and answered; rounds added for loss or a
    # slow network; removed nodes that answered afterwards.
    probe_attempts_lost: int = 0
    probe_attempts_answered: int = 0
    probe_rounds_extended: int = 0
    late_answers: int = 0


class RMSnapshot(msgspec.Struct, frozen=True):
    """Counters and totals: cheap enough to take every sample interval."""

    t: float
    up: bool
    epoch: int
    recovering: bool
    counters: RMCounters
    inbound: DispatcherStatistics
    scheduler: DispatcherStatistics
    nodes: int
    nodes_unhealthy: int
    capacity: Resources  # schedulable
    allocated: Resources  # on schedulable nodes
    registered: Resources  # every registered node, healthy or not
    window: UsageWindow
    operations: int
    running_tasks: int
    pending_tasks: int
    policy: PolicyCounters
    preemption: PreemptionCounters | None
    groups: dict[str, GroupCounters]
    membership: MembershipSnapshot | None
    tiers: TierCounters | None = None  # Borg tier preemption (design.md §3b)

    @property
    def cpu_utilization(self) -> float:
        return self.allocated.cpu / self.capacity.cpu if self.capacity.cpu > 0 else 0.0

    @property
    def ram_utilization(self) -> float:
        return self.allocated.ram_gib / self.capacity.ram_gib if self.capacity.ram_gib > 0 else 0.0


class Share(msgspec.Struct, frozen=True):
    """Dominant share achieved now and the fair share (both fractions of the cluster)."""

    dominant: float
    fair: float


class SharesSnapshot(msgspec.Struct, frozen=True):
    """Fair shares of the current demand (progressive filling on the pooled cluster)."""

    bound: Resources  # the pooled-cluster utilisation bound of this demand mix (fractions)
    operations: dict[int, Share]
    groups: dict[str, Share]
    pools: dict[str, Share]
    # (running, pending) tasks of each workload entry's operations, and under each pool but root
    # (its sub-pools' too, as its dominant share counts them): what the per-pool series reads
    # next to the shares, without a view of every operation and pool each sample.
    group_tasks: dict[str, tuple[int, int]]
    pool_tasks: dict[str, tuple[int, int]]


class OperationView(msgspec.Struct, frozen=True):
    id: int
    name: str
    group: str
    pool: str
    state: str
    demand: Resources
    running: int
    pending: int
    completed: int
    total: int
    usage: Resources
    submitted_at: float


class PoolView(msgspec.Struct, frozen=True):
    name: str
    parent: str | None
    weight: float
    operations: int
    pending: int
    usage: Resources


class ContainerView(msgspec.Struct, frozen=True, array_like=True):
    container_id: int
    op_id: int
    task: int


class NodeView(msgspec.Struct, frozen=True):
    machine_id: int
    address: str
    state: str  # running | unhealthy
    total: Resources
    free: Resources
    containers: tuple[ContainerView, ...]
    last_heartbeat_at: float


class RingSnapshot(msgspec.Struct, frozen=True):
    """The RM's published ring and its open suspicions (machine ids)."""

    version: int
    members: tuple[int, ...]
    suspected: tuple[int, ...]
    held: tuple[int, ...]
