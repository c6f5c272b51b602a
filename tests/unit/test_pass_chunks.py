"""Continuous-scheduling passes in bounded chunks (issue 34): a pass over many nodes yields to the
events queued meanwhile, resumes at the node where it stopped, and places what one unbounded pass
places. A real RM (delta mode: continuous scheduling) on the fake virtual clock."""

from __future__ import annotations

import random
from collections.abc import Iterator

from rm.config import RMConfig, ServiceTimeConfig
from rm.protocol import LaunchContainers, Register, Resources
from rm.queues.dispatcher import Handler
from rm.scheduler.config import PolicyName, SchedulerConfig
from rm.scheduler.loop import NodeUpdate, SchedulerItem
from rm.shell.manager import ResourceManager
from rm.state.cluster import NodeRecord
from rm.state.operations import OperationSpec
from rm.state.room_index import Demand
from tests.helpers import FakeClock, RecordingLink, sync_rm


def _rm(
    budget: int, nodes: list[Resources], service: ServiceTimeConfig | None = None,
    scheduler: SchedulerConfig | None = None,
) -> tuple[ResourceManager, FakeClock, list[RecordingLink]]:
    config = RMConfig(pass_budget=budget, service_time=service or ServiceTimeConfig())
    rm, clock = sync_rm(config, scheduler, mode="delta")
    links = []
    for i, total in enumerate(nodes):
        link = RecordingLink()
        rm.receive(link, Register(address=f"n{i}", resources=total))
        links.append(link)
    clock.advance_to(1.0)  # registrations (and their empty node updates) are over
    return rm, clock, links


def _submit(rm: ResourceManager, name: str, demand: Resources, tasks: int) -> None:
    rm.submit_operation(OperationSpec(name=name, pool="root", demand=demand, durations=[100.0] * tasks))


def _record_items(rm: ResourceManager) -> list[str]:
    """The scheduler events in the order they are handled."""
    seen: list[str] = []

    def wrap(handler: Handler[SchedulerItem]) -> Handler[SchedulerItem]:
        def recorded(item: SchedulerItem) -> float | None:
            seen.append(type(item).__name__)
            return handler(item)
        return recorded

    rm.instrument(lambda h: h, wrap)
    return seen


def _placed(rm: ResourceManager) -> list[list[tuple[int, str, int]]]:
    """Per node (in registration order): (container id, operation, task) of what runs there."""
    nodes = sorted(rm._life.cluster.nodes.values(), key=lambda n: n.seq)
    return [sorted((cid, a.op.name, a.task.index) for cid, a in n.containers.items()) for n in nodes]


def _count(rm: ResourceManager, name: str | None = None) -> int:
    return sum(1 for x in _placed(rm) for _, op, _ in x if name is None or op == name)


def test_a_pass_stops_at_its_budget_and_its_continuation_goes_through_the_clock() -> None:
    rm, clock, links = _rm(budget=10, nodes=[Resources(4, 8)] * 100)
    _submit(rm, "big", Resources(1, 2), 400)
    # One chunk so far: 10 units of work (nodes offered + tasks started), a node's fill whole.
    placed = _count(rm)
    assert 0 < placed <= 10 + 4
    assert sum(len(link.of(LaunchContainers)) for link in links) == placed // 4
    assert clock.pending() > 0  # the rest waits for the event loop, not run in this call
    clock.advance_to(2.0)
    assert _count(rm) == 400


def test_the_continuation_runs_after_events_queued_while_its_chunk_was_served() -> None:
    # With a service-time model a chunk keeps the scheduler busy; a node update arriving then is
    # handled before the pass goes on.
    service = ServiceTimeConfig(node_update_us=100.0, allocation_us=1000.0)
    rm, clock, _ = _rm(budget=8, nodes=[Resources(4, 8)] * 20, service=service)
    seen = _record_items(rm)
    _submit(rm, "big", Resources(1, 2), 80)
    assert seen == ["SchedulePass"]
    node = rm.node(20)
    assert node is not None
    clock.advance_to(clock.now() + 0.001)  # inside the first chunk's service time (~8 ms)
    rm.events.submit(NodeUpdate(node))
    clock.advance_to(clock.now() + 10.0)
    assert seen[:3] == ["SchedulePass", "NodeUpdate", "SchedulePass"]
    assert _count(rm) == 80


def test_a_continuation_resumes_at_the_node_where_its_chunk_stopped() -> None:
    rm, clock, _ = _rm(budget=12, nodes=[Resources(4, 8)] * 200)
    life = rm._life
    starts: list[int] = []
    offered: list[int] = []
    room_for = life.cluster.room_for
    begin_fill = life.policy.begin_fill

    def spy_room(start: int, demands: list[Demand]) -> Iterator[NodeRecord]:
        starts.append(start)
        return room_for(start, demands)

    def spy_fill(node: NodeRecord) -> None:
        offered.append(node.seq)
        begin_fill(node)

    life.cluster.room_for = spy_room  # type: ignore[method-assign]
    life.policy.begin_fill = spy_fill  # type: ignore[method-assign]
    _submit(rm, "big", Resources(1, 2), 300)
    clock.advance_to(5.0)
    assert len(starts) > 10
    assert offered == sorted(set(offered))  # every node offered once, in registration order
    # Each chunk starts at the first node the one before it did not offer.
    assert starts[0] == 0
    assert all(s in offered for s in starts[1:])
    assert [offered.index(s) for s in starts[1:]] == sorted(offered.index(s) for s in starts[1:])
    assert _count(rm) == 300


def test_a_pass_requested_while_one_is_under_way_covers_what_changed_behind_it() -> None:
    # Three big nodes (room for one 40 GiB task each), then small ones.
    rm, clock, _ = _rm(budget=6, nodes=[Resources(16, 64)] * 3 + [Resources(4, 8)] * 30)
    _submit(rm, "threes", Resources(3, 2), 40)
    first = _placed(rm)[0]
    assert len(first) == 5 and _count(rm) == 5  # the first chunk filled the first node only
    _submit(rm, "wide", Resources(1, 40), 3)  # one of them fits only on the first node
    clock.advance_to(5.0)
    assert _count(rm, "wide") == 3
    assert [op for _, op, _ in _placed(rm)[0]] == ["threes"] * 5 + ["wide"]


def _seeded_run(budget: int, seed: int, policy: PolicyName) -> list[list[tuple[int, str, int]]]:
    rng = random.Random(seed)
    nodes = [Resources(rng.choice([4, 8, 16]), rng.choice([8, 16, 32])) for _ in range(150)]
    rm, clock, _ = _rm(budget=budget, nodes=nodes, scheduler=SchedulerConfig(policy=policy))
    for k in range(8):
        demand = Resources(rng.choice([0.5, 1, 2, 3]), rng.choice([1, 2, 4, 6]))
        _submit(rm, f"op{k}", demand, rng.randint(20, 300))
        clock.advance_to(clock.now() + 10.0)
    return _placed(rm)


def test_a_chunked_pass_places_exactly_what_an_unbounded_pass_places() -> None:
    for seed in (1, 2, 3):
        for policy in ("drf", "fifo", "packing"):
            unbounded = _seeded_run(10**9, seed, policy)
            assert sum(map(len, unbounded)) > 500
            assert _seeded_run(3, seed, policy) == unbounded, (seed, policy)


def test_nodes_where_no_waiting_task_fits_are_not_offered() -> None:
    # 1-cpu nodes never fit a 2-cpu task: a pass skips them without asking the policy.
    rm, clock, _ = _rm(budget=10**9, nodes=[Resources(1, 8)] * 300 + [Resources(4, 8)] * 3)
    offered: list[int] = []
    begin_fill = rm._life.policy.begin_fill

    def spy_fill(node: NodeRecord) -> None:
        offered.append(node.seq)
        begin_fill(node)

    rm._life.policy.begin_fill = spy_fill  # type: ignore[method-assign]
    _submit(rm, "wide", Resources(2, 2), 100)
    clock.advance_to(5.0)
    assert offered == [301, 302, 303]
    assert _count(rm) == 6
