"""DRF ordering (weights, min shares, nested pools) and progressive-filling fair shares."""

from __future__ import annotations

import pytest

from rm.protocol import Resources
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.fair_share import progressive_filling
from rm.scheduler.policies.drf import DRFPolicy
from rm.scheduler.policy import PolicyCounters
from rm.state.cluster import Cluster, NodeRecord
from rm.state.operations import Operation, OperationSpec, Pool, Task
from tests.helpers import FakeClock, RecordingLink


def drf(root: Pool, cluster: Cluster) -> DRFPolicy:
    return DRFPolicy(root, cluster, SchedulerConfig(), FakeClock(), PolicyCounters())


def make_cluster(cpu: float, ram: float) -> tuple[Cluster, NodeRecord]:
    cluster = Cluster()
    node = cluster.add("n", Resources(cpu, ram), link=RecordingLink(), now=0.0)
    return cluster, node


def op(op_id: int, pool: Pool, cpu: float, ram: float, tasks: int = 100, weight: float = 1.0) -> Operation:
    spec = OperationSpec(
        name=f"op{op_id}", pool=pool.name, demand=Resources(cpu, ram), durations=[1.0] * tasks, weight=weight
    )
    o = Operation(op_id, spec, pool, 0.0)
    pool.operations.append(o)
    return o


def run_tasks(o: Operation, n: int) -> None:
    for _ in range(n):
        o.take_task(0.0)


def test_lowest_dominant_share_goes_first() -> None:
    cluster, node = make_cluster(100, 100)
    root = Pool("root")
    a, b = op(1, root, 1, 4), op(2, root, 3, 1)
    run_tasks(a, 5)  # dominant 20/100 ram
    run_tasks(b, 5)  # dominant 15/100 cpu
    assert [o.name for o in drf(root, cluster).candidates(node)] == ["op2", "op1"]


def test_weights_divide_dominant_shares() -> None:
    cluster, node = make_cluster(100, 100)
    root = Pool("root")
    heavy, light = op(1, root, 1, 1, weight=3.0), op(2, root, 1, 1)
    run_tasks(heavy, 20)  # 0.20 / 3
    run_tasks(light, 10)  # 0.10 / 1
    assert drf(root, cluster).assign(node) is heavy


def test_ties_are_broken_by_next_dominant_share_then_submission_order() -> None:
    cluster, node = make_cluster(100, 100)
    root = Pool("root")
    a, b, c = op(1, root, 2, 1), op(2, root, 2, 2), op(3, root, 2, 1)
    for o in (a, b, c):
        run_tasks(o, 5)  # all dominant 0.10 cpu; b's ram share 0.10 > a's and c's 0.05
    assert [o.name for o in drf(root, cluster).candidates(node)] == ["op1", "op3", "op2"]


def test_pool_below_min_share_is_served_first() -> None:
    cluster, node = make_cluster(100, 100)
    root = Pool("root")
    rich = Pool("rich", min_share=Resources(0, 0), parent=root)
    needy = Pool("needy", min_share=Resources(30, 0), parent=root)
    o_rich, o_needy = op(1, rich, 1, 1), op(2, needy, 1, 1)
    for o, n in ((o_rich, 5), (o_needy, 20)):
        run_tasks(o, n)
    # needy has the larger share (0.20 vs 0.05) but is below its 30-cpu min share.
    assert drf(root, cluster).assign(node) is o_needy
    run_tasks(o_needy, 10)  # now at 30 cpu: no longer needy
    assert drf(root, cluster).assign(node) is o_rich


def test_nested_pools_compare_pool_shares_before_operation_shares() -> None:
    cluster, node = make_cluster(100, 100)
    root = Pool("root")
    team = Pool("team", parent=root)
    solo = Pool("solo", parent=root)
    t1, t2 = op(1, team, 1, 1), op(2, team, 1, 1)
    s1 = op(3, solo, 1, 1)
    run_tasks(t1, 10)
    run_tasks(t2, 10)  # team at 0.20 in total, each of its ops at 0.10
    run_tasks(s1, 15)  # solo at 0.15: higher than each team op, lower than the team
    assert drf(root, cluster).assign(node) is s1


def test_operations_whose_task_does_not_fit_are_skipped() -> None:
    cluster, node = make_cluster(4, 100)
    root = Pool("root")
    big, small = op(1, root, 8, 1), op(2, root, 1, 1)
    run_tasks(small, 2)
    assert drf(root, cluster).assign(node) is small
    assert big not in list(drf(root, cluster).candidates(node))


def test_progressive_filling_seed002_example() -> None:
    # 3200 cpu, 6400 GiB; op1 1000 x <1,4>, op2 500 x <10,1>.
    root = Pool("root")
    o1, o2 = op(1, root, 1, 4, tasks=1000), op(2, root, 10, 1, tasks=500)
    fs = progressive_filling(root, [o1, o2], Resources(3200, 6400))
    # Both rise to 0.625 where op1's demand is met; op2 continues until the CPU saturates (220 tasks).
    assert fs.operations[1] == pytest.approx(0.625)
    assert fs.operations[2] == pytest.approx(2200 / 3200)
    assert fs.utilization.cpu == pytest.approx(1.0)
    assert fs.utilization.ram_gib == pytest.approx((4000 + 220) / 6400)


def test_progressive_filling_respects_weights_and_pool_tree() -> None:
    root = Pool("root")
    a = Pool("a", weight=2.0, parent=root)
    b = Pool("b", weight=1.0, parent=root)
    a1, a2 = op(1, a, 1, 1, tasks=10_000), op(2, a, 1, 1, tasks=10_000)
    b1 = op(3, b, 1, 1, tasks=10_000)
    fs = progressive_filling(root, [a1, a2, b1], Resources(100, 100))
    assert fs.pools["a"] == pytest.approx(2 / 3)
    assert fs.pools["b"] == pytest.approx(1 / 3)
    assert fs.operations[1] == pytest.approx(1 / 3)
    assert fs.operations[3] == pytest.approx(1 / 3)


def test_progressive_filling_redistributes_within_the_pool_first() -> None:
    root = Pool("root")
    a = Pool("a", parent=root)
    b = Pool("b", parent=root)
    small = op(1, a, 1, 1, tasks=10)  # capped at 0.10
    big = op(2, a, 1, 1, tasks=10_000)
    other = op(3, b, 1, 1, tasks=10_000)
    fs = progressive_filling(root, [small, big, other], Resources(100, 100))
    assert fs.operations[1] == pytest.approx(0.10)
    # Pool a keeps half the cluster: big takes what small leaves.
    assert fs.operations[2] == pytest.approx(0.40)
    assert fs.operations[3] == pytest.approx(0.50)


def test_assign_is_the_first_candidate_in_random_pool_trees() -> None:
    """``DRFPolicy.assign`` finds its operation without ``candidates``' generators: the same one,
    over nested, weighted, min-share and capped pools whose operations may not fit the node."""
    import random

    rng = random.Random(5)
    for _ in range(60):
        cluster, node = make_cluster(rng.choice([4, 16, 64]), rng.choice([8, 32, 128]))
        root = Pool("root")
        pools = [root]
        for p in range(rng.randint(1, 8)):
            parent = rng.choice(pools)
            capped = rng.random() < 0.3
            pools.append(Pool(
                f"p{p}", weight=rng.choice([0.5, 1.0, 2.0]), parent=parent,
                min_share=Resources(rng.choice([0, 8, 40]), rng.choice([0, 16])),
                max_cpu=rng.choice([2.0, 30.0]) if capped else None,
            ))
        ops = [op(i, rng.choice(pools), rng.choice([1, 2, 8, 20]), rng.choice([1, 4, 64]),
                  tasks=rng.randint(1, 30), weight=rng.choice([1.0, 3.0]))
               for i in range(rng.randint(1, 12))]
        policy = drf(root, cluster)
        for _ in range(40):  # start what it assigns until nothing fits: usage moves the order
            expected = next(policy.candidates(node), None)
            got = policy.assign(node)
            assert got is expected
            if got is None:
                break
            got.take_task(0.0)
        assert any(o.pending for o in ops) or policy.assign(node) is None


def test_a_pools_usage_at_a_level_is_the_sum_of_its_childrens_to_the_last_bit() -> None:
    """``_sum_at_level`` (the fair-share hot loop, ``_at`` inlined) gives exactly the floats of
    ``_sum_at`` over ``_child_share`` and ``_at``, on curves of pools as ``_build`` makes them."""
    import random

    from rm.scheduler import fair_share as fs

    rng = random.Random(11)
    cap = (64.0, 256.0)
    checked = 0
    for _ in range(30):
        root = Pool("root")
        pools = [root] + [Pool(f"p{p}", weight=rng.choice([0.5, 1.0, 3.0]), parent=root,
                               min_share=Resources(rng.choice([0, 6]), 0)) for p in range(rng.randint(2, 9))]
        for i in range(rng.randint(2, 14)):
            o = op(i, rng.choice(pools), rng.choice([1, 2, 5]), rng.choice([1, 3, 16]),
                   tasks=rng.randint(1, 40))
            run_tasks(o, rng.randint(0, o.total))
        tree, _ = fs._tree(root, [o for p in pools for o in p.operations], cap)
        fs._build(tree)
        for node in [tree, *tree.children]:
            kids = node.children
            if not kids or not node.levels:
                continue
            top = node.levels[-1][0]
            for lv in [lv for lv, _, _ in node.levels] + [rng.uniform(0, top * 1.2) for _ in range(20)]:
                reference = fs._sum_at(kids, [fs._child_share(k, lv) for k in kids])
                assert fs._sum_at_level(fs._specs(kids), lv) == reference
                checked += 1
    assert checked > 500


def test_each_pool_knows_its_children_with_pending_tasks_through_every_change() -> None:
    """DRF reads ``Pool.pending_children`` instead of scanning every child: it must always be the
    children with pending tasks, as tasks are queued, started, lost and requeued, and recovered."""
    import random

    rng = random.Random(5)
    root = Pool("root")
    pools = [root]
    for i in range(8):
        pools.append(Pool(f"p{i}", parent=rng.choice(pools)))
    ops: list[Operation] = []
    running: list[tuple[Operation, Task]] = []
    for step in range(1500):
        roll = rng.random()
        if roll < 0.1 or not ops:
            ops.append(op(len(ops), rng.choice(pools), 1, 1, tasks=rng.randint(0, 6)))
        elif roll < 0.6:
            o = rng.choice(ops)
            if o.pending:
                running.append((o, o.take_task(0.0)))
        elif roll < 0.95 and running:
            o, task = running.pop(rng.randrange(len(running)))
            o.requeue(task)
        else:
            o = op(len(ops), rng.choice(pools), 1, 1, tasks=5)
            ops.append(o)
            o.restore(completed={0}, running={1}, started_at=0.0)
        for p in pools:
            want = [c for c in p.children if c.pending_tasks > 0]
            assert sorted(p.pending_children, key=lambda c: c.rank) == want, (step, p)
            assert p.pending_tasks == sum(len(x.pending) for x in ops if p in x.pools_up)
    assert any(len(p.pending_children) > 1 for p in pools)
