"""Per-interval sampling: the time series, h1/h2, and time-averaged shares per workload entry
and per pool. Reads the RM only through its snapshots.

n_i and m_i count heartbeats by the interval they were *sent* in (the nodes' ``HeartbeatTiming``,
as over TCP): an answer counts in its heartbeat's interval, and only within one interval. a_i and
s_i count them by the interval they *arrived* at the RM in (``emulator.measure.arrivals``): an
update counts in its heartbeat's arrival interval, and only within one interval. Interval i's
answers and updates can still come until the next sample, so a row's m_i and s_i are provisional
when taken and settled at the next one; h1/h2 read settled rows only. Then m_i <= n_i and
s_i <= a_i in every row."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import msgspec

from emulator.measure.arrivals import worst_ratio
from rm import RMSnapshot, SharesSnapshot


class SampleRow(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One row of timeseries.csv (one per sample interval)."""

    t_s: float
    cpu_utilization: float
    ram_utilization: float
    nodes: int
    running_tasks: int
    pending_tasks: int
    n_i: int  # heartbeats nodes sent in the interval
    m_i: int  # of those, answered within one interval (settled at the next sample)
    a_i: int  # heartbeats that arrived at the RM in the interval (registered nodes')
    s_i: int  # of those, node updates processed within one interval (settled at the next sample)
    rm_queue_depth: int
    scheduler_queue_depth: int
    fair_cpu_bound: float  # pooled-cluster utilisation bound of the current demand mix
    fair_ram_bound: float
    removals: int  # nodes the RM removed in the interval
    to_rm_messages: int  # messages and bytes nodes sent to the RM in the interval
    to_rm_bytes: int
    ring_messages: int  # ring liveness messages between nodes in the interval
    ring_update_bytes: int  # bytes of ring updates the RM sent in the interval
    refusals: int  # cumulative
    fallback_allocations: int  # cumulative
    preemptions: int  # cumulative


COLUMNS: tuple[str, ...] = SampleRow.__struct_fields__
# Per-interval deltas of cumulative counters the harness supplies.
COUNTER_COLUMNS = ("removals", "to_rm_messages", "to_rm_bytes", "ring_messages", "ring_update_bytes")


class Mean:
    """A running mean of one share: the sum over samples and their number."""

    __slots__ = ("dominant_sum", "fair_sum", "samples")

    def __init__(self) -> None:
        self.dominant_sum = 0.0
        self.fair_sum = 0.0
        self.samples = 0

    @property
    def dominant(self) -> float:
        return self.dominant_sum / (self.samples or 1)

    @property
    def fair(self) -> float:
        return self.fair_sum / (self.samples or 1)


class RMView(Protocol):
    def snapshot(self) -> RMSnapshot: ...

    def sampled_shares(self) -> SharesSnapshot: ...


class HeartbeatIntervals(Protocol):
    """Heartbeats by sample interval k ([(k-1)·I, k·I)): sent, and answered within one interval."""

    def sent_in(self, k: int) -> int: ...

    def answered_in(self, k: int) -> int: ...


class RMIntervals(Protocol):
    """Heartbeats by the interval k they arrived at the RM in, and those updated within one
    interval (``emulator.measure.arrivals.RMArrivals``)."""

    def arrived_in(self, k: int) -> int: ...

    def timely_in(self, k: int) -> int: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: object) -> object: ...

    def call_soon(self, callback: Callable[..., object], *args: object) -> object: ...


class Sampler:
    def __init__(
        self,
        rm: RMView,
        heartbeats: HeartbeatIntervals,
        arrivals: RMIntervals,
        clock: Clock,
        interval_s: float,
        warmup_s: float,
        groups: list[str],
    ) -> None:
        """``heartbeats``: the nodes' heartbeats by the interval they were sent in; ``arrivals``:
        the RM's, by the interval they arrived in."""
        self._rm = rm
        self._heartbeats = heartbeats
        self._arrivals = arrivals
        self._clock = clock
        self.interval_s = interval_s
        self.warmup_s = warmup_s
        self.rows: list[SampleRow] = []
        self.groups: dict[str, Mean] = {g: Mean() for g in groups}
        # Same means per pool (every pool but root), for per-pool fairness deviation.
        self.pools: dict[str, Mean] = {}
        self._row_k = 0  # the interval the last row closed
        self.listeners: list[Callable[[SampleRow], None]] = []
        # Cumulative counters behind COUNTER_COLUMNS (set by the harness; zero when absent).
        self.counters: dict[str, Callable[[], int]] = {}
        self._last_counters = dict.fromkeys(COUNTER_COLUMNS, 0)
        self._k = 0
        self._stopped = False
        # The RM's shares at the last sample (entries and pools, no per-operation shares), for
        # listeners (the per-pool series) to reuse.
        self.last_shares: SharesSnapshot | None = None

    def start(self) -> None:
        """Sample at every multiple of the interval (from now on: a resumed run starts late)."""
        now = self._clock.now()
        self._k = max(1, math.floor(now / self.interval_s) + 1)
        self._clock.call_later(self._k * self.interval_s - now, self._due)

    def stop(self) -> None:
        self._stopped = True

    def _due(self) -> None:
        # A sample shows everything that happened at its instant: taken after the rest of it.
        self._clock.call_soon(self._take, self._k)
        self._k += 1
        self._clock.call_later(self._k * self.interval_s - self._clock.now(), self._due)

    def _take(self, k: int) -> None:
        if self._stopped:
            return
        if not self.rows or self.rows[-1].t_s < self._clock.now():  # the harness may have sampled
            self.sample(k)

    def sample(self, k: int | None = None) -> SampleRow:
        """A row closing interval ``k`` (the timer's; by default the nearest boundary, or the next
        one for a final row taken soon after a sample, as at an early stop)."""
        snap = self._rm.snapshot()
        shares = self._rm.sampled_shares()  # entries and pools are all it reads
        self.last_shares = shares
        now = snap.t
        self._settle()
        if k is None:
            k = max(round(now / self.interval_s), self._row_k + 1)
        self._row_k = k
        hb = self._heartbeats
        rm_hb = self._arrivals
        if now > self.warmup_s:
            self._accumulate(snap, shares)
        deltas = self._counter_deltas()
        row = SampleRow(
            t_s=round(now, 6),
            cpu_utilization=snap.cpu_utilization,
            ram_utilization=snap.ram_utilization,
            nodes=snap.nodes,
            running_tasks=snap.running_tasks,
            pending_tasks=snap.pending_tasks,
            n_i=hb.sent_in(k),
            m_i=hb.answered_in(k),  # so far: settled at the next sample
            a_i=rm_hb.arrived_in(k),
            s_i=rm_hb.timely_in(k),  # so far: settled at the next sample
            rm_queue_depth=snap.inbound.depth,
            scheduler_queue_depth=snap.scheduler.depth,
            fair_cpu_bound=shares.bound.cpu,
            fair_ram_bound=shares.bound.ram_gib,
            removals=deltas[0],
            to_rm_messages=deltas[1],
            to_rm_bytes=deltas[2],
            ring_messages=deltas[3],
            ring_update_bytes=deltas[4],
            refusals=snap.policy.refusals,
            fallback_allocations=snap.policy.fallback_allocations,
            preemptions=snap.preemption.preemptions if snap.preemption is not None else 0,
        )
        self.rows.append(row)
        for listener in self.listeners:
            listener(row)
        return row

    def _settle(self) -> None:
        """The last row's m_i and s_i as they now stand: every answer and update to its heartbeats
        that could come has (both count within one interval, and the next interval has ended)."""
        if not self.rows:
            return
        last = self.rows[-1]
        k = self._row_k
        m_i = self._heartbeats.answered_in(k)
        a_i = self._arrivals.arrived_in(k)  # a late real-time sample may have seen more
        s_i = self._arrivals.timely_in(k)
        if m_i != last.m_i or a_i != last.a_i or s_i != last.s_i:
            self.rows[-1] = msgspec.structs.replace(last, m_i=m_i, a_i=a_i, s_i=s_i)

    def _counter_deltas(self) -> list[int]:
        out = []
        for name in COUNTER_COLUMNS:
            fn = self.counters.get(name)
            value = fn() if fn is not None else 0
            out.append(value - self._last_counters[name])
            self._last_counters[name] = value
        return out

    def _accumulate(self, snap: RMSnapshot, shares: SharesSnapshot) -> None:
        for g, acc in self.groups.items():
            acc.samples += 1
            share = shares.groups.get(g)
            if share is not None:
                acc.dominant_sum += share.dominant
                acc.fair_sum += share.fair
        if snap.capacity.cpu <= 0 or snap.capacity.ram_gib <= 0:
            return
        pools = self.pools
        for name, share in shares.pools.items():
            mean = pools.get(name)
            if mean is None:  # not setdefault: that would make a Mean per pool per sample
                mean = pools[name] = Mean()
            mean.samples += 1
            mean.dominant_sum += share.dominant
            mean.fair_sum += share.fair

    def window_rows(self) -> list[SampleRow]:
        return [r for r in self.rows if r.t_s > self.warmup_s]

    def settled_rows(self) -> list[SampleRow]:
        """Rows after the warm-up whose heartbeats had a whole interval to be answered before the
        last sample (the last row never has: its answers are still coming, or the run ended)."""
        if not self.rows:
            return []
        end, interval = self.rows[-1].t_s + 1e-9, self.interval_s
        # Nominal ends: a real-time sample is taken a little after its boundary.
        return [r for r in self.window_rows() if (round(r.t_s / interval) + 1) * interval <= end]

    def efficiency(self, set_aside: frozenset[int] = frozenset()) -> tuple[float | None, float | None]:
        """(h1, h2) = min over settled intervals of m_i/n_i (those with n_i > 0) and of s_i/a_i
        (those with a_i > 0), but for the intervals ``set_aside`` (by number: t_s / interval)."""
        rows = [r for r in self.settled_rows() if round(r.t_s / self.interval_s) not in set_aside]
        return worst_ratio((r.m_i, r.n_i) for r in rows), worst_ratio((r.s_i, r.a_i) for r in rows)
