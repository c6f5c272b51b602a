"""The NodeManager state machine, sans-IO: driven message by message on a fake clock (no event
loop), asserting the messages it sends."""

from __future__ import annotations

from collections.abc import Callable

from emulator.harness.eventlog import make_logger
from nodemanager.config import HeartbeatConfig, HeartbeatMode
from nodemanager.node import NodeManager, NodeState
from nodemanager.stats import NodeCounters
from rm.protocol import (
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


def drive(mode: HeartbeatMode, script: Callable[[NodeManager, RecordingLink, FakeClock], None]) -> None:
    """Start one node (first tick at t=1, interval 10 s) and run ``script(node, link, clock)``."""
    clock = FakeClock()
    link = RecordingLink()
    node = NodeManager(
        "n0", Resources(4, 8), HeartbeatConfig(mode=mode, interval_s=10.0), clock, link.send,
        NodeCounters(), make_logger(clock, None),
    )
    node.start(phase_s=1.0)
    script(node, link, clock)


def launch(cid: int, duration: float, cpu: float = 1, ram: float = 1) -> ContainerLaunch:
    return ContainerLaunch(cid, Resources(cpu, ram), duration)


def registered(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
    clock.advance_to(1.5)
    assert isinstance(link.sent[-1], Register)
    node.receive(RegisterResponse(action="normal", machine_id=7))


def test_periodic_node_reports_everything_and_keeps_heartbeat_ids() -> None:
    def script(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
        registered(node, link, clock)
        node.receive(LaunchContainers(containers=(launch(1, 25), launch(2, 100))))
        clock.advance_to(11.5)
        hb1 = link.last(Heartbeat)
        assert (hb1.machine_id, hb1.heartbeat_id, hb1.full) == (7, 0, True)
        assert [(s.container_id, s.state) for s in hb1.statuses] == [(1, "running"), (2, "running")]
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
        clock.advance_to(21.5)
        assert link.last(Heartbeat).heartbeat_id == 1
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=2))
        clock.advance_to(31.5)  # container 1 finished at t=26.5
        hb2 = link.last(Heartbeat)
        assert hb2.heartbeat_id == 2
        assert [(s.container_id, s.state) for s in hb2.statuses] == [(2, "running"), (1, "complete")]
        assert node.used() == Resources(1, 1)

    drive("periodic", script)


def test_one_heartbeat_in_flight_and_late_answers_ignored() -> None:
    def script(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
        registered(node, link, clock)
        clock.advance_to(31.5)  # ticks at 11, 21, 31: no answer, so only the first is sent
        assert len(link.of(Heartbeat)) == 1
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=5))  # not ours
        clock.advance_to(41.5)
        assert len(link.of(Heartbeat)) == 1
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
        clock.advance_to(51.5)
        assert [h.heartbeat_id for h in link.of(Heartbeat)] == [0, 1]

    drive("periodic", script)


def test_delta_node_sends_only_unacknowledged_changes() -> None:
    def script(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
        registered(node, link, clock)
        clock.advance_to(40)
        assert link.of(Heartbeat) == []
        node.receive(LaunchContainers(containers=(launch(1, 15),)))
        clock.advance_to(41.5)
        hb = link.last(Heartbeat)
        assert not hb.full and [(s.container_id, s.state) for s in hb.statuses] == [(1, "running")]
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
        clock.advance_to(51.5)
        assert len(link.of(Heartbeat)) == 1  # nothing new
        clock.advance_to(61.5)  # finished at 55
        assert [(s.container_id, s.state) for s in link.last(Heartbeat).statuses] == [(1, "complete")]
        node.set_healthy(False)
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=2))
        clock.advance_to(71.5)
        last = link.last(Heartbeat)
        assert last.statuses == () and last.healthy is False

    drive("delta", script)


def test_resync_reregisters_with_full_state() -> None:
    def script(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
        registered(node, link, clock)
        node.receive(LaunchContainers(containers=(launch(1, 1000), launch(2, 1000))))
        clock.advance_to(11.5)
        node.receive(HeartbeatResponse(action="resync", heartbeat_id=0))
        reg = link.last(Register)
        assert node.state is NodeState.REGISTERING
        assert sorted(s.container_id for s in reg.containers) == [1, 2]
        node.receive(RegisterResponse(action="normal", machine_id=3))
        clock.advance_to(21.5)
        hb = link.last(Heartbeat)
        assert (hb.machine_id, hb.heartbeat_id) == (3, 0)
        assert node.running_containers().keys() == {1, 2}  # containers survived the resync

    drive("periodic", script)


def test_shutdown_and_kill_and_overcommit() -> None:
    def script(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
        registered(node, link, clock)
        node.receive(LaunchContainers(containers=(launch(1, 100, cpu=3), launch(2, 100, cpu=3))))
        assert node.running_containers().keys() == {1}  # 2 would exceed 4 cpu: rejected
        node.receive(LaunchContainers(containers=(launch(1, 100, cpu=3),)))  # duplicate: ignored
        assert node.used() == Resources(3, 1)
        node.receive(KillContainers(container_ids=(1,)))
        assert node.used() == Resources(0, 0)
        clock.advance_to(11.5)
        node.receive(HeartbeatResponse(action="shutdown", heartbeat_id=1))
        assert node.state is NodeState.STOPPED
        sent = len(link.sent)
        clock.advance_to(100)
        assert len(link.sent) == sent

    drive("periodic", script)


def test_containers_share_one_completion_timer_and_end_on_time() -> None:
    """Twenty containers hold one pending timer between them (not one each); each still ends at
    its own time, a killed one is skipped, and a stopped node leaves no timer behind."""

    def script(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
        registered(node, link, clock)
        before = clock.pending()
        node.receive(LaunchContainers(containers=tuple(launch(c, 5.0 + c, 0.1, 0.1) for c in range(20))))
        assert clock.pending() == before + 1
        node.receive(KillContainers(container_ids=(0,)))  # the earliest: its entry is skipped
        clock.advance_to(1.5 + 5.5)
        assert set(node.running_containers()) == set(range(1, 20))
        assert node.unreported_completions() == {0}  # killed, not finished
        clock.advance_to(1.5 + 6.0)
        assert 1 not in node.running_containers() and 2 in node.running_containers()
        node.receive(LaunchContainers(containers=(launch(50, 0.25, 0.1, 0.1),)))  # earlier than all
        clock.advance_to(1.5 + 6.25 + 1e-6)
        assert 50 not in node.running_containers() and 2 in node.running_containers()
        clock.advance_to(1.5 + 23.5)
        assert set(node.running_containers()) == {19}
        node.stop()
        assert clock.pending() == 0

    drive("periodic", script)


def test_full_reports_follow_every_container_change() -> None:
    """The periodic report is reused between changes, never stale: a launch, a completion and
    its acknowledgement each show in the next heartbeat."""

    def states(link: RecordingLink) -> list[tuple[int, str]]:
        return [(s.container_id, s.state) for s in link.last(Heartbeat).statuses]

    def script(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
        registered(node, link, clock)
        node.receive(LaunchContainers(containers=(launch(1, 15),)))
        clock.advance_to(11.5)
        assert states(link) == [(1, "running")]
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=1, launch=(launch(2, 100),)))
        clock.advance_to(21.5)  # 1 ended at 16.5
        assert states(link) == [(2, "running"), (1, "complete")]
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=2))
        clock.advance_to(31.5)
        assert states(link) == [(2, "running")]
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=3, launch=(launch(3, 100),)))
        clock.advance_to(41.5)
        assert states(link) == [(2, "running"), (3, "running")]

    drive("periodic", script)


def test_an_answer_retires_only_the_changes_its_report_carried() -> None:
    """A completion and a launch that come while a report is in flight are not acknowledged by
    its answer: the next report carries them (periodic and delta alike)."""

    def states(link: RecordingLink) -> list[tuple[int, str]]:
        return [(s.container_id, s.state) for s in link.last(Heartbeat).statuses]

    def script_for(mode: HeartbeatMode) -> Callable[[NodeManager, RecordingLink, FakeClock], None]:
        def script(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
            registered(node, link, clock)
            node.receive(LaunchContainers(containers=(launch(1, 12),)))
            clock.advance_to(11.5)
            assert states(link) == [(1, "running")]
            clock.advance_to(14)  # 1 ended at 13.5, before the answer
            node.receive(LaunchContainers(containers=(launch(2, 100),)))
            node.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
            assert node.unreported_completions() == {1}
            clock.advance_to(21.5)
            assert sorted(states(link)) == [(1, "complete"), (2, "running")]
            node.receive(HeartbeatResponse(action="normal", heartbeat_id=2))
            assert node.unreported_completions() == set()
            clock.advance_to(31.5)
            if mode == "periodic":
                assert states(link) == [(2, "running")]
            else:
                assert len(link.of(Heartbeat)) == 2  # nothing left to report

        return script

    drive("periodic", script_for("periodic"))
    drive("delta", script_for("delta"))


def test_containers_due_at_one_instant_end_in_container_id_order() -> None:
    """Completions due at the same time end (and are reported) in container-id order, whatever
    order they were launched in: the completion heap's entries compare by time alone."""

    def script(node: NodeManager, link: RecordingLink, clock: FakeClock) -> None:
        registered(node, link, clock)
        ids = [5, 3, 9, 1, 7, 2, 8, 4, 6, 0, 11, 10]
        node.receive(LaunchContainers(containers=tuple(launch(c, 12.0, 0.1, 0.1) for c in ids)))
        node.receive(LaunchContainers(containers=(launch(20, 12.5, 0.1, 0.1),)))
        clock.advance_to(11.5)  # the running statuses, acknowledged: the next report has only ends
        node.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
        clock.advance_to(21.5)  # all but 20 ended at 13.5, 20 at 14
        ended = [s.container_id for s in link.last(Heartbeat).statuses if s.state == "complete"]
        assert ended == [*sorted(ids), 20]

    drive("delta", script)
