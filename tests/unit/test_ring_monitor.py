"""The per-node ring monitor (ringmon.monitor), sans-IO: driven on a fake clock (no event loop),
over the in-memory peer channel, asserting what each monitor sends to the RM."""

from __future__ import annotations

from functools import partial
from typing import Any

from emulator.harness.eventlog import make_logger
from emulator.transport.peers import MemoryPeers
from ringmon.config import RingConfig
from ringmon.membership import ViewCache, encode_ids
from ringmon.monitor import RingMonitor, settle_all
from ringmon.ports import RingCounters
from ringmon.protocol import (
    Liveness,
    Probe,
    ProbeAck,
    Ring,
    RingDelta,
    RingSyncRequest,
    RingUpdate,
    UnlivelinessReport,
)
from ringmon.sleepers import SleepLedger
from tests.helpers import FakeClock


class Net:
    """``n`` monitors on one peer channel; what each sends to the RM is recorded."""

    def __init__(self, clock: FakeClock, n: int, **cfg: Any) -> None:
        self.clock = clock
        self.cfg = RingConfig(interval_s=1.0, **cfg)
        self.peers = MemoryPeers(clock, seed=1)
        self.views = ViewCache()
        self.stats = RingCounters()
        self.sleepers = SleepLedger()
        self.to_rm: dict[int, list[Any]] = {}
        self.removed: list[int] = []
        self.stall: dict[int, float] = {}
        log = make_logger(clock, None)
        self.mon: dict[int, RingMonitor] = {}
        ring = Ring(version=1, ids=tuple(range(1, n + 1)))
        for i in range(1, n + 1):
            self.to_rm[i] = []
            self.mon[i] = RingMonitor(
                self.cfg, clock, self.peers, self.to_rm[i].append, self.views, self.stats, log,
                stall_age=partial(self.stall_age, i),
                on_removed=partial(self.removed.append, i),
                phase_s=0.37 * i, sleepers=self.sleepers,
            )
            self.mon[i].join(i, ring)

    def stall_age(self, i: int) -> float:
        return self.stall.get(i, 0.0)

    def reports(self, i: int) -> list[UnlivelinessReport]:
        return [m for m in self.to_rm[i] if isinstance(m, UnlivelinessReport)]


def drive(fn: Any) -> None:
    fn(FakeClock())


def test_healthy_ring_sends_k_messages_per_interval_and_reports_nothing() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 100)
        clock.advance_to(clock.now() + 30.0)
        assert all(not net.reports(i) for i in net.mon)
        per_node_interval = net.stats.liveness_sent / (100 * 30)
        # Two rings: at most two messages per node per interval (fewer where both successors coincide).
        assert 1.5 <= per_node_interval <= 2.0

    drive(body)


def test_kring_pings_then_reports_a_silent_predecessor_within_the_timeout() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 100)
        clock.advance_to(clock.now() + 5.0)
        net.mon[10].leave()  # crash: silent
        t0 = clock.now()
        clock.advance_to(clock.now() + 1.5)
        reporters = {i for i in net.mon if any(r.suspect == 10 for r in net.reports(i))}
        assert reporters == {11, 74}  # both watchers: id ring and stride-64 ring
        assert clock.now() - t0 <= 1.5
        assert net.stats.pings_sent >= 2

    drive(body)


def test_an_answered_ping_prevents_a_report() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 50, strides=[1])
        clock.advance_to(clock.now() + 3.0)
        # 5 -> 6 liveness is lost for a while, but 5 still answers pings.
        mon6 = net.mon[6]
        real_from_peer = mon6.from_peer

        def drop_regular(msg: Any) -> None:
            if isinstance(msg, Liveness) and msg.sender == 5 and clock.now() < 6.0 and msg.seq % 2 == 1:
                return
            real_from_peer(msg)

        # Every liveness to 6 as a message (no timestamps), so that some can be dropped.
        net.peers.bind(6, type("R", (), {
            "from_peer": staticmethod(drop_regular), "heard_from": staticmethod(lambda *_: False),
        })())
        clock.advance_to(clock.now() + 6.0)
        assert not net.reports(6)

    drive(body)


def test_paper_ring_reports_after_one_silent_interval() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 20, detector="ring")
        clock.advance_to(clock.now() + 3.0)
        net.mon[7].leave()
        clock.advance_to(clock.now() + 2.01)
        # Reported at each silent tick (the paper's RM would have removed it after the first).
        assert {r.suspect for r in net.reports(8)} == {7}
        assert all(not net.reports(i) for i in net.mon if i != 8)
        assert net.stats.liveness_sent <= 20 * 6  # one successor each

    drive(body)


def test_stalled_liveness_is_reported_after_the_grace_only() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 30, strides=[1], grace_s=5.0)
        clock.advance_to(clock.now() + 2.0)
        net.stall[3] = 4.0  # the main loop of node 3 is stuck, its watchdog still talks
        clock.advance_to(clock.now() + 2.0)
        assert not net.reports(4)
        net.stall[3] = 6.0
        clock.advance_to(clock.now() + 1.0)
        assert [(r.suspect, r.reason) for r in net.reports(4)] == [(3, "stalled")]

    drive(body)


def test_ring_updates_only_from_the_rm_and_never_stale() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 10, strides=[1])
        m = net.mon[5]
        forged = RingUpdate(ring=Ring(version=9, ids=(5,)))
        net.peers.send(5, forged)
        clock.advance_to(clock.now() + 0.1)
        assert m.view is not None and m.view.version == 1 and net.stats.updates_rejected == 1
        m.from_rm(RingUpdate(ring=Ring(version=0, ids=(1, 5))))  # older: ignored
        assert m.view.version == 1
        m.from_rm(RingDelta(base_version=1, version=2, added=(), removed=encode_ids([4])))
        assert m.view.version == 2 and 4 not in m.view.members and m.watching.keys() == {3}
        m.from_rm(RingDelta(base_version=1, version=2, added=(), removed=encode_ids([4])))  # duplicate
        assert net.stats.updates_stale >= 2
        m.from_rm(RingDelta(base_version=5, version=6, added=(), removed=encode_ids([6])))  # a gap
        assert any(isinstance(x, RingSyncRequest) for x in net.to_rm[5])
        assert m.view.version == 2

    drive(body)


def test_removed_from_the_ring_while_alive_asks_to_rejoin() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 10, strides=[1])
        net.mon[5].from_rm(RingDelta(base_version=1, version=2, added=(), removed=encode_ids([5])))
        assert net.removed == [5] and not net.mon[5].active

    drive(body)


def test_probe_is_answered_with_the_stall_age() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 4)
        net.stall[2] = 3.5
        net.mon[2].from_rm(Probe(probe_id=7))
        assert net.to_rm[2][-1] == ProbeAck(machine_id=2, probe_id=7, stalled_s=3.5)

    drive(body)


def test_a_late_watcher_does_not_trust_its_own_silence() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 20, strides=[1])
        clock.advance_to(clock.now() + 2.0)
        m = net.mon[8]
        # Emulate a watchdog that could not run for 3 intervals (e.g. the whole VM froze).
        m._next_tick -= 3.0
        m._tick()
        assert net.stats.self_lag_skips == 1
        assert all(w.last == clock.now() for w in m.watching.values())

    drive(body)


def test_a_node_not_in_the_ring_yet_still_answers_a_probe() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 4)
        net.mon[3].leave()  # e.g. registering again after its RegisterResponse was lost
        net.mon[3].from_rm(Probe(probe_id=5, machine_id=3))
        assert net.to_rm[3][-1] == ProbeAck(machine_id=3, probe_id=5, stalled_s=0.0)

    drive(body)


def test_a_new_predecessor_is_pinged_at_once_and_reported_if_silent() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 100, strides=[1])
        clock.advance_to(clock.now() + 3.0)
        net.mon[10].leave()  # two neighbours crash together
        net.mon[11].leave()
        clock.advance_to(clock.now() + 1.5)
        assert {r.suspect for r in net.reports(12)} == {11}
        # The RM removes 11: 12 now watches 10, dead too. It pings it at once and reports it
        # after the ping timeout (0.1 interval + RTO), not a whole suspicion timeout (1.25) later.
        removal = RingDelta(base_version=1, version=2, added=(), removed=encode_ids([11]))
        for i in net.mon:
            net.mon[i].from_rm(removal)
        t1 = clock.now()
        clock.advance_to(t1 + 0.5)
        assert [r.suspect for r in net.reports(12) if r.suspect == 10] == [10]
        assert net.stats.new_pred_pings == 1  # 12's only: 9 kept its predecessor (8)

    drive(body)


def test_a_new_predecessor_that_answers_the_ping_is_watched_as_usual() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 100, strides=[1])
        clock.advance_to(clock.now() + 3.0)
        net.mon[11].leave()
        clock.advance_to(clock.now() + 1.5)
        removal = RingDelta(base_version=1, version=2, added=(), removed=encode_ids([11]))
        for i in net.mon:
            net.mon[i].from_rm(removal)
        clock.advance_to(clock.now() + 10.0)
        assert net.stats.new_pred_pings == 1
        assert {r.suspect for i in net.mon for r in net.reports(i)} == {11}  # 10 answered: never reported
        assert net.mon[12].watching.keys() == {10} and net.mon[12].watching[10].pinged_at < 0

    drive(body)


def test_a_catch_up_delta_from_a_version_left_since_is_ignored() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 10, strides=[1])
        m = net.mon[5]
        m.from_rm(RingDelta(base_version=1, version=2, added=(), removed=encode_ids([8])))
        # Combined 1 -> 3 (asked for while at 1) arrives after 1 -> 2: not applicable to 2.
        m.from_rm(RingDelta(base_version=1, version=3, added=(), removed=encode_ids([8, 9])))
        assert m.view is not None and m.view.version == 2 and net.stats.updates_stale == 1
        m.from_rm(RingDelta(base_version=2, version=3, added=(), removed=encode_ids([9])))
        assert m.view.version == 3 and m.view.ids == (1, 2, 3, 4, 5, 6, 7, 10)

    drive(body)


def test_quiet_kring_between_local_nodes_costs_one_timer_and_no_traffic_per_node() -> None:
    """Liveness a timestamp vouches for is a promise kept until the sender says it stopped: a
    quiet ring of nodes of one process arms one timer per node (its tick) and sends nothing,
    yet injected loss brings every watcher's own timer back, and a crash is still found."""

    def body(clock: FakeClock) -> None:
        net = Net(clock, 100)
        clock.advance_to(clock.now() + 5.0)
        assert clock.pending() == 100  # the ticks; no watcher polls a vouched predecessor
        sent, logical = net.peers.counters.sent, net.stats.liveness_sent
        clock.advance_to(clock.now() + 30.0)
        assert net.peers.counters.sent == sent  # not even a timestamp
        assert net.stats.liveness_sent - logical >= 1.5 * 100 * 30  # still counted as liveness
        assert all(not net.reports(i) for i in net.mon)

        net.peers.set_loss(0.5)
        assert clock.pending() > 150  # watchers' own timers again
        clock.advance_to(clock.now() + 10.0)
        assert net.peers.counters.sent > sent + 100 * 10  # liveness as messages, some lost
        net.peers.set_loss(0.0)
        clock.advance_to(clock.now() + 10.0)
        assert clock.pending() == 100

        net.mon[10].leave()  # crash: it tells its watchers when it last ticked
        t0 = clock.now()
        clock.advance_to(clock.now() + 1.5)
        assert {i for i in net.mon if any(r.suspect == 10 for r in net.reports(i))} >= {11, 74}
        assert clock.now() - t0 <= 1.5

    drive(body)


def test_the_papers_ring_keeps_a_timestamp_each_tick() -> None:
    def body(clock: FakeClock) -> None:
        net = Net(clock, 100, detector="ring")
        clock.advance_to(clock.now() + 5.0)
        sent = net.peers.counters.sent
        clock.advance_to(clock.now() + 10.0)
        assert net.peers.counters.sent - sent == 100 * 10  # one successor, one timestamp a tick
        assert clock.pending() == 100

    drive(body)


def test_an_idle_monitor_sleeps_yet_counts_wakes_on_a_stall_and_a_crash_is_found() -> None:
    """With nothing to send or watch by itself (every link a promise) a monitor whose host reports
    stalls arms no timer at all; its skipped ticks still count as liveness; a stall wakes it to
    send the stall's age; a crash is found as before."""

    def body(clock: FakeClock) -> None:
        net = Net(clock, 100)
        for m in net.mon.values():
            m._can_sleep = True  # as NodeProcess builds it (its pause calls loop_stalled)
        clock.advance_to(clock.now() + 5.0)
        assert clock.pending() == 0  # asleep, every one
        logical = net.stats.liveness_sent
        clock.advance_to(clock.now() + 30.0)
        for m in net.mon.values():
            m.settle()
        assert net.stats.liveness_sent - logical >= 1.5 * 100 * 30  # counted as if it ticked

        sent = net.peers.counters.sent
        net.stall[20] = 0.5  # node 20's loop stalls: its host says so
        net.mon[20].loop_stalled()
        clock.advance_to(clock.now() + 1.0)
        assert net.peers.counters.sent >= sent + 2  # the stall's age to both watchers, as messages
        net.stall[20] = 0.0
        clock.advance_to(clock.now() + 5.0)
        assert clock.pending() == 0

        net.mon[10].leave()  # crash
        t0 = clock.now()
        clock.advance_to(clock.now() + 1.5)
        assert {i for i in net.mon if any(r.suspect == 10 for r in net.reports(i))} == {11, 74}
        assert clock.now() - t0 <= 1.5

    drive(body)


def test_sleeping_monitors_settled_together_count_what_each_settled_alone_counts() -> None:
    """A sampler settles every sleeping monitor of a process at once (``settle_all``: the ledger
    counts them in aggregate); the liveness counted, each monitor's sequence and its next tick are
    those of settling each one by itself at every sample, also for monitors of two processes (two
    ledgers) in one list, with monitors waking (a stall) and falling asleep again between samples
    and samples on the monitors' tick times."""

    def body(clock: FakeClock) -> None:
        alone, one, two = Net(clock, 20), Net(clock, 20), Net(clock, 20)
        for net in (alone, one, two):
            for m in net.mon.values():
                m._can_sleep = True
        clock.advance_to(clock.now() + 5.0)
        assert clock.pending() == 0
        assert len(one.sleepers) == 20
        mixed = [m for pair in zip(one.mon.values(), two.mon.values(), strict=True) for m in pair]
        for step in range(12):
            # Steps of 2.5 s, and of 0.37 s (on a tick time of node 1, whose phase is 0.37).
            clock.advance_to(clock.now() + (2.5 if step % 3 else 0.37))
            if step in (4, 7):
                for net in (alone, one, two):
                    for i in (3, 8, 13):
                        net.mon[i].loop_stalled()  # awake for a tick, then asleep again
            for m in alone.mon.values():
                m.settle()
            settle_all(mixed)
            assert one.stats == alone.stats == two.stats
        assert alone.stats.liveness_sent > 0
        for i, m in alone.mon.items():
            for other in (one.mon[i], two.mon[i]):
                other._sleepers.catch_up(other)
                assert (other._seq, other._next_tick) == (m._seq, m._next_tick)
        for net in (alone, one, two):
            for m in net.mon.values():
                m.leave()
            assert len(net.sleepers) == 0
        assert one.stats == alone.stats == two.stats

    drive(body)



def test_a_monitor_keeps_its_fields_in_slots() -> None:
    """Every field a monitor sets is a slot (MonitorFields): past 30 attributes an instance dict
    is each monitor's own (~1.6 KB a node), and a part without ``__slots__ = ()`` brings one back."""

    def body(clock: FakeClock) -> None:
        net = Net(clock, 4)
        clock.advance_to(clock.now() + 5.0)
        assert all(not hasattr(m, "__dict__") for m in net.mon.values())

    drive(body)
