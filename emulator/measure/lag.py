"""How far behind real time a process of a real-time run falls: event-loop lateness.

A probe timer asks the loop to call it back every ``period_s`` wall seconds and records how late
the call came, in emulated seconds (wall lateness x speed): whatever delays the probe delays every
heartbeat, liveness message and timer of that process alike. Per sample interval the worst
lateness is kept too, so results can set aside intervals in which the emulator itself, not the
emulated system, fell behind. Only meaningful in real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec

from emulator.measure.timing import LatenessSummary
from rm.histogram import LogHistogram


class LoopLag:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        now: Callable[[], float],
        speed: Callable[[], float],
        interval_s: float,
        period_s: float = 0.02,
    ) -> None:
        """``now()``: emulated time; ``speed()``: emulated s per wall s (it may change while a
        served run is watched); ``interval_s``: the sample interval (per-interval maxima)."""
        self._loop = loop
        self._now = now
        self._speed = speed
        self._interval = interval_s
        self._period = period_s
        self.lateness = LogHistogram()
        self.worst_by_interval: dict[int, float] = {}
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._due = self._loop.time() + self._period
        self._handle = self._loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        wall = self._loop.time()
        late = max(0.0, wall - self._due) * self._speed()
        self.lateness.add(late)
        t = self._now()
        if t >= 0:
            k = int(t // self._interval) + 1
            if late > self.worst_by_interval.get(k, 0.0):
                self.worst_by_interval[k] = late
        self._due = wall + self._period
        self._handle = self._loop.call_at(self._due, self._tick)

    def summary(self) -> LatenessSummary:
        h = self.lateness
        return LatenessSummary(h.count, h.mean(), h.quantile(0.5), h.quantile(0.99), h.max)


def merge_worst(parts: list[dict[int, float]]) -> dict[int, float]:
    """The worst lateness per interval over several processes."""
    out: dict[int, float] = {}
    for part in parts:
        for k, v in part.items():
            if v > out.get(k, 0.0):
                out[k] = v
    return out


class LagReport(msgspec.Struct, frozen=True):
    """How far the emulator itself fell behind real time, and whether that voids the results."""

    threshold_s: float  # emulated s: lateness above this is the emulator's, not the system's
    rm_loop_s: LatenessSummary | None  # the RM process's event loop
    worker_loop_s: LatenessSummary | None  # the node-hosting process(es): the worst one
    heartbeat_send_s: LatenessSummary  # heartbeat ticks of the nodes (not those a pause held back)
    fault_injection_s: LatenessSummary | None  # node faults applied after their emulated time
    lagged_intervals: list[int]  # sample intervals set aside from h1/h2 (some process lagged)
    measured_intervals: int
    overloaded: bool
    reasons: list[str]


def judge(
    threshold_s: float,
    rm_loop: LatenessSummary | None,
    worker_loops: list[LatenessSummary],
    heartbeat_send: LatenessSummary,
    fault_injection: LatenessSummary | None,
    worst_by_interval: dict[int, float],
    measured_intervals: int,
) -> LagReport:
    """A real-time run is overloaded (its results are not valid) when a process's event loop, or
    the nodes' heartbeats, run late by more than the threshold at the 99th percentile, or a node
    fault was applied more than the threshold after its time."""
    reasons = []
    if rm_loop is not None and rm_loop.p99 > threshold_s:
        reasons.append(f"the RM process ran {rm_loop.p99:.3g} s late (p99)")
    worst = max(worker_loops, key=lambda s: s.p99, default=None)
    if worst is not None and worst.p99 > threshold_s:
        reasons.append(f"a node-hosting process ran {worst.p99:.3g} s late (p99)")
    if heartbeat_send.count and heartbeat_send.p99 > threshold_s:
        reasons.append(f"heartbeats left {heartbeat_send.p99:.3g} s late (p99)")
    if fault_injection is not None and fault_injection.count and fault_injection.max > threshold_s:
        reasons.append(f"a fault was applied {fault_injection.max:.3g} s after its time")
    lagged = sorted(k for k, v in worst_by_interval.items() if v > threshold_s)
    return LagReport(
        threshold_s=threshold_s, rm_loop_s=rm_loop, worker_loop_s=worst, heartbeat_send_s=heartbeat_send,
        fault_injection_s=fault_injection, lagged_intervals=lagged, measured_intervals=measured_intervals,
        overloaded=bool(reasons), reasons=reasons,
    )
