"""RM membership service (design.md §2 steps 1, 4, 5): the ring, unliveliness reports, removal,
the mass-failure brake, and batched ring deltas pushed to the nodes.

Wiring: the RM builds it when the ring is on and routes every ring message from nodes to
``handle`` (through the inbound queue, so they queue and cost like heartbeats); the tracker asks
it for the ring in every ``RegisterResponse`` and tells it about joins, and whatever removes a
node tells it the node left. It reaches the RM only through ``MembershipHost``.

Removal rule: ``ring`` detector — one valid report removes the suspect (the paper). ``kring`` —
one valid report makes the RM probe the suspect on its own connection; it is removed only if
the probe is not answered (with its probe id, on the suspect's own link) within
``probe_timeout`` plus the measured round-trip timeout (answers are handled in arrival order,
behind everything the RM already queued, so an RM stall does not turn into removals) or the
answer says its loop has been stalled longer than ``grace_s``.

Telling a slow or lossy network from a dead node (docs/ring.md "Robustness"):

- every probe attempt has its own id, so each answer is a round-trip sample, timed when it
  arrives (``ack_arrived``, before the RM's queue); the probe waits ``probe_timeout`` + RTO;
- the RM probes the *reporter* too (a control: it is alive, it just reported). If the control is
  not answered by the deadline either, the RM cannot reach a live node in time: the network is
  slow, so the probe goes another round with twice the wait instead of removing;
- with the per-attempt loss measured on live nodes, a round ends with more attempts while every
  attempt being lost is still plausible (``ringmon.rtt.LOSS_TARGET``); all of this within
  ``probe_max_wait`` intervals, after which the suspect is confirmed;
- a removed node that answers after all proves the network, not the node, failed: the brake
  then stops every removal for a window (held suspects are probed again afterwards);
- when no node at all has said anything for ``orphan_after`` intervals, no live watcher is in
  evidence (every node crashed, or one node alone): the RM probes members itself.
"""

from __future__ import annotations

import msgspec

from ringmon.config import RingConfig
from ringmon.membership import Membership
from ringmon.protocol import (
    Probe,
    ProbeAck,
    Ring,
    RingMessage,
    RingSyncRequest,
    UnlivelinessReport,
    UnlivelinessResponse,
)
from ringmon.rtt import LossEstimator, RttEstimator
from rm.membership.brake import RemovalBrake
from rm.membership.host import MembershipHost
from rm.membership.orphan_sweep import OrphanSweep
from rm.membership.ring_publisher import RECENT_DELTAS, MembershipCounters, RingPublisher
from rm.membership.suspicion import Attempt, DisconnectExpired, ProbeExpired, Suspicion
from rm.ports import Clock, Link, Log
from rm.protocol import HeartbeatResponse
from rm.queues.outbox import Outbox
from rm.state.cluster import NodeRecord
from rm.views.snapshot import MembershipSnapshot, RingSnapshot

__all__ = [
    "RECENT_DELTAS", "DisconnectExpired", "MembershipCounters", "MembershipHost", "MembershipService",
    "ProbeExpired",
]


class MembershipService:
    def __init__(
        self, config: RingConfig, clock: Clock, log: Log, host: MembershipHost, outbox: Outbox,
    ) -> None:
        self._cfg = config
        self._outbox = outbox
        self._clock = clock
        self._log = log
        self._host = host
        self.stats = MembershipCounters()
        self._probe_first = config.detector == "kring"
        self._encoder = msgspec.msgpack.Encoder()
        self._publisher: RingPublisher | None = None
        self._brake: RemovalBrake | None = None
        self._suspects: dict[int, Suspicion] = {}
        self._attempts: dict[int, Attempt] = {}
        self._base_wait = config.probe_timeout * config.interval_s
        self._max_wait = max(self._base_wait, config.probe_max_wait * config.interval_s)
        # What the network is like lasts across RM lives (it is the same network).
        self.rtt = RttEstimator(cap_s=self._max_wait)
        self.loss = LossEstimator()
        self._orphans = OrphanSweep(config, clock, log, host, self._idle, self._probe_orphan)
        self.reset()

    def reset(self) -> None:
        """A new RM life starts with an empty ring whose versions are above every earlier life's
        (the RM's epoch in the high bits), so nodes never take a new ring for an old one."""
        if self._brake is not None:
            self._brake.close()
        for sus in self._suspects.values():
            if sus.timer is not None:
                sus.timer.cancel()
        if self._publisher is not None:
            self._publisher.close()
        self._orphans.close()
        self.ring = Membership(self._cfg.ring_strides(), version=self._host.epoch << 32)
        self._publisher = RingPublisher(
            self.ring, self._cfg, self._clock, self._log, self._host, self.stats, self._outbox,
        )
        self._suspects = {}
        self._attempts = {}
        self._brake = RemovalBrake(
            self._cfg, self._clock, self._log, self.stats, self.ring, self._suspects, self._host, self.rtt,
            self._remove, self._open,
        )
        self._next_probe = 1

    @property
    def interval_s(self) -> float:
        return self._cfg.interval_s

    @property
    def brake(self) -> RemovalBrake:
        assert self._brake is not None  # built by reset()
        return self._brake

    @property
    def publisher(self) -> RingPublisher:
        assert self._publisher is not None  # built by reset()
        return self._publisher

    @property
    def published_at(self) -> float:
        """Emulated time of the last published ring change."""
        return self.publisher.published_at

    def flush_due(self) -> None:
        """The RM handled a message: publish pending ring changes if the batch is due."""
        self.publisher.flush_due()

    def quiet_since(self) -> float | None:
        """When the ring last changed, or None while a change is on its way (pending joins or
        removals, open suspicions, suspects held by the brake). For the invariant checker."""
        if self.publisher.waiting or self._suspects or self.brake.held:
            return None
        return self.published_at

    # ---- joins and removals ------------------------------------------------------------

    def current_ring(self) -> Ring:
        """The published ring, for a registering node (it learns itself from the next delta)."""
        return self.publisher.current_ring()

    def _on_sync(self, link: Link, msg: RingSyncRequest) -> None:
        """A node is behind: the deltas since its version (combined) or the whole ring."""
        self.stats.syncs += 1
        self.publisher.catch_up(link, msg.version)

    def node_joined(self, node: NodeRecord) -> None:
        """A new node joins the ring; a known one re-registering has just shown it is alive."""
        sus = self._suspects.pop(node.machine_id, None)
        if sus is not None and sus.timer is not None:
            sus.timer.cancel()
        if node.machine_id not in self.ring:
            self.ring.insert(node.machine_id, node.peer_endpoint)
            self.publisher.changed(removal=False)

    def node_left(self, node: NodeRecord) -> None:
        mid = node.machine_id
        sus = self._suspects.pop(mid, None)
        if sus is not None and sus.timer is not None:
            sus.timer.cancel()
        self.brake.held.pop(mid, None)
        if mid in self.ring:
            self.ring.remove(mid)
            self.publisher.changed(removal=True)

    # ---- node messages -----------------------------------------------------------------

    def handle(self, link: Link | None, msg: RingMessage) -> None:
        """A ring message from a node (``link``: its connection), or an internal probe deadline."""
        match msg:
            case UnlivelinessReport() if link is not None:
                self._on_report(link, msg)
            case ProbeAck() if link is not None:
                self._on_ack(link, msg)
            case ProbeExpired():
                self._on_expired(msg)
            case DisconnectExpired():
                self._on_disconnect_expired(msg)
            case RingSyncRequest() if link is not None:
                self._on_sync(link, msg)
            case _:
                self._log.warning("rm.unexpected_message", type=type(msg).__name__)

    def _on_report(self, link: Link, msg: UnlivelinessReport) -> None:
        self.stats.reports += 1
        reporter = self._host.node(msg.reporter)
        if reporter is None or reporter.link is not link:
            self.stats.reports_unregistered += 1
            self._log.warning("ring.report_rejected", reporter=msg.reporter, suspect=msg.suspect,
                              why="reporter not registered")
            self._outbox.send(link, UnlivelinessResponse(action="resync"))
            return
        suspect = self._host.node(msg.suspect)
        ring = self.ring
        valid = suspect is not None and msg.suspect in ring
        if valid and msg.reporter not in ring.watchers(msg.suspect):
            # A watcher in the ring its reporter holds (a delta still on its way to it): its
            # report is as good as a current watcher's; rejecting it cost a detection round. Only
            # where a report opens a probe: the paper's ring removes on one report, and a watcher
            # behind a join (its old predecessor now sends to the newcomer) would remove a live node.
            pub = self.publisher
            valid = self._probe_first and pub.watched_in(msg.ring_version, msg.reporter, msg.suspect)
            self.stats.reports_stale_accepted += valid
        if not valid:
            # Not (or no longer) consistent with our ring: change nothing; a reporter behind gets
            # what it missed (one combined delta, or the whole ring if it is too far behind).
            self.stats.reports_rejected += 1
            self._log.info("ring.report_rejected", reporter=msg.reporter, suspect=msg.suspect,
                           why="not a watcher of the suspect in the current ring")
            self._outbox.send(link, UnlivelinessResponse(action="normal"))
            self.publisher.catch_up(link, msg.ring_version)
            return
        assert suspect is not None
        self._outbox.send(link, UnlivelinessResponse(action="normal"))
        if not self._probe_first:
            self._remove(suspect, f"ring report by {msg.reporter}")
            return
        sus = self._suspects.get(msg.suspect)
        if sus is None:
            sus = self._open(suspect, reporter)
        sus.reporters.add(msg.reporter)

    def _open(self, node: NodeRecord, reporter: NodeRecord | None = None) -> Suspicion:
        """Suspect ``node``: probe it (and ``reporter``, alive since it just reported, as the
        control that tells a slow network from a dead suspect)."""
        sus = self._suspects[node.machine_id] = Suspicion(self._next_probe, self._clock.now())
        self.stats.probes += 1
        if reporter is not None and self._probe_first:
            sus.control = reporter
        self._round(node, sus)
        return sus

    def _round(self, node: NodeRecord, sus: Suspicion) -> None:
        """One round: ``probe_attempts`` probes spread over the wait, one control probe."""
        now = self._clock.now()
        cfg = self._cfg
        wait = (self._base_wait + self.rtt.timeout()) * (1 << min(sus.slow, 16))
        left = sus.since + self._max_wait - now
        wait = max(min(wait, left), min(self._base_wait, left), 0.0)
        sus.round_start, sus.round_wait = now, wait
        sus.round += 1
        self._attempt(node, sus, False)
        attempts = cfg.probe_attempts
        for k in range(1, attempts):
            self._clock.call_later(wait * k / attempts, self._reprobe, node, sus, sus.round)
        ctl = sus.control
        sus.control_ok = True
        if ctl is not None and self._host.node(ctl.machine_id) is ctl and not ctl.link.closed \
                and ctl.machine_id not in self._suspects:
            sus.control_ok = False
            self.stats.controls += 1
            self._attempt(ctl, sus, True)
        expired = ProbeExpired(machine_id=node.machine_id, probe_id=sus.probe_id, round=sus.round)
        sus.timer = self._clock.call_later(wait, self._host.enqueue, expired)

    def _attempt(self, node: NodeRecord, sus: Suspicion, to_control: bool) -> None:
        now = self._clock.now()
        attempts = self._attempts
        # Forget attempts too old to be answered usefully (a late answer still counts a while).
        horizon = now - 2 * (self._max_wait + self._cfg.brake_window_s)
        while attempts:
            first = next(iter(attempts.values()))
            if first.sent_at >= horizon:
                break
            del attempts[next(iter(attempts))]
        pid = self._next_probe
        self._next_probe += 1
        attempts[pid] = Attempt(sus, node.machine_id, node.link, now, to_control)
        if not to_control:
            sus.sent += 1
        self._outbox.send(node.link, Probe(probe_id=pid, machine_id=node.machine_id))

    def _reprobe(self, node: NodeRecord, sus: Suspicion, round_: int) -> None:
        if (
            self._suspects.get(node.machine_id) is sus and sus.round == round_
            and self._host.node(node.machine_id) is node
        ):
            self._attempt(node, sus, False)

    def ack_arrived(self, link: Link, msg: ProbeAck) -> None:
        """A probe answer reached the RM (before its queue): a round-trip sample."""
        a = self._attempts.get(msg.probe_id)
        if a is not None and a.arrived < 0 and a.machine_id == msg.machine_id and a.link is link:
            a.arrived = self._clock.now()
            self.rtt.sample(a.arrived - a.sent_at)

    def _on_ack(self, link: Link, msg: ProbeAck) -> None:
        a = self._attempts.get(msg.probe_id)
        if a is None or a.machine_id != msg.machine_id:
            return  # not a probe of ours to that node (a guess)
        if a.link is not link:
            # Only the probed node, on the link it registered on, can refute the suspicion: a
            # peer guessing the probe id must not keep a dead node in the ring.
            self.stats.acks_rejected += 1
            self._log.warning("ring.ack_rejected", machine_id=msg.machine_id, why="not the node's link")
            return
        a.answered = True
        sus = a.sus
        if a.to_control:
            sus.control_ok = True
            return
        first, sus.answered = not sus.answered, True
        node = self._host.node(msg.machine_id)
        if sus.removed:
            if first and sus.expired:
                self.brake.late_answer(msg.machine_id)
            return
        if self._suspects.get(msg.machine_id) is not sus or node is None or node.link is not link:
            if first and node is not None and self.brake.held.pop(msg.machine_id, None) is not None:
                self.stats.refuted += 1  # held by the brake, and alive after all
            return  # an answer to a suspicion already closed
        if msg.stalled_s > self._cfg.grace_s:
            self.brake.confirm(node, f"stalled {msg.stalled_s:.1f}s > grace")
            return
        # Loss on the way to a live node: attempts sent before the answered one were lost.
        lost = sum(
            1 for b in self._attempts.values()
            if b.sus is sus and not b.to_control and not b.answered and b.sent_at < a.sent_at
        )
        self.loss.outcome(lost, 1)
        self.stats.probe_attempts_lost += lost
        self.stats.probe_attempts_answered += 1
        del self._suspects[msg.machine_id]
        if sus.timer is not None:
            sus.timer.cancel()
        if sus.orphan:
            return  # checked on, alive: nobody had suspected it
        self.stats.refuted += 1
        self._log.info("ring.refuted", machine_id=msg.machine_id, reporters=sorted(sus.reporters))

    def node_disconnected(self, node: NodeRecord) -> None:
        """``node``'s RM connection was closed: unless it registers again within the grace, probe
        it (on the closed connection no answer can come)."""
        if node.machine_id in self.ring:
            self.stats.disconnects += 1
            grace = self._cfg.disconnect_grace * self._cfg.interval_s
            self._clock.call_later(grace, self._host.enqueue, DisconnectExpired(machine_id=node.machine_id))

    def _on_disconnect_expired(self, msg: DisconnectExpired) -> None:
        node = self._host.node(msg.machine_id)
        if node is None or not node.link.closed or msg.machine_id in self._suspects:
            return  # gone already, or back on a new connection, or being probed
        self._open(node)

    def _on_expired(self, msg: ProbeExpired) -> None:
        sus = self._suspects.get(msg.machine_id)
        node = self._host.node(msg.machine_id)
        if sus is None or sus.probe_id != msg.probe_id or sus.round != msg.round or node is None:
            return
        now = self._clock.now()
        if now - sus.since < self._max_wait - 1e-9 and not node.link.closed:
            # Answers measured since the round began may say the wait was too short.
            due = sus.round_start + (self._base_wait + self.rtt.timeout()) * (1 << min(sus.slow, 16))
            due = min(due, sus.since + self._max_wait)
            if due > now + 1e-9:
                sus.timer = self._clock.call_later(due - now, self._host.enqueue, msg)
                return
            slow = not sus.control_ok  # the live reporter did not answer in time either
            if slow or sus.sent < self.loss.attempts_needed():
                sus.slow += slow
                self.stats.probe_rounds_extended += 1
                self._round(node, sus)
                return
        sus.expired = True
        if sus.reporters:
            why = f"reported by {sorted(sus.reporters)}"
        else:
            why = "no live watcher" if not node.link.closed else "connection closed"
        self.brake.confirm(node, f"silent; {why}; probe unanswered")

    # ---- removal (paced by the brake, rm/membership/brake.py) ------------------------------

    def _remove(self, node: NodeRecord, reason: str) -> None:
        sus = self._suspects.get(node.machine_id)
        if sus is not None:
            sus.removed = True  # an answer after this proves the removal false
        self.brake.removed(self._clock.now())
        self.stats.removals += 1
        # If it is alive after all (stalled past the grace), it must not run on out of the cluster
        # with nothing to report (delta mode): tell it to register again, on its node channel (so
        # it comes after anything the RM said before, e.g. a registration answer it has not read).
        resync = HeartbeatResponse(action="resync", heartbeat_id=node.last_response_id)
        self.stats.bytes_removal += len(self._encoder.encode(resync))
        self._outbox.send(node.link, resync)
        self._host.remove_node(node, reason)

    # ---- no live watcher -------------------------------------------------------------------

    def sweep(self, last_inbound_at: float) -> None:
        """The RM's periodic look (every ring interval): see ``rm.membership.orphan_sweep``."""
        self._orphans.sweep(last_inbound_at, len(self.ring))

    def _idle(self, node: NodeRecord) -> bool:
        mid = node.machine_id
        return mid in self.ring and mid not in self._suspects and mid not in self.brake.held

    def _probe_orphan(self, node: NodeRecord) -> None:
        self.stats.orphan_probes += 1
        self._open(node).orphan = True

    # ---- views -------------------------------------------------------------------------------

    def snapshot(self) -> MembershipSnapshot:
        s = self.stats
        return MembershipSnapshot(
            version=self.ring.version, members=len(self.ring), suspects=len(self._suspects),
            reports=s.reports, reports_rejected=s.reports_rejected + s.reports_unregistered,
            probes=s.probes, refuted=s.refuted, removals=s.removals, brake_held=s.brake_held,
            deltas=s.deltas, syncs=s.syncs, ring_messages=s.ring_messages, bytes_join=s.bytes_join,
            bytes_removal=s.bytes_removal, probe_attempts_lost=s.probe_attempts_lost,
            probe_attempts_answered=s.probe_attempts_answered,
            probe_rounds_extended=s.probe_rounds_extended, late_answers=s.late_answers,
        )

    def ring_snapshot(self) -> RingSnapshot:
        pub = self.ring.published
        return RingSnapshot(
            version=pub.version, members=pub.ids, suspected=tuple(sorted(self._suspects)),
            held=tuple(sorted(self.brake.held)),
        )

