"""Ring agreement: once membership changes settle, every live node holds the RM's ring; a node
that lost a ring change catches up (anti-entropy through liveness), even if the ring stays quiet."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.harness.invariants import InvariantChecker, InvariantViolation
from emulator.harness.runner import RunOutcome, run_blocking
from emulator.scenario.loader import scenario_from_dict
from emulator.time.clock import LoopClock
from nodemanager.node import NodeState
from ringmon.membership import RingView, encode_ids
from ringmon.protocol import Liveness, Ring, RingDelta, RingSyncRequest, RingUpdate
from tests.ring_support import ring_scenario
from tests.test_ring_monitor import Net, virtual

CHURN = [
    {"kind": "crash", "at_s": 20, "count": 6, "rejoin_after_s": 15},
    {"kind": "crash", "at_s": 50, "count": 4, "consecutive": True, "rejoin_after_s": 30},
    {"kind": "crash", "at_s": 90, "count": 3},
]


class Watch:
    """A second checker on the run (the runner's own raises on a violation; this one counts)."""

    def __init__(self) -> None:
        self.checker: InvariantChecker | None = None

    def __call__(self, outcome: RunOutcome, row: tuple[float, ...]) -> None:
        if self.checker is None:
            self.checker = InvariantChecker(
                outcome.rm, outcome.nodes, outcome.extra["membership"], outcome.extra["message_faults"]
            )
        self.checker.check_ring()


def assert_all_agree(out: RunOutcome) -> None:
    pub = out.extra["membership"].ring.published
    live = [n for n in out.nodes if n.state is NodeState.RUNNING]
    assert live
    for n in live:
        assert n.monitor.view.version == pub.version, n.address
    assert set(pub.ids) == set(out.rm.cluster.nodes) == {n.machine_id for n in live}


@pytest.mark.parametrize("detector", ["kring", "ring"])
def test_agreement_holds_after_crashes_and_rejoins(detector: str) -> None:
    watch = Watch()
    sc = scenario_from_dict(
        ring_scenario(nodes=60, faults=CHURN, ring={"detector": detector}, duration_s=180, job_count=300),
        "<test>",
    )
    out = run_blocking(sc, progress=watch, check_invariants=True)
    assert watch.checker is not None and watch.checker.ring_checks > 10  # settled periods were checked
    assert out.extra["membership"].stats.removals >= 13
    assert_all_agree(out)


def test_a_node_forced_onto_a_stale_ring_after_settling_fails_the_invariant() -> None:
    forced: dict[str, Any] = {}

    def force(outcome: RunOutcome, row: tuple[float, ...]) -> None:
        if row[0] < 150 or forced:
            return
        ms = outcome.extra["membership"]
        node = next(n for n in outcome.nodes if n.state is NodeState.RUNNING)
        pub = ms.ring.published
        node.monitor.view = RingView(pub.version - 1, pub.ids)  # as if it had missed the last change
        forced["node"] = node.address
        InvariantChecker(outcome.rm, outcome.nodes, ms).check_ring()

    sc = scenario_from_dict(ring_scenario(nodes=40, faults=CHURN, duration_s=200, job_count=200), "<test>")
    with pytest.raises(InvariantViolation) as err:
        run_blocking(sc, progress=force, check_invariants=True)
    text = str(err.value)
    assert f"ring disagreement after settling: node {forced['node']} (id " in text
    assert "holds ring v" in text and "the RM's ring is v" in text


def test_nothing_is_checked_while_changes_are_in_flight() -> None:
    """Right after a crash the ring is not settled (suspicion, pending removal, fresh version)."""
    seen: list[tuple[float, bool]] = []

    def record(outcome: RunOutcome, row: tuple[float, ...]) -> None:
        chk = InvariantChecker(outcome.rm, outcome.nodes, outcome.extra["membership"])
        seen.append((row[0], chk.ring_settled()))

    sc = scenario_from_dict(
        ring_scenario(nodes=40, faults=CHURN[2:], duration_s=150, job_count=200), "<test>"
    )
    run_blocking(sc, progress=record, check_invariants=True)
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
    out = run_blocking(sc, progress=watch, check_invariants=True)
    assert out.extra["message_faults"].dropped > 50
    assert out.extra["membership"].stats.syncs > 0
    assert watch.checker is not None and watch.checker.ring_checks > 5
    assert_all_agree(out)


def test_a_node_that_missed_a_delta_asks_for_the_ring_after_a_neighbours_liveness() -> None:
    async def body(clock: LoopClock) -> None:
        net = Net(clock, 10)
        await clock.sleep(3.0)
        delta = RingDelta(base_version=1, version=2, added=encode_ids([11]))
        for i, mon in net.mon.items():
            if i != 4:
                mon.from_rm(delta)  # node 4 lost it
        await clock.sleep(3.0)
        asks = [m for m in net.to_rm[4] if isinstance(m, RingSyncRequest)]
        assert asks and asks[0].version == 1
        assert not any(isinstance(m, RingSyncRequest) for i in net.mon if i != 4 for m in net.to_rm[i])
        # The answer is lost too: it asks again, but not more than once per two intervals.
        await clock.sleep(10.0)
        asks = [m for m in net.to_rm[4] if isinstance(m, RingSyncRequest)]
        assert 3 <= len(asks) <= 7
        net.mon[4].from_rm(RingUpdate(ring=Ring(version=2, ids=tuple(range(1, 12)))))
        await clock.sleep(5.0)
        assert net.mon[4].view.version == 2
        assert len([m for m in net.to_rm[4] if isinstance(m, RingSyncRequest)]) == len(asks)

    virtual(body)


def test_a_delta_still_in_flight_triggers_no_sync() -> None:
    """Versions are advertised only after being held an interval: a neighbour that got the delta a
    moment earlier does not make us ask for the ring."""

    async def body(clock: LoopClock) -> None:
        net = Net(clock, 2)
        await clock.sleep(3.0)
        net.mon[1].from_rm(RingDelta(base_version=1, version=2, added=encode_ids([3])))
        await clock.sleep(0.9)
        net.mon[2].from_rm(RingDelta(base_version=1, version=2, added=encode_ids([3])))
        await clock.sleep(5.0)
        assert not any(isinstance(m, RingSyncRequest) for i in net.mon for m in net.to_rm[i])

    virtual(body)


def test_a_stale_predecessor_learns_from_its_successor() -> None:
    async def body(clock: LoopClock) -> None:
        net = Net(clock, 3, detector="ring")
        await clock.sleep(2.0)
        net.mon[2].from_rm(RingDelta(base_version=1, version=2, added=encode_ids([4])))
        net.mon[3].from_rm(RingDelta(base_version=1, version=2, added=encode_ids([4])))
        # In v2 node 3 sends to 4 (silent), so node 1 hears no newer version from a predecessor;
        # node 2, its successor, answers node 1's old-version liveness with its own.
        await clock.sleep(4.0)
        assert any(isinstance(m, RingSyncRequest) for m in net.to_rm[1])

    virtual(body)


def test_a_registered_node_missing_from_every_newer_ring_knows_it_was_dropped() -> None:
    async def body(clock: LoopClock) -> None:
        net = Net(clock, 3)
        mon = net.mon[3]
        mon.join(7, Ring(version=1, ids=(1, 2, 3)))  # registered as 7; the ring at that moment
        await clock.sleep(7.0)
        # Not in the ring after two intervals (the delta that added it was lost): it asks.
        assert any(isinstance(m, RingSyncRequest) for m in net.to_rm[3])
        mon.from_rm(RingUpdate(ring=Ring(version=3, ids=(1, 2))))  # inserted and removed meanwhile
        assert net.removed == [3]

    virtual(body)


def test_liveness_carries_the_advertised_version() -> None:
    async def body(clock: LoopClock) -> None:
        net = Net(clock, 2)
        got: list[Any] = []
        net.mon[2].from_peer = got.append  # type: ignore[method-assign]
        net.peers.bind(2, net.mon[2])
        await clock.sleep(2.0)
        assert got and isinstance(got[-1], Liveness) and got[-1].ring_version == 1

    virtual(body)
