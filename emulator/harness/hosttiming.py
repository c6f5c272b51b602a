"""Heartbeat timing for a process that ticks thousands of nodes.

``HeartbeatTiming`` does its arithmetic as each tick, send and answer comes: a log2, a floor and
dict updates per tick (twice), an interval number and a dict update per send. A node host keeps
ticks and sends as they come instead (a tick, a held tick and a send are one list append, made
in C) and does the same arithmetic with numpy a batch at a time: the histograms' buckets, counts
and maxima and the per-interval counts are the same; sums are added in another order. Every read
takes in what is pending, and ``flush_every`` keeps the lists short during a run (``flush_period_s``).
"""

from __future__ import annotations

from array import array

import numpy as np

from emulator.measure.timing import HeartbeatTiming, Interval, LatenessSummary
from emulator.time.clock import Scheduler

# Ticks (and as many sends and answers) a node host keeps before it takes them in.
PENDING = 10_000
MAX_FLUSH_S = 60.0


class BatchedTiming(HeartbeatTiming):
    def __init__(self, interval_s: float = 0.0) -> None:
        super().__init__(interval_s)
        # Arrays of doubles, not lists: a value kept is 8 bytes, not a float object that lives
        # until the next flush (hundreds of thousands of them between two flushes of a node host).
        self._own = array("d")  # ticks the emulator ran late (both histograms)
        self._held = array("d")  # ticks an injected pause held back (``lateness`` only)
        self._sent = array("d")  # send times
        self._answered = array("d")  # send times of heartbeats answered within an interval
        self.tick = self._own.append  # type: ignore[method-assign, assignment]
        self.held_tick = self._held.append  # type: ignore[method-assign, assignment]
        # What ``answered`` keeps, for a caller that made its check itself (``AnswerPass``).
        self.answered_pending = self._answered.append
        if interval_s:
            self.sent = self._sent.append  # type: ignore[method-assign, assignment]

    def answered(self, sent_at: float, t: float) -> None:
        if self.interval_s and t - sent_at <= self.interval_s:
            self._answered.append(sent_at)

    def flush_every(self, clock: Scheduler, seconds: float) -> None:
        """Take in what is pending every ``seconds`` of ``clock`` from now on."""
        self.flush()
        clock.call_later(seconds, self.flush_every, clock, seconds)

    def flush(self) -> None:
        """Take in what is pending."""
        own, held = self._own, self._held
        # Each batch is copied out of its array, never viewed in place: a view exports the array's
        # buffer for as long as anything holds it (a profiler's frame, an exception's traceback,
        # with the collector off), and while it does the array can neither grow nor be cleared:
        # every tick of every node would raise BufferError.
        if own:
            values = np.array(own, dtype=np.float64)
            self.lateness.add_values(values)
            self.own_lateness.add_values(values)
            del own[:]
        if held:
            self.lateness.add_values(np.array(held, dtype=np.float64))
            del held[:]
        pending = ((self._sent, self.sent_by_interval), (self._answered, self.answered_by_interval))
        for times, counts in pending:
            if times:
                # Interval k is [(k-1)·I, k·I), as ``HeartbeatTiming`` counts it; a batch spans a
                # few consecutive intervals (counted without sorting).
                ks = np.floor_divide(np.array(times, dtype=np.float64), self.interval_s).astype(np.int64)
                first = int(ks.min())
                for offset, n in enumerate(np.bincount(ks - first).tolist()):
                    if n:
                        key = first + offset + 1
                        counts[key] = counts.get(key, 0) + n
                del times[:]

    def restart_lateness(self) -> None:
        del self._own[:]
        del self._held[:]
        super().restart_lateness()

    def summary(self) -> LatenessSummary:
        self.flush()
        return super().summary()

    def own_summary(self) -> LatenessSummary:
        self.flush()
        return super().own_summary()

    def sent_in(self, k: int) -> int:
        self.flush()
        return super().sent_in(k)

    def answered_in(self, k: int) -> int:
        self.flush()
        return super().answered_in(k)

    def intervals(self) -> list[Interval]:
        self.flush()
        return super().intervals()


def flush_period_s(nodes: int, interval_s: float, sample_interval_s: float) -> float:
    """How often a host of ``nodes`` takes in its pending timing: about ``PENDING`` ticks at a
    time (numpy's fixed cost per batch spread thin, the lists a few MB at most), at least every
    minute and at most every sample interval."""
    per_s = max(nodes, 1) / interval_s
    return min(MAX_FLUSH_S, max(sample_interval_s, PENDING / per_s))
