"""The per-node ring monitor: sends liveness to its successors, watches its predecessors, reports
silent ones to the RM and follows the RM's ring versions.

Two detectors share this code (``RingConfig.detector``):

- ``ring`` (paper 004 §1.3): one ring; runs inside the node's event loop (a stalled node stops
  sending *and* watching: the harness gives it the node process's clock and channels, which hold
  everything while the process is paused); at each tick a predecessor not heard since the
  previous tick is reported; the RM removes on that one report.
- ``kring``: one ring per stride, so every node has ``len(strides)`` watchers, and a block of
  consecutive ids is watched from outside the block. The monitor is a watchdog beside the event
  loop: it keeps sending while the loop stalls and puts the stall's age in every liveness, so a
  hung node is removed after ``grace_s`` and a briefly stalled one never. A watcher pings a
  predecessor silent for ``suspect_after`` intervals (one a ring change just gave it, at once)
  and reports only if the ping goes unanswered too; it does not trust silence measured while it
  was itself late; the RM probes the suspect before removing it (``rm.membership.service``).

Sans-IO: timers on the injected clock; messages come in through ``from_peer`` / ``from_rm`` and go
out through the ``PeerChannel`` and the ``to_rm`` callable. The node drives ``join`` / ``leave``.

This module holds the monitor's lifecycle, its tick (sending liveness) and what peers send; the
watching of predecessors is ringmon/watching.py, following the RM's ring (and anti-entropy)
ringmon/following.py, the fields they share ringmon/monitor_fields.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ringmon.config import RingConfig
from ringmon.following import RingFollowing
from ringmon.membership import RingView, ViewCache
from ringmon.monitor_fields import EPS, SYNC_RETRY_INTERVALS, Watch
from ringmon.ports import Clock, Log, PeerChannel, RingCounters, Timer
from ringmon.protocol import (
    Liveness,
    LivenessPing,
    Probe,
    Ring,
    RingDelta,
    RingUpdate,
    UnlivelinessResponse,
)
from ringmon.rtt import RttEstimator
from ringmon.sleepers import SleepLedger, settle_ticks
from ringmon.watching import PredecessorWatching


class RingMonitor(PredecessorWatching, RingFollowing):
    __slots__ = ()  # the fields: MonitorFields (ringmon/monitor_fields.py)

    def __init__(
        self,
        config: RingConfig,
        clock: Clock,
        peers: PeerChannel,
        to_rm: Callable[[Any], None],
        views: ViewCache,
        stats: RingCounters,
        log: Log,
        stall_age: Callable[[], float] = lambda: 0.0,
        on_removed: Callable[[], None] | None = None,
        phase_s: float = 0.0,
        can_sleep: bool = False,
        sleepers: SleepLedger | None = None,
    ) -> None:
        """``can_sleep`` (kring): the host calls ``loop_stalled`` when the node's loop stalls, so
        a monitor with nothing to send or watch by itself may skip its ticks (``settle``);
        ``sleepers``: the ledger of the process's sleeping monitors (they share ``stats``; None:
        one of its own)."""
        self._cfg = config
        self._clock = clock
        self._peers = peers
        self._to_rm = to_rm
        self._views = views
        self.stats = stats
        self._log = log
        self._stall_age = stall_age
        self._on_removed = on_removed
        self._phase = phase_s % config.interval_s
        self._interval = config.interval_s
        self._strides = config.ring_strides()
        # The paper's detector reports a predecessor unheard for one tick, at its tick.
        self._in_loop = config.detector == "ring"
        self._suspect_s = config.suspect_after * config.interval_s
        self._ping_s = config.ping_timeout * config.interval_s
        # A ping waits ping_timeout plus the round-trip timeout measured on our own pings: with
        # peers 0.7 s away, a 0.3 s wait reported every predecessor it pinged.
        self.ping_rtt = RttEstimator(cap_s=self._suspect_s)
        self.machine_id = -1
        self.view: RingView | None = None
        self.active = False
        self.member = False
        self.successors: tuple[int, ...] = ()
        self.watching: dict[int, Watch] = {}
        self._seq = 0
        self._next_tick = 0.0
        # kring: successors whose watcher holds our liveness as a timestamp the channel vouches
        # for (see ``PeerChannel.stopped``), at the version we advertised: nothing to send them
        # until that version or our state changes.
        self._told: list[int] = []  # (a list: a set is 216 bytes however few it holds)
        self._told_version = -2
        # Asleep since this tick time (-1: awake): every successor holds our liveness as a
        # promise, every predecessor's is one, we advertise the ring we hold and are not
        # stalled; the ticks that do nothing are counted, not run (``settle``).
        self._can_sleep = can_sleep and config.detector != "ring"
        self._asleep_at = -1.0
        self._tick_timer: Timer | None = None
        self._check_timer: Timer | None = None
        self._check_at = float("inf")
        self._sync_asked = -1  # the newest version we asked the RM for, and when
        self._sync_at = -1e18
        self._joined_version = -1  # the ring version in our RegisterResponse, and when
        self._joined_at = 0.0
        self._prev_version = -1  # the version held before the current one, and since when
        self._adopted_at = 0.0
        self._sleepers = sleepers if sleepers is not None else SleepLedger()
        self._sleepers.join(self)

    # ---- lifecycle ---------------------------------------------------------------------

    def join(self, machine_id: int, ring: Ring | None) -> None:
        """The node registered as ``machine_id``; ``ring`` is the RM's ring at that moment."""
        self.leave()
        self.machine_id = machine_id
        self.active = True
        self._peers.bind(machine_id, self)
        now = self._clock.now()
        k = (now - self._phase) // self._interval + 1
        self._next_tick = self._phase + k * self._interval
        self._tick_timer = self._clock.call_later(self._next_tick - now, self._tick)
        self._asleep_at = -1.0
        self._joined_at = now
        if ring is not None:
            self._joined_version = ring.version
            self._adopt(self._views.of(ring))

    def leave(self) -> None:
        """Stop sending and watching (crash, resync, shutdown). Sends nothing."""
        self._settle_awake()
        if self.machine_id >= 0:
            self._peers.unbind(self.machine_id, self)
            last = self._next_tick - self._interval
            for dst in self.successors:
                self._peers.stopped(dst, self.machine_id, last)
        for timer in (self._tick_timer, self._check_timer):
            if timer is not None:
                timer.cancel()
        self._tick_timer = self._check_timer = None
        self._check_at = float("inf")
        self.active = self.member = False
        self.view = None
        self.successors = ()
        self._told.clear()
        self.watching = {}
        self._sync_asked = self._joined_version = self._prev_version = -1
        self._sync_at = -1e18

    # ---- timers ------------------------------------------------------------------------

    def _tick(self) -> None:
        self._tick_timer = None
        if not self.active:
            return
        now = self._clock.now()
        late = now - self._next_tick
        while self._next_tick <= now + EPS:
            self._next_tick += self._interval
        if (
            not self.member
            and self.view is not None
            and now - self._joined_at >= SYNC_RETRY_INTERVALS * self._interval
        ):
            self._want_sync(self.view.version + 1)  # registered, yet not in the ring we hold
        if self.successors:
            self._seq += 1
            stalled, version = self._stall_age(), self._advertised()
            told = self._told
            if version != self._told_version:
                told.clear()  # our watchers should hear the version we now advertise
                self._told_version = version
            msg: Liveness | None = None
            touch, me = self._peers.touch, self.machine_id
            for dst in self.successors:
                if stalled == 0.0:
                    if dst in told:
                        continue
                    if touch(dst, me, version):
                        if not self._in_loop:  # the paper's ring needs a timestamp each tick
                            told.append(dst)  # (not in it: skipped above)
                        continue
                if dst in told:
                    told.remove(dst)
                if msg is None:
                    msg = Liveness(
                        sender=self.machine_id, seq=self._seq, stalled_s=stalled, ring_version=version
                    )
                self._to_peer(dst, msg)
            self.stats.liveness_sent += len(self.successors)
        if self._in_loop:
            for pred, w in self.watching.items():
                if not w.heard:
                    self._report(pred, "silent")
                w.heard = False
        elif late > self._cfg.lag_tolerance * self._interval:
            # We were late ourselves: the silence we measured may be ours. Start over.
            self.stats.self_lag_skips += 1
            for w in self.watching.values():
                w.last = now
                w.pinged_at = -1.0
            self._arm(now + self._suspect_s)
        elif (
            self._can_sleep and self.member and self.successors and len(self._told) == len(self.successors)
            and self.view is not None and self._told_version == self.view.version
            and all(w.vouched for w in self.watching.values())
        ):
            self._asleep_at = self._next_tick
            self._sleepers.add(self)
            return
        self._tick_timer = self._clock.call_later(self._next_tick - now, self._tick)

    def settle(self) -> None:
        """Count the ticks a sleeping monitor skipped up to now as the liveness they would have
        sent (what a reader of the counters sees is as if it had ticked)."""
        if self._asleep_at >= 0:
            self._settle_awake()
            self._asleep_at = self._next_tick
            self._sleepers.add(self)

    def _settle_awake(self) -> None:
        """Settle a sleeping monitor by itself, out of its ledger, and wake it (no timer)."""
        if self._asleep_at < 0:
            return
        self._sleepers.remove(self)
        self.stats.liveness_sent += settle_ticks(self, self._clock.now()) * len(self.successors)
        self._asleep_at = -1.0

    def _wake(self) -> None:
        if self._asleep_at < 0:
            return
        self._settle_awake()
        self._tick_timer = self._clock.call_later(self._next_tick - self._clock.now(), self._tick)

    def loop_stalled(self) -> None:
        """The node's event loop has stalled: tick again, to put the stall's age in liveness."""
        self._wake()

    # ---- inbound -----------------------------------------------------------------------

    def from_peer(self, msg: Any) -> None:
        """A message on the node<->node channel."""
        if not self.active:
            return
        match msg:
            case Liveness(sender=sender, stalled_s=stalled, ring_version=version):
                if version > (self.view.version if self.view is not None else -1):
                    self._want_sync(version)
                elif version < self._advertised():
                    self._seq += 1
                    self._to_peer(sender, self._liveness())  # tell the sender it is behind
                    self.stats.liveness_sent += 1
                w = self.watching.get(sender)
                if w is None:
                    return  # not (or no longer) our predecessor
                now = self._clock.now()
                if w.ping_sent >= 0:
                    self.ping_rtt.sample(now - w.ping_sent)
                    w.ping_sent = -1.0
                w.last = now
                w.pinged_at = -1.0
                w.heard = True
                if w.vouched:  # as a message it may stop without notice: our timer watches
                    w.vouched = False
                    self._arm(now + self._suspect_s)
                    self._wake()
                if (
                    not self._in_loop
                    and stalled > self._cfg.grace_s
                    and now - w.stall_reported_at >= self._interval
                ):
                    w.stall_reported_at = now
                    self._report(sender, "stalled")
            case LivenessPing(sender=sender):
                self._seq += 1
                self._to_peer(sender, self._liveness())
                self.stats.liveness_sent += 1
            case RingUpdate() | RingDelta() | UnlivelinessResponse() | Probe():
                # Ring changes come from the RM only (paper 004 flow 3).
                self.stats.updates_rejected += 1
                self._log.warning("ring.update_rejected", machine_id=self.machine_id, type=type(msg).__name__)
            case _:
                self._log.warning("ring.unexpected_message", type=type(msg).__name__)

    def _to_peer(self, dst: int, msg: Any) -> None:
        """Send to member ``dst``, at the endpoint our ring says its process listens on."""
        view = self.view
        self._peers.send(dst, msg, view.endpoint(dst) if view is not None else "")

    def _advertised(self) -> int:
        """The newest ring version we have held for a whole interval (-1: none)."""
        if self.view is None:
            return -1
        if self._clock.now() - self._adopted_at >= self._interval - EPS:
            return self.view.version
        return self._prev_version

    def _liveness(self) -> Liveness:
        if self._asleep_at >= 0:
            self._sleepers.catch_up(self)  # its sequence, as if every sample had settled it
        return Liveness(
            sender=self.machine_id, seq=self._seq, stalled_s=self._stall_age(),
            ring_version=self._advertised(),
        )


def settle_all(monitors: Sequence[RingMonitor]) -> None:
    """``settle`` the sleeping monitors of ``monitors``' ledgers (a process's monitors share one:
    a sampler reads the counters of every sleeping monitor at every sample), each ledger once."""
    ledgers: dict[int, SleepLedger] = {}
    for m in monitors:
        ledgers.setdefault(id(m._sleepers), m._sleepers)
    for ledger in ledgers.values():
        ledger.settle()
