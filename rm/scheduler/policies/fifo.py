"""FIFO baseline (seed 002): operations strictly in submission order; pools ignored but for their
maximums (a task that would take its pool past one waits)."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from rm.ports import Clock
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.policy import PolicyBase, PolicyCounters
from rm.state.cluster import EPS, Cluster, NodeRecord
from rm.state.operations import Operation, Pool


class FIFOPolicy(PolicyBase):
    def __init__(
        self, root: Pool, cluster: Cluster, config: SchedulerConfig, clock: Clock, counters: PolicyCounters,
        params: msgspec.Struct | None = None,
    ) -> None:
        super().__init__(root, cluster, config, clock, counters, params)
        self.queue: list[Operation] = []

    def on_submitted(self, op: Operation) -> None:
        self.queue.append(op)

    def on_finished(self, op: Operation) -> None:
        self.queue.remove(op)

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:
        free_cpu = node.free_cpu + EPS
        free_ram = node.free_ram + EPS
        for op in self.queue:
            fits = op.demand.cpu <= free_cpu and op.demand.ram_gib <= free_ram
            if op.pending and fits and op.pool.takes(op.demand):  # not past a pool maximum
                yield op
