"""Re-registration loses nothing (issue 13, finding 1): a Register is in flight like a heartbeat,
and its answer acknowledges only what it carried. A container that completes, or a kill that
arrives, while the node re-registers is still reported afterwards.

Unit tests drive one NodeManager by hand; the runs restart the RM under 1 s of network latency
(the Register and its answer then take 2 s, so completions fall in between), with the invariant
checker on (tests/conftest.py): a completion the RM never hears of fails the end check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from emulator.harness.eventlog import make_logger
from emulator.harness.nodeproc import NodeProcess
from emulator.harness.runner import RunHandle, run_scenario
from emulator.results.summary import build_summary
from emulator.scenario.loader import scenario_from_dict
from emulator.time.pacing import PacedClock
from emulator.web.control import Controller
from emulator.web.state import LiveRun
from nodemanager.config import HeartbeatConfig, HeartbeatMode
from nodemanager.node import NodeManager, NodeState
from nodemanager.stats import NodeCounters
from rm.protocol import (
    EXIT_KILLED,
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
from tests.helpers import FakeClock, RecordingLink, run_with_handle
from tests.webrun import small_scenario

MODES: list[HeartbeatMode] = ["periodic", "delta"]


def node_on(mode: HeartbeatMode, clock: FakeClock, link: RecordingLink) -> NodeManager:
    node = NodeManager(
        "n0", Resources(4, 8), HeartbeatConfig(mode=mode, interval_s=10.0), clock, link.send,
        NodeCounters(), make_logger(clock, None),
    )
    node.start(phase_s=1.0)
    clock.advance_to(1.5)
    node.receive(RegisterResponse(action="normal", machine_id=7))
    return node


def acked_running(
    node: NodeManager, link: RecordingLink, clock: FakeClock, *launches: ContainerLaunch
) -> None:
    """Launch containers and let one heartbeat acknowledge them as running."""
    node.receive(LaunchContainers(containers=launches))
    clock.advance_to(11.5)
    hb = link.last(Heartbeat)
    node.receive(HeartbeatResponse(action="normal", heartbeat_id=hb.heartbeat_id + 1))


def completes_in_next_heartbeats(node: NodeManager, link: RecordingLink, clock: FakeClock, cid: int,
                                 code: int, until: float = 60.0) -> None:
    sent = len(link.sent)
    clock.advance_to(until)
    reported = [
        (s.container_id, s.exit_code) for hb in link.sent[sent:] if isinstance(hb, Heartbeat)
        for s in hb.statuses if s.state == "complete"
    ]
    assert (cid, code) in reported, f"completion of {cid} never reported; sent {link.sent[sent:]}"


@pytest.mark.parametrize("mode", MODES)
def test_a_completion_while_the_register_is_in_flight_is_reported(mode: HeartbeatMode) -> None:
    clock, link = FakeClock(), RecordingLink()
    node = node_on(mode, clock, link)
    acked_running(node, link, clock, ContainerLaunch(1, Resources(1, 1), 13.0))  # ends at 14.5
    clock.advance_to(13.0)
    node.resync()  # the RM restarted: the Register carries container 1 as running
    reg = link.last(Register)
    assert [(s.container_id, s.state) for s in reg.containers] == [(1, "running")]
    clock.advance_to(15.0)  # container 1 completes before the answer
    node.receive(RegisterResponse(action="normal", machine_id=3))
    assert node.unreported_completions() == {1}
    completes_in_next_heartbeats(node, link, clock, 1, EXIT_SUCCESS)


@pytest.mark.parametrize("mode", MODES)
def test_a_kill_while_registering_is_reported(mode: HeartbeatMode) -> None:
    clock, link = FakeClock(), RecordingLink()
    node = node_on(mode, clock, link)
    acked_running(node, link, clock, ContainerLaunch(1, Resources(1, 1), 500.0))
    node.resync()
    node.receive(KillContainers(container_ids=(1,)))  # e.g. preempted; overtakes the answer
    assert node.state is NodeState.REGISTERING and node.running_containers() == {}
    node.receive(RegisterResponse(action="normal", machine_id=3))
    completes_in_next_heartbeats(node, link, clock, 1, EXIT_KILLED)


def test_what_the_register_carried_is_acknowledged_and_not_sent_again() -> None:
    clock, link = FakeClock(), RecordingLink()
    node = node_on("delta", clock, link)
    node.receive(LaunchContainers(containers=(ContainerLaunch(1, Resources(1, 1), 3.0),)))
    clock.advance_to(5.0)  # ended at 4.5, unacknowledged: the Register carries the completion
    node.resync()
    assert [(s.container_id, s.state) for s in link.last(Register).containers] == [(1, "complete")]
    node.receive(RegisterResponse(action="normal", machine_id=3))
    assert node.unreported_completions() == set()
    sent = len(link.sent)
    clock.advance_to(100.0)
    assert not [m for m in link.sent[sent:] if isinstance(m, Heartbeat)]  # idle: nothing to say


def test_a_retried_register_acknowledges_only_what_every_copy_carried() -> None:
    """The answer cannot say which Register it answers: a completion that only the retry carried
    may have been lost with it, so it is reported again (a duplicate the RM ignores)."""
    clock, link = FakeClock(), RecordingLink()
    node = node_on("delta", clock, link)
    acked_running(node, link, clock, ContainerLaunch(1, Resources(1, 1), 13.0))  # ends at 14.5
    node.resync()  # at 11.5, container 1 running
    clock.advance_to(200.0)  # unanswered: retried after the rpc timeout, now carrying the completion
    regs = link.of(Register)
    assert [s.state for s in regs[-2].containers] == ["running"]
    assert [s.state for s in regs[-1].containers] == ["complete"]
    node.receive(RegisterResponse(action="normal", machine_id=3))  # an answer to the first copy?
    completes_in_next_heartbeats(node, link, clock, 1, EXIT_SUCCESS, until=260.0)


def test_health_changed_while_registering_is_reported() -> None:
    clock, link = FakeClock(), RecordingLink()
    node = node_on("delta", clock, link)
    node.resync()
    node.set_healthy(False)  # after the Register (healthy) left
    node.receive(RegisterResponse(action="normal", machine_id=3))
    clock.advance_to(30.0)
    assert link.last(Heartbeat).healthy is False


# ---- whole runs -----------------------------------------------------------------------------


def restart_under_latency(mode: str, seed: int, faults: list[dict[str, Any]] | None = None,
                          **sections: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "cluster": {"nodes": [{"count": 20, "cpu": 8, "ram_gib": 16}]},
        "heartbeat": {"mode": mode, "interval_s": 3},
        "rm": {"expiry_s": 60},
        "transport": {"latency_s": 1.0},
        "workload": {"operations": [
            {"name": "a", "cpu": 1, "ram_gib": 2, "job_count": 60, "seconds_mean": 40,
             "seconds_deviation": 10, "loop": True},
            {"name": "b", "cpu": 2, "ram_gib": 1, "job_count": 40, "seconds_mean": 90,
             "seconds_deviation": 20, "loop": True},
        ]},
        "faults": faults if faults is not None else [{"kind": "rm_restart", "at_s": 200, "downtime_s": 8}],
        "run": {"duration_s": 400, "seed": seed},
        **sections,
    }
    out, _ = run_with_handle(scenario_from_dict(data, "<test>"))
    assert out.invariants is not None and out.invariants.end_check == "passed", out.invariants
    return build_summary(out)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", [2, 3])
def test_rm_restart_under_latency_loses_no_completion(mode: str, seed: int) -> None:
    summary = restart_under_latency(mode, seed)
    assert summary["tasks_lost"] == 0 and summary["tasks_duplicated"] == 0
    assert len(summary["rm_restarts"]) == 1


@pytest.mark.parametrize("mode", MODES)
def test_rm_stall_and_node_pauses_across_a_restart_lose_nothing(mode: str) -> None:
    summary = restart_under_latency(mode, 4, faults=[
        {"kind": "rm_stall", "at_s": 195, "duration_s": 8},
        {"kind": "pause", "at_s": 198, "fraction": 0.3, "duration_s": 4, "duration_max_s": 15},
        {"kind": "rm_restart", "at_s": 200, "downtime_s": 8},
    ])
    assert summary["tasks_lost"] == 0 and summary["tasks_duplicated"] == 0


# ---- a paused node registers only when its loop runs again ----------------------------------


def test_a_paused_node_sends_no_register_during_its_stall() -> None:
    """The RM restarts while a node's event loop is stalled: the reconnect's resync waits in the
    process's loop (``ProcessGate``), so the node sends nothing until the stall ends, then
    registers with everything it holds."""
    sent: list[tuple[float, str, object]] = []
    original: Callable[[NodeProcess, object], None] = NodeProcess.send_to_rm

    def spy(self: NodeProcess, msg: object) -> None:
        sent.append((self.node._clock.now(), self.address, msg))
        original(self, msg)

    data: dict[str, Any] = {
        "cluster": {"nodes": [{"count": 6, "cpu": 8, "ram_gib": 16}]},
        "heartbeat": {"mode": "delta", "interval_s": 3},
        "workload": {"operations": [{"name": "a", "cpu": 1, "ram_gib": 2, "job_count": 30,
                                     "seconds_mean": 20, "seconds_deviation": 5, "loop": True}]},
        "faults": [
            {"kind": "pause", "at_s": 50, "nodes": ["node-0-00002"], "duration_s": 30},
            {"kind": "rm_restart", "at_s": 55, "downtime_s": 5},
        ],
        "run": {"duration_s": 120, "seed": 3},
    }
    mp = pytest.MonkeyPatch()
    mp.setattr(NodeProcess, "send_to_rm", spy)
    try:
        out, handle = run_with_handle(scenario_from_dict(data, "<test>"))
    finally:
        mp.undo()
    regs = [(t, a) for t, a, m in sent if isinstance(m, Register)]
    paused = [t for t, a in regs if a == "node-0-00002" and t > 50]
    others = [t for t, a in regs if a != "node-0-00002" and t > 55]
    assert others and min(others) < 62  # the others re-registered soon after the RM came back
    assert paused and min(paused) >= 80.0  # not before its loop ran again ...
    proc = next(p for p in handle.side.hosting.processes if p.address == "node-0-00002")  # type: ignore[attr-defined]
    assert proc.state is NodeState.RUNNING  # ... and then it is back
    assert out.invariants is not None and out.invariants.end_check == "passed"


def test_a_node_paused_from_the_status_page_across_an_rm_restart_comes_back() -> None:
    """Finding 9: the status page's pause (``Controller.pause_nodes``, a paced real-time run)
    spanning an RM restart. The node's reconnect and registration wait for its loop; then it is
    registered again, known to the RM, and the page no longer lists it as paused."""
    data = msgspec.to_builtins(small_scenario(nodes=6, duration_s=60.0, speed=40.0))
    data["faults"] = [{"kind": "rm_restart", "at_s": 20, "downtime_s": 3}]
    sc = scenario_from_dict(data, "<test>")
    live = LiveRun(sc, allow_control=True)
    target = "n-0-00003"

    async def main() -> RunHandle:
        clock = PacedClock(asyncio.get_running_loop(), sc.run.speed)
        handles: list[RunHandle] = []

        def attach(handle: RunHandle) -> None:
            handles.append(handle)
            live.attach(handle.side, handle.clock, handle.log, handle.hosting.processes)
            clock.call_later(18.0, Controller(live).pause_nodes, [target], 10.0)

        await run_scenario(sc, clock, None, None, on_start=attach)
        return handles[0]

    handle = asyncio.run(main())
    proc = handle.hosting.by_address[target]
    assert proc.state is NodeState.RUNNING and not proc.paused
    assert target in {n.address for n in handle.side.rm.nodes_view()}
    assert target not in live.injected


def test_registration_retries_carry_their_attempt_and_a_resync_starts_a_new_one() -> None:
    clock = FakeClock()
    link = RecordingLink()
    node = NodeManager(
        "n0", Resources(4, 8), HeartbeatConfig(mode="delta", interval_s=1.0, rpc_timeout_s=2.0), clock,
        link.send, NodeCounters(), make_logger(clock, None),
    )
    node.start(phase_s=0.5)
    clock.advance_to(6.0)  # no answer: retried after 2 s, twice
    regs = link.of(Register)
    assert len(regs) == 3 and {r.attempt_at for r in regs} == {0.5}
    node.receive(RegisterResponse(action="normal", machine_id=7))
    node.resync()
    assert link.of(Register)[-1].attempt_at == 6.0
