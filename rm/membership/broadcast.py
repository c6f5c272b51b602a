"""A published ring delta on its way to every node, in bounded steps (issue 34).

Order: the nodes next to a changed id in some stride ring (whose predecessor or successor changed)
and the nodes added get it first, then everyone else. Each step does a bounded amount of work, so
that one publication does not hold the RM's loop: the first nodes are found ``CHANGED_CHUNK``
changed ids at a time (a join storm's delta changes tens of thousands: their neighbours and the
sends to them took 100-190 ms at 50,000 nodes in one go), everyone else gets it ``BROADCAST_CHUNK``
nodes per step. A delta with at most ``CHANGED_CHUNK`` changes and ``BROADCAST_CHUNK`` other nodes
goes out whole in its first step, in the order it always had: the first nodes by id, then the
others in the order the cluster took them in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from ringmon.protocol import RingDelta
from rm.ports import Link
from rm.state.cluster import NodeRecord

# Changed ids whose neighbours are found (and sent the delta) per step: ~2 µs of lookups per id
# and stride plus the sends.
CHANGED_CHUNK = 400
# Other nodes sent a delta per step (~1 µs each over TCP).
BROADCAST_CHUNK = 2000
# Nodes looked at per step while skipping those that had it first (a join storm's are most).
SCAN_CHUNK = 4 * BROADCAST_CHUNK


class Neighbourhood(Protocol):
    def neighbours(self, mids: Iterable[int]) -> set[int]: ...


class Broadcast:
    """One delta, the nodes it reached, where each phase stands."""

    __slots__ = ("_added", "_changed", "_k", "_node", "_removed", "_rest", "_rest_at", "_ring",
                 "_send", "delta", "first", "sent")

    def __init__(
        self, delta: RingDelta, removed: Sequence[int], added: Sequence[int], ring: Neighbourhood,
        node: Callable[[int], NodeRecord | None], everyone: list[NodeRecord],
        send: Callable[[Link, RingDelta], None],
    ) -> None:
        """``removed``, ``added``: the delta's ids, decoded; ``everyone``: the nodes registered
        when it was published (the rest are sent it in this order)."""
        self.delta = delta
        self._removed = frozenset(removed)
        self._added = frozenset(added)
        self._changed = [*removed, *added]
        self._k = 0  # changed ids done
        self._ring = ring
        self._node = node
        self._rest = everyone
        self._rest_at = 0
        self._send = send
        self.sent: set[int] = set()  # machine ids sent it
        self.first = 0  # nodes sent it first (next to a change, or added)

    @property
    def done(self) -> bool:
        return self._k >= len(self._changed) and self._rest_at >= len(self._rest)

    def step(self) -> None:
        """One bounded step: the next chunk of changed ids and their neighbours, or, once those
        are done (in the same step if there is room), the next chunk of everyone else."""
        changed = self._changed
        if self._k < len(changed):
            end = min(len(changed), self._k + CHANGED_CHUNK)
            self._first(changed[self._k:end])
            self._k = end
            if end < len(changed):
                return
        self._others(BROADCAST_CHUNK)

    def _first(self, ids: list[int]) -> None:
        near = self._ring.neighbours(ids).difference(self._removed)
        near.update(i for i in ids if i in self._added)
        near.difference_update(self.sent)
        node = self._node
        send = self._send
        delta = self.delta
        for mid in sorted(near):
            rec = node(mid)
            if rec is not None:
                send(rec.link, delta)
                self.first += 1
        self.sent.update(near)

    def _others(self, most: int) -> None:
        rest = self._rest
        sent = self.sent
        send = self._send
        delta = self.delta
        k = self._rest_at
        end = min(len(rest), k + SCAN_CHUNK)
        n = 0
        while k < end:
            rec = rest[k]
            k += 1
            if rec.machine_id not in sent:
                send(rec.link, delta)  # a node gone since has a closed link: nothing is sent
                n += 1
                if n == most:
                    break
        self._rest_at = k
