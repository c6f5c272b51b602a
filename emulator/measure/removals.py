"""Who the RM removed, when, and whether it was really dead: nodes_lost, false_removals and
detection latency (crash -> removal at the RM)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple, Protocol

import msgspec

from rm import NodeEvent, RMObserver


class Fates(Protocol):
    """What the harness did to the nodes (``emulator.harness.faults.NodeFates``)."""

    crashed_at: dict[str, float]
    crash_source: dict[str, str]

    def is_down(self, address: str) -> bool: ...

    def stalled_for(self, address: str) -> float: ...


class Removal(NamedTuple):
    t_s: float
    machine_id: int
    address: str
    reason: str
    crashed: bool
    stalled_s: float
    latency_s: float | None


class LatencySummary(msgspec.Struct, frozen=True):
    p50: float | None
    p99: float | None
    max: float | None


class RemovalSummary(msgspec.Struct, frozen=True):
    removals: int
    false_removals: int
    # A node can be falsely removed, rejoin, and be removed again: distinct nodes.
    false_removed_nodes: int
    stalled_removals: int
    crashed_nodes: int
    crashed_removed: int
    detection_latency_s: LatencySummary
    # The same two counts by who crashed the node: the scenario's faults or the status page.
    crashed_by_scenario: int = 0
    crashed_from_page: int = 0
    crashed_removed_by_scenario: int = 0
    crashed_removed_from_page: int = 0


class Clock(Protocol):
    def now(self) -> float: ...


class RemovalLog(RMObserver):
    def __init__(self, fates: Fates, clock: Clock, grace_s: float) -> None:
        self._fates = fates
        self._clock = clock
        self._grace = grace_s
        self.removals: list[Removal] = []

    def node_lost(self, ev: NodeEvent) -> None:
        now = self._clock.now()
        crashed = self._fates.is_down(ev.address)
        stalled = self._fates.stalled_for(ev.address)
        t0 = self._fates.crashed_at.get(ev.address)
        latency = now - t0 if crashed and t0 is not None else None
        self.removals.append(Removal(now, ev.machine_id, ev.address, ev.reason, crashed, stalled, latency))

    def is_false(self, r: Removal) -> bool:
        """Removed although alive: not crashed and not stalled longer than the grace."""
        return not r.crashed and r.stalled_s <= self._grace

    def summary(self) -> RemovalSummary:
        latencies = sorted(r.latency_s for r in self.removals if r.latency_s is not None)
        source = self._fates.crash_source
        removed = {r.address for r in self.removals if r.crashed}

        def by(src: str, among: Iterable[str]) -> int:
            return sum(1 for a in among if source.get(a, "scenario") == src)

        return RemovalSummary(
            removals=len(self.removals),
            false_removals=sum(self.is_false(r) for r in self.removals),
            false_removed_nodes=len({r.address for r in self.removals if self.is_false(r)}),
            stalled_removals=sum(not r.crashed and r.stalled_s > self._grace for r in self.removals),
            crashed_nodes=len(self._fates.crashed_at),
            crashed_removed=len(removed),
            detection_latency_s=LatencySummary(
                _quantile(latencies, 0.5), _quantile(latencies, 0.99),
                round(latencies[-1], 3) if latencies else None,
            ),
            crashed_by_scenario=by("scenario", self._fates.crashed_at),
            crashed_from_page=by("page", self._fates.crashed_at),
            crashed_removed_by_scenario=by("scenario", removed),
            crashed_removed_from_page=by("page", removed),
        )


def _quantile(xs: list[float], q: float) -> float | None:
    """Nearest-rank quantile of sorted ``xs`` (exact; there are at most a few thousand)."""
    if not xs:
        return None
    k = max(0, min(len(xs) - 1, math.ceil(q * len(xs)) - 1))
    return round(xs[k], 3)
