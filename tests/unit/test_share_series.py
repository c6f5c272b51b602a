"""The per-pool and per-entry series (emulator/measure/shares.py) reads its task counts from the
RM's shares: a pool counts its sub-pools' tasks, an entry its operations', names with none read 0."""

from __future__ import annotations

from emulator.measure.shares import ShareSeries, share_columns
from rm import SharesSnapshot
from rm.protocol import Resources
from rm.shell.view_builders import fair_shares, sampled_shares
from rm.state.operations import OperationSpec
from rm.state.workload import WorkloadBook


class _RM:
    def __init__(self, book: WorkloadBook) -> None:
        self.book = book

    def shares(self) -> SharesSnapshot:
        return fair_shares(self.book, Resources(16, 64))


def _book() -> WorkloadBook:
    book = WorkloadBook()
    book.add_pool("a")
    book.add_pool("a1", parent="a")
    book.add_pool("b", weight=2.0)
    book.add_pool("idle")

    def add(name: str, pool: str, tasks: int, started: int, group: str = "") -> None:
        demand = Resources(1, 2)
        op = book.add_operation(OperationSpec(name=name, pool=pool, demand=demand, durations=[5.0] * tasks,
                                              group=group), 0.0)
        for _ in range(started):
            op.take_task(0.0)

    add("x", "a1", 4, 1, group="g")  # running 1, pending 3
    add("y", "a", 3, 2, group="g")  # running 2, pending 1
    add("z", "b", 2, 0)  # its own entry: pending 2
    return book


def test_pools_count_their_sub_pools_and_entries_their_operations() -> None:
    rm = _RM(_book())
    series = ShareSeries(rm, ["a", "a1", "b", "idle", "declared-only"], ["g", "z", "gone"])
    row = dict(zip(series.columns, series.take(), strict=True))
    assert series.columns == share_columns(series.pools, series.entries)
    counts = {name: (row[f"{name}:running"], row[f"{name}:pending"]) for name in (
        "pool:a", "pool:a1", "pool:b", "pool:idle", "pool:declared-only", "op:g", "op:z", "op:gone")}
    assert counts == {
        "pool:a": (3, 4), "pool:a1": (1, 3), "pool:b": (0, 2), "pool:idle": (0, 0),
        "pool:declared-only": (0, 0), "op:g": (3, 4), "op:z": (0, 2), "op:gone": (0, 0),
    }
    shares = rm.shares()
    assert row["pool:a:fair_share"] == round(shares.pools["a"].fair, 6) > 0
    assert row["op:z:dominant_share"] == 0.0 and row["op:g:dominant_share"] == round(3 / 16, 6)
    assert len(series.rows) == 1


def test_the_counts_follow_the_operations_from_one_sample_to_the_next() -> None:
    book = _book()
    series = ShareSeries(_RM(book), ["a"], ["g"])
    series.take()
    op = next(o for o in book.operations.values() if o.name == "x")
    op.take_task(1.0)
    op.task_completed(2.0)
    book.remove_operation(next(o for o in book.operations.values() if o.name == "y"))
    last = dict(zip(series.columns, series.take(), strict=True))
    assert (last["pool:a:running"], last["pool:a:pending"]) == (1, 2)
    assert (last["op:g:running"], last["op:g:pending"]) == (1, 2)


def test_the_samplers_shares_are_the_full_ones_less_the_per_operation_shares() -> None:
    """What the sampler asks for (``sampled_shares``) differs from the full shares only by the
    operations' own, which no sampler reader uses."""
    book = _book()
    full = fair_shares(book, Resources(16, 64))
    lean = sampled_shares(book, Resources(16, 64))
    assert len(full.operations) == 3 and lean.operations == {}
    assert (lean.bound, lean.groups, lean.pools, lean.group_tasks, lean.pool_tasks) == (
        full.bound, full.groups, full.pools, full.group_tasks, full.pool_tasks)
