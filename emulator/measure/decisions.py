"""Scheduler decision latency (SLS's "timecost"): the wall time the RM's scheduler takes to handle
each of its events (a node update, a continuous-scheduling pass), in microseconds.

Wall time, not emulated: it is what a scheduler change costs in CPU, whatever the clock of the run
(on the virtual clock as well). It varies from run to run and machine to machine: a rerun does not
reproduce it (``emulator.results.record.WALL_CLOCK_FIELDS``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from emulator.time.clock import wall_time
from rm import Handler, LogHistogram, SchedulerItem

# Upper bucket edges for /metrics, wall microseconds.
BUCKETS_US = (5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 50000.0, 250000.0)
_BUCKETS_S = tuple(edge / 1e6 for edge in BUCKETS_US)  # the same, in the histograms' seconds


class DecisionTimer:
    def __init__(self, now: Callable[[], float] = wall_time) -> None:
        """``now``: a monotonic wall clock in seconds (injectable for tests)."""
        self._now = now
        # Wall seconds per event, by its type (one histogram update per event: the cost meter of
        # a real-time run reads these too, rather than timing the same events again).
        self.by_type: dict[type, LogHistogram] = {}
        self.counts = [0] * (len(BUCKETS_US) + 1)
        # Told each item and its wall seconds (the cost meter of a real-time run): one clock
        # reading per event serves both, which is measurement the RM process pays per heartbeat.
        self.observer: Callable[[SchedulerItem, float], None] | None = None

    def wrap(self, handler: Handler[SchedulerItem]) -> Handler[SchedulerItem]:
        now = self._now
        by_type = self.by_type
        counts = self.counts

        def timed(item: SchedulerItem) -> float | None:
            t0 = now()
            extra = handler(item)
            dt = now() - t0
            cls = type(item)
            h = by_type.get(cls)
            if h is None:
                h = by_type[cls] = LogHistogram()
            h.add(dt)
            counts[bisect_left(_BUCKETS_S, dt)] += 1
            observer = self.observer
            if observer is not None:
                observer(item, dt)
            return extra

        return timed

    def total_s(self) -> float:
        """Wall seconds of every event timed."""
        return sum(h.sum for h in self.by_type.values())

    def summary(self) -> dict[str, float]:
        """``{"count", "p50", "p90", "p99", "max"}`` in µs over every event (quantiles within ~4%)."""
        h = LogHistogram.merged(self.by_type.values())
        return {
            "count": h.count,
            "p50": round(h.quantile(0.5) * 1e6, 3),
            "p90": round(h.quantile(0.9) * 1e6, 3),
            "p99": round(h.quantile(0.99) * 1e6, 3),
            "max": round(h.max * 1e6, 3),
        }
