"""No live watcher in evidence (``rm.membership.service``): when no node has said anything for
``orphan_after`` intervals (every node crashed, or one node alone), the RM probes members itself,
least recently heard first, at most the brake's fraction per look, paced over one interval."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from ringmon.config import RingConfig
from rm.membership.ring_publisher import NodeDirectory
from rm.ports import Clock, Log, Timer
from rm.state.cluster import NodeRecord


class OrphanSweep:
    def __init__(
        self, config: RingConfig, clock: Clock, log: Log, nodes: NodeDirectory,
        idle: Callable[[NodeRecord], bool], probe: Callable[[NodeRecord], None],
    ) -> None:
        """``idle(node)``: a registered member not suspected or held; ``probe(node)``: open a
        suspicion on it."""
        self._cfg = config
        self._clock = clock
        self._log = log
        self._nodes = nodes
        self._idle = idle
        self._probe = probe
        self._timer: Timer | None = None
        self._queue: deque[NodeRecord] = deque()  # a paced round's members not probed yet
        self._gap = 0.0

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._queue.clear()

    def sweep(self, last_inbound_at: float, members: int) -> None:
        """The RM's periodic look (every ring interval) at a ring of ``members``."""
        cfg = self._cfg
        now = self._clock.now()
        if self._queue or not members or now - last_inbound_at < cfg.orphan_after * cfg.interval_s:
            return
        idle = [n for n in self._nodes.nodes() if self._idle(n)]
        if not idle:
            return
        idle.sort(key=_heard)
        k = max(1, math.ceil(cfg.brake_fraction * members))
        self._log.info("ring.orphan_probe", probed=min(k, len(idle)), members=members,
                       silent_s=round(now - last_inbound_at, 3))
        # Paced over one interval: thousands of probes at once would stall the RM and the nodes.
        self._queue.extend(idle[:k])
        self._gap = cfg.interval_s / k
        self._next()

    def _next(self) -> None:
        self._timer = None
        queue = self._queue
        while queue:
            node = queue.popleft()
            if self._nodes.node(node.machine_id) is node and self._idle(node):
                self._probe(node)
                break
        if queue:
            self._timer = self._clock.call_later(self._gap, self._next)


def _heard(node: NodeRecord) -> float:
    return node.last_heartbeat_at
