"""Fair shares as YARN's ComputeFairShares and hierarchical DRF define them (design.md §3).

The single-resource cases are YARN's TestComputeFairShares cases: each schedulable is a pool with
one operation of 1-unit tasks, the cluster has that many units (the other resource is plentiful);
the expected shares are YARN's. The mixed-shape cases are hand-computed equilibria.
"""

from __future__ import annotations

import pytest

from rm.protocol import Resources
from rm.scheduler.fair_share import progressive_filling
from rm.state.operations import Operation, OperationSpec, Pool

BIG = 10**4  # tasks: a demand above any share (each task is an object: keep it small)


def cluster_of(
    total: float, specs: list[tuple[float, int, float]], cpu: bool = False
) -> tuple[list[float], dict[str, float]]:
    """specs: (min share, demand in units, weight) per pool. Returns each pool's share in units."""
    root = Pool("root")
    ops = []
    for i, (min_share, demand, weight) in enumerate(specs):
        m = Resources(min_share, 0.0) if cpu else Resources(0.0, min_share)
        p = Pool(f"p{i}", weight=weight, min_share=m, parent=root)
        d = Resources(1.0, 0.0) if cpu else Resources(0.0, 1.0)
        spec = OperationSpec(name=f"o{i}", pool=p.name, demand=d, durations=[1.0] * demand)
        o = Operation(i + 1, spec, p, 0.0)
        p.operations.append(o)
        ops.append(o)
    capacity = Resources(total, 10.0 * total) if cpu else Resources(10.0 * total, total)
    fs = progressive_filling(root, ops, capacity)
    return [fs.operations[o.id] * total for o in ops], fs.pools


def test_equal_sharing() -> None:
    shares, _ = cluster_of(40, [(0, BIG, 1.0)] * 4)
    assert shares == pytest.approx([10, 10, 10, 10])


def test_low_max_shares() -> None:
    shares, _ = cluster_of(40, [(0, 100, 1.0), (0, 50, 1.0), (0, 11, 1.0), (0, 3, 1.0)])
    assert shares == pytest.approx([13, 13, 11, 3])


def test_min_shares() -> None:
    shares, _ = cluster_of(40, [(20, BIG, 1.0), (18, BIG, 1.0), (0, BIG, 1.0), (2, BIG, 1.0)])
    assert shares == pytest.approx([20, 18, 0, 2])


def test_min_share_above_demand_gives_the_demand() -> None:
    # YARN's comment on testMinShares: a min share of 20 with a demand of 10 gets 10.
    shares, _ = cluster_of(40, [(20, BIG, 1.0), (20, 10, 1.0), (0, BIG, 1.0), (2, 3, 1.0)])
    assert shares == pytest.approx([20, 10, 7, 3])


def test_weighted_sharing() -> None:
    shares, _ = cluster_of(45, [(0, BIG, 2.0), (0, BIG, 1.0), (0, BIG, 1.0), (0, BIG, 0.5)])
    assert shares == pytest.approx([20, 10, 10, 5])


def test_weighted_sharing_with_max_shares() -> None:
    shares, _ = cluster_of(45, [(0, 10, 2.0), (0, 11, 1.0), (0, 30, 1.0), (0, 20, 0.5)])
    assert shares == pytest.approx([10, 11, 16, 8])


def test_weighted_sharing_with_min_shares() -> None:
    shares, _ = cluster_of(45, [(20, BIG, 2.0), (0, BIG, 1.0), (5, BIG, 1.0), (15, BIG, 0.5)])
    assert shares == pytest.approx([20, 5, 5, 15])


def test_large_shares() -> None:
    m = 10_000  # YARN's case uses 1e6-unit shares (int overflow in Java); the arithmetic is the same
    shares, _ = cluster_of(40 * m, [(0, 20 * m, 1.0)] * 4)
    assert shares == pytest.approx([10 * m] * 4)


def test_cpu() -> None:
    shares, _ = cluster_of(45, [(20, BIG, 2.0), (0, BIG, 1.0), (5, BIG, 1.0), (15, BIG, 0.5)], cpu=True)
    assert shares == pytest.approx([20, 5, 5, 15])


def test_oversubscribed_min_shares_scale_down() -> None:
    # Min shares summing to more than the cluster are scaled to fit it (YT normalises them so).
    shares, _ = cluster_of(40, [(40, BIG, 1.0), (40, BIG, 1.0)])
    assert shares == pytest.approx([20, 20])


def test_min_share_of_70_percent_is_the_fair_share() -> None:
    # The case: P2 guaranteed 70 of 100 CPUs, both pools want everything.
    shares, pools = cluster_of(100, [(0, BIG, 1.0), (70, BIG, 1.0)], cpu=True)
    assert shares == pytest.approx([30, 70])
    assert pools == pytest.approx({"p0": 0.3, "p1": 0.7})


def mixed() -> tuple[Pool, list[Operation]]:
    root = Pool("root")
    p1, p2 = Pool("P1", parent=root), Pool("P2", parent=root)
    ops = []
    for i, (pool, cpu, ram) in enumerate([(p1, 2, 1), (p1, 1, 2), (p2, 1, 1)]):
        spec = OperationSpec(name=f"o{i}", pool=pool.name, demand=Resources(cpu, ram), durations=[1.0] * BIG)
        o = Operation(i + 1, spec, pool, 0.0)
        pool.operations.append(o)
        ops.append(o)
    return root, ops


def test_sibling_pools_share_by_the_dominant_share_of_their_aggregate_usage() -> None:
    # P1 {<2,1>, <1,2>} and P2 {<1,1>} on 100 cpu x 100 GiB. In P1 both operations hold dominant
    # share x: usage (x + x/2, x/2 + x) = 1.5x in each resource, so P1's dominant share is 1.5x.
    # P2 at y uses y of each. Equal weights: 1.5x = y; both resources saturate at 1.5x + y = 1,
    # so P1 = P2 = 0.5 and each P1 operation holds 1/3.
    root, ops = mixed()
    fs = progressive_filling(root, ops, Resources(100, 100))
    assert fs.pools == pytest.approx({"P1": 0.5, "P2": 0.5})
    assert [fs.operations[o.id] for o in ops] == pytest.approx([1 / 3, 1 / 3, 0.5])
    assert fs.utilization.cpu == pytest.approx(1.0) and fs.utilization.ram_gib == pytest.approx(1.0)


def test_a_pool_whose_operation_stops_passes_its_rate_to_its_sibling_operation() -> None:
    # Same pools, P1's <1,2> operation wants only 10 tasks (0.2 RAM, 0.1 CPU). P1 at share S holds
    # <1,2> at 0.2 and <2,1> at z: usage (0.1 + z, 0.2 + z/2). Once z > 0.2, CPU dominates and P1 = 0.1 + z.
    # P2 = y. CPU saturates: 0.1 + z + y = 1 with 0.1 + z = y -> y = 0.5, z = 0.4; RAM 0.2 + 0.2 + 0.5 < 1.
    # RAM has room left but every operation uses CPU, so it ends there.
    root, ops = mixed()
    small = ops[1]
    for _ in range(BIG - 10):
        small.pending.pop()
    fs = progressive_filling(root, ops, Resources(100, 100))
    assert [fs.operations[o.id] for o in ops] == pytest.approx([0.4, 0.2, 0.5])
    assert fs.pools == pytest.approx({"P1": 0.5, "P2": 0.5})
    assert fs.utilization.ram_gib == pytest.approx(0.9)


def test_nested_pool_min_share_counts_within_its_parent() -> None:
    # root -> a (weight 1) {a1 (min 30 cpu), a2}, b (weight 1). a gets half: 50; a1 is guaranteed
    # 30 of it and a2 gets the rest, 20 (the level in a, 20, is below a1's floor of 30).
    root = Pool("root")
    a, b = Pool("a", parent=root), Pool("b", parent=root)
    a1 = Pool("a1", min_share=Resources(30, 0), parent=a)
    a2 = Pool("a2", parent=a)
    ops = []
    for i, p in enumerate([a1, a2, b]):
        spec = OperationSpec(name=f"o{i}", pool=p.name, demand=Resources(1, 0.5), durations=[1.0] * BIG)
        o = Operation(i + 1, spec, p, 0.0)
        p.operations.append(o)
        ops.append(o)
    fs = progressive_filling(root, ops, Resources(100, 100))
    assert [fs.operations[o.id] for o in ops] == pytest.approx([0.3, 0.2, 0.5])
