"""DRF ties at equal keys go to start time, for pools and operations alike (design.md §3)."""

from __future__ import annotations

from rm.protocol import Resources
from rm.state.operations import Operation, OperationSpec, Pool
from tests.unit.test_drf import drf, make_cluster


def submit(op_id: int, pool: Pool, at: float) -> Operation:
    spec = OperationSpec(name=f"op{op_id}", pool=pool.name, demand=Resources(1, 1), durations=[1.0] * 10)
    o = Operation(op_id, spec, pool, at)
    pool.operations.append(o)
    return o


def test_an_earlier_operation_in_root_goes_before_a_later_child_pool() -> None:
    cluster, node = make_cluster(100, 100)
    root = Pool("root")
    child = Pool("team", parent=root)
    early = submit(1, root, at=0.0)
    late = submit(2, child, at=5.0)
    assert list(drf(root, cluster).candidates(node)) == [early, late]


def test_a_pool_whose_first_operation_is_older_goes_first() -> None:
    cluster, node = make_cluster(100, 100)
    root = Pool("root")
    a, b = Pool("a", parent=root), Pool("b", parent=root)
    later = submit(1, a, at=7.0)
    older = submit(2, b, at=3.0)
    assert drf(root, cluster).assign(node) is older
    assert list(drf(root, cluster).candidates(node)) == [older, later]
