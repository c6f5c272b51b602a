"""Scheduler decision latency (SLS's "timecost"): the wall time the RM's scheduler takes to handle
each of its events (a node update, a continuous-scheduling pass), in microseconds.

Wall time, not emulated: it is what a scheduler change costs in CPU, whatever the clock of the run
(on the virtual clock as well). It varies from run to run and machine to machine: a rerun does not
reproduce it (``emulator.results.record.WALL_CLOCK_FIELDS``).

The RM process pays for this measurement on every heartbeat, so a sample is appended to a list and
the lists are bucketed in batches with numpy (``TimedSamples``), not one histogram call per event.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emulator.time.clock import wall_time
from rm import Handler, LogHistogram, SchedulerItem

# Upper bucket edges for /metrics, wall microseconds.
BUCKETS_US = (5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 50000.0, 250000.0)
_BUCKETS_S = np.array([edge / 1e6 for edge in BUCKETS_US])  # the same, in the histograms' seconds
BATCH = 4096  # samples held before they are bucketed


class TimedSamples:
    """Wall seconds of one kind of item: ``dts``, appended by the hot path, go into ``hist`` every
    ``BATCH`` samples and whenever the histogram is read (``flush``)."""

    __slots__ = ("dts", "hist")

    def __init__(self) -> None:
        self.dts: list[float] = []
        self.hist = LogHistogram()

    def flush(self) -> np.ndarray:
        """Bucket what is held; returns the samples bucketed, as an array (for the caller's other
        tallies: one conversion from the list)."""
        dts = np.asarray(self.dts, dtype=np.float64)
        if len(dts):
            self.dts = []
            self.hist.add_values(dts)
        return dts


class DecisionTimer:
    def __init__(self, now: Callable[[], float] = wall_time) -> None:
        """``now``: a monotonic wall clock in seconds (injectable for tests)."""
        self._now = now
        # Wall seconds per event, by its type (one sample per event: the cost meter of a real-time
        # run reads these too, rather than timing the same events again).
        self._samples: dict[type, TimedSamples] = {}
        self._counts = [0] * (len(BUCKETS_US) + 1)
        # Told each item and its wall seconds (the cost meter of a real-time run, the arrivals):
        # one clock reading per event serves all, which is measurement the RM process pays per heartbeat.
        self.observer: Callable[[SchedulerItem, float], None] | None = None

    def wrap(self, handler: Handler[SchedulerItem]) -> Handler[SchedulerItem]:
        now = self._now
        samples = self._samples
        flush = self._flush

        def timed(item: SchedulerItem) -> float | None:
            t0 = now()
            extra = handler(item)
            dt = now() - t0
            cls = type(item)
            s = samples.get(cls)
            if s is None:
                s = samples[cls] = TimedSamples()
            dts = s.dts
            dts.append(dt)
            if len(dts) >= BATCH:
                flush(s)
            observer = self.observer
            if observer is not None:
                observer(item, dt)
            return extra

        return timed

    def _flush(self, s: TimedSamples) -> None:
        dts = s.flush()
        if len(dts):
            at = np.searchsorted(_BUCKETS_S, dts, side="left")  # as bisect_left
            for i, n in enumerate(np.bincount(at, minlength=len(self._counts)).tolist()):
                self._counts[i] += n

    @property
    def by_type(self) -> dict[type, LogHistogram]:
        """Wall seconds per event, by its type."""
        for s in self._samples.values():
            self._flush(s)
        return {cls: s.hist for cls, s in self._samples.items()}

    @property
    def counts(self) -> list[int]:
        """Events per /metrics bucket (``BUCKETS_US``, then above the last edge)."""
        for s in self._samples.values():
            self._flush(s)
        return self._counts

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
