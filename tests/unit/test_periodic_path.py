"""The periodic heartbeat path's shortcuts keep what the general path did: a running periodic
node's tick (``NodeManager._periodic_tick``) sends what ``_tick`` through ``_heartbeat`` sent, at
the same times, with the same timing probes; the tracker answers repeats, duplicates and
out-of-order ids as before; a node update with no task pending begins no fill."""

from __future__ import annotations

import random
from typing import Any

from emulator.harness.eventlog import make_logger
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeManager
from nodemanager.stats import NodeCounters
from nodemanager.usage import NodeUsage
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
from rm.scheduler.config import SchedulerConfig
from rm.state.cluster import NodeRecord
from rm.state.operations import OperationSpec
from tests.helpers import FakeClock, RecordingLink, sync_rm


class Probe:
    """A timing probe that keeps every call."""

    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls

    def tick(self, late_s: float) -> None:
        self.calls.append(("tick", late_s))

    def sent(self, t: float) -> None:
        self.calls.append(("sent", t))

    def answered(self, sent_at: float, t: float) -> None:
        self.calls.append(("answered", sent_at, t))


class CountingNode(NodeManager):
    __slots__ = ("fast_ticks",)
    fast_ticks: int

    def _periodic_tick(self) -> None:
        self.fast_ticks += 1
        super()._periodic_tick()


def _run(general: bool, seed: int) -> tuple[list[tuple[Any, ...]], int]:
    """A node driven by a random RM for 300 intervals; what it sent and probed, with times.
    ``general``: an (empty) usage table keeps every tick on ``_tick``'s general path."""
    clock = FakeClock()
    seen: list[tuple[Any, ...]] = []
    node = CountingNode(
        "n0", Resources(8, 16), HeartbeatConfig(mode="periodic", interval_s=3.0, rpc_timeout_s=7.0),
        clock, lambda msg: seen.append((clock.now(), msg)), NodeCounters(), make_logger(clock, None),
        timing=Probe(seen),
    )
    node.fast_ticks = 0
    if general:
        node._usage = NodeUsage(node.resources, node._stats.usage, 0.1)
    rng = random.Random(seed)
    node.start(phase_s=0.7)
    clock.advance_to(1.0)
    node.receive(RegisterResponse(action="normal", machine_id=3))
    cid = 0
    t = 1.0
    for _ in range(300):
        t += rng.choice((0.5, 1.5, 3.0, 3.0, 3.0, 4.5))
        clock.advance_to(t)
        sent = [e[1] for e in seen if isinstance(e[1], Heartbeat)]
        roll = rng.random()
        if not sent or roll < 0.15:
            continue  # no answer: the next ticks find it in flight, then resend it
        hb = sent[-1]
        if roll < 0.2:
            node.receive(HeartbeatResponse(action="normal", heartbeat_id=hb.heartbeat_id))  # stale
        elif roll < 0.25:
            node.set_healthy(not node.healthy)
        elif roll < 0.28:
            node.receive(HeartbeatResponse(action="resync", heartbeat_id=hb.heartbeat_id))
            node.receive(RegisterResponse(action="normal", machine_id=3))
        else:
            launch = tuple(
                ContainerLaunch(cid := cid + 1, Resources(1, 2), rng.uniform(1.0, 20.0))
                for _ in range(rng.choice((0, 0, 0, 1, 2)))
            )
            running = list(node.running_containers())
            kill = (rng.choice(running),) if running and rng.random() < 0.1 else ()
            node.receive(
                HeartbeatResponse(action="normal", heartbeat_id=hb.heartbeat_id + 1, launch=launch, kill=kill)
            )
            if rng.random() < 0.05 and running:
                node.receive(KillContainers(container_ids=(running[0],)))
            if rng.random() < 0.05:
                pushed = ContainerLaunch(cid := cid + 1, Resources(1, 2), 5.0)
                node.receive(LaunchContainers(containers=(pushed,)))
    return seen, node.fast_ticks


def test_the_periodic_tick_sends_and_probes_what_the_general_path_does() -> None:
    for seed in (1, 2, 3):
        (fast, shortcuts), (general, none) = _run(False, seed), _run(True, seed)
        assert shortcuts > 100 and none == 0
        assert sum(isinstance(e[1], Heartbeat) for e in fast) > 150
        assert fast == general


def test_a_node_update_begins_a_fill_only_while_a_task_is_pending() -> None:
    rm, _ = sync_rm(scheduler=SchedulerConfig(policy="packing"))
    fills: list[int] = []
    begin_fill = rm._life.policy.begin_fill

    def spy(node: NodeRecord) -> None:
        fills.append(node.machine_id)
        begin_fill(node)

    rm._life.policy.begin_fill = spy  # type: ignore[method-assign]
    link = RecordingLink()
    rm.receive(link, Register(address="n0", resources=Resources(4, 8)))
    mid = link.last(RegisterResponse).machine_id
    beat = 0

    def heartbeat() -> None:
        nonlocal beat
        rm.receive(link, Heartbeat(machine_id=mid, heartbeat_id=beat, healthy=True, statuses=(), full=True))
        beat += 1

    heartbeat()
    heartbeat()
    assert fills == []  # nothing pending: nothing offered, no fill begun
    rm.submit_operation(OperationSpec(name="op", pool="root", demand=Resources(1, 2), durations=[50.0] * 6))
    for _ in range(6):  # one start per update (packing's rule) until the node is full
        heartbeat()
    assert fills == [mid] * 6  # offered every time while tasks are pending, full or not
    assert sum(len(m.containers) for m in link.of(LaunchContainers)) == 4  # the node's room


class ReportingLink(RecordingLink):
    """A link with a way out for the common periodic report (as ``MeteredLink.send_report``)."""

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[Heartbeat] = []

    def send_report(self, hb: Heartbeat) -> None:
        self.reports.append(hb)


def test_a_node_process_reports_through_its_current_links_send_report() -> None:
    """The common tick's report goes through the link's ``send_report`` where it has one, anything
    else through ``send``; a new link without one (a reconnect) takes the reports through ``send``."""
    from emulator.harness.nodeproc import NodeProcess

    clock = FakeClock()
    proc = NodeProcess("n0", Resources(8, 16), HeartbeatConfig(mode="periodic", interval_s=3.0), clock,
                       NodeCounters(), make_logger(clock, None), phase_s=0.5)
    first = ReportingLink()
    proc.attach(first)
    proc.start()
    clock.advance_to(1.0)
    proc.receive(RegisterResponse(action="normal", machine_id=1))
    clock.advance_to(4.0)
    assert len(first.of(Register)) == 1 and not first.of(Heartbeat)
    assert [hb.heartbeat_id for hb in first.reports] == [0]
    second = RecordingLink()
    proc.attach(second)
    proc.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
    clock.advance_to(7.0)
    assert [hb.heartbeat_id for hb in second.of(Heartbeat)] == [1] and len(first.reports) == 1
