"""How a ring monitor watches its predecessors: when each was last heard, pinging one silent for
``suspect_after`` intervals, reporting it when the ping goes unanswered (or its liveness says it
has stalled past ``grace_s``), and liveness that comes as a timestamp the channel vouches for."""

from __future__ import annotations

from typing import Literal

from ringmon.monitor_fields import EPS, MonitorFields
from ringmon.protocol import LivenessPing, UnlivelinessReport


class PredecessorWatching(MonitorFields):
    """Part of ``RingMonitor`` (ringmon/monitor.py)."""
    __slots__ = ()  # the fields: MonitorFields (ringmon/monitor_fields.py)


    def _arm(self, at: float) -> None:
        if self._in_loop or at >= self._check_at - EPS:
            return
        if self._check_timer is not None:
            self._check_timer.cancel()
        self._check_at = at
        self._check_timer = self._clock.call_later(at - self._clock.now(), self._check)

    def _check(self) -> None:
        self._check_timer = None
        self._check_at = float("inf")
        if not self.active:
            return
        now = self._clock.now()
        # The common case, once an interval: every predecessor was heard lately and none is
        # being pinged; only the next deadline is to be armed, and none for those vouched for.
        suspect = self._suspect_s - EPS
        oldest = float("inf")
        for w in self.watching.values():
            if w.vouched:
                continue
            if w.pinged_at >= 0 or now - w.last >= suspect:
                break
            if w.last < oldest:
                oldest = w.last
        else:
            if oldest < float("inf"):
                self._arm(oldest + self._suspect_s)
            return
        nxt = float("inf")
        ping_s = self._ping_s + self.ping_rtt.timeout()
        for pred, w in self.watching.items():
            if w.vouched:
                continue
            if w.pinged_at >= 0:
                if now - w.pinged_at >= ping_s - EPS:
                    self._report(pred, "silent")
                    w.pinged_at = -1.0
                    w.last = now  # report again only after another full timeout
                    due = now + self._suspect_s
                else:
                    due = w.pinged_at + ping_s
            elif now - w.last >= self._suspect_s - EPS:
                w.pinged_at = w.ping_sent = now
                self._to_peer(pred, LivenessPing(sender=self.machine_id))
                self.stats.pings_sent += 1
                due = now + ping_s
            else:
                due = w.last + self._suspect_s
            nxt = min(nxt, due)
        if nxt < float("inf"):
            self._arm(nxt)

    def _report(self, suspect: int, reason: Literal["silent", "stalled"]) -> None:
        self.stats.reports_sent += 1
        version = self.view.version if self.view is not None else -1
        self._log.info("ring.suspect", reporter=self.machine_id, suspect=suspect, reason=reason)
        self._to_rm(
            UnlivelinessReport(reporter=self.machine_id, suspect=suspect, ring_version=version, reason=reason)
        )

    def heard_from(self, sender: int, ring_version: int) -> bool:
        """A liveness as a timestamp (see ``PeerChannel.touch``): done here when the message
        would only have set when ``sender`` was last heard; anything more (a newer or older ring
        version to act on, a ping's round trip to sample) needs the message itself."""
        if not self.active:
            return True  # the message would be ignored
        view = self.view
        # A version other than ours (newer: we are behind; older: the sender is) may be news; ours
        # is never older than the one we advertise.
        held = view.version if view is not None else -1
        if ring_version != held and (ring_version > held or ring_version < self._advertised()):
            return False
        w = self.watching.get(sender)
        if w is None:
            return True
        if w.ping_sent >= 0:
            return False
        w.last = self._clock.now()
        w.pinged_at = -1.0
        w.heard = True
        w.vouched = True
        return True

    def sender_stopped(self, sender: int, last_s: float) -> None:
        w = self.watching.get(sender)
        if w is not None and w.vouched:
            w.vouched = False
            w.last = max(w.last, last_s)  # its last tick: when its liveness would have come
            self._arm(w.last + self._suspect_s)
            self._wake()

    def liveness_lossy(self) -> None:
        self._wake()
        self._told.clear()  # as a sender: our liveness must go as messages, which may be lost
        now, interval = self._clock.now(), self._interval
        for w in self.watching.values():
            if w.vouched:
                # Vouched for until now, so it ticked on schedule since we last heard it.
                w.vouched = False
                w.last += (now - w.last + EPS) // interval * interval
                self._arm(w.last + self._suspect_s)
