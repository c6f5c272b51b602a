"""In-memory transport: objects handed over through the event loop, with optional latency.

Delivery is FIFO per link and, as over TCP, never happens inside ``send``: in both directions
the receiver gets the message from the event loop (``call_soon``, or a timer with latency).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from emulator.time.clock import Scheduler
from emulator.transport.backoff import backoff_delay
from rm.protocol import Disconnected


class MemoryLink:
    __slots__ = ("_clock", "_deliver", "_in_flight", "_latency", "_on_close", "_post", "closed")

    def __init__(
        self,
        clock: Scheduler,
        deliver: Callable[..., None],
        arg: Any,
        latency_s: float,
    ) -> None:
        self._clock = clock
        # ``deliver(arg, msg)`` (the RM's receive, with the link to answer on) or ``deliver(msg)``
        # (a node's): one callable of the message either way, no test per message.
        self._deliver: Callable[[Any], None] = deliver if arg is None else partial(deliver, arg)
        self._latency = latency_s
        # Without latency a message goes to the loop's next pass (batched with the sends just
        # before it): the clock's method bound once, no test of the latency per message.
        self._post = clock.call_soon_batched if latency_s <= 0 else None
        # An attribute, not a property: a node's sender and the meter read it on every send.
        self.closed = False
        self._on_close: Callable[[], None] | None = None
        # Delayed messages in send order; one timer for the head keeps delivery FIFO (timers that
        # share a deadline are not ordered by the event loop).
        self._in_flight: deque[tuple[float, Any]] = deque()

    def send(self, msg: Any) -> None:
        if self.closed:
            return
        post = self._post
        if post is not None:
            post(_deliver_now, (self, msg))
            return
        self._in_flight.append((self._clock.now() + self._latency, msg))
        if len(self._in_flight) == 1:
            self._clock.call_later(self._latency, self._deliver_due)

    def poster(self) -> Callable[[Any], None] | None:
        """For a link without latency: a callable that sends ``msg`` as ``send`` does, for a sender
        that has seen this end open (a metered node link's reports: one call and one pair less
        each); None with latency. Its messages are checked again on delivery, as ``send``'s are."""
        post = self._post
        return None if post is None else partial(post, self._deliver_if_open)

    def _deliver_if_open(self, msg: Any) -> None:
        if not self.closed:
            self._deliver(msg)

    def _deliver_due(self) -> None:
        q = self._in_flight
        now = self._clock.now()
        while q and q[0][0] <= now + 1e-9:
            self._deliver_if_open(q.popleft()[1])
        if q:
            self._clock.call_later(q[0][0] - now, self._deliver_due)

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when this end closes (it closes the other end)."""
        self._on_close = callback

    def close(self) -> None:
        self.closed = True
        if self._on_close is not None:
            cb, self._on_close = self._on_close, None
            cb()


def _deliver_now(item: tuple[MemoryLink, Any]) -> None:
    # One function for every link: back-to-back sends (an RM broadcast) share one loop entry.
    # ``MemoryLink._deliver_if_open``, inlined: one call less per message.
    link, msg = item
    if not link.closed:
        link._deliver(msg)


class Endpoint(Protocol):
    """A node's end of the transport (``emulator.harness.nodeproc.NodeProcess``)."""

    def attach(self, link: Any) -> None: ...

    def receive(self, msg: Any) -> None: ...

    def resync(self) -> None: ...


class MemoryNetwork:
    """Connects nodes to one RM. ``receive(link, msg)`` (the RM's) gets node messages, with the
    RM-side link to answer on; ``node.receive(msg)`` gets RM messages.

    ``drop_all`` is the RM process dying: every connection closes and each node retries with
    exponential backoff (as the TCP client does) until ``listen`` is called again; on reconnecting
    a node gets a new link and a ``resync()`` call."""

    def __init__(
        self,
        clock: Scheduler,
        receive: Callable[[Any, Any], None] | None,
        latency_s: float = 0.0,
        wrap: Callable[[Any, str], Any] | None = None,
        seed: int = 0,
    ) -> None:
        """``wrap(link, direction)`` may decorate each end (direction "to_rm" or "to_node");
        ``receive`` None: given by ``deliver_to`` before the first ``connect``."""
        self._clock = clock
        self._receive = receive
        self._latency = latency_s
        self._wrap = wrap
        self._rng = random.Random(f"{seed}:reconnect")
        self._links: dict[Endpoint, MemoryLink] = {}
        self.listening = True
        self.reconnects = 0

    def deliver_to(self, receive: Callable[[Any, Any], None]) -> None:
        """The RM's ``receive``, where it is made after the network (links connected later
        deliver to it directly)."""
        self._receive = receive

    def connect(self, node: Endpoint) -> tuple[MemoryLink, MemoryLink]:
        """Returns (node-side link, RM-side link); the node is attached to its side."""
        receive = self._receive
        if receive is None:
            raise RuntimeError("MemoryNetwork.connect: no RM to deliver to yet (deliver_to first)")
        to_node = MemoryLink(self._clock, node.receive, None, self._latency)
        rm_side: Any = to_node if self._wrap is None else self._wrap(to_node, "to_node")
        to_rm = MemoryLink(self._clock, receive, rm_side, self._latency)

        def closed() -> None:
            # Closing either end closes the connection, like a socket; when the node's end went
            # first, the RM hears of it.
            if not to_node.closed:
                to_node.close()
                self._clock.call_soon(receive, rm_side, Disconnected())

        to_node.on_close(to_rm.close)
        to_rm.on_close(closed)
        node.attach(to_rm if self._wrap is None else self._wrap(to_rm, "to_rm"))
        self._links[node] = to_rm
        return to_rm, to_node

    def drop_all(self) -> None:
        """The RM stops listening and every connection breaks."""
        self.listening = False
        links, self._links = self._links, {}
        for node, link in links.items():
            link.close()
            self._clock.call_later(backoff_delay(0, self._rng), self._retry, node, 1)

    def listen(self) -> None:
        self.listening = True

    def _retry(self, node: Endpoint, attempt: int) -> None:
        if not self.listening:
            self._clock.call_later(backoff_delay(attempt, self._rng), self._retry, node, attempt + 1)
            return
        self.connect(node)
        self.reconnects += 1
        node.resync()
