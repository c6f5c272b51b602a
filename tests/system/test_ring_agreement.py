"""Ring agreement: once membership changes settle, every live node holds the RM's ring; a node
that lost a ring change catches up (anti-entropy through liveness), even if the ring stays quiet."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.harness.invariants import InvariantChecker, InvariantViolation
from emulator.harness.runner import RunHandle
from emulator.measure.sampler import SampleRow
from emulator.scenario.loader import scenario_from_dict
from emulator.scenario.schema import MessageFault
from nodemanager.node import NodeState
from ringmon.membership import RingView, encode_ids
from ringmon.protocol import Liveness, Ring, RingDelta, RingSyncRequest, RingUpdate
from tests.helpers import FakeClock, run_with_handle
from tests.ring_support import ring_scenario
from tests.unit.test_ring_monitor import Net, drive

CHURN = [
    {"kind": "crash", "at_s": 20, "count": 6, "rejoin_after_s": 15},
    {"kind": "crash", "at_s": 50, "count": 4, "consecutive": True, "rejoin_after_s": 30},
    {"kind": "crash", "at_s": 90, "count": 3},
]


def checker_for(handle: RunHandle) -> InvariantChecker:
    """A second checker on the run (the runner's own raises on a violation; this one counts)."""
    sc = handle.scenario
    windows = [(f.at_s, f.at_s + f.duration_s) for f in sc.faults if isinstance(f, MessageFault)]
    return InvariantChecker(handle.side.rm, sc.ring.interval_s, lambda: windows)


class Watch:
    def __init__(self) -> None:
        self.checker: InvariantChecker | None = None

    def __call__(self, handle: RunHandle, row: SampleRow) -> None:
        if self.checker is None:
            self.checker = checker_for(handle)
        self.checker.check_ring(handle.hosting.realities())


def assert_all_agree(handle: RunHandle) -> None:
    ring = handle.side.rm.ring_snapshot()
    assert ring is not None
    live = [p for p in handle.hosting.processes if p.state is NodeState.RUNNING and not p.crashed]
    assert live
    for p in live:
        view = p.ring_view()
        assert view is not None and view.version == ring.version, p.address
    registered = {n.machine_id for n in handle.side.rm.nodes_view()}
    assert set(ring.members) == registered == {p.machine_id for p in live}


@pytest.mark.parametrize("detector", ["kring", "ring"])
def test_agreement_holds_after_crashes_and_rejoins(detector: str) -> None:
    watch = Watch()
    sc = scenario_from_dict(
        ring_scenario(nodes=60, faults=CHURN, ring={"detector": detector}, duration_s=180, job_count=300),
        "<test>",
    )
    out, handle = run_with_handle(sc, check_invariants=True, on_row=watch)
    assert watch.checker is not None and watch.checker.ring_checks > 10  # settled periods were checked
    assert out.rm.membership is not None and out.rm.membership.removals >= 13
    assert_all_agree(handle)


def test_a_node_forced_onto_a_stale_ring_after_settling_fails_the_invariant() -> None:
    forced: dict[str, Any] = {}

    def force(handle: RunHandle, row: SampleRow) -> None:
        if row.t_s < 150 or forced:
            return
        ring = handle.side.rm.ring_snapshot()
        assert ring is not None
        proc = next(p for p in handle.hosting.processes if p.state is NodeState.RUNNING)
        assert proc.monitor is not None
        proc.monitor.view = RingView(ring.version - 1, ring.members)  # as if it missed the last change
        forced["node"] = proc.address
        checker_for(handle).check_ring(handle.hosting.realities())

    sc = scenario_from_dict(ring_scenario(nodes=40, faults=CHURN, duration_s=200, job_count=200), "<test>")
    with pytest.raises(InvariantViolation) as err:
        run_with_handle(sc, check_invariants=True, on_row=force)
    text = str(err.value)
    assert f"ring disagreement after settling: node {forced['node']} (id " in text
    assert "holds ring v" in text and "the RM's ring is v" in text


def test_nothing_is_checked_while_changes_are_in_flight() -> None:
    """Right after a crash the ring is not settled (suspicion, pending removal, fresh version)."""
    seen: list[tuple[float, bool]] = []

    checkers: list[InvariantChecker] = []

    def record(handle: RunHandle, row: SampleRow) -> None:
        if not checkers:
            checkers.append(checker_for(handle))
        seen.append((row.t_s, checkers[0].ring_settled()))

    sc = scenario_from_dict(
        ring_scenario(nodes=40, faults=CHURN[2:], duration_s=150, job_count=200), "<test>"
    )
    run_with_handle(sc, check_invariants=True, on_row=record)
    settled = dict(seen)
    # Start-up registrations settle; the crash at 90 s is detected within ~1.5 intervals; the
    # ring is settled again 4 intervals + 1 s after the last removal was published.
    assert not settled[3.0] and settled[84.0] and settled[90.0]
    assert not any(settled[t] for t in (93.0, 96.0, 99.0, 102.0, 105.0))
    assert all(settled[t] for t in (108.0, 120.0, 150.0))


def test_lost_ring_deltas_are_repaired_while_the_ring_stays_quiet() -> None:
    # Half of all ring deltas to nodes are lost during the churn; after 100 s nothing changes.
    faults = [
        {"kind": "messages", "at_s": 10, "duration_s": 90, "loss": 0.5,
         "types": ["RingDelta", "RingUpdate"], "direction": "to_node"},
        *CHURN,
    ]
    watch = Watch()
    sc = scenario_from_dict(ring_scenario(nodes=60, faults=faults, duration_s=180, job_count=300), "<test>")
    out, handle = run_with_handle(sc, check_invariants=True, on_row=watch)
    assert out.message_faults is not None and out.message_faults.dropped > 50
    assert out.rm.membership is not None and out.rm.membership.syncs > 0
    assert watch.checker is not None and watch.checker.ring_checks > 5
    assert_all_agree(handle)


def test_a_node_that_missed_a_delta_asks_for_the_ring_after_a_neighbours_liveness() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 10)
        clock.advance_to(clock.now() + 3.0)
        delta = RingDelta(base_version=1, version=2, added=encode_ids([11]), removed=())
        for i, mon in net.mon.items():
            if i != 4:
                mon.from_rm(delta)  # node 4 lost it
        clock.advance_to(clock.now() + 3.0)
        asks = [m for m in net.to_rm[4] if isinstance(m, RingSyncRequest)]
        assert asks and asks[0].version == 1
        assert not any(isinstance(m, RingSyncRequest) for i in net.mon if i != 4 for m in net.to_rm[i])
        # The answer is lost too: it asks again, but not more than once per two intervals.
        clock.advance_to(clock.now() + 10.0)
        asks = [m for m in net.to_rm[4] if isinstance(m, RingSyncRequest)]
        assert 3 <= len(asks) <= 7
        net.mon[4].from_rm(RingUpdate(ring=Ring(version=2, ids=tuple(range(1, 12)))))
        clock.advance_to(clock.now() + 5.0)
        view = net.mon[4].view
        assert view is not None and view.version == 2
        assert len([m for m in net.to_rm[4] if isinstance(m, RingSyncRequest)]) == len(asks)

    drive(body)


def test_a_delta_still_in_flight_triggers_no_sync() -> None:
    """Versions are advertised only after being held an interval: a neighbour that got the delta a
    moment earlier does not make us ask for the ring."""

    def body(clock: FakeClock) -> None:
        net = Net(clock, 2)
        clock.advance_to(clock.now() + 3.0)
        net.mon[1].from_rm(RingDelta(base_version=1, version=2, added=encode_ids([3]), removed=()))
        clock.advance_to(clock.now() + 0.9)
        net.mon[2].from_rm(RingDelta(base_version=1, version=2, added=encode_ids([3]), removed=()))
        clock.advance_to(clock.now() + 5.0)
        assert not any(isinstance(m, RingSyncRequest) for i in net.mon for m in net.to_rm[i])

    drive(body)


def test_a_stale_predecessor_learns_from_its_successor() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 3, detector="ring")
        clock.advance_to(clock.now() + 2.0)
        net.mon[2].from_rm(RingDelta(base_version=1, version=2, added=encode_ids([4]), removed=()))
        net.mon[3].from_rm(RingDelta(base_version=1, version=2, added=encode_ids([4]), removed=()))
        # In v2 node 3 sends to 4 (silent), so node 1 hears no newer version from a predecessor;
        # node 2, its successor, answers node 1's old-version liveness with its own.
        clock.advance_to(clock.now() + 4.0)
        assert any(isinstance(m, RingSyncRequest) for m in net.to_rm[1])

    drive(body)


def test_a_registered_node_missing_from_every_newer_ring_knows_it_was_dropped() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 3)
        mon = net.mon[3]
        mon.join(7, Ring(version=1, ids=(1, 2, 3)))  # registered as 7; the ring at that moment
        clock.advance_to(clock.now() + 7.0)
        # Not in the ring after two intervals (the delta that added it was lost): it asks.
        assert any(isinstance(m, RingSyncRequest) for m in net.to_rm[3])
        mon.from_rm(RingUpdate(ring=Ring(version=3, ids=(1, 2))))  # inserted and removed meanwhile
        assert net.removed == [3]

    drive(body)


def test_liveness_carries_the_advertised_version() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 2)
        got: list[Any] = []
        class Recorder:
            def from_peer(self, msg: Any) -> None:
                got.append(msg)

            def heard_from(self, sender: int, ring_version: int) -> bool:
                return False

            def sender_stopped(self, sender: int, last_s: float) -> None:
                pass

            def liveness_lossy(self) -> None:
                pass

        net.peers.bind(2, Recorder())
        clock.advance_to(clock.now() + 2.0)
        assert got and isinstance(got[-1], Liveness) and got[-1].ring_version == 1

    drive(body)
