"""Time series of real usage beside allocation (design.md §3b), one row per sample interval,
taken from the nodes' usage ground truth (``UsageStats``) and the RM's allocation."""

from __future__ import annotations

import msgspec

from nodemanager.stats import UsageStats


class UsageRow(msgspec.Struct, frozen=True, array_like=True):
    t_s: float
    cpu_allocated: float  # cores the RM had allocated at the sample
    ram_allocated_gib: float
    cpu_used: float  # real usage of the usage-modelled containers at the sample
    ram_used_gib: float
    cpu_limit: float  # limits of those containers at the sample
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
    """Call ``sample`` at each sampler row: usage and limits as they stand (the nodes' current
    values: their integrals advance only when a node samples, every ``usage_sample_s``), OOMs and
    overflow since the last row."""

    def __init__(self, stats: UsageStats) -> None:
        self._stats = stats
        self._last = _totals(stats)
        self._overflow = 0.0
        self.rows: list[UsageRow] = []

    def sample(self, t_s: float, cpu_allocated: float, ram_allocated: float) -> None:
        st = self._stats
        now = _totals(st)
        d = [a - b for a, b in zip(now, self._last, strict=True)]
        self._last = now
        if d[5] > 0:  # node-time sampled since the last row: its share over capacity
            self._overflow = d[6] / d[5]
        self.rows.append(UsageRow(
            t_s=t_s, cpu_allocated=cpu_allocated, ram_allocated_gib=ram_allocated,
            cpu_used=st.cpu_now, ram_used_gib=st.ram_now, cpu_limit=st.cpu_limit_now,
            ram_limit_gib=st.ram_limit_now, ooms=int(d[4]), overflow_fraction=self._overflow,
        ))
