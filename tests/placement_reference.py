"""The placement rules as they were before the node index (a scan of every node per task), kept
as the reference the indexed policy must agree with (tests/unit/test_placement_index.py) and the
baseline of its CPU measurement (``python -m tests.placement_bench``)."""

from __future__ import annotations

from collections.abc import Iterable

from rm.borg.placement import PlacementPolicy, load
from rm.state.cluster import NodeRecord
from rm.state.operations import Operation


class ScanPlacement(PlacementPolicy):
    """Sorts the nodes and tries every one for every pending operation, as before (and the
    admission, outside a pass, computes every node's statistics afresh for every test)."""

    def place(self, nodes: Iterable[NodeRecord]) -> tuple[Operation, NodeRecord] | None:
        c = self._cluster
        state = (len(c.nodes), c.used_cpu, c.used_ram, c.cap_cpu, float(self._book.pending_tasks))
        if self._admission is None and state == self._stuck:
            return None
        ordered = sorted(nodes, key=lambda n: n.seq)
        choose = {"next-fit": self._scan_next_fit, "first-fit": self._scan_first_fit,
                  "best-fit": self._scan_best_fit, "worst-fit": self._scan_worst_fit}[self.config.policy]
        for op in self.order():
            node = choose(op, ordered)
            if node is not None:
                self._stuck = None
                return op, node
        self._stuck = state
        return None

    def _scan_next_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        if not nodes:
            return None
        start = next((i for i, n in enumerate(nodes) if n.seq >= self._cursor), 0)
        for k in range(len(nodes)):
            node = nodes[(start + k) % len(nodes)]
            if self.fits(node, op):
                self._cursor = node.seq
                return node
        return None

    def _scan_first_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        return next((n for n in nodes if self.fits(n, op)), None)

    def _scan_best_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        fitting = [n for n in nodes if self.fits(n, op)]
        return max(fitting, key=lambda n: (load(n, op.demand), -n.seq), default=None)

    def _scan_worst_fit(self, op: Operation, nodes: list[NodeRecord]) -> NodeRecord | None:
        fitting = [n for n in nodes if self.fits(n, op)]
        return min(fitting, key=lambda n: (load(n, op.demand), n.seq), default=None)
