"""How a ring monitor follows the RM's ring: whole rings and deltas adopted in version order, its
successors and predecessors recomputed from each, and its own removal noticed.

Anti-entropy (a lost delta must not leave a node on a stale ring while the ring stays quiet):
every liveness advertises the newest ring version its sender has held for a whole interval (so a
delta still in flight triggers nothing). A node that hears a newer version than it holds, or gets
a delta it cannot apply, asks the RM for the whole ring (``RingSyncRequest``), again after
``SYNC_RETRY_INTERVALS`` if still behind (the request or the answer may be lost). A node that
hears an *older* version answers with its own liveness, so a stale node learns from its successor
as well as its predecessor. A node that registered but has not seen itself in the ring for a
while asks too, and one that sees a newer ring without itself knows the RM dropped it.
"""

from __future__ import annotations

from typing import Any

from ringmon.membership import RingView
from ringmon.monitor_fields import SYNC_RETRY_INTERVALS, MonitorFields, Watch
from ringmon.protocol import (
    LivenessPing,
    Probe,
    ProbeAck,
    Ring,
    RingDelta,
    RingSyncRequest,
    RingUpdate,
    UnlivelinessResponse,
)


class RingFollowing(MonitorFields):
    """Part of ``RingMonitor`` (ringmon/monitor.py)."""
    __slots__ = ()  # the fields: MonitorFields (ringmon/monitor_fields.py)


    def from_rm(self, msg: Any) -> None:
        """A ring message on the node's RM connection."""
        if isinstance(msg, Probe):
            # Alive, even if not (yet) in the ring: answer at once.
            mid = self.machine_id if self.active else msg.machine_id
            self._to_rm(ProbeAck(machine_id=mid, probe_id=msg.probe_id, stalled_s=self._stall_age()))
            return
        if not self.active:
            return
        match msg:
            case RingDelta():
                self._on_delta(msg)
            case RingUpdate(ring=ring):
                self._offer(ring)
            case UnlivelinessResponse(action=action, ring=ring):
                if action == "resync":
                    self._removed()
                elif ring is not None:
                    self._offer(ring)
            case _:
                self._log.warning("ring.unexpected_message", type=type(msg).__name__)

    def _offer(self, ring: Ring) -> None:
        if self.view is not None and ring.version <= self.view.version:
            self.stats.updates_stale += 1
            return
        self._adopt(self._views.of(ring))

    def _on_delta(self, delta: RingDelta) -> None:
        view = self.view
        if view is None or delta.base_version > view.version:
            self._want_sync(delta.version)  # a gap (or no ring yet)
            return
        if delta.version <= view.version or delta.base_version != view.version:
            # Older than ours, or a catch-up (combined) delta from a version we have since left:
            # the deltas after ours come anyway (or anti-entropy asks again).
            self.stats.updates_stale += 1
            return
        self._adopt(self._views.apply(view, delta))

    def _want_sync(self, version: int) -> None:
        """We are behind ``version``: ask for the whole ring, once per version and again only if
        still behind after ``SYNC_RETRY_INTERVALS``."""
        now = self._clock.now()
        if version <= self._sync_asked and now - self._sync_at < SYNC_RETRY_INTERVALS * self._interval:
            return
        self._sync_asked = max(self._sync_asked, version)
        self._sync_at = now
        self.stats.sync_requests += 1
        held = self.view.version if self.view is not None else -1
        self._to_rm(RingSyncRequest(machine_id=self.machine_id, version=held))

    def _adopt(self, view: RingView) -> None:
        self._wake()  # counted with the successors we had; a new ring is news to tell
        was_member = self.member
        if self.view is not None:
            self._prev_version = self._advertised()
        self._adopted_at = self._clock.now()
        self.view = view
        self.stats.updates_applied += 1
        me = self.machine_id
        if me not in view.members:
            # The RM inserts a registered node in the ring version after the one it answered
            # with; a newer ring without us means it dropped us (maybe before we saw ourselves in).
            if self.member or view.version > self._joined_version:
                self._removed()
            return
        self.member = True
        succs: list[int] = []
        preds: list[int] = []
        for s in self._strides:
            nxt, prv = view.successor(me, s), view.predecessor(me, s)
            if nxt is not None and nxt != me and nxt not in succs:
                succs.append(nxt)
            if prv is not None and prv != me and prv not in preds:
                preds.append(prv)
        last = self._next_tick - self._interval
        for dst in self.successors:
            if dst not in succs:
                self._peers.stopped(dst, me, last)
                if dst in self._told:
                    self._told.remove(dst)
        self.successors = tuple(succs)
        now = self._clock.now()
        old = self.watching
        # A kept predecessor keeps its history. A new one, after a ring change, is pinged at once:
        # it is often the next of a block of crashed nodes (its old watcher crashed too, or it
        # was the crashed node's predecessor), and a full suspicion timeout from now made the
        # tail of detection (issue 34). On joining we only start the clock: nobody changed.
        self.watching = {p: old.get(p) or Watch(now) for p in preds}
        if was_member and not self._in_loop:
            for p, w in self.watching.items():
                if p not in old:
                    w.pinged_at = w.ping_sent = now
                    self._to_peer(p, LivenessPing(sender=self.machine_id))
                    self.stats.pings_sent += 1
                    self.stats.new_pred_pings += 1
        ping_s = self._ping_s + self.ping_rtt.timeout()
        self._arm(min((w.pinged_at + ping_s if w.pinged_at >= 0 else w.last + self._suspect_s
                       for w in self.watching.values() if not w.vouched), default=float("inf")))

    def _removed(self) -> None:
        self._log.info("ring.removed_self", machine_id=self.machine_id)
        self.leave()
        if self._on_removed is not None:
            self._on_removed()
