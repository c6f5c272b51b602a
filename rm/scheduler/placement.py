"""Placement policies of the Borg lecture (design.md §3b) as a node-choice layer.

Operations go in tier order (higher first), then dominant share (DRF within a tier), then
submission; each task goes to a node chosen by the rule:

- next-fit: the node the last task went to if it fits, else the next one that does (cyclic);
- first-fit: the earliest registered node that fits;
- best-fit: the most loaded node that fits (dominant reserved share after placing);
- worst-fit: the least loaded node that fits (spreads).

"Fits" is the request check, with overcommit: tasks of tiers below ``overcommit_below`` may be
reserved up to ``overcommit`` × a node's capacity, tasks of that tier and above only within its
capacity (counting only their own tier group's reservations). An admission method
(rm/scheduler/sbp.py) may refuse a node on the usage it predicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import ClassVar

from rm.cluster import EPS, Cluster, NodeRecord
from rm.operations import Operation
from rm.protocol import TIER_NAMES, Resources
from rm.scheduler.borg_config import PlacementConfig
from rm.workload import WorkloadBook

Admit = Callable[[NodeRecord, Operation], bool]


def load(node: NodeRecord, extra: Resources | None = None) -> float:
    """The node's dominant reserved share (after adding ``extra``)."""
    cpu = node.total.cpu - node.free_cpu + (extra.cpu if extra else 0.0)
    ram = node.total.ram_gib - node.free_ram + (extra.ram_gib if extra else 0.0)
    return max(cpu / node.total.cpu, ram / node.total.ram_gib)


class PlacementPolicy:
    chooses_nodes: ClassVar[bool] = True

    def __init__(
        self, config: PlacementConfig, book: WorkloadBook, cluster: Cluster, admit: Admit | None = None
    ) -> None:
        self.config = config
        self._book = book
        self._cluster = cluster
        self._admit = admit
        self._cursor = 0  # next-fit: the seq of the node the last task went to
        self._protected = TIER_NAMES.index(config.overcommit_below)
        self._choose = {
            "next-fit": self._next_fit, "first-fit": self._first_fit,
            "best-fit": self._best_fit, "worst-fit": self._worst_fit,
        }[config.policy]
        # When nothing fit: what the cluster looked like (no need to look again until it changes).
        self._stuck: tuple[float, ...] | None = None

    # ---- fit -----------------------------------------------------------------------------

    def fits(self, node: NodeRecord, op: Operation) -> bool:
        if not node.schedulable:
            return False
        d = op.demand
        f = self.config.overcommit
        if f <= 1.0:
            if not node.fits(d):
                return False
        else:
            total = node.total
            if (total.cpu * (f - 1) + node.free_cpu < d.cpu - EPS
                    or total.ram_gib * (f - 1) + node.free_ram < d.ram_gib - EPS):
                return False
            if op.spec.tier >= self._protected:
                cpu = ram = 0.0
                for a in node.containers.values():
                    if a.op.spec.tier >= self._protected:
                        cpu += a.op.demand.cpu
                        ram += a.op.demand.ram_gib
                if cpu + d.cpu > total.cpu + EPS or ram + d.ram_gib > total.ram_gib + EPS:
                    return False
        return self._admit is None or self._admit(node, op)

    # ---- the rules ---------------------------------------------------------------------------

    def _ordered(self, nodes: Iterable[NodeRecord]) -> list[NodeRecord]:
        return sorted(nodes, key=lambda n: n.seq)

    def _next_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        if not nodes:
            return None
        start = next((i for i, n in enumerate(nodes) if n.seq >= self._cursor), 0)
        for k in range(len(nodes)):
            node = nodes[(start + k) % len(nodes)]
            if self.fits(node, op):
                self._cursor = node.seq
                return node
        return None

    def _first_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        return next((n for n in nodes if self.fits(n, op)), None)

    def _best_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        fitting = [n for n in nodes if self.fits(n, op)]
        return max(fitting, key=lambda n: (load(n, op.demand), -n.seq), default=None)

    def _worst_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        fitting = [n for n in nodes if self.fits(n, op)]
        return min(fitting, key=lambda n: (load(n, op.demand), n.seq), default=None)

    # ---- the Policy protocol ---------------------------------------------------------------

    def order(self) -> list[Operation]:
        cap = self._cluster.capacity
        ops = [op for op in self._book.operations.values() if op.pending]
        ops.sort(key=lambda op: (-op.spec.tier, op.dominant_share(cap), op.submitted_at, op.id))
        return ops

    def place(self, nodes: Iterable[NodeRecord]) -> tuple[Operation, NodeRecord] | None:
        c = self._cluster
        state = (len(c.nodes), c.used_cpu, c.used_ram, c.cap_cpu, float(self._book.pending_tasks))
        if self._admit is None and state == self._stuck:
            return None
        ordered = self._ordered(nodes)
        for op in self.order():
            node = self._choose(op, ordered)
            if node is not None:
                self._stuck = None
                return op, node
        self._stuck = state
        return None

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:
        return (op for op in self.order() if self.fits(node, op))

    def assign(self, node: NodeRecord) -> Operation | None:
        return next(self.candidates(node), None)

    def on_submitted(self, op: Operation) -> None:
        self._stuck = None

    def on_finished(self, op: Operation) -> None:
        pass

    def begin_fill(self, node: NodeRecord) -> None:
        pass
