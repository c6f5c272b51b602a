"""Who the RM removed, when, and whether it was really dead: nodes_lost, false_removals and
detection latency (crash -> removal at the RM)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from nodemanager.node import NodeManager


class Removal(NamedTuple):
    t_s: float
    machine_id: int
    address: str
    reason: str
    crashed: bool
    stalled_s: float
    latency_s: float | None


class RemovalLog:
    def __init__(
        self, nodes: list[NodeManager], crashed_at: dict[str, float], clock: Any, grace_s: float
    ) -> None:
        self._nodes = {n.address: n for n in nodes}
        self._crashed_at = crashed_at
        self._clock = clock
        self._grace = grace_s
        self.removals: list[Removal] = []

    def on_lost(self, node: Any, reason: str) -> None:
        now = self._clock.now()
        nm = self._nodes.get(node.address)
        crashed = nm is not None and nm.crashed
        stalled = nm.stalled_for() if nm is not None else 0.0
        t0 = self._crashed_at.get(node.address)
        latency = now - t0 if crashed and t0 is not None else None
        self.removals.append(Removal(now, node.machine_id, node.address, reason, crashed, stalled, latency))

    def is_false(self, r: Removal) -> bool:
        """Removed although alive: not crashed and not stalled longer than the grace."""
        return not r.crashed and r.stalled_s <= self._grace

    def summary(self) -> dict[str, Any]:
        latencies = sorted(r.latency_s for r in self.removals if r.latency_s is not None)
        crashed_removed = {r.address for r in self.removals if r.crashed}
        return {
            "removals": len(self.removals),
            "false_removals": sum(self.is_false(r) for r in self.removals),
            # A node can be falsely removed, rejoin, and be removed again: distinct nodes.
            "false_removed_nodes": len({r.address for r in self.removals if self.is_false(r)}),
            "stalled_removals": sum(not r.crashed and r.stalled_s > self._grace for r in self.removals),
            "crashed_nodes": len(self._crashed_at),
            "crashed_removed": len(crashed_removed),
            "detection_latency_s": {
                "p50": _quantile(latencies, 0.5),
                "p99": _quantile(latencies, 0.99),
                "max": round(latencies[-1], 3) if latencies else None,
            },
        }


def _quantile(xs: list[float], q: float) -> float | None:
    """Nearest-rank quantile of sorted ``xs`` (exact; there are at most a few thousand)."""
    if not xs:
        return None
    k = max(0, min(len(xs) - 1, math.ceil(q * len(xs)) - 1))
    return round(xs[k], 3)
