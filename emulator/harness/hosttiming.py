"""Heartbeat timing for a process that ticks thousands of nodes.

``HeartbeatTiming`` buckets each tick's lateness into two log histograms as it comes: a log2, a
floor and two dict updates per tick, twice. A node host keeps the latenesses in lists instead and
buckets them with numpy a batch at a time (``LogHistogram.add_values``: the same buckets, counts,
maximum and sum, summed in another order); every read of the histograms takes in what is pending.
"""

from __future__ import annotations

from emulator.measure.timing import HeartbeatTiming, LatenessSummary

# Ticks kept before they are bucketed: one numpy pass every few hundred ms of a big host.
BATCH = 4096


class BatchedTiming(HeartbeatTiming):
    def __init__(self, interval_s: float = 0.0) -> None:
        super().__init__(interval_s)
        self._own: list[float] = []  # ticks the emulator ran late (both histograms)
        self._held: list[float] = []  # ticks an injected pause held back (``lateness`` only)

    def tick(self, late_s: float) -> None:
        own = self._own
        own.append(late_s)
        if len(own) >= BATCH:
            self.flush()

    def held_tick(self, late_s: float) -> None:
        self._held.append(late_s)
        if len(self._held) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Bucket what is pending."""
        own, held = self._own, self._held
        if own:
            self.lateness.add_values(own)
            self.own_lateness.add_values(own)
            own.clear()
        if held:
            self.lateness.add_values(held)
            held.clear()

    def restart_lateness(self) -> None:
        self._own.clear()
        self._held.clear()
        super().restart_lateness()

    def summary(self) -> LatenessSummary:
        self.flush()
        return super().summary()

    def own_summary(self) -> LatenessSummary:
        self.flush()
        return super().own_summary()
