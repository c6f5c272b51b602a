"""The RM's index of nodes with room: what a continuous-scheduling pass visits."""

from __future__ import annotations

import random

from rm.protocol import Resources
from rm.state.cluster import Allocation, Cluster
from rm.state.operations import Operation, OperationSpec, Pool
from tests.helpers import RecordingLink


def test_a_pass_visits_only_nodes_with_room_in_the_order_they_came() -> None:
    cluster = Cluster()
    nodes = [cluster.add(f"n{i}", Resources(4, 8), RecordingLink(), 0.0) for i in range(5)]
    op = Operation(1, OperationSpec(name="x", pool="root", demand=Resources(4, 2), durations=[9.0] * 9),
                   Pool("root"), 0.0)
    allocs = {}
    for k, node in enumerate(nodes[:4]):
        allocs[k] = Allocation(k, node, op, op.take_task(0.0), 0.0)
        cluster.place(allocs[k], 0.0)  # cpu full: no room
    assert cluster.with_room() == [nodes[4]]
    cluster.release(allocs[1], 1.0)
    assert cluster.with_room() == [nodes[1], nodes[4]]  # registration order, not release order
    cluster.remove(nodes[1], 2.0)
    back = cluster.add("n1", Resources(4, 8), RecordingLink(), 3.0)  # a new life: it comes last
    assert cluster.with_room() == [nodes[4], back]
    cluster.release(allocs[2], 4.0)
    assert cluster.with_room() == [nodes[2], nodes[4], back]


def test_a_pass_from_any_node_finds_exactly_the_nodes_where_a_demand_fits() -> None:
    # The index skips blocks by their largest free cpu and ram; against checking every node.
    rng = random.Random(7)
    cluster = Cluster()
    sizes = [Resources(rng.choice([2, 4, 8]), rng.choice([4, 8, 16])) for _ in range(400)]
    nodes = [cluster.add(f"n{i}", size, RecordingLink(), 0.0) for i, size in enumerate(sizes)]
    specs = [OperationSpec(name=f"o{k}", pool="root", demand=Resources(c, r), durations=[9.0] * 5000)
             for k, (c, r) in enumerate([(1, 1), (0.5, 3), (2, 2), (3, 1)])]
    ops = [Operation(k, spec, Pool("root"), 0.0) for k, spec in enumerate(specs)]
    live: list[Allocation] = []
    cid = 0
    for step in range(3000):
        if live and rng.random() < (0.45 if step > 1500 else 0.2):
            cluster.release(live.pop(rng.randrange(len(live))), float(step))
        else:
            node = rng.choice(nodes)
            op = rng.choice(ops)
            if node.fits(op.demand):
                cid += 1
                alloc = Allocation(cid, node, op, op.take_task(0.0), float(step))
                cluster.place(alloc, float(step))
                live.append(alloc)
        if step % 3 == 0 or step < 40:
            demands = [(op.demand.cpu, op.demand.ram_gib) for op in rng.sample(ops, rng.randint(1, 3))]
            start = rng.randint(0, 420)
            want = [n for n in cluster.with_room()
                    if n.seq >= start and any(n.fits(Resources(c, r)) for c, r in demands)]
            assert list(cluster.room_for(start, demands)) == want, step


def test_a_node_that_frees_more_than_its_block_held_is_found() -> None:
    cluster = Cluster()
    node = cluster.add("n0", Resources(8, 16), RecordingLink(), 0.0)
    op = Operation(1, OperationSpec(name="x", pool="root", demand=Resources(2, 2), durations=[9.0] * 9),
                   Pool("root"), 0.0)
    allocs = [Allocation(k, node, op, op.take_task(0.0), 0.0) for k in range(3)]
    for a in allocs:
        cluster.place(a, 0.0)
    assert list(cluster.room_for(0, [(2, 2)])) == [node]  # 2 cpu left
    assert list(cluster.room_for(0, [(4, 2)])) == []
    cluster.release(allocs[0], 1.0)  # 4 cpu left: more than the block's largest so far
    assert list(cluster.room_for(0, [(4, 2)])) == [node]


def test_registered_totals_follow_joins_leaves_and_health_between_snapshots() -> None:
    # registered() keeps its walk until membership or health changes: each change must show.
    cluster = Cluster()

    def walk() -> tuple[float, float, int]:
        nodes = list(cluster.nodes.values())
        return (sum(n.total.cpu for n in nodes), sum(n.total.ram_gib for n in nodes),
                sum(1 for n in nodes if not n.schedulable))

    assert cluster.registered() == (0.0, 0.0, 0)
    a = cluster.add("a", Resources(4, 8.5), RecordingLink(), 0.0)
    assert cluster.registered() == walk() == (4.0, 8.5, 0)
    b = cluster.add("b", Resources(2, 3), RecordingLink(), 1.0)
    assert cluster.registered() == walk() == (6.0, 11.5, 0)
    assert cluster.set_healthy(a, False, 2.0)
    assert cluster.registered() == walk() == (6.0, 11.5, 1)  # unhealthy: still registered
    assert not cluster.set_healthy(a, False, 2.5)
    assert cluster.set_healthy(a, True, 3.0)
    assert cluster.registered() == walk() == (6.0, 11.5, 0)
    cluster.remove(b, 4.0)
    assert cluster.registered() == walk() == (4.0, 8.5, 0)
    cluster.add("b", Resources(8, 16), RecordingLink(), 5.0)
    assert cluster.registered() == walk() == (12.0, 24.5, 0)
