"""DRFH-style node choice (seed 000 §1.4): the fairness order picks the operation, the heuristic
picks the node.

This needs a choice of nodes, so it works on the whole cluster at once (continuous scheduling):
the neediest operation whose task fits somewhere starts on the node with the smallest
``H_drfh = ‖D_t/D_t1 - F_s/F_s1‖₁`` among the nodes where it fits, shares are updated, repeat.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rm.scheduler.policies.drf import DRFPolicy
from rm.scheduler.policies.heuristics import drfh, scales
from rm.state.cluster import EPS, NodeRecord
from rm.state.operations import Operation


class DRFHPolicy(DRFPolicy):
    chooses_nodes: ClassVar[bool] = True

    def place(self, nodes: Iterable[NodeRecord]) -> tuple[Operation, NodeRecord] | None:
        free = [n for n in nodes if n.schedulable and n.free_cpu > EPS and n.free_ram > EPS]
        if not free:
            return None
        max_cpu = max(n.free_cpu for n in free) + EPS
        max_ram = max(n.free_ram for n in free) + EPS
        sc, sr = scales(self.cluster, "cluster_total")
        for op in self._descend(self.root, max_cpu, max_ram):
            d = op.demand
            dc, dr = d.cpu / sc, d.ram_gib / sr
            best: NodeRecord | None = None
            best_v = 0.0
            for n in free:
                if n.fits(d):
                    v = drfh(dc, dr, n.free_cpu / sc, n.free_ram / sr)
                    if best is None or v < best_v:
                        best, best_v = n, v
            if best is not None:
                return op, best
        return None
