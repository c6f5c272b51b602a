"""Heartbeats at the RM by sample interval: a_i, those that arrived in interval i, and s_i, those of
them whose node update the scheduler processed within one interval of the arrival. h2 is the
worst interval's s_i/a_i. One mechanism for every transport: the RM tells ``stamp`` of every
registered node's heartbeat as it arrives (``ResourceManager.observe_heartbeat_arrivals``, with
the clock reading it takes anyway), and the run's decision timer tells ``observer``.

Counting arrivals (not heartbeats sent) keeps a host or network hiccup from moving a heartbeat
across a boundary between the two counts, and counting each update in its heartbeat's arrival
interval (not when processed) keeps an RM stall's backlog from counting twice: s_i <= a_i."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from rm import NodeUpdate, SchedulerItem


class Clock(Protocol):
    def now(self) -> float: ...


class RMArrivals:
    """Interval k is [(k-1)·I, k·I), as the sampler's rows."""

    def __init__(self, clock: Clock, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self._clock = clock
        self.interval_s = interval_s
        self.arrived_by_interval: dict[int, int] = {}
        self.timely_by_interval: dict[int, int] = {}
        self._arrival: dict[Any, float] = {}  # link -> arrival of its latest heartbeat not yet updated
        # A registered node's heartbeat arrived on ``link`` at ``t`` (the RM's clock reading).
        self.stamp: Callable[[Any, float], None] = self._stamper()
        # The run's ``DecisionTimer`` observer: told each scheduler event processed.
        self.observer: Callable[[SchedulerItem, float], None] = self._observer()

    def arrived_in(self, k: int) -> int:
        return self.arrived_by_interval.get(k, 0)

    def timely_in(self, k: int) -> int:
        """So far: the count can grow until one interval after interval k ends."""
        return self.timely_by_interval.get(k, 0)

    def h2(self, ks: Iterable[int]) -> float | None:
        """min s_k/a_k over intervals ``ks`` (a TCP run's window; the sampler's settled rows hold
        the same counts, and ``Sampler.efficiency`` the same rule)."""
        return worst_ratio((self.timely_in(k), self.arrived_in(k)) for k in ks)

    def _stamper(self) -> Callable[[Any, float], None]:
        arrival = self._arrival
        arrived = self.arrived_by_interval
        interval = self.interval_s

        def stamp(link: Any, t: float) -> None:
            arrival[link] = t
            k = int(t // interval) + 1
            arrived[k] = arrived.get(k, 0) + 1

        return stamp

    def _observer(self) -> Callable[[SchedulerItem, float], None]:
        """A node update within one interval of its heartbeat's arrival counts in the arrival's
        interval. Called for every scheduler event of every run: locals, not attribute look-ups."""
        pop = self._arrival.pop
        now = self._clock.now
        timely = self.timely_by_interval
        interval = self.interval_s

        def on_event(item: SchedulerItem, _dt: float) -> None:
            if type(item) is NodeUpdate:
                t_arr = pop(item.node.link, None)
                if t_arr is not None and now() - t_arr <= interval:
                    k = int(t_arr // interval) + 1
                    timely[k] = timely.get(k, 0) + 1

        return on_event


def worst_ratio(pairs: Iterable[tuple[int, int]]) -> float | None:
    """min of num/den over the (num, den) pairs with den > 0 (None if none): h1 from (m_i, n_i),
    h2 from (s_i, a_i), the same rule in memory and over TCP."""
    ratios = [num / den for num, den in pairs if den > 0]
    return min(ratios) if ratios else None
