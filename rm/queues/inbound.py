"""Admission to the RM's inbound queue: who is served first, and how much a peer may queue.

A message on a registered node's link (or the RM's own, such as a probe deadline) joins the
first class, at most ``max_per_link`` per link at a time (a ``Disconnected`` always fits).
Everything else — registrations, and whatever a peer that registered nothing sends — joins the
low class, served one turn in nine while the first is busy, and holding at most
``max_unregistered`` weight (a message weighs 1 plus the container statuses it carries); past
that it is dropped. A flood from peers without the secret can so delay registrations and take a
ninth of the RM's turns, never starve registered nodes, and what it queues is bounded.
"""

from __future__ import annotations

import msgspec

from rm.config import ServiceTimeConfig
from rm.ports import Link
from rm.protocol import Disconnected, Heartbeat, Register
from rm.queues.dispatcher import Dispatcher
from rm.queues.logbudget import LogBudget

# An honest node has a heartbeat or two and a few ring messages queued at a time.
MAX_PER_LINK = 256
# 100,000 messages or statuses (a few tens of MB): an honest registration burst of ~50,000 nodes
# fits, and a flood queues at most ~10 s of work for an RM that takes 100 µs per message.
MAX_UNREGISTERED = 100_000

Inbound = tuple[Link | None, object]


class AdmissionStatistics(msgspec.Struct, frozen=True):
    dropped_unregistered: int
    dropped_over_link_bound: int


def inbound_cost(st: ServiceTimeConfig, item: Inbound) -> float:
    """The emulated service time of handling one inbound item (seconds)."""
    msg = item[1]
    if isinstance(msg, Heartbeat):
        return (st.heartbeat_us + st.heartbeat_per_status_us * len(msg.statuses)) * 1e-6
    if isinstance(msg, Register):
        return st.register_us * 1e-6
    return st.unliveliness_us * 1e-6


def weight(msg: object) -> int:
    if isinstance(msg, Heartbeat):
        return 1 + len(msg.statuses)
    if isinstance(msg, Register):
        return 1 + len(msg.containers)
    return 1


class InboundAdmission:
    """Counts the messages of each registered link that wait in the queue (not those served at
    once: an idle RM, most of the time, counts nothing)."""

    def __init__(
        self,
        queue: Dispatcher[Inbound],
        noisy: LogBudget,
        max_per_link: int = MAX_PER_LINK,
        max_unregistered: int = MAX_UNREGISTERED,
    ) -> None:
        self._queue = queue
        self._noisy = noisy
        self.max_per_link = max_per_link
        queue.low_limit = max_unregistered
        queue.on_wait = self._may_wait
        queue.on_handled = self._handled
        self._queued: dict[Link, int] = {}
        self.dropped_over_link_bound = 0

    def admit(self, link: Link | None, msg: object, registered: bool) -> None:
        """``registered``: a node is registered on ``link`` now (the caller knows it already)."""
        if link is None or registered:
            self._queue.submit((link, msg))  # bounded per link if it must wait (``_may_wait``)
        elif not self._queue.submit_low((link, msg), weight(msg)):
            self._noisy.warning("rm.inbound_dropped", reason="unregistered class full",
                                type=type(msg).__name__, limit=self._queue.low_limit)

    def _may_wait(self, item: Inbound) -> bool:
        """A first-class item must wait: it fits unless its link has ``max_per_link`` waiting
        (a ``Disconnected`` always fits; the RM's own items are not counted)."""
        link, msg = item
        if link is None or type(msg) is Disconnected:
            return True
        n = self._queued.get(link, 0)
        if n >= self.max_per_link:
            self.dropped_over_link_bound += 1
            self._noisy.warning("rm.inbound_dropped", reason="link bound", type=type(msg).__name__,
                                limit=self.max_per_link)
            return False
        self._queued[link] = n + 1
        return True

    def _handled(self, item: Inbound) -> None:
        """An item that waited is being handled: its link has one less waiting."""
        link = item[0]
        queued = self._queued
        if queued and link is not None:
            n = queued.get(link)
            if n is not None:
                if n > 1:
                    queued[link] = n - 1
                else:
                    del queued[link]

    def clear(self) -> None:
        """The queue was emptied (a crash, the end of the run)."""
        self._queued.clear()

    def statistics(self) -> AdmissionStatistics:
        return AdmissionStatistics(self._queue.dropped, self.dropped_over_link_bound)
