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
(rm/borg/sbp.py) may refuse a node on the usage it predicts.

Cost: an index keeps the nodes sorted by headroom on each resource (updated on every allocation
and release), so a task looks only at the nodes with room for it on the scarcer resource, not at
every node; within one pass an operation at least as large as one that fitted nowhere (same tier
group; fits are monotone in the demand except under gpa-sqrt) is not tried again. The choices
are those of trying every node (tests/placement_reference.py keeps that version).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from typing import ClassVar

from rm.borg.sbp import Admission
from rm.protocol import TIER_NAMES, Resources
from rm.scheduler.borg_config import PlacementConfig
from rm.state.cluster import EPS, Cluster, NodeRecord
from rm.state.operations import Operation
from rm.state.workload import WorkloadBook

# The index's bound is looser than the fit test by this much (float rounding), so the candidates
# always include every node that fits.
_SLACK = 1e-6


def load(node: NodeRecord, extra: Resources | None = None) -> float:
    """The node's dominant reserved share (after adding ``extra``)."""
    cpu = node.total.cpu - node.free_cpu + (extra.cpu if extra else 0.0)
    ram = node.total.ram_gib - node.free_ram + (extra.ram_gib if extra else 0.0)
    return max(cpu / node.total.cpu, ram / node.total.ram_gib)


class NodeIndex:
    """The cluster's nodes sorted by headroom on each resource: free + (overcommit − 1) × total,
    the most a task there may ask for. Kept current by the cluster's change notifications."""

    def __init__(self, cluster: Cluster, overcommit: float) -> None:
        self._cluster = cluster
        self._extra = max(0.0, overcommit - 1.0)
        self._sorted: tuple[list[tuple[float, int]], list[tuple[float, int]]] = ([], [])
        self._keys: dict[int, tuple[float, float]] = {}  # seq -> its (cpu, ram) keys
        self._by_seq: dict[int, NodeRecord] = {}
        for node in cluster.nodes.values():
            self.update(node)
        cluster.watch(self.update)

    def _key(self, node: NodeRecord) -> tuple[float, float]:
        t = node.total
        if self._extra == 0.0:
            return node.free_cpu, node.free_ram
        return t.cpu * self._extra + node.free_cpu, t.ram_gib * self._extra + node.free_ram

    def update(self, node: NodeRecord) -> None:
        seq = node.seq
        old = self._keys.get(seq)
        member = self._cluster.nodes.get(node.machine_id) is node
        new = self._key(node) if member else None
        if old == new:
            return
        if old is not None:
            for lst, k in zip(self._sorted, old, strict=True):
                del lst[bisect_left(lst, (k, seq))]
            del self._keys[seq]
            del self._by_seq[seq]
        if new is not None:
            for lst, k in zip(self._sorted, new, strict=True):
                insort(lst, (k, seq))
            self._keys[seq] = new
            self._by_seq[seq] = node

    def candidates(self, demand: Resources) -> list[NodeRecord]:
        """A superset of the nodes with room for ``demand`` (on the resource with fewer such
        nodes), in no particular order."""
        cpu, ram = self._sorted
        i = bisect_left(cpu, (demand.cpu - EPS - _SLACK,))
        j = bisect_left(ram, (demand.ram_gib - EPS - _SLACK,))
        lst, k = (cpu, i) if len(cpu) - i <= len(ram) - j else (ram, j)
        by_seq = self._by_seq
        return [by_seq[seq] for _, seq in lst[k:]]


class PlacementPolicy:
    chooses_nodes: ClassVar[bool] = True

    def __init__(
        self, config: PlacementConfig, book: WorkloadBook, cluster: Cluster,
        admission: Admission | None = None,
    ) -> None:
        self.config = config
        self._book = book
        self._cluster = cluster
        self._admission = admission
        self._index = NodeIndex(cluster, config.overcommit)
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
        return self._admission is None or self._admission.admits(node, op)

    # ---- the rules (on the index's candidates: a superset of the nodes that fit) -------------

    def _next_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        """The first node that fits from the cursor on, cyclically in registration order."""
        fitting = sorted((n for n in nodes if self.fits(n, op)), key=_seq)
        if not fitting:
            return None
        node = next((n for n in fitting if n.seq >= self._cursor), fitting[0])
        self._cursor = node.seq
        return node

    def _first_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        nodes.sort(key=_seq)
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
        """Chooses among the cluster's nodes (its index; ``nodes`` is the protocol's argument)."""
        c = self._cluster
        state = (len(c.nodes), c.used_cpu, c.used_ram, c.cap_cpu, float(self._book.pending_tasks))
        adm = self._admission
        if adm is None and state == self._stuck:
            return None
        monotone = adm is None or adm.monotone
        if adm is not None:
            adm.begin_pass()
        try:
            # Demands that fitted nowhere in this pass, per tier group (protected or not).
            failed: list[tuple[bool, float, float]] = []
            protected = self.config.overcommit > 1.0
            for op in self.order():
                d = op.demand
                group = protected and op.spec.tier >= self._protected
                if monotone and any(g == group and d.cpu >= cpu and d.ram_gib >= ram
                                    for g, cpu, ram in failed):
                    continue
                node = self._choose(op, self._index.candidates(d))
                if node is not None:
                    self._stuck = None
                    return op, node
                failed.append((group, d.cpu, d.ram_gib))
        finally:
            if adm is not None:
                adm.end_pass()
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


def _seq(node: NodeRecord) -> int:
    return node.seq
