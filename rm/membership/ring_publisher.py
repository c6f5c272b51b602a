"""How the RM publishes ring changes (issue 34): batches of joins and removals become versioned
deltas, sent to the nodes they concern first; a bounded history answers a node that fell behind.

- Batching: a removal waits at most ``batch_s`` (the first pending removal's age) or until
  ``batch_max`` removals are pending; joins alone wait ``join_batch`` intervals (a start-up
  storm is a few deltas, not one per half second: each goes to every node). The
  age is checked by a timer *and* whenever the RM handles a message (``flush_due``): a timer
  starves while the RM drains a long inbound queue, and a delta that tells a watcher its new
  predecessor then reaches it seconds late.
- Order: the nodes next to a changed id in some stride ring (whose predecessor or successor
  changed) get the delta before everyone else; over TCP a 20,000-node burst takes seconds.
  It goes out in bounded steps, one per turn of the RM's loop (``rm.membership.broadcast``), so
  that one flush does not hold the loop for a send per node (80 ms at 50,000 nodes; with a join
  storm's neighbours, 100-190 ms); deltas go out one after the other, so every node gets them in
  version order.
- History: the last ``RECENT_DELTAS`` deltas and the views they produced. A node behind by a
  version the history covers gets one combined delta (``ringmon.membership.combine``), a few
  hundred bytes, instead of the whole ring (78 KB at 20,000 nodes), unless it missed more than
  ``CATCH_UP_MAX_IDS`` changed ids (a start-up storm's joins): combining those held the loop
  10-14 ms at 50,000 nodes, while the whole ring is built once per version for registrations
  anyway. The views let the RM check a report against the ring its reporter held
  (``watched_in``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from typing import Protocol

import msgspec

from ringmon.config import RingConfig
from ringmon.membership import Membership, RingView, combine
from ringmon.protocol import Ring, RingDelta, RingUpdate
from rm.membership.broadcast import Broadcast
from rm.ports import Clock, Link, Log, Timer
from rm.queues.outbox import Outbox
from rm.state.cluster import NodeRecord

# Deltas (and their views) kept to answer a node a few versions behind (older: the whole ring).
RECENT_DELTAS = 32
# A catch-up over more changed ids than this is answered with the whole ring: combining them is a
# few passes over every id in Python (6 ms for a join storm's 50,000), while the whole ring of a
# version is built once for every registration anyway.
CATCH_UP_MAX_IDS = 8192


class MembershipCounters(msgspec.Struct):
    reports: int = 0
    reports_rejected: int = 0
    reports_unregistered: int = 0
    reports_stale_accepted: int = 0  # reports valid in the (older) ring version their reporter cited
    probes: int = 0
    refuted: int = 0
    acks_rejected: int = 0  # probe answers on another link than the probed node's
    removals: int = 0
    brake_held: int = 0
    controls: int = 0  # probes of a reporter, to tell a slow network from a dead suspect
    probe_rounds_extended: int = 0  # probe rounds added for a slow or lossy network
    # Probe attempts to nodes that turned out alive: sent before the answered one (lost), answered.
    probe_attempts_lost: int = 0
    probe_attempts_answered: int = 0
    late_answers: int = 0  # removed nodes that answered their probe afterwards
    network_held: int = 0  # confirmations held because a removal had just proved false
    orphan_probes: int = 0  # members probed with no live watcher in evidence
    disconnects: int = 0  # nodes whose RM connection was closed
    deltas: int = 0
    syncs: int = 0
    syncs_combined: int = 0  # catch-ups answered with one combined delta (not the whole ring)
    ring_messages: int = 0
    # Bytes the RM sends for membership (msgpack size, as on the wire): ring snapshots in
    # register responses and deltas with joins only vs deltas carrying removals and syncs.
    bytes_join: int = 0
    bytes_removal: int = 0


class NodeDirectory(Protocol):
    def node(self, machine_id: int) -> NodeRecord | None: ...

    def nodes(self) -> Collection[NodeRecord]: ...


class RingPublisher:
    """Publishes one RM life's ring (``ring``); the membership service tells it of changes."""

    def __init__(
        self, ring: Membership, config: RingConfig, clock: Clock, log: Log, nodes: NodeDirectory,
        stats: MembershipCounters, outbox: Outbox,
    ) -> None:
        self.ring = ring
        self._batch_s = config.batch_s
        self._join_batch_s = config.join_batch * config.interval_s
        self._batch_max = config.batch_max
        self._clock = clock
        self._log = log
        self._nodes = nodes
        self.stats = stats
        self._outbox = outbox
        self._encoder = msgspec.msgpack.Encoder()
        self._timer: Timer | None = None
        self._pending_since: float | None = None  # the first pending change (a join or a removal)
        self._removal_since: float | None = None  # the first pending removal
        self._timer_at = float("inf")
        self._snapshot: tuple[int, Ring, int, RingUpdate] | None = None
        # (delta, its encoded size, the view it produced), oldest first.
        self._recent: deque[tuple[RingDelta, int, RingView]] = deque(maxlen=RECENT_DELTAS)
        # Combined catch-ups to the current version, by the version they start from: in a join
        # storm hundreds of nodes fall behind by the same versions and ask at once.
        self._combined: dict[int, tuple[RingDelta, int]] = {}
        self.published_at = clock.now()  # emulated time of the last published ring change
        # Deltas on their way to the nodes, oldest first (the first is the one going out).
        self._outgoing: deque[Broadcast] = deque()
        self._broadcast_timer: Timer | None = None

    @property
    def waiting(self) -> bool:
        """A change is pending or its flush is scheduled."""
        return self._pending_since is not None or self.ring.pending

    def close(self) -> None:
        """This RM life ended: nothing more is published or sent."""
        self._cancel_flush()
        if self._broadcast_timer is not None:
            self._broadcast_timer.cancel()
        self._broadcast_timer = None
        self._outgoing.clear()

    def _cancel_flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = float("inf")

    # ---- batching -----------------------------------------------------------------------

    def changed(self, removal: bool) -> None:
        """The ring changed (a join or a removal): publish within ``batch_s`` of the first
        pending removal, or ``join_batch`` intervals of the first pending join."""
        now = self._clock.now()
        if self._pending_since is None:
            self._pending_since = now
        if removal and self._removal_since is None:
            self._removal_since = now
        due = self._due_at()
        if due < self._timer_at:
            self._cancel_flush()
            self._timer_at = due
            self._timer = self._clock.call_later(max(0.0, due - now), self._on_timer)

    def _due_at(self) -> float:
        since = self._pending_since
        if since is None:
            return float("inf")
        due = since + self._join_batch_s
        if self._removal_since is not None:
            due = min(due, self._removal_since + self._batch_s)
        return due

    def flush_due(self) -> None:
        """Publish now if the batch is old enough or holds enough removals (called on every
        message the RM handles)."""
        if self._pending_since is not None and (
            self._clock.now() >= self._due_at() - 1e-9 or self.ring.pending_removals >= self._batch_max
        ):
            self.flush()

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        self.flush()

    def flush(self) -> None:
        self._cancel_flush()
        self._pending_since = self._removal_since = None
        delta = self.ring.flush()
        if delta is None:
            return
        self.stats.deltas += 1
        self._combined.clear()  # catch-ups now end at the new version
        self.published_at = self._clock.now()
        size = len(self._encoder.encode(delta))
        self._recent.append((delta, size, self.ring.published))
        removed, added = self.ring.flushed
        out = Broadcast(delta, removed, added, self.ring, self._nodes.node, self._everyone, self._outbox.send)
        self._outgoing.append(out)
        if len(self._outgoing) == 1:
            if out.small:
                self._broadcast_some()  # its first step now
            else:  # from the loop's next turn: publishing a join storm's delta is a step itself
                self._broadcast_timer = self._clock.call_later(0.0, self._broadcast_some)
        # Every node registered now gets it once: those it concerns first, then the rest.
        count = len(self._nodes.nodes())
        self.stats.ring_messages += count
        if delta.removed:
            self.stats.bytes_removal += size * count
        else:
            self.stats.bytes_join += size * count
        self._log.info(
            "ring.updated", version=delta.version, added=len(delta.added), removed=len(delta.removed),
            members=len(self.ring), recipients=count, first=out.first,
        )

    def _everyone(self) -> list[NodeRecord]:
        return list(self._nodes.nodes())

    def _broadcast_some(self) -> None:
        """One step of the delta going out; the next one on the loop's next turn."""
        self._broadcast_timer = None
        outgoing = self._outgoing
        outgoing[0].step()
        if outgoing[0].done:
            outgoing.popleft()
        if outgoing:
            self._broadcast_timer = self._clock.call_later(0.0, self._broadcast_some)

    # ---- the published ring and its history ----------------------------------------------

    def current_ring(self) -> Ring:
        """The published ring, for a registering node (it learns itself from the next delta)."""
        _, ring, size, _ = self._published()
        self.stats.bytes_join += size
        return ring

    def _published(self) -> tuple[int, Ring, int, RingUpdate]:
        """The published ring, its encoded size and the message that sends it, built once per
        version (one object: a transport sending the same object again need not encode it)."""
        pub = self.ring.published
        snap = self._snapshot
        if snap is None or snap[0] != pub.version:
            ring = pub.ring()
            size = len(self._encoder.encode(ring))
            snap = self._snapshot = (pub.version, ring, size, RingUpdate(ring=ring))
        return snap

    def view(self, version: int) -> RingView | None:
        """The published view of ``version`` if it is the current one or still in the history."""
        if version == self.ring.version:
            return self.ring.published
        for _, _, view in self._recent:
            if view.version == version:
                return view
        return None

    def watched_in(self, version: int, reporter: int, suspect: int) -> bool:
        """``suspect`` was ``reporter``'s predecessor in some stride ring of ``version``."""
        view = self.view(version)
        if view is None or reporter not in view:
            return False
        return any(view.predecessor(reporter, s) == suspect for s in self.ring.strides)

    def catch_up(self, link: Link, version: int) -> None:
        """A node holding ``version`` is behind: one combined delta when the history covers it
        (answering every request with the whole ring made a sync storm at 6,000 nodes in real
        time) and it changes at most ``CATCH_UP_MAX_IDS`` ids, else the whole ring."""
        current = self.ring.version
        if version == current:
            return  # it caught up meanwhile
        recent = self._recent
        missed = [d for d, _, _ in recent if d.version > version]
        if (
            recent and recent[0][0].base_version <= version < current
            and (len(missed) == 1 or sum(len(d.added) + len(d.removed) for d in missed) <= CATCH_UP_MAX_IDS)
        ):
            if len(missed) == 1:
                delta, size = missed[0], next(s for d, s, _ in recent if d is missed[0])
            else:
                hit = self._combined.get(version)
                if hit is None:
                    combined = combine(missed)
                    hit = self._combined[version] = (combined, len(self._encoder.encode(combined)))
                delta, size = hit
            self.stats.syncs_combined += 1
            self.stats.bytes_removal += size
            self._outbox.send(link, delta)
            return
        _, _, size, update = self._published()
        self.stats.bytes_removal += size
        self._outbox.send(link, update)
