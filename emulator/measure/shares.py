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

from rm import OperationView, PoolView, SharesSnapshot

METRICS = ("dominant_share", "fair_share", "running", "pending")


def share_columns(pools: Iterable[str], entries: Iterable[str]) -> tuple[str, ...]:
    """The column names, pools first, each block in the given order."""
    cols: list[str] = []
    for kind, names in (("pool", pools), ("op", entries)):
        for name in names:
            cols.extend(f"{kind}:{name}:{m}" for m in METRICS)
    return tuple(cols)


class SharesRM(Protocol):
    def shares(self) -> SharesSnapshot: ...

    def operations_view(self) -> list[OperationView]: ...

    def pools_view(self) -> list[PoolView]: ...


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
        parent = {p.name: p.parent for p in self._rm.pools_view()}
        running: dict[tuple[str, str], int] = {}
        pending: dict[tuple[str, str], int] = {}
        for op in self._rm.operations_view():
            # A pool counts the tasks of its sub-pools too, as its dominant share does.
            keys = [("op", op.group)]
            pool: str | None = op.pool
            while pool is not None and pool != "root" and len(keys) < 64:
                keys.append(("pool", pool))
                pool = parent.get(pool)
            for key in keys:
                running[key] = running.get(key, 0) + op.running
                pending[key] = pending.get(key, 0) + op.pending
        values: list[float] = []
        for kind, names, by_name in (("pool", self.pools, shares.pools), ("op", self.entries, shares.groups)):
            for name in names:
                share = by_name.get(name)
                values.extend((
                    round(share.dominant, 6) if share is not None else 0.0,
                    round(share.fair, 6) if share is not None else 0.0,
                    running.get((kind, name), 0),
                    pending.get((kind, name), 0),
                ))
        row = tuple(values)
        self.rows.append(row)
        return row
