"""How far behind real time a process of a real-time run falls: event-loop lateness.

A probe timer asks the loop to call it back every ``period_s`` wall seconds and records how late
the call came, in emulated seconds (wall lateness x speed): whatever delays the probe delays every
heartbeat, liveness message and timer of that process alike. Per sample interval the worst
lateness is kept too, so results can set aside intervals in which the emulator itself, not the
emulated system, fell behind. Only meaningful in real time.

A percentile over probes counts samples, not time: one 8-second freeze is one late probe among
thousands. So the probe also keeps the *windows* in which the loop ran late past a floor (a late
probe at t, late by L, means the loop was stuck over [t - L, t]), and the verdict judges by time:
the share of the run spent late past the threshold, and the longest stall against the failure
detector's timeout (a stall longer than it removes live nodes: those removals are the emulator's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import msgspec

from emulator.measure.timing import LatenessSummary
from rm import LogHistogram

# Stall windows kept per process (the longest, when there are more); the time late counts them all.
MAX_STALLS = 64
# A run that spends more than this share of its time late past the threshold is overloaded.
LATE_SHARE_MAX = 0.05
# Without a threshold given, windows are kept from this fraction of the sample interval.
STALL_FLOOR_FRACTION = 0.05


class Stall(msgspec.Struct, frozen=True, array_like=True):
    """The loop was stuck (emulated s) from ``start_s`` to ``end_s``."""

    start_s: float
    end_s: float


class StallLog(msgspec.Struct):
    """One process's stalls: emulated seconds spent late past the floor, and the windows."""

    floor_s: float = 0.0
    late_s: float = 0.0
    stalls: list[Stall] = msgspec.field(default_factory=list)

    def add(self, start: float, end: float) -> None:
        last = self.stalls[-1] if self.stalls else None
        if last is not None and start <= last.end_s:  # the same stall, seen by the next probe
            self.late_s += max(0.0, end - last.end_s)
            self.stalls[-1] = Stall(last.start_s, max(end, last.end_s))
            return
        self.late_s += end - start
        self.stalls.append(Stall(start, end))
        if len(self.stalls) > 2 * MAX_STALLS:  # keep the longest, in time order
            longest = sorted(self.stalls, key=lambda w: w.end_s - w.start_s)[-MAX_STALLS:]
            self.stalls = sorted(longest, key=lambda w: w.start_s)


class LoopLag:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        now: Callable[[], float],
        speed: Callable[[], float],
        interval_s: float,
        period_s: float = 0.02,
        stall_floor_s: float | None = None,
    ) -> None:
        """``now()``: emulated time; ``speed()``: emulated s per wall s (it may change while a
        served run is watched); ``interval_s``: the sample interval (per-interval maxima);
        ``stall_floor_s``: lateness (emulated s) from which a stall window is kept (the lag
        threshold; default a twentieth of the interval)."""
        self._loop = loop
        self._now = now
        self._speed = speed
        self._interval = interval_s
        self._period = period_s
        self.lateness = LogHistogram()
        self.worst_by_interval: dict[int, float] = {}
        floor = stall_floor_s if stall_floor_s is not None else STALL_FLOOR_FRACTION * interval_s
        self.stalls = StallLog(floor)
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
            # Every interval the stall overlapped was late by it, not just the one it ended in.
            first = int(max(0.0, t - late) // self._interval) + 1
            for k in range(first, int(t // self._interval) + 2):
                if late > self.worst_by_interval.get(k, 0.0):
                    self.worst_by_interval[k] = late
        if late > self.stalls.floor_s:
            self.stalls.add(t - late, t)
        self._due = wall + self._period
        self._handle = self._loop.call_at(self._due, self._tick)

    def restart(self) -> None:
        """Lateness samples from now on only (the end of the warm-up); stall windows are kept,
        to explain removals."""
        self.lateness = LogHistogram()

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
    # By time, not samples: the longest stall of any process and the share of the run spent late
    # past the threshold by the latest process; the stalls past the threshold (process, start,
    # end, emulated s), and node removals during a stall or within the detector's timeout after it.
    longest_stall_s: float = 0.0
    late_share: float = 0.0
    detector_timeout_s: float | None = None
    stalls: list[tuple[str, float, float]] = msgspec.field(default_factory=list)
    removals_in_stalls: int = 0


def judge(
    threshold_s: float,
    rm_loop: LatenessSummary | None,
    worker_loops: list[LatenessSummary],
    heartbeat_send: LatenessSummary,
    fault_injection: LatenessSummary | None,
    worst_by_interval: dict[int, float],
    measured_intervals: int,
    stalls: dict[str, StallLog] | None = None,
    detector_timeout_s: float | None = None,
    duration_s: float | None = None,
    removal_times: Sequence[float] = (),
    measured_from_s: float = 0.0,
) -> LagReport:
    """A real-time run is overloaded (its results are not valid) when a process's event loop, or
    the nodes' heartbeats, run late by more than the threshold at the 99th percentile, or a node
    fault was applied more than the threshold after its time; or, judged by time (``stalls`` per
    process), one process spent more than LATE_SHARE_MAX of the run late past the threshold, or
    stalled longer than the failure detector's timeout (``detector_timeout_s``). Only what came
    after ``measured_from_s`` (the warm-up, as for h1/h2: registration) counts for the verdict;
    removals during any stall are still put down to it."""
    reasons: list[str] = []
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
    by_time = judge_stalls(threshold_s, stalls or {}, detector_timeout_s, duration_s, removal_times, reasons,
                           measured_from_s)
    return LagReport(
        threshold_s=threshold_s, rm_loop_s=rm_loop, worker_loop_s=worst, heartbeat_send_s=heartbeat_send,
        fault_injection_s=fault_injection, lagged_intervals=lagged, measured_intervals=measured_intervals,
        overloaded=bool(reasons), reasons=reasons, longest_stall_s=by_time.longest_stall_s,
        late_share=by_time.late_share, detector_timeout_s=detector_timeout_s, stalls=by_time.stalls,
        removals_in_stalls=by_time.removals_in_stalls,
    )


class StallVerdict(msgspec.Struct, frozen=True):
    longest_stall_s: float
    late_share: float
    stalls: list[tuple[str, float, float]]
    removals_in_stalls: int


def judge_stalls(
    threshold_s: float,
    stalls: dict[str, StallLog],
    detector_timeout_s: float | None,
    duration_s: float | None,
    removal_times: Sequence[float],
    reasons: list[str],
    measured_from_s: float = 0.0,
) -> StallVerdict:
    """The verdict by time (``stalls``: per process name): appends its reasons to ``reasons``.
    Stalls are judged from ``measured_from_s`` on (a stall across it, for its part after it)."""
    windows = [(who, w.start_s, w.end_s) for who, log in stalls.items() for w in log.stalls
               if w.end_s - w.start_s > threshold_s]
    windows.sort(key=lambda x: x[1])
    judged = [(who, max(s, measured_from_s), e) for who, s, e in windows if e > measured_from_s]
    longest = max(judged, key=lambda x: x[2] - x[1], default=None)
    longest_s = longest[2] - longest[1] if longest is not None else 0.0
    share, latest = 0.0, ""
    measured = (duration_s or 0.0) - measured_from_s
    if measured > 0:
        for who, log in stalls.items():
            # Only past the threshold: a loop a little late all the time is what p99 is for.
            parts = [(max(w.start_s, measured_from_s), w.end_s) for w in log.stalls
                     if w.end_s - w.start_s > threshold_s and w.end_s > measured_from_s]
            late = sum(e - s for s, e in parts)
            if log.floor_s >= threshold_s and not measured_from_s:
                late = max(late, log.late_s)  # the windows kept are the longest; the total is exact
            if late / measured > share:
                share, latest = late / measured, who
    if share > LATE_SHARE_MAX:
        reasons.append(f"{latest} ran more than {threshold_s:g} s late for {share:.1%} of the run")
    removed = 0
    if longest is not None and detector_timeout_s is not None and longest_s > detector_timeout_s:
        who, start, _ = longest
        reasons.append(f"{who} stalled for {longest_s:.3g} s at t={start:.1f} s, longer than the failure "
                       f"detector's timeout ({detector_timeout_s:g} s)")
    if detector_timeout_s is not None and any(e - s > detector_timeout_s for _, s, e in windows):
        # Warm-up or not: a removal a stall caused is in the results, and is the emulator's.
        removed = sum(1 for t in removal_times
                      if any(s <= t <= e + detector_timeout_s for _, s, e in windows))
        if removed:
            reasons.append(f"{removed} node removals during or right after a stall are the emulator's, "
                           "not the nodes'")
    return StallVerdict(
        round(longest_s, 6), round(share, 6),
        [(who, round(s, 6), round(e, 6)) for who, s, e in windows[:MAX_STALLS]], removed,
    )
