"""The mass-failure brake (``rm.membership.service``): the membership service confirms a removal
here, and the brake decides whether it happens now.

- A suspect whose connection its host closed goes at once: that is evidence of death, not the
  silence a partition or an overloaded RM could also cause.
- After a removal proved false (a removed node answered its probe: the network, not the node,
  failed) every removal stops for ``brake_window_s``; suspects are held meanwhile.
- More removals in one window than ``brake_fraction`` of the ring plausibly crashes: the rest
  are held.

Held suspects are probed again when the window moves (``release``). One brake lasts one RM life.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from ringmon.config import RingConfig
from ringmon.membership import Membership
from ringmon.rtt import RttEstimator
from rm.membership.host import MembershipHost
from rm.membership.ring_publisher import MembershipCounters
from rm.membership.suspicion import Suspicion
from rm.ports import Clock, Log, Timer
from rm.state.cluster import NodeRecord


class RemovalBrake:
    def __init__(
        self, config: RingConfig, clock: Clock, log: Log, stats: MembershipCounters, ring: Membership,
        suspects: dict[int, Suspicion], host: MembershipHost, rtt: RttEstimator,
        remove: Callable[[NodeRecord, str], None], reopen: Callable[[NodeRecord], object],
    ) -> None:
        """``suspects``: the service's open suspicions (a held suspect's is closed); ``remove``:
        removes a node now; ``reopen``: opens a new suspicion of a held node."""
        self._cfg = config
        self._clock = clock
        self._log = log
        self._stats = stats
        self._ring = ring
        self._suspects = suspects
        self._host = host
        self._rtt = rtt
        self._remove = remove
        self._reopen = reopen
        self.held: dict[int, float] = {}  # machine id -> held since
        self._removed_at: deque[float] = deque()
        self._braking = False
        self._network_until = -math.inf  # a removal proved false: removals stop until then
        self._release_timer: Timer | None = None

    def close(self) -> None:
        if self._release_timer is not None:
            self._release_timer.cancel()

    def removed(self, now: float) -> None:
        """A node was removed (it counts to the window)."""
        self._removed_at.append(now)

    def _close_suspicion(self, machine_id: int) -> None:
        sus = self._suspects.pop(machine_id, None)
        if sus is not None and sus.timer is not None:
            sus.timer.cancel()

    def confirm(self, node: NodeRecord, reason: str) -> None:
        """The probe says ``node`` is gone: remove it, or hold it."""
        if node.link.closed:
            self._close_suspicion(node.machine_id)
            self._remove(node, f"{reason}; connection closed")
            return
        now = self._clock.now()
        window = self._cfg.brake_window_s
        while self._removed_at and self._removed_at[0] <= now - window:
            self._removed_at.popleft()
        if now < self._network_until:
            # A removal just proved false: silence means nothing now. Hold, probe again later.
            self._close_suspicion(node.machine_id)
            if node.machine_id not in self.held:
                self.held[node.machine_id] = now
                self._stats.network_held += 1
            if self._release_timer is None:
                self._release_timer = self._clock.call_later(self._network_until - now, self.release)
            return
        budget = max(1, int(self._cfg.brake_fraction * (len(self._ring) + len(self._removed_at))))
        if len(self._removed_at) >= budget:
            # More removals in one window than crashes plausibly cause: hold, re-probe later.
            self._close_suspicion(node.machine_id)
            if node.machine_id not in self.held:
                self.held[node.machine_id] = now
                self._stats.brake_held += 1
            if not self._braking:
                self._braking = True
                self._log.warning("ring.brake_engaged", removed_in_window=len(self._removed_at),
                                  budget=budget, window_s=window)
            if self._release_timer is None:
                self._release_timer = self._clock.call_later(
                    self._removed_at[0] + window - now, self.release
                )
            return
        self._remove(node, reason)

    def late_answer(self, machine_id: int) -> None:
        """A node removed as silent answered its probe: the network, not the node, failed."""
        self._stats.late_answers += 1
        now = self._clock.now()
        if now >= self._network_until:
            self._log.warning("ring.brake_network", machine_id=machine_id, window_s=self._cfg.brake_window_s,
                              rtt_timeout_s=round(self._rtt.timeout(), 3))
        self._network_until = now + self._cfg.brake_window_s

    def release(self) -> None:
        """The brake window moved: probe held suspects again (they may be back)."""
        self._release_timer = None
        now = self._clock.now()
        if now < self._network_until - 1e-9:  # a later false removal moved the end of the stop
            self._release_timer = self._clock.call_later(self._network_until - now, self.release)
            return
        held, self.held = self.held, {}
        if not held:
            self._braking = False
            return
        self._log.info("ring.brake_release", held=len(held))
        for mid in sorted(held):
            node = self._host.node(mid)
            if node is None or mid in self._suspects:
                continue
            self._reopen(node)
