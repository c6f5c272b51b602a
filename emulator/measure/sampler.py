"""Per-interval sampling: the time series, h1/h2, and time-averaged shares per workload entry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.time.clock import LoopClock
from nodemanager.stats import NodeStats
from rm.manager import ResourceManager
from rm.scheduler.fair_share import progressive_filling

# Per interval: nodes removed by the RM, messages and bytes nodes sent to the RM, ring liveness
# messages between nodes, bytes of ring updates the RM sent.
COUNTER_COLUMNS = ("removals", "to_rm_messages", "to_rm_bytes", "ring_messages", "ring_update_bytes")

COLUMNS = (
    "t_s",
    "cpu_utilization",
    "ram_utilization",
    "nodes",
    "running_tasks",
    "pending_tasks",
    "n_i",
    "m_i",
    "s_i",
    "rm_queue_depth",
    "scheduler_queue_depth",
    "fair_cpu_bound",
    "fair_ram_bound",
    *COUNTER_COLUMNS,
    "refusals",
    "fallback_allocations",
    "preemptions",
)


class GroupShares:
    __slots__ = ("dominant_sum", "fair_sum", "samples")

    def __init__(self) -> None:
        self.dominant_sum = 0.0
        self.fair_sum = 0.0
        self.samples = 0


class Sampler:
    def __init__(
        self,
        rm: ResourceManager,
        node_stats: NodeStats,
        clock: LoopClock,
        interval_s: float,
        warmup_s: float,
        groups: list[str],
    ) -> None:
        self._rm = rm
        self._stats = node_stats
        self._clock = clock
        self.interval_s = interval_s
        self.warmup_s = warmup_s
        self.rows: list[tuple[float, ...]] = []
        self.groups: dict[str, GroupShares] = {g: GroupShares() for g in groups}
        # Same means per pool (every pool but root), for per-pool fairness deviation.
        self.pools: dict[str, GroupShares] = {}
        self._last = (0, 0, 0)
        self.listeners: list[Callable[[tuple[float, ...]], None]] = []
        # Cumulative counters behind COUNTER_COLUMNS (set by the runner; zero when absent).
        self.counters: dict[str, Callable[[], int]] = {}
        self._last_counters = dict.fromkeys(COUNTER_COLUMNS, 0)

    async def run(self) -> None:
        t = self.interval_s
        while True:
            await self._clock.sleep_until(t)
            if not self.rows or self.rows[-1][0] < self._clock.now():  # the runner may have sampled
                self.sample()
            t += self.interval_s

    def sample(self) -> tuple[float, ...]:
        rm = self._rm
        now = self._clock.now()
        cluster = rm.cluster
        cap = cluster.capacity
        sent, resp, upd = (
            self._stats.heartbeats_sent,
            self._stats.heartbeat_responses,
            rm.stats.update_events,
        )
        n_i, m_i, s_i = sent - self._last[0], resp - self._last[1], upd - self._last[2]
        self._last = (sent, resp, upd)
        ops = list(rm.operations.values())
        fair = progressive_filling(rm.root, ops, cap)
        if now > self.warmup_s:
            self._accumulate_shares(ops, fair.usage, cap.cpu, cap.ram_gib)
            self._accumulate_pools(fair.pools, cap.cpu, cap.ram_gib)
        preemptor = rm.preemptor
        row = (
            round(now, 6),
            cluster.used_cpu / cap.cpu if cap.cpu > 0 else 0.0,
            cluster.used_ram / cap.ram_gib if cap.ram_gib > 0 else 0.0,
            len(cluster.nodes),
            sum(op.running for op in ops),
            sum(len(op.pending) for op in ops),
            n_i,
            m_i,
            s_i,
            rm.inbound.depth,
            rm.events.depth,
            fair.utilization.cpu,
            fair.utilization.ram_gib,
            *self._counter_deltas(),
            rm.policy.stats.refusals,
            rm.policy.stats.fallback_allocations,
            preemptor.preemptions if preemptor is not None else 0,
        )
        self.rows.append(row)
        for listener in self.listeners:
            listener(row)
        return row

    def _counter_deltas(self) -> list[int]:
        out = []
        for name in COUNTER_COLUMNS:
            fn = self.counters.get(name)
            value = fn() if fn is not None else 0
            out.append(value - self._last_counters[name])
            self._last_counters[name] = value
        return out

    def _accumulate_shares(
        self, ops: list[Any], usage: dict[int, tuple[float, float]], cap_cpu: float, cap_ram: float
    ) -> None:
        cpu: dict[str, float] = {}
        ram: dict[str, float] = {}
        fcpu: dict[str, float] = {}
        fram: dict[str, float] = {}
        for op in ops:
            g = op.group
            cpu[g] = cpu.get(g, 0.0) + op.usage_cpu
            ram[g] = ram.get(g, 0.0) + op.usage_ram
            u = usage.get(op.id, (0.0, 0.0))
            fcpu[g] = fcpu.get(g, 0.0) + u[0]
            fram[g] = fram.get(g, 0.0) + u[1]
        for g, acc in self.groups.items():
            acc.samples += 1
            if g in cpu and cap_cpu > 0 and cap_ram > 0:
                acc.dominant_sum += max(cpu[g] / cap_cpu, ram[g] / cap_ram)
                acc.fair_sum += max(fcpu[g], fram[g])

    def _accumulate_pools(self, fair: dict[str, float], cap_cpu: float, cap_ram: float) -> None:
        if cap_cpu <= 0 or cap_ram <= 0:
            return
        for name, pool in self._rm.pools.items():
            if name == "root":
                continue
            acc = self.pools.get(name)
            if acc is None:
                acc = self.pools[name] = GroupShares()
            acc.samples += 1
            acc.dominant_sum += max(pool.usage_cpu / cap_cpu, pool.usage_ram / cap_ram)
            acc.fair_sum += fair.get(name, 0.0)

    def window_rows(self) -> list[tuple[float, ...]]:
        return [r for r in self.rows if r[0] > self.warmup_s]

    def efficiency(self) -> tuple[float | None, float | None]:
        """(h1, h2) = min over measured intervals of m_i/n_i and s_i/n_i (intervals with n_i > 0)."""
        rows = [r for r in self.window_rows() if r[6] > 0]
        if not rows:
            return None, None
        return min(r[7] / r[6] for r in rows), min(r[8] / r[6] for r in rows)
