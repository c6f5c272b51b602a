"""The RM membership service (rm.membership.service): report validation, removal, probe, brake, deltas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.harness.eventlog import make_logger
from ringmon.config import RingConfig
from ringmon.membership import decode_ids
from ringmon.protocol import (
    Probe,
    ProbeAck,
    RingDelta,
    RingSyncRequest,
    RingUpdate,
    UnlivelinessReport,
    UnlivelinessResponse,
)
from rm.membership.service import MembershipService
from rm.protocol import LaunchContainers, Register, RegisterResponse, Resources
from rm.shell.manager import ResourceManager
from rm.state.operations import OperationSpec
from tests.helpers import FakeClock, RecordingLink, record

Link = RecordingLink


class Cluster:
    def __init__(self, clock: FakeClock, n: int, **ring: Any) -> None:
        self.clock = clock
        log = make_logger(clock, None)
        # Joins published within batch_s (not the default interval, 3 s), as removals are: these
        # tests are about reports, probes and removals on a ring that has settled.
        ring.setdefault("join_batch", ring.get("batch_s", 0.5) / ring.get("interval_s", 3.0))
        self.rm = ResourceManager(clock, log, heartbeat_mode="delta", ring=RingConfig(**ring))
        assert self.rm.membership is not None
        self.svc: MembershipService = self.rm.membership
        self.links: dict[int, Link] = {}
        for i in range(n):
            link = Link()
            self.rm.receive(link, Register(address=f"n{i}", resources=Resources(4, 8)))
            self.links[link.of(RegisterResponse)[-1].machine_id] = link

    def report(self, reporter: int, suspect: int, answer_control: bool = True, **kw: Any) -> Link:
        """``reporter`` reports ``suspect``; being alive, it answers the RM's control probe."""
        link = self.links.get(reporter) or Link()
        kw.setdefault("ring_version", self.svc.ring.version)
        msg = UnlivelinessReport(reporter=reporter, suspect=suspect, **kw)
        before = len(link.sent)
        self.rm.receive(link, msg)
        if answer_control:
            for probe in [m for m in link.sent[before:] if isinstance(m, Probe)]:
                self.rm.receive(link, ProbeAck(machine_id=probe.machine_id, probe_id=probe.probe_id))
        return link

    def alive(self, mid: int) -> bool:
        return self.rm.node(mid) is not None


def drive(fn: Callable[[FakeClock], Any]) -> Any:
    return fn(FakeClock())


def test_register_gets_smallest_free_id_ring_and_a_batched_delta() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 5, batch_s=0.5)
        first = c.links[1].of(RegisterResponse)[0]
        assert first.machine_id == 1 and first.ring is not None and first.ring.version == 0
        clock.advance_to(clock.now() + 1.0)
        deltas = c.links[1].of(RingDelta)
        assert len(deltas) == 1  # five joins, one delta
        assert decode_ids(deltas[0].added) == [1, 2, 3, 4, 5]
        c.rm.remove_node(record(c.rm, 3), "test")
        clock.advance_to(clock.now() + 1.0)
        link = Link()
        c.rm.receive(link, Register(address="new", resources=Resources(4, 8)))
        assert link.of(RegisterResponse)[0].machine_id == 3  # the smallest free id
        assert link.of(RegisterResponse)[0].ring.ids == (1, 2, 4, 5)
        clock.advance_to(clock.now() + 1.0)
        assert c.svc.ring.published.ids == (1, 2, 3, 4, 5)

    drive(body)


def test_report_from_unregistered_reporter_gets_resync_and_changes_nothing() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 4, detector="ring")
        clock.advance_to(clock.now() + 1.0)
        link = c.report(99, 1)
        assert link.of(UnlivelinessResponse)[-1].action == "resync"
        # A registered id on someone else's connection is not that node either.
        forged = Link()
        c.rm.receive(forged, UnlivelinessReport(reporter=2, suspect=1, ring_version=1))
        assert forged.of(UnlivelinessResponse)[-1].action == "resync"
        assert c.alive(1)

    drive(body)


def test_report_by_a_non_watcher_is_rejected_with_what_the_reporter_missed() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 6, detector="ring")
        clock.advance_to(clock.now() + 1.0)
        link = Link()
        c.links[4] = link
        record(c.rm, 4).link = link
        c.rm.receive(link, UnlivelinessReport(reporter=4, suspect=1, ring_version=0))
        answer = link.of(UnlivelinessResponse)[-1]
        assert answer.action == "normal" and answer.ring is None
        # The reporter cited version 0: it gets the delta since then, not the whole ring.
        (delta,) = link.of(RingDelta)
        assert delta.base_version == 0 and delta.version == c.svc.ring.version
        assert decode_ids(delta.added) == [1, 2, 3, 4, 5, 6] and not link.of(RingUpdate)
        assert c.alive(1) and c.svc.stats.reports_rejected == 1

    drive(body)


def test_ring_baseline_removes_on_one_report_and_requeues_tasks_once() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 3, detector="ring")
        c.rm.add_pool("p")
        op = c.rm.submit_operation(
            OperationSpec(name="op", pool="p", demand=Resources(1, 1), durations=[100.0] * 12)
        )
        clock.advance_to(clock.now() + 1.0)
        on_2 = sum(len(m.containers) for m in c.links[2].of(LaunchContainers))
        assert on_2 > 0
        c.report(3, 2)
        assert not c.alive(2)
        assert c.rm.counters().tasks_requeued == on_2
        (view,) = c.rm.operations_view()
        assert view.id == op and view.running + view.pending == 12  # none lost, none duplicated
        c.report(3, 2)  # a second report about a removed node changes nothing
        assert c.rm.counters().tasks_requeued == on_2 and c.rm.counters().nodes_lost == 1
        clock.advance_to(clock.now() + 1.0)
        delta = c.links[1].of(RingDelta)[-1]
        assert decode_ids(delta.removed) == [2]

    drive(body)


def test_kring_probes_before_removing() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 200, interval_s=3.0, probe_timeout=0.2, grace_s=9.0)
        clock.advance_to(clock.now() + 1.0)
        w = c.svc.ring.watchers(10)
        assert w == [11, 74]
        c.report(11, 10)
        probe = c.links[10].of(Probe)[-1]
        c.rm.receive(c.links[10], ProbeAck(machine_id=10, probe_id=probe.probe_id, stalled_s=0.5))
        clock.advance_to(clock.now() + 1.0)
        assert c.alive(10) and c.svc.stats.refuted == 1
        # Unanswered: removed once the probe timeout (0.6 s) has passed, not before.
        c.report(74, 10)
        clock.advance_to(clock.now() + 0.5)
        assert c.alive(10)
        clock.advance_to(clock.now() + 0.2)
        assert not c.alive(10)
        # Answered, but stalled longer than the grace: removed.
        c.report(21, 20)
        probe = c.links[20].of(Probe)[-1]
        c.rm.receive(c.links[20], ProbeAck(machine_id=20, probe_id=probe.probe_id, stalled_s=12.0))
        assert not c.alive(20)

    drive(body)


def test_probe_answers_count_only_from_the_probed_nodes_link_with_its_probe_id() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 200, interval_s=3.0, probe_timeout=0.2)
        clock.advance_to(clock.now() + 1.0)
        c.report(11, 10)
        probe = c.links[10].of(Probe)[-1]
        # Node 11 (or anyone who learnt the id) answers for the silent node 10: rejected.
        c.rm.receive(c.links[11], ProbeAck(machine_id=10, probe_id=probe.probe_id))
        c.rm.receive(Link(), ProbeAck(machine_id=10, probe_id=probe.probe_id))
        # The right link with a guessed probe id: ignored.
        c.rm.receive(c.links[10], ProbeAck(machine_id=10, probe_id=probe.probe_id + 1))
        assert c.svc.stats.acks_rejected == 2 and c.svc.stats.refuted == 0
        clock.advance_to(clock.now() + 0.7)
        assert not c.alive(10)  # the probe went unanswered: removed
        # The node's own answer on its own link still refutes.
        c.report(21, 20)
        probe = c.links[20].of(Probe)[-1]
        c.rm.receive(c.links[20], ProbeAck(machine_id=20, probe_id=probe.probe_id))
        clock.advance_to(clock.now() + 1.0)
        assert c.alive(20) and c.svc.stats.refuted == 1

    drive(body)


def test_brake_holds_removals_beyond_the_fraction_then_releases_them() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 100, brake_fraction=0.1, brake_window_s=30.0)
        clock.advance_to(clock.now() + 1.0)
        suspects = list(range(1, 61, 2))  # 30 silent nodes reported at once
        for s in suspects:
            c.report(c.svc.ring.watchers(s)[0], s)
        clock.advance_to(clock.now() + 2.0)
        assert sum(not c.alive(s) for s in suspects) == 10
        assert c.svc.stats.brake_held == 20
        clock.advance_to(clock.now() + 30.0)  # the window moved: ten more, re-probed and still silent
        assert sum(not c.alive(s) for s in suspects) == 10 + 9  # 10% of the 90 left

    drive(body)


def test_sync_request_gets_the_deltas_it_missed_or_the_full_ring() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 3)
        clock.advance_to(clock.now() + 1.0)
        first = c.svc.ring.version
        c.rm.remove_node(record(c.rm, 3), "x")
        clock.advance_to(clock.now() + 1.0)
        link = c.links[2]
        # A few versions behind: only the deltas since its version, not the whole ring.
        before = len(link.sent)
        c.rm.receive(link, RingSyncRequest(machine_id=2, version=first))
        (delta,) = link.sent[before:]
        assert isinstance(delta, RingDelta) and delta.base_version == first
        assert decode_ids(delta.removed) == [3]
        # Up to date (it caught up meanwhile): nothing.
        before = len(link.sent)
        c.rm.receive(link, RingSyncRequest(machine_id=2, version=c.svc.ring.version))
        assert link.sent[before:] == []
        # No ring at all: the whole ring.
        c.rm.receive(link, RingSyncRequest(machine_id=2, version=-1))
        assert link.of(RingUpdate)[-1].ring.ids == (1, 2)

    drive(body)


def test_nodes_behind_by_the_same_versions_share_one_combined_catch_up() -> None:
    """A join storm leaves hundreds of nodes behind by the same versions: the RM combines their
    missed deltas once per version, and again once the ring moves on."""

    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 6)
        clock.advance_to(clock.now() + 1.0)
        old = c.svc.ring.version
        for mid in (6, 5):  # two published changes
            c.rm.remove_node(record(c.rm, mid), "x")
            clock.advance_to(clock.now() + 1.0)
        answers = []
        for mid in (1, 2, 3):
            c.rm.receive(c.links[mid], RingSyncRequest(machine_id=mid, version=old))
            answers.append(c.links[mid].of(RingDelta)[-1])
        assert answers[0] is answers[1] is answers[2]
        assert (answers[0].base_version, answers[0].version) == (old, c.svc.ring.version)
        assert sorted(decode_ids(answers[0].removed)) == [5, 6]
        c.rm.remove_node(record(c.rm, 4), "x")
        clock.advance_to(clock.now() + 1.0)
        c.rm.receive(c.links[1], RingSyncRequest(machine_id=1, version=old))
        later = c.links[1].of(RingDelta)[-1]
        assert later.version == c.svc.ring.version and sorted(decode_ids(later.removed)) == [4, 5, 6]

    drive(body)


def test_a_version_older_than_the_kept_deltas_gets_the_full_ring() -> None:
    def body(clock: FakeClock) -> None:
        from rm.membership.service import RECENT_DELTAS

        c = Cluster(clock, RECENT_DELTAS + 4)
        clock.advance_to(clock.now() + 1.0)
        old = c.svc.ring.version
        for mid in range(3, RECENT_DELTAS + 4):  # one published change each
            c.rm.remove_node(record(c.rm, mid), "x")
            clock.advance_to(clock.now() + 1.0)
        c.rm.receive(c.links[2], RingSyncRequest(machine_id=2, version=old))
        assert c.links[2].of(RingUpdate)[-1].ring.ids == (1, 2, RECENT_DELTAS + 4)

    drive(body)


def test_375_removals_at_7500_nodes_cost_under_10_mb() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 7500, batch_s=0.5)
        clock.advance_to(clock.now() + 1.0)
        # Removals spread over two intervals, the way a 5% crash is detected.
        victims = list(range(20, 7501, 20))[:375]
        for k, mid in enumerate(victims):
            clock.call_later(6.0 * k / len(victims), lambda m=mid: c.rm.remove_node(record(c.rm, m), "x"))
        clock.advance_to(clock.now() + 8.0)
        assert c.svc.ring.published.ids == tuple(i for i in range(1, 7501) if i not in set(victims))
        assert c.svc.stats.bytes_removal <= 10_000_000
        # Sanity: the same removals as full lists, one per change, would be ~10^11 bytes.
        assert c.svc.stats.bytes_removal * 1000 < 375 * 7500 * 3 * 7500

    drive(body)


def test_a_lost_probe_is_resent_and_re_registration_clears_a_suspicion() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 100)
        clock.advance_to(clock.now() + 1.0)
        c.report(11, 10)
        clock.advance_to(clock.now() + 0.3)
        probes = c.links[10].of(Probe)
        # Resent; each attempt has its own id, so each answer is a round-trip sample.
        assert len(probes) >= 2 and len({p.probe_id for p in probes}) == len(probes)
        # The node registers again (its last answer was lost, say): it is alive, nothing removed.
        c.rm.receive(c.links[10], Register(address="n9", resources=Resources(4, 8)))
        clock.advance_to(clock.now() + 1.0)
        assert c.alive(10) and c.svc.stats.removals == 0

    drive(body)


def test_a_silent_ring_is_probed_by_the_rm_paced_over_one_interval() -> None:
    # 50 delta nodes that say nothing: after orphan_after intervals the RM probes a brake's
    # fraction (10) of them itself, one after another over an interval, not all at one instant.
    clock = FakeClock()
    c = Cluster(clock, 50, detector="kring", interval_s=3.0, orphan_after=10.0, brake_fraction=0.2)
    c.rm.start()
    first_probed: dict[int, float] = {}
    t = 0.0
    while t < 45.0:
        t = round(t + 0.05, 2)
        clock.advance_to(t)
        for mid, link in c.links.items():
            if mid not in first_probed and link.of(Probe):
                first_probed[mid] = t
    times = sorted(first_probed.values())
    assert len(times) >= 10
    start = times[0]
    assert 30.0 <= start <= 34.0
    round_one = [x for x in times if x < start + 2.95]
    assert len(round_one) == 10
    assert len([x for x in round_one if x <= start + 0.1]) == 1  # paced, not a burst
    assert times[9] - start >= 2.0


def test_registrations_are_not_silence() -> None:
    # Nodes joining one after another for 60 s: the RM does not probe "orphans" while they do.
    clock = FakeClock()
    c = Cluster(clock, 1, detector="kring", interval_s=3.0, orphan_after=10.0)
    c.rm.start()
    for i in range(1, 21):
        clock.advance_to(3.0 * i)
        c.rm.receive(Link(), Register(address=f"late{i}", resources=Resources(4, 8)))
    assert c.svc.stats.orphan_probes == 0
    clock.advance_to(60.0 + 31.0)
    assert c.svc.stats.orphan_probes > 0


def test_a_report_valid_in_the_ring_version_its_reporter_cites_is_accepted() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 200, interval_s=3.0, probe_timeout=0.2)
        clock.advance_to(clock.now() + 1.0)
        c.rm.remove_node(record(c.rm, 11), "x")
        clock.advance_to(clock.now() + 1.0)
        cited = c.svc.ring.version  # 12 watches 10 here
        link = Link()
        c.rm.receive(link, Register(address="new", resources=Resources(4, 8)))
        c.links[11] = link
        clock.advance_to(clock.now() + 1.0)
        assert c.svc.ring.version > cited and c.svc.ring.watchers(10) == [11, 74]
        # 12 has not heard of the new 11 yet and reports 10, its predecessor in `cited`.
        answer = c.report(12, 10, ring_version=cited)
        assert answer.of(UnlivelinessResponse)[-1].action == "normal" and not answer.of(RingUpdate)
        assert c.svc.stats.reports_stale_accepted == 1 and c.svc.stats.reports_rejected == 0
        clock.advance_to(clock.now() + 2.0)
        assert not c.alive(10)  # probed, silent, removed
        # Not its predecessor in the cited version either: rejected, answered with the delta(s)
        # it missed (one message), not the whole ring.
        before = len(answer.sent)
        c.report(12, 30, ring_version=cited)
        assert c.alive(30) and c.svc.stats.reports_rejected == 1
        (catch_up,) = [m for m in answer.sent[before:] if isinstance(m, RingDelta)]
        assert (catch_up.base_version, catch_up.version) == (cited, c.svc.ring.version)
        assert decode_ids(catch_up.added) == [11] and decode_ids(catch_up.removed) == [10]

    drive(body)


class SharedLink(RecordingLink):
    """A node's link that also notes, in one list for all nodes, who got what when."""

    def __init__(self, mid: int, log: list[tuple[int, Any]]) -> None:
        super().__init__()
        self.mid, self.log = mid, log

    def send(self, msg: Any) -> None:
        super().send(msg)
        self.log.append((self.mid, msg))


def test_a_ring_change_goes_to_the_nodes_it_concerns_first() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 200)
        clock.advance_to(clock.now() + 1.0)
        order: list[tuple[int, Any]] = []
        for mid in list(c.links):
            record(c.rm, mid).link = c.links[mid] = SharedLink(mid, order)
        c.rm.remove_node(record(c.rm, 10), "x")
        clock.advance_to(clock.now() + 1.0)
        got = [mid for mid, m in order if isinstance(m, RingDelta)]
        assert len(got) == 199
        # 10's predecessors and successors: 9 and 11 (id ring), 137 and 74 (stride-64 ring).
        assert set(got[:4]) == {9, 11, 74, 137}

    drive(body)


def test_a_node_several_versions_behind_gets_one_combined_delta() -> None:
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 10)
        clock.advance_to(clock.now() + 1.0)
        held = c.svc.ring.published
        for mid in (3, 5, 7):  # three published versions
            c.rm.remove_node(record(c.rm, mid), "x")
            clock.advance_to(clock.now() + 1.0)
        link = c.links[2]
        before = len(link.sent)
        c.rm.receive(link, RingSyncRequest(machine_id=2, version=held.version))
        (delta,) = link.sent[before:]
        assert isinstance(delta, RingDelta) and delta.base_version == held.version
        assert delta.version == c.svc.ring.version and held.apply(delta).ids == (1, 2, 4, 6, 8, 9, 10)
        assert c.svc.stats.syncs_combined == 1

    drive(body)


def test_pending_changes_are_flushed_by_count_and_by_age_on_a_handled_message() -> None:
    def body(clock: FakeClock) -> None:
        # By count: the third pending removal publishes at once, long before batch_s; joins,
        # however many, wait for join_batch (10 s here).
        c = Cluster(clock, 12, batch_s=10.0, batch_max=3, join_batch=10.0 / 3.0)
        assert not c.links[1].of(RingDelta)
        clock.advance_to(10.0)
        assert [decode_ids(d.added) for d in c.links[1].of(RingDelta)] == [list(range(1, 13))]
        for mid in (4, 6):
            c.rm.remove_node(record(c.rm, mid), "x")
        c.rm.receive(c.links[2], RingSyncRequest(machine_id=2, version=c.svc.ring.version))
        assert len(c.links[1].of(RingDelta)) == 1
        c.rm.remove_node(record(c.rm, 8), "x")
        c.rm.receive(c.links[2], RingSyncRequest(machine_id=2, version=c.svc.ring.version))
        assert [decode_ids(d.removed) for d in c.links[1].of(RingDelta)][1:] == [[4, 6, 8]]
        assert clock.now() == 10.0

    drive(body)

    def starved(clock: FakeClock) -> None:
        # By age: the flush timer has not run (the loop is busy draining the RM's queue), but the
        # next message the RM handles finds the batch older than batch_s and publishes it.
        c = Cluster(clock, 3, batch_s=0.5)
        assert not c.links[1].of(RingDelta)
        clock.t = 0.6  # time passes; no timer gets to run
        c.rm.receive(c.links[2], RingSyncRequest(machine_id=2, version=-1))
        assert [decode_ids(d.added) for d in c.links[1].of(RingDelta)] == [[1, 2, 3]]

    drive(starved)


def test_the_paper_ring_does_not_remove_on_a_report_from_an_older_version() -> None:
    # It removes on one report, without a probe: a watcher behind a join (its old predecessor
    # already sends to the newcomer) must not remove a live node.
    def body(clock: FakeClock) -> None:
        c = Cluster(clock, 20, detector="ring")
        clock.advance_to(clock.now() + 1.0)
        c.rm.remove_node(record(c.rm, 11), "x")
        clock.advance_to(clock.now() + 1.0)
        cited = c.svc.ring.version
        c.rm.receive(Link(), Register(address="new", resources=Resources(4, 8)))
        clock.advance_to(clock.now() + 1.0)
        c.report(12, 10, ring_version=cited)
        assert c.alive(10) and c.svc.stats.reports_rejected == 1

    drive(body)
