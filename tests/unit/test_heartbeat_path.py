"""The periodic heartbeat path's shortcuts keep what they stand for: on-time ticks counted once and
folded into both lateness histograms, a heartbeat's answer handed to the node directly yet held
while its process is paused, and the in-memory network delivering to an RM given after it."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.harness.eventlog import make_logger
from emulator.harness.nodeproc import NodeProcess
from emulator.measure.timing import HeartbeatTiming
from emulator.transport.memory import MemoryNetwork
from nodemanager.config import HeartbeatConfig
from nodemanager.stats import NodeCounters
from rm.protocol import Heartbeat, HeartbeatResponse, RegisterResponse, Resources
from rm.queues.histogram import LogHistogram
from tests.helpers import FakeClock, RecordingLink


def _state(h: LogHistogram) -> tuple[int, int, float, float, list[float]]:
    return h.count, h.zeros, h.sum, h.max, [h.quantile(q) for q in (0.1, 0.5, 0.9, 0.99)]


def test_on_time_ticks_land_in_both_histograms_as_one_add_each_would() -> None:
    timing = HeartbeatTiming()
    lateness, own = LogHistogram(), LogHistogram()
    ticks = [0.0, 0.0, 0.25, 0.0, 1e-12, 0.0, 3.5, 0.0]
    for late in ticks[:4]:
        timing.tick(late)
        lateness.add(late)
        own.add(late)
    assert _state(timing.lateness) == _state(lateness)  # read between ticks: folded once
    timing.held_tick(0.0)
    lateness.add(0.0)
    timing.on_time += 2  # a node host's probe counts an on-time tick itself
    for h in (lateness, own):
        h.add(0.0)
        h.add(0.0)
    for late in ticks[4:]:
        timing.tick(late)
        lateness.add(late)
        own.add(late)
    assert _state(timing.lateness) == _state(lateness)
    assert _state(timing.own_lateness) == _state(own)
    assert timing.summary().count == len(ticks) + 3 and timing.own_summary().count == len(ticks) + 2
    timing.tick(0.0)
    timing.restart_lateness()  # the warm-up's on-time ticks go with it
    timing.tick(0.0)
    assert timing.summary().count == 1 and timing.own_summary().count == 1


def _registered_node(
    clock: FakeClock, counters: NodeCounters, timing: HeartbeatTiming | None = None
) -> tuple[NodeProcess, RecordingLink]:
    link = RecordingLink()
    proc = NodeProcess(
        "n", Resources(4, 8), HeartbeatConfig(interval_s=10.0), clock, counters,
        make_logger(clock, None), phase_s=1.0, timing=timing,
    )
    proc.attach(link)
    proc.start()
    clock.advance_to(1.5)
    proc.receive(RegisterResponse(action="normal", machine_id=1))
    return proc, link


def test_a_heartbeat_answer_waits_for_a_paused_process_and_counts_when_it_resumes() -> None:
    clock = FakeClock()
    timing = HeartbeatTiming(interval_s=10.0)
    counters = NodeCounters()
    proc, link = _registered_node(clock, counters, timing)
    clock.advance_to(12.0)  # the tick at 11 sent heartbeat 0
    hb = link.last(Heartbeat)
    proc.pause(5.0)  # 12 .. 17
    proc.receive(HeartbeatResponse(action="normal", heartbeat_id=hb.heartbeat_id + 1))
    assert counters.heartbeat_responses == 0 and timing.answered_in(2) == 0  # held, not handled
    clock.advance_to(18.0)
    assert counters.heartbeat_responses == 1
    assert timing.answered_in(2) == 1  # sent at 11 (interval 2), answered at 17: within one interval
    clock.advance_to(22.0)  # the next tick sends heartbeat 1: the answer was taken
    assert link.last(Heartbeat).heartbeat_id == hb.heartbeat_id + 1


def test_a_heartbeat_answer_to_a_running_process_is_handled_at_once() -> None:
    clock = FakeClock()
    counters = NodeCounters()
    proc, link = _registered_node(clock, counters)
    clock.advance_to(12.0)
    hb = link.last(Heartbeat)
    proc.receive(HeartbeatResponse(action="normal", heartbeat_id=hb.heartbeat_id + 1))
    assert counters.heartbeat_responses == 1
    proc.crash()
    proc.receive(HeartbeatResponse(action="normal", heartbeat_id=hb.heartbeat_id + 2))
    assert counters.heartbeat_responses == 1  # a crashed process hears nothing


class _Endpoint:
    def __init__(self) -> None:
        self.link: Any = None
        self.got: list[object] = []

    def attach(self, link: Any) -> None:
        self.link = link

    def receive(self, msg: object) -> None:
        self.got.append(msg)

    def resync(self) -> None:
        pass


def test_the_memory_network_delivers_to_an_rm_given_after_it_was_made() -> None:
    clock = FakeClock()
    early = MemoryNetwork(clock, None)
    with pytest.raises(RuntimeError, match="deliver_to"):
        early.connect(_Endpoint())
    got: list[tuple[Any, object]] = []
    network = MemoryNetwork(clock, None)
    network.deliver_to(lambda link, msg: got.append((link, msg)))
    node = _Endpoint()
    _, to_node = network.connect(node)
    node.link.send("hello")
    assert got == []  # never inside send
    clock.advance_to(2.0)
    assert got == [(to_node, "hello")]
