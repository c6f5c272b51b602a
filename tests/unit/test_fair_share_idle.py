"""Operations with nothing to run and pools with nothing under them take no part in the fair-share
tree (rm/scheduler/fair_share.py leaves them out when it builds it): they get nothing, and the
others get what they get without them, down through a pool that holds only a sub-pool."""

from __future__ import annotations

from rm.protocol import Resources
from rm.scheduler.fair_share import FairShares, progressive_filling
from rm.state.operations import OperationSpec
from rm.state.workload import WorkloadBook

CAP = Resources(8, 32)
SMALL = Resources(1, 2)


def _shares(with_idle: bool) -> tuple[FairShares, dict[str, int]]:
    book = WorkloadBook()
    book.add_pool("a", weight=2.0)
    book.add_pool("a1", parent="a")  # "a" holds only this sub-pool
    book.add_pool("b", min_share=Resources(2, 4))
    if with_idle:
        book.add_pool("empty", min_share=Resources(4, 8))
        book.add_pool("empty-child", parent="empty")
    ids: dict[str, int] = {}

    def add(name: str, pool: str, tasks: int, done: int = 0, demand: Resources = SMALL) -> None:
        spec = OperationSpec(name=name, pool=pool, demand=demand, durations=[5.0] * tasks)
        op = book.add_operation(spec, 0.0)
        for _ in range(done):
            op.take_task(0.0)
            op.task_completed(1.0)
        ids[name] = op.id

    add("x", "a1", 20)
    add("y", "b", 6, done=1)
    add("z", "b", 9, demand=Resources(2, 1))
    if with_idle:
        add("finished", "b", 2, done=2)
        add("weightless", "a1", 3, demand=Resources(0, 0))
        add("idle-in-empty", "empty-child", 1, done=1)
    return progressive_filling(book.root, list(book.operations.values()), CAP), ids


def test_idle_operations_and_pools_get_nothing_and_change_no_one_elses_share() -> None:
    busy, busy_ids = _shares(with_idle=False)
    full, ids = _shares(with_idle=True)
    assert busy.utilization.cpu == 1.0  # the demand is more than the cluster: shares are contested
    for name in ("x", "y", "z"):
        assert full.operations[ids[name]] == busy.operations[busy_ids[name]] > 0
        assert full.usage[ids[name]] == busy.usage[busy_ids[name]]
    for name in ("finished", "weightless", "idle-in-empty"):
        assert full.operations[ids[name]] == 0.0 and full.usage[ids[name]] == (0.0, 0.0)
    assert full.pools == busy.pools and set(full.pools) == {"a", "a1", "b"}
    assert full.utilization == busy.utilization
