"""An hbemu scheduling policy in a package of its own: the operation whose task is smallest goes
first (shortest-job-first by size), ties by submission. docs/extending.md explains each part."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Literal

import msgspec

from rm import EPS, Clock, Cluster, NodeRecord, Operation, PolicyBase, PolicyCounters, Pool, SchedulerConfig


class SmallestFirstParams(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """``[scheduler.params]`` of this policy (unknown fields are refused at validation)."""

    # What "small" means: a task's cpu, its RAM, or its larger share of the cluster.
    by: Literal["cpu", "ram", "dominant"] = "dominant"
    # Largest first instead (packs big tasks before the cluster fragments).
    largest_first: bool = False


class SmallestFirst(PolicyBase):
    """A fill-one-node policy: ``candidates`` gives the operations whose next task fits the
    offered node, in the order they should get it; ``PolicyBase.assign`` takes the first."""

    Params = SmallestFirstParams
    honours_min_share: ClassVar[bool] = False  # pools and their min shares are ignored

    def __init__(
        self, root: Pool, cluster: Cluster, config: SchedulerConfig, clock: Clock, counters: PolicyCounters,
        params: msgspec.Struct | None = None,
    ) -> None:
        super().__init__(root, cluster, config, clock, counters, params)
        assert isinstance(self.options, SmallestFirstParams)
        self.params: SmallestFirstParams = self.options
        self.queue: list[Operation] = []  # live operations, in submission order

    def on_submitted(self, op: Operation) -> None:
        self.queue.append(op)

    def on_finished(self, op: Operation) -> None:
        self.queue.remove(op)

    def _size(self, op: Operation) -> float:
        cpu = op.demand.cpu / max(self.cluster.cap_cpu, EPS)
        ram = op.demand.ram_gib / max(self.cluster.cap_ram, EPS)
        size = {"cpu": cpu, "ram": ram, "dominant": max(cpu, ram)}[self.params.by]
        return -size if self.params.largest_first else size

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:
        free_cpu, free_ram = node.free_cpu + EPS, node.free_ram + EPS
        fitting = [
            op for op in self.queue
            if op.pending and op.demand.cpu <= free_cpu and op.demand.ram_gib <= free_ram
        ]
        # sorted() is stable: equal sizes keep submission order (deterministic).
        return iter(sorted(fitting, key=self._size))
