"""a_i and s_i (h2) at the RM: heartbeats counted by arrival interval, each node update in its
heartbeat's arrival interval and only within one interval; the in-memory sampler's rows and a TCP
run's window give h2 by the same rule (``RMArrivals`` serves both)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from emulator.harness.eventlog import make_logger
from emulator.measure.arrivals import RMArrivals
from emulator.measure.sampler import Sampler
from emulator.measure.timing import HeartbeatTiming
from rm import NodeUpdate
from rm.protocol import Heartbeat, Register, Resources
from rm.shell.manager import ResourceManager
from tests.helpers import FakeClock, RecordingLink

INTERVAL = 3.0


def _heartbeat() -> Heartbeat:
    return Heartbeat(machine_id=1, heartbeat_id=0, healthy=True, statuses=(), full=True)


def _update(link: object) -> NodeUpdate:
    return NodeUpdate(cast(Any, SimpleNamespace(link=link)))


def test_updates_count_in_their_heartbeats_arrival_interval_within_one_interval() -> None:
    clock = FakeClock()
    a, b, stranger = object(), object(), object()
    arrivals = RMArrivals(clock, INTERVAL)
    rm = ResourceManager(clock, make_logger(clock, None))
    sampler = Sampler(rm, HeartbeatTiming(INTERVAL), arrivals, clock, INTERVAL, 0.0, [])

    def at(t: float, *actions: tuple[str, object]) -> None:
        clock.t = t
        for kind, link in actions:
            if kind == "hb":
                if link is not stranger:  # the RM tells only a registered node's heartbeats
                    arrivals.stamp(link, clock.t)
            else:
                arrivals.observer(_update(link), 0.0)

    # Interval 1: two nodes' heartbeats updated at once; a stranger's counts nowhere.
    at(1.0, ("hb", a), ("hb", b), ("hb", stranger), ("up", a))
    at(2.0, ("up", b), ("up", stranger))
    clock.t = 3.0
    sampler.sample(1)
    # Interval 2: an RM stall; b's update comes 2.8 s after its heartbeat (in time), a's 3.2 s.
    at(4.0, ("hb", a))
    at(4.5, ("hb", b))
    clock.t = 6.0
    first = sampler.sample(2)
    assert (first.a_i, first.s_i) == (2, 0)  # provisional: the updates are still to come
    at(7.2, ("up", a))
    at(7.3, ("up", b))
    # Interval 3: one heartbeat, updated in time; the backlog's two updates are interval 2's.
    at(7.5, ("hb", a))
    at(8.0, ("up", a))
    clock.t = 9.0
    sampler.sample(3)
    clock.t = 12.0
    sampler.sample(4)
    assert [(r.a_i, r.s_i) for r in sampler.rows] == [(2, 2), (2, 1), (1, 1), (0, 0)]
    # The old rule (updates by processing time) had interval 3 at 3 updates for 1 arrival.
    assert all(r.s_i <= r.a_i for r in sampler.rows)
    # h2 the same way in memory (the sampler's settled rows) and over TCP (a window of intervals).
    h2 = sampler.efficiency()[1]
    assert h2 == pytest.approx(0.5)
    assert arrivals.h2(range(1, 4)) == h2


def test_the_rm_tells_a_registered_nodes_heartbeats_also_when_stopped() -> None:
    """``ResourceManager.observe_heartbeat_arrivals`` (the runs' wiring): a registered node's
    heartbeats are stamped on arrival, also those a stopped RM drops; a stranger's never."""
    clock = FakeClock()
    rm = ResourceManager(clock, make_logger(clock, None))
    arrivals = RMArrivals(clock, INTERVAL)
    rm.observe_heartbeat_arrivals(arrivals.stamp)
    receive = rm.receive
    node, stranger = RecordingLink(), RecordingLink()
    receive(node, Register(address="n", resources=Resources(4, 8)))
    mid = node.sent[0].machine_id
    for t, link in ((1.0, node), (2.0, stranger), (4.0, node), (5.0, node)):
        clock.t = t
        receive(link, Heartbeat(machine_id=mid, heartbeat_id=0, healthy=True, statuses=(), full=True))
    rm.stop()
    clock.t = 7.0
    receive(node, _heartbeat())
    assert arrivals.arrived_by_interval == {1: 1, 2: 2, 3: 1}


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        RMArrivals(FakeClock(), 0.0)
