"""Heartbeat timing of the nodes of one process: how late their ticks ran, and which sample
interval each heartbeat was sent in and whether it was answered within one interval (n_i and m_i,
for in-memory and TCP runs alike). Implements the NodeManager's ``TimingProbe`` port."""

from __future__ import annotations

import msgspec

from rm import LogHistogram


class Interval(msgspec.Struct, array_like=True, frozen=True):
    """Heartbeats sent in the interval ((k-1)·I, k·I] and those answered within one interval."""

    k: int
    sent: int
    responses: int


class LatenessSummary(msgspec.Struct, frozen=True):
    count: int
    mean: float
    p50: float
    p99: float
    max: float


class HeartbeatTiming:
    def __init__(self, interval_s: float = 0.0) -> None:
        """``interval_s``: attribute heartbeats to sample intervals of this length (0: do not).
        Interval k is [(k-1)·I, k·I); an answer counts in the interval of the heartbeat it answers,
        and only if it came within one interval, so interval k's count is final from k·I on."""
        self._lateness = LogHistogram()
        # Without the ticks an injected pause held back: how late the emulator itself ran them.
        self._own_lateness = LogHistogram()
        # Ticks on time (most, in virtual time) not yet in either histogram: one count per tick
        # instead of two ``add(0.0)`` calls, folded in when read (the same counts: a zero adds
        # only to ``count`` and ``zeros``). A node host's probe may count here itself.
        self.on_time = 0
        self.interval_s = interval_s
        self.sent_by_interval: dict[int, int] = {}
        self.answered_by_interval: dict[int, int] = {}

    def tick(self, late_s: float) -> None:
        if late_s == 0.0:
            self.on_time += 1
        else:
            self._lateness.add(late_s)
            self._own_lateness.add(late_s)

    @property
    def lateness(self) -> LogHistogram:
        """How late every tick ran."""
        self._fold()
        return self._lateness

    @property
    def own_lateness(self) -> LogHistogram:
        """How late the ticks ran that no injected pause held back."""
        self._fold()
        return self._own_lateness

    def _fold(self) -> None:
        n = self.on_time
        if n:
            self.on_time = 0
            self._lateness.add_many(0.0, n)
            self._own_lateness.add_many(0.0, n)

    def restart_lateness(self) -> None:
        """Lateness from now on only (the end of the warm-up: registration is not measured)."""
        self._lateness = LogHistogram()
        self._own_lateness = LogHistogram()
        self.on_time = 0

    def held_tick(self, late_s: float) -> None:
        """A tick an injected pause of its process held back (late by design)."""
        self._lateness.add(late_s)

    def sent(self, t: float) -> None:
        if self.interval_s:
            k = int(t // self.interval_s) + 1
            self.sent_by_interval[k] = self.sent_by_interval.get(k, 0) + 1

    def answered(self, sent_at: float, t: float) -> None:
        if self.interval_s and t - sent_at <= self.interval_s:
            k = int(sent_at // self.interval_s) + 1
            self.answered_by_interval[k] = self.answered_by_interval.get(k, 0) + 1

    def sent_in(self, k: int) -> int:
        return self.sent_by_interval.get(k, 0)

    def answered_in(self, k: int) -> int:
        return self.answered_by_interval.get(k, 0)

    def add_intervals(self, intervals: list[Interval]) -> None:
        """Add another process's counts (a TCP run's workers', at the end)."""
        sent, answered = self.sent_by_interval, self.answered_by_interval
        for iv in intervals:
            sent[iv.k] = sent.get(iv.k, 0) + iv.sent
            answered[iv.k] = answered.get(iv.k, 0) + iv.responses

    def summary(self) -> LatenessSummary:
        return _summary(self.lateness)

    def own_summary(self) -> LatenessSummary:
        return _summary(self.own_lateness)

    def intervals(self) -> list[Interval]:
        keys = sorted(self.sent_by_interval.keys() | self.answered_by_interval.keys())
        sent, answered = self.sent_by_interval, self.answered_by_interval
        return [Interval(k, sent.get(k, 0), answered.get(k, 0)) for k in keys]


def _summary(h: LogHistogram) -> LatenessSummary:
    return LatenessSummary(h.count, h.mean(), h.quantile(0.5), h.quantile(0.99), h.max)
