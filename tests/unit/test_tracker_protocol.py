"""The protocol rules of design.md §2 steps 1-2, fed message by message (no transport, no sleeps)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from rm.config import RMConfig
from rm.protocol import (
    EXIT_SUCCESS,
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    KillContainers,
    LaunchContainers,
    Register,
    RegisterResponse,
    Resources,
)
from rm.shell.manager import ResourceManager
from rm.state.operations import OperationSpec
from tests.helpers import FakeClock, RecordingLink, node_view, record, sync_rm


@pytest.fixture
def rm_clock() -> tuple[ResourceManager, FakeClock]:
    return sync_rm(RMConfig(credentials="s3cret"))


def register(
    rm: ResourceManager, address: str, cpu: float = 8, ram: float = 16, **kw: Any
) -> RecordingLink:
    link = RecordingLink()
    rm.receive(link, Register(address=address, resources=Resources(cpu, ram), credentials="s3cret", **kw))
    return link


def hb(mid: int, hid: int, statuses: tuple[ContainerStatus, ...] = (), healthy: bool = True) -> Heartbeat:
    return Heartbeat(machine_id=mid, heartbeat_id=hid, healthy=healthy, statuses=statuses, full=True)


def test_registration_assigns_smallest_free_machine_id(rm_clock: tuple[ResourceManager, FakeClock]) -> None:
    rm, _ = rm_clock
    ids = [register(rm, f"n{i}").last(RegisterResponse).machine_id for i in range(3)]
    assert ids == [1, 2, 3]
    rm.remove_node(record(rm, 2), "test")
    assert register(rm, "n9").last(RegisterResponse).machine_id == 2
    assert register(rm, "n10").last(RegisterResponse).machine_id == 4


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"credentials": "wrong"}, "bad credentials"),
        ({"resources": Resources(0.5, 16)}, "below the minimum allocation"),
    ],
)
def test_invalid_registration_is_told_to_shut_down(
    rm_clock: tuple[ResourceManager, FakeClock], kwargs: dict[str, object], reason: str
) -> None:
    rm, _ = rm_clock
    link = RecordingLink()
    fields: dict[str, object] = {"address": "bad", "resources": Resources(8, 16), "credentials": "s3cret"}
    fields.update(kwargs)
    rm.receive(link, Register(**fields))  # type: ignore[arg-type]
    resp = link.last(RegisterResponse)
    assert resp.action == "shutdown"
    assert reason in resp.reason
    assert rm.nodes_view() == []


def test_unknown_node_is_told_to_resync(rm_clock: tuple[ResourceManager, FakeClock]) -> None:
    rm, _ = rm_clock
    link = RecordingLink()
    rm.receive(link, hb(mid=42, hid=0))
    assert link.last(HeartbeatResponse).action == "resync"


def test_heartbeat_from_another_connection_is_refused(rm_clock: tuple[ResourceManager, FakeClock]) -> None:
    rm, _ = rm_clock
    register(rm, "n0")
    intruder = RecordingLink()
    rm.receive(intruder, hb(mid=1, hid=0))
    assert intruder.last(HeartbeatResponse).action == "resync"
    assert record(rm, 1).last_response_id == 0


def test_heartbeat_ids_advance_duplicates_are_answered_again_and_gaps_resync(
    rm_clock: tuple[ResourceManager, FakeClock],
) -> None:
    rm, _ = rm_clock
    link = register(rm, "n0")
    rm.receive(link, hb(1, 0))
    first = link.last(HeartbeatResponse)
    assert (first.action, first.heartbeat_id) == ("normal", 1)
    rm.receive(link, hb(1, 1))
    assert link.last(HeartbeatResponse).heartbeat_id == 2
    # The node lost response 2 and sends heartbeat 1 again: same answer, nothing reprocessed.
    before = rm.counters().heartbeats
    rm.receive(link, hb(1, 1))
    assert link.last(HeartbeatResponse).heartbeat_id == 2
    assert rm.counters().heartbeats == before
    rm.receive(link, hb(1, 7))
    assert link.last(HeartbeatResponse).action == "resync"
    rm.receive(link, hb(1, 0))
    assert link.last(HeartbeatResponse).action == "resync"


def submit(rm: ResourceManager, name: str, cpu: float, ram: float, n: int, pool: str = "p") -> None:
    if not rm.has_pool(pool):
        rm.add_pool(pool)
    rm.submit_operation(
        OperationSpec(name=name, pool=pool, demand=Resources(cpu, ram), durations=[100.0] * n)
    )


def test_node_update_allocates_and_completion_frees(rm_clock: tuple[ResourceManager, FakeClock]) -> None:
    rm, clock = rm_clock
    link = register(rm, "n0")  # registration is a node update too, but nothing is pending yet
    submit(rm, "op", 2, 4, 10)
    assert link.of(LaunchContainers) == []  # periodic mode: waits for the node's heartbeat
    rm.receive(link, hb(1, 0))
    launched = link.last(LaunchContainers).containers
    assert len(launched) == 4  # 8 cpu / 2, 16 GiB / 4
    assert node_view(rm, 1).free.cpu == 0
    running = tuple(ContainerStatus(c.container_id, "running") for c in launched)
    rm.receive(link, hb(1, 1, running))
    assert rm.counters().containers_completed == 0
    clock.set(100)
    done = (ContainerStatus(launched[0].container_id, "complete", EXIT_SUCCESS), *running[1:])
    rm.receive(link, hb(1, 2, done))
    assert rm.counters().containers_completed == 1
    # The freed slot was refilled by the same node update.
    assert len(link.of(LaunchContainers)) == 2
    op = rm.operations_view()[0]
    assert (op.completed, op.running, op.pending) == (1, 4, 5)


def test_a_report_sent_again_is_walked_again_once_a_container_in_it_ends(
    rm_clock: tuple[ResourceManager, FakeClock],
) -> None:
    """A periodic node resends the same report object; the tracker skips walking one it found
    nothing in. A container of it that the RM let go of since must still be named to kill."""
    rm, _ = rm_clock
    link = register(rm, "n0")
    submit(rm, "op", 2, 4, 10)
    rm.receive(link, hb(1, 0))
    launched = link.last(LaunchContainers).containers
    running = tuple(ContainerStatus(c.container_id, "running") for c in launched)
    rm.receive(link, hb(1, 1, running))  # confirms the launches
    rm.receive(link, hb(1, 2, running))  # nothing to do: remembered
    rm.receive(link, hb(1, 3, running))  # the same object again
    assert link.last(HeartbeatResponse).kill == ()
    gone = launched[0].container_id
    assert rm.end_container(1, gone)
    rm.receive(link, hb(1, 4, running))  # the node has not stopped it yet
    assert link.last(HeartbeatResponse).kill == (gone,)


def test_unknown_running_container_is_killed(rm_clock: tuple[ResourceManager, FakeClock]) -> None:
    rm, _ = rm_clock
    link = register(rm, "n0")
    rm.receive(link, hb(1, 0, (ContainerStatus(999, "running"),)))
    assert link.last(HeartbeatResponse).kill == (999,)


def test_unhealthy_node_gets_no_allocations_until_healthy(
    rm_clock: tuple[ResourceManager, FakeClock],
) -> None:
    rm, _ = rm_clock
    link = register(rm, "n0")
    rm.receive(link, hb(1, 0, healthy=False))
    assert rm.snapshot().capacity == Resources(0, 0)
    submit(rm, "op", 1, 1, 5)
    rm.receive(link, hb(1, 1, healthy=False))
    assert link.of(LaunchContainers) == []
    rm.receive(link, hb(1, 2, healthy=True))
    assert rm.snapshot().capacity == Resources(8, 16)
    assert len(link.last(LaunchContainers).containers) == 5


def test_reregistration_reconciles_containers(rm_clock: tuple[ResourceManager, FakeClock]) -> None:
    rm, _ = rm_clock
    link = register(rm, "n0")
    submit(rm, "op", 1, 1, 3)
    rm.receive(link, hb(1, 0))
    c1, c2, c3 = link.last(LaunchContainers).containers
    # The node resyncs: it still runs c1, c2 finished, c3 never started; it also runs a stray 77.
    statuses = (
        ContainerStatus(c1.container_id, "running"),
        ContainerStatus(c2.container_id, "complete", EXIT_SUCCESS),
        ContainerStatus(77, "running"),
    )
    link2 = register(rm, "n0", containers=statuses)
    assert link2.last(RegisterResponse).machine_id == 1
    assert link2.last(KillContainers).container_ids == (77,)
    op = rm.operations_view()[0]
    assert (op.completed, op.running) == (1, 2)  # c3's task requeued, then placed again
    assert c3.container_id not in {c.container_id for c in node_view(rm, 1).containers}


def test_a_registration_retry_is_answered_again_not_registered_anew(
    rm_clock: tuple[ResourceManager, FakeClock],
) -> None:
    """A registering storm answers late, and nodes retry: each retry handled as a registration
    changed the ring and requeued containers, so more retries came (issue 34)."""
    rm, _ = rm_clock
    link = RecordingLink()
    first = Register(address="n0", resources=Resources(8, 16), credentials="s3cret", attempt_at=2.0)
    rm.receive(link, first)
    rm.receive(link, first)  # the retry, on the same connection, before any heartbeat
    answers = link.of(RegisterResponse)
    assert [a.machine_id for a in answers] == [1, 1]
    assert (rm.counters().registrations, rm.counters().registrations_repeated) == (1, 1)
    # A new attempt (a resync) registers again; so does the same attempt on a new connection.
    rm.receive(link, msgspec.structs.replace(first, attempt_at=9.0))
    rm.receive(RecordingLink(), msgspec.structs.replace(first, attempt_at=9.0))
    assert (rm.counters().registrations, rm.counters().registrations_repeated) == (3, 1)


def test_a_late_copy_of_the_registration_after_a_heartbeat_registers_again(
    rm_clock: tuple[ResourceManager, FakeClock],
) -> None:
    rm, _ = rm_clock
    link = RecordingLink()
    reg = Register(address="n0", resources=Resources(8, 16), credentials="s3cret", attempt_at=2.0)
    rm.receive(link, reg)
    rm.receive(link, hb(1, 0))
    rm.receive(link, reg)
    assert (rm.counters().registrations, rm.counters().registrations_repeated) == (2, 0)
