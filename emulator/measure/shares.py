"""Per-pool and per-operation shares over time: one row per sample interval, next to the
sampler's own columns in timeseries.csv.

The columns are fixed when the run starts, from the scenario (every pool it declares or names,
every workload entry), so two runs of one scenario always have the same header and ``compare``
can line them up. Names: ``pool:<pool>:<metric>`` and ``op:<workload entry>:<metric>`` with
metric one of ``METRICS``. A workload entry stands for its operations (a looping user submits a
new operation of the entry when the previous one finishes): the figures sum over them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from rm import SharesSnapshot

METRICS = ("dominant_share", "fair_share", "running", "pending")
_NO_TASKS = (0, 0)


def share_columns(pools: Iterable[str], entries: Iterable[str]) -> tuple[str, ...]:
    """The column names, pools first, each block in the given order."""
    cols: list[str] = []
    for kind, names in (("pool", pools), ("op", entries)):
        for name in names:
            cols.extend(f"{kind}:{name}:{m}" for m in METRICS)
    return tuple(cols)


class SharesRM(Protocol):
    def shares(self) -> SharesSnapshot: ...


class ShareSeries:
    """Takes one row of per-pool and per-entry figures when asked (the sampler's listener)."""

    def __init__(self, rm: SharesRM, pools: list[str], entries: list[str]) -> None:
        self._rm = rm
        self.pools = list(dict.fromkeys(pools))
        self.entries = list(dict.fromkeys(entries))
        self.columns = share_columns(self.pools, self.entries)
        self.rows: list[tuple[float, ...]] = []

    def on_sample(self, _row: object, shares: SharesSnapshot | None = None) -> None:
        self.take(shares)

    def take(self, shares: SharesSnapshot | None = None) -> tuple[float, ...]:
        """``shares``: the RM's shares if the caller has them already (the sampler has)."""
        shares = shares if shares is not None else self._rm.shares()
        # The tasks come with the shares (a pool's count its sub-pools' too): no view of every
        # operation and pool per sample.
        values: list[float] = []
        for names, by_name, tasks in (
            (self.pools, shares.pools, shares.pool_tasks), (self.entries, shares.groups, shares.group_tasks),
        ):
            for name in names:
                share = by_name.get(name)
                running, pending = tasks.get(name, _NO_TASKS)
                values.extend((
                    round(share.dominant, 6) if share is not None else 0.0,
                    round(share.fair, 6) if share is not None else 0.0,
                    running,
                    pending,
                ))
        row = tuple(values)
        self.rows.append(row)
        return row
