"""Borg priority tiers (design.md §3b): free < batch < mid < production < monitoring.

Scheduling offers resources to higher tiers first; within a tier the policy's own order (DRF,
FIFO, ...) holds. Operations of the preempting tiers (production and up by default) that fit on
no node take a node by preempting lower-tier tasks: on the node where that costs the fewest and
lowest-tier victims, most recently started first (least work lost). A lower tier never preempts
a higher one. Preemptions and the CPU-seconds of work they lose are counted per victim tier.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar, Protocol

import msgspec

from rm.ports import Clock
from rm.protocol import EXIT_PREEMPTED, TIER_NAMES
from rm.scheduler.borg_config import TiersConfig
from rm.scheduler.policy import Policy
from rm.state.cluster import EPS, Allocation, Cluster, NodeRecord
from rm.state.operations import Operation
from rm.state.workload import WorkloadBook


def tier_of(op: Operation) -> int:
    return op.spec.tier


class TierCounters(msgspec.Struct):
    """Per tier name: tasks preempted (as victims), CPU-seconds they had run, and tasks started by
    preempting (as preemptors)."""

    preempted: dict[str, int] = msgspec.field(default_factory=dict)
    lost_cpu_s: dict[str, float] = msgspec.field(default_factory=dict)
    started_by_preemption: dict[str, int] = msgspec.field(default_factory=dict)

    def copy(self) -> TierCounters:
        return TierCounters(dict(self.preempted), dict(self.lost_cpu_s), dict(self.started_by_preemption))


class TieredPolicy:
    """Wraps a fill-one-node policy: the candidate of the highest tier goes first, the wrapped
    policy's order within a tier. (Node-choosing policies are not wrapped.)"""

    chooses_nodes: ClassVar[bool] = False

    def __init__(self, inner: Policy) -> None:
        self.inner = inner

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:
        ops = list(self.inner.candidates(node))
        ops.sort(key=lambda op: -tier_of(op))  # stable: the policy's order within a tier
        return iter(ops)

    def assign(self, node: NodeRecord) -> Operation | None:
        best: Operation | None = None
        for op in self.inner.candidates(node):
            if best is None or tier_of(op) > tier_of(best):
                best = op
                if tier_of(op) == len(TIER_NAMES) - 1:
                    break
        return best

    def place(self, nodes: Iterable[NodeRecord]) -> tuple[Operation, NodeRecord] | None:
        return self.inner.place(nodes)

    def on_submitted(self, op: Operation) -> None:
        self.inner.on_submitted(op)

    def on_finished(self, op: Operation) -> None:
        self.inner.on_finished(op)

    def begin_fill(self, node: NodeRecord) -> None:
        self.inner.begin_fill(node)


class TierHost(Protocol):
    def start_on(self, op: Operation, node: NodeRecord) -> None: ...

    def kill_container(self, alloc: Allocation, exit_code: int) -> None: ...


def _room(node: NodeRecord) -> tuple[float, float]:
    return node.free_cpu, node.free_ram


def plan_victims(node: NodeRecord, op: Operation) -> list[Allocation] | None:
    """The lower-tier tasks to preempt on ``node`` so that a task of ``op`` fits (lowest tier
    first, most recently started first), or None if even all of them would not make room."""
    need = op.demand
    cpu, ram = _room(node)
    if need.cpu <= cpu + EPS and need.ram_gib <= ram + EPS:
        return []
    lower = [a for a in node.containers.values() if tier_of(a.op) < tier_of(op)]
    lower.sort(key=lambda a: (tier_of(a.op), -a.started_at, -a.container_id))
    victims: list[Allocation] = []
    for a in lower:
        victims.append(a)
        cpu += a.op.demand.cpu
        ram += a.op.demand.ram_gib
        if need.cpu <= cpu + EPS and need.ram_gib <= ram + EPS:
            return victims
    return None


class TierPreemptor:
    def __init__(
        self, config: TiersConfig, counters: TierCounters, cluster: Cluster, book: WorkloadBook,
        host: TierHost, clock: Clock,
    ) -> None:
        self.config = config
        self._counters = counters
        self._cluster = cluster
        self._book = book
        self._host = host
        self._clock = clock
        self._from = TIER_NAMES.index(config.preempt_from)

    def check(self) -> int:
        """One pass; returns the tasks started by preempting."""
        waiting = [op for op in self._book.operations.values()
                   if op.pending and tier_of(op) >= self._from and _below_max(op)]
        waiting.sort(key=lambda op: (-tier_of(op), op.submitted_at, op.id))
        started = 0
        budget = self.config.max_starts_per_check
        for op in waiting:
            while op.pending and started < budget:
                if not self._preempt_for(op):
                    break
                started += 1
        return started

    def _preempt_for(self, op: Operation) -> bool:
        nodes = [n for n in self._cluster.nodes.values() if n.schedulable]
        if any(n.fits(op.demand) for n in nodes):
            return False  # it fits somewhere: the scheduler places it without preempting
        best: tuple[tuple[int, int, float], NodeRecord, list[Allocation]] | None = None
        now = self._clock.now()
        for node in nodes:
            victims = plan_victims(node, op)
            if not victims:
                continue
            cost = (max(tier_of(a.op) for a in victims), len(victims),
                    sum(a.op.demand.cpu * (now - a.started_at) for a in victims))
            if best is None or cost < best[0]:
                best = (cost, node, victims)
        if best is None:
            return False
        _, node, victims = best
        c = self._counters
        for a in victims:
            name = TIER_NAMES[tier_of(a.op)]
            c.preempted[name] = c.preempted.get(name, 0) + 1
            c.lost_cpu_s[name] = c.lost_cpu_s.get(name, 0.0) + a.op.demand.cpu * (now - a.started_at)
            self._host.kill_container(a, EXIT_PREEMPTED)
        name = TIER_NAMES[tier_of(op)]
        c.started_by_preemption[name] = c.started_by_preemption.get(name, 0) + 1
        self._host.start_on(op, node)
        return True


def _below_max(op: Operation) -> bool:
    """A task of ``op`` fits under its pool's maximum (and those above): preempting for one that
    does not would start nothing."""
    return op.pool.takes(op.demand)
