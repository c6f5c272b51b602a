"""Time series of real usage beside allocation (design.md §3b), one row per sample interval,
taken from the nodes' usage ground truth (``UsageStats``) and the RM's allocation."""

from __future__ import annotations

import msgspec

from nodemanager.stats import UsageStats


class UsageRow(msgspec.Struct, frozen=True, array_like=True):
    t_s: float
    cpu_allocated: float  # cores the RM had allocated at the sample
    ram_allocated_gib: float
    cpu_used: float  # mean real usage over the interval (usage-modelled containers)
    ram_used_gib: float
    cpu_limit: float  # mean limits of those containers over the interval
    ram_limit_gib: float
    ooms: int  # in the interval
    overflow_fraction: float  # of the interval's sampled node-time with usage > capacity


USAGE_COLUMNS: tuple[str, ...] = UsageRow.__struct_fields__


def _totals(st: UsageStats) -> tuple[float, float, float, float, int, float, float]:
    tiers = st.tiers.values()
    return (
        sum(t.cpu_used_s for t in tiers), sum(t.ram_used_s for t in tiers),
        sum(t.cpu_limit_s for t in tiers), sum(t.ram_limit_s for t in tiers),
        st.ooms_limit + st.ooms_node, st.node_s, st.overflow_s,
    )


class UsageSeries:
    """Call ``sample`` at each sampler row; keeps the per-interval deltas."""

    def __init__(self, stats: UsageStats) -> None:
        self._stats = stats
        self._last = _totals(stats)
        self._last_t = 0.0
        self.rows: list[UsageRow] = []

    def sample(self, t_s: float, cpu_allocated: float, ram_allocated: float) -> None:
        now = _totals(self._stats)
        d = [a - b for a, b in zip(now, self._last, strict=True)]
        dt = max(t_s - self._last_t, 1e-9)
        self._last, self._last_t = now, t_s
        self.rows.append(UsageRow(
            t_s=t_s, cpu_allocated=cpu_allocated, ram_allocated_gib=ram_allocated,
            cpu_used=d[0] / dt, ram_used_gib=d[1] / dt, cpu_limit=d[2] / dt, ram_limit_gib=d[3] / dt,
            ooms=int(d[4]), overflow_fraction=d[6] / d[5] if d[5] > 0 else 0.0,
        ))
