"""The RM's one way out: every message the RM sends to a node leaves through ``Outbox.send``.

Inbound messages queue (``rm.queues.inbound``, the dispatcher); outbound ones do not: a link's
``send`` never blocks, so the outbox hands each message to its link at once, in the order the RM
decided them. What it adds is one place: what the RM may send is ``rm.protocol.NodeInbound`` (the
type checker holds every sender to it), and metering, tracing or batching the RM's outgoing
traffic is one change here rather than one per sender (a test checks no other module of ``rm``
calls a link's ``send``).
"""

from __future__ import annotations

from rm.ports import Link
from rm.protocol import NodeInbound


class Outbox:
    __slots__ = ()

    def send(self, link: Link, msg: NodeInbound) -> None:
        """``msg`` to the node at the other end of ``link`` (a closed link drops it)."""
        link.send(msg)
