"""The sleeping kring monitors of one process, and the liveness their skipped ticks stand for.

A monitor with nothing to send or watch by itself sleeps (``RingMonitor._tick``): its ticks are
counted, not run. A reader of the counters (the sampler, every sample) must see them counted up
to now. Settling each sleeping monitor at every sample cost a loop over every node of the process
per sample; the ledger counts them all at once instead. A monitor asleep since its tick at ``a``
has ticked ``floor((t + EPS - a) / interval) + 1`` times by ``t``; summed over the sleepers,
with ``y = a / interval`` split into its whole and fractional parts, that is
``W * (floor(x) + 1) - sum(w * floor(y)) - sum(w for frac(y) > frac(x))`` with ``x = (t + EPS) /
interval`` and ``w`` a monitor's successors (the liveness one tick stands for): a bisection per
distinct ``w``, whatever the number of sleepers.

A monitor's own state (its sequence number and next tick) is brought up to date when it is read
or the monitor wakes, by replaying the ledger's settle times since it fell asleep with the
arithmetic that settling it at each of them would have done (``catch_up``): its next tick, and so
when it ticks again, is what it was when every sample settled every monitor.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort

from ringmon.monitor_fields import EPS, MonitorFields
from ringmon.ports import Clock, RingCounters


def settle_ticks(m: MonitorFields, now: float) -> int:
    """Settle one sleeping monitor at ``now``: count the ticks it skipped up to then into its
    sequence and next tick; returns them (0 when none is due)."""
    asleep_at = m._asleep_at
    if now + EPS < asleep_at:
        return 0
    interval = m._interval
    behind = now - asleep_at + EPS
    # One tick when less than an interval is due (what the floor division gives then).
    ticks = 1 if behind < interval else int(behind // interval) + 1
    m._seq += ticks
    m._asleep_at = m._next_tick = asleep_at + ticks * interval
    return ticks


class _Sleeper:
    __slots__ = ("frac", "index", "whole", "width")

    def __init__(self, width: int, whole: int, frac: float, index: int) -> None:
        self.width = width  # liveness per tick: its successors
        self.whole = whole
        self.frac = frac
        self.index = index  # the first of the ledger's settle times it has not caught up with


class SleepLedger:
    """The sleeping monitors of one process: they share one set of counters and one interval."""

    def __init__(self) -> None:
        self.clock: Clock | None = None
        self._stats: RingCounters | None = None
        self._interval = 0.0
        # The times the whole ledger was settled at, since the oldest sleeper fell asleep.
        self._times: list[float] = []
        self._sleepers: dict[MonitorFields, _Sleeper] = {}
        # Sorted fractional parts of the sleepers' tick phases, by their width.
        self._fracs: dict[int, list[float]] = {}
        self._width = 0  # summed over the sleepers
        self._base = 0  # width * whole part, summed
        self._counted = 0  # the liveness counted for the current sleepers at the last settle

    def __len__(self) -> int:
        return len(self._sleepers)

    def join(self, m: MonitorFields) -> None:
        """``m`` (a monitor of this ledger's process) will settle through it."""
        if self._stats is None:
            self.clock, self._stats, self._interval = m._clock, m.stats, m._interval
        elif m.stats is not self._stats or m._interval != self._interval:
            raise ValueError("the monitors of one sleep ledger share their counters and interval")

    def add(self, m: MonitorFields) -> None:
        """``m`` fell asleep at ``m._asleep_at`` (a tick time after now: none of it is due)."""
        y = m._asleep_at / self._interval
        whole = math.floor(y)
        s = _Sleeper(len(m.successors), whole, y - whole, len(self._times))
        self._sleepers[m] = s
        insort(self._fracs.setdefault(s.width, []), s.frac)
        self._width += s.width
        self._base += s.width * whole

    def remove(self, m: MonitorFields) -> None:
        """``m`` wakes (or settles by itself): caught up with the ledger's settles, and out of
        what the ledger counts; its ticks from the last settle on are its own to count."""
        s = self._sleepers.pop(m)
        self._replay(m, s)
        if self._times:
            self._counted -= s.width * self._ticks(s, self._times[-1])
        fracs = self._fracs[s.width]
        del fracs[bisect_left(fracs, s.frac)]
        self._width -= s.width
        self._base -= s.width * s.whole
        if not self._sleepers:
            self._times.clear()
            self._counted = 0

    def catch_up(self, m: MonitorFields) -> None:
        """Bring sleeping ``m``'s sequence and next tick up to the ledger's last settle."""
        s = self._sleepers.get(m)
        if s is not None:
            self._replay(m, s)

    def settle(self) -> None:
        """Count every sleeper's skipped ticks up to now into the shared counters."""
        if not self._sleepers or self.clock is None or self._stats is None:
            return
        now = self.clock.now()
        x = (now + EPS) / self._interval
        whole = math.floor(x)
        frac = x - whole
        total = self._width * (whole + 1) - self._base
        for width, fracs in self._fracs.items():
            total -= width * (len(fracs) - bisect_right(fracs, frac))
        self._stats.liveness_sent += total - self._counted
        self._counted = total
        self._times.append(now)

    def _ticks(self, s: _Sleeper, t: float) -> int:
        """The ticks of sleeper ``s`` due by ``t``, as ``settle`` counts them."""
        x = (t + EPS) / self._interval
        whole = math.floor(x)
        return whole - s.whole + (0 if s.frac > x - whole else 1)

    def _replay(self, m: MonitorFields, s: _Sleeper) -> None:
        times = self._times
        for i in range(s.index, len(times)):
            settle_ticks(m, times[i])
        s.index = len(times)
