"""The RM's index of nodes with room: what a continuous-scheduling pass visits."""

from __future__ import annotations

from rm.cluster import Allocation, Cluster
from rm.operations import Operation, OperationSpec, Pool
from rm.protocol import Resources
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
