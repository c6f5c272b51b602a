"""Two NodeManager rules pinned on a fake clock (issue 31 part 5): an idle delta node arms no
timer at all, and the RM's answer acknowledges a reported status by identity (the very object the
acknowledged report carried), while launches and kills are matched by container id. (The same
rule for a registration's answer is tests/system/test_reregistration.py's.)"""

from __future__ import annotations

from emulator.harness.eventlog import make_logger
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeManager
from nodemanager.stats import NodeCounters
from rm.protocol import (
    EXIT_SUCCESS,
    ContainerLaunch,
    Heartbeat,
    HeartbeatResponse,
    KillContainers,
    LaunchContainers,
    Register,
    RegisterResponse,
    Resources,
)
from tests.helpers import FakeClock, RecordingLink


def _delta_node() -> tuple[NodeManager, RecordingLink, FakeClock]:
    """A delta node with no ring (the NodeManager alone), registered at t=1.5, ticking at 11, 21..."""
    clock = FakeClock()
    link = RecordingLink()
    node = NodeManager(
        "n0", Resources(4, 8), HeartbeatConfig(mode="delta", interval_s=10.0), clock, link.send,
        NodeCounters(), make_logger(clock, None),
    )
    node.start(phase_s=1.0)
    clock.advance_to(1.5)
    assert isinstance(link.sent[-1], Register)
    node.receive(RegisterResponse(action="normal", machine_id=7))
    return node, link, clock


def _statuses(hb: Heartbeat) -> list[tuple[int, str, int]]:
    return [(s.container_id, s.state, s.exit_code) for s in hb.statuses]


def test_an_idle_delta_node_arms_no_timer() -> None:
    node, link, clock = _delta_node()
    clock.advance_to(11.5)  # the tick after registration finds nothing to say ...
    assert link.of(Heartbeat) == []
    assert clock.pending() == 0  # ... and arms nothing: no tick, no completion, no usage timer
    clock.advance_to(1000)
    assert link.of(Heartbeat) == [] and clock.pending() == 0

    # A change wakes it (a tick on its own phase and the completion timer) ...
    node.receive(LaunchContainers(containers=(ContainerLaunch(1, Resources(1, 1), 5.0),)))
    assert clock.pending() == 2
    clock.advance_to(1001.5)
    node.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
    clock.advance_to(1011.5)  # completed at 1005, reported at the tick of 1011
    assert _statuses(link.last(Heartbeat)) == [(1, "complete", EXIT_SUCCESS)]
    node.receive(HeartbeatResponse(action="normal", heartbeat_id=2))
    # ... and once everything is acknowledged it is idle again: nothing armed.
    clock.advance_to(1021.5)
    assert len(link.of(Heartbeat)) == 2
    assert clock.pending() == 0


def test_an_answer_acknowledges_the_status_object_it_answers_not_the_container_id() -> None:
    node, link, clock = _delta_node()
    node.receive(LaunchContainers(containers=(ContainerLaunch(1, Resources(1, 1), 14.5),)))  # ends at 16
    clock.advance_to(11.5)
    assert _statuses(link.last(Heartbeat)) == [(1, "running", EXIT_SUCCESS)]
    clock.advance_to(17)  # container 1 completed while the report of it running was unanswered
    node.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
    # The answer acknowledged "running", not the completion that replaced it under the same id:
    assert node.unreported_completions() == {1}
    clock.advance_to(21.5)
    assert _statuses(link.last(Heartbeat)) == [(1, "complete", EXIT_SUCCESS)]
    node.receive(HeartbeatResponse(action="normal", heartbeat_id=2))
    assert node.unreported_completions() == set()


def test_launches_and_kills_are_matched_by_container_id() -> None:
    node, link, clock = _delta_node()
    first = ContainerLaunch(1, Resources(1, 1), 3.0)
    node.receive(LaunchContainers(containers=(first,)))
    clock.advance_to(5)  # ended at 4.5; its completion is not acknowledged yet
    assert node.unreported_completions() == {1}
    # The same id again (the RM resending a launch): a duplicate, not a second container ...
    node.receive(LaunchContainers(containers=(ContainerLaunch(1, Resources(2, 2), 100.0),)))
    assert node.running_containers() == {} and node.used() == Resources(0, 0)
    # ... and a kill of an id that already ended changes nothing (its exit code stays success).
    node.receive(KillContainers(container_ids=(1, 99)))
    clock.advance_to(11.5)
    assert _statuses(link.last(Heartbeat)) == [(1, "complete", EXIT_SUCCESS)]
    node.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
    # Acknowledged: the id is free again, and a launch under it is a new container.
    node.receive(LaunchContainers(containers=(ContainerLaunch(1, Resources(2, 2), 100.0),)))
    assert node.running_containers().keys() == {1} and node.used() == Resources(2, 2)
