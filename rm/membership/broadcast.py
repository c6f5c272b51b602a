"""A published ring delta on its way to every node, in bounded steps (issue 34).

Order, as it always was: the nodes next to a changed id in some stride ring (whose predecessor or
successor changed) and the nodes added get it first, by id, then everyone else in the order the
cluster took them in. Each step does a bounded amount of work, so that one publication does not
hold the RM's loop (a join storm's delta changes tens of thousands of ids: finding their
neighbours and sending to every node took 100-190 ms at 50,000 nodes in one go): the nodes next
to a change are found ``CHANGED_CHUNK`` changed ids per step, then sent it ``BROADCAST_CHUNK`` per
step, then everyone else as many per step. A delta with at most ``CHANGED_CHUNK`` changes sends
to all the nodes next to them, and to ``BROADCAST_CHUNK`` others, in its first step (a larger
one's first step comes on the loop's next turn: publishing it is a step of its own).
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
    """One delta, the nodes it reached, where each phase stands: finding the nodes next to its
    changes, sending to them (by id), sending to everyone else (in registration order)."""

    __slots__ = ("_added_at", "_changed", "_everyone", "_k", "_near", "_near_at", "_node", "_order",
                 "_removed", "_rest", "_rest_at", "_ring", "_send", "delta", "first")

    def __init__(
        self, delta: RingDelta, removed: Sequence[int], added: Sequence[int], ring: Neighbourhood,
        node: Callable[[int], NodeRecord | None], everyone: Callable[[], list[NodeRecord]],
        send: Callable[[Link, RingDelta], None],
    ) -> None:
        """``removed``, ``added``: the delta's ids, decoded; ``everyone()``: the nodes registered
        now, asked when the rest are sent it (in this order)."""
        self.delta = delta
        self._removed = frozenset(removed)
        self._changed = [*removed, *added]
        self._added_at = len(removed)  # where the added ids start in ``_changed``
        self._k = 0  # changed ids whose neighbours are found
        self._ring = ring
        self._node = node
        self._near: set[int] = set()  # the nodes next to a change, or added
        self._order: list[int] = []  # the same by id, once all are found
        self._near_at = 0  # of them sent it
        self._everyone = everyone
        self._rest: list[NodeRecord] | None = None
        self._rest_at = 0
        self._send = send
        self.first = 0  # nodes sent it first (next to a change, or added)

    @property
    def small(self) -> bool:
        """Its first step finds all the nodes next to its changes."""
        return len(self._changed) <= CHANGED_CHUNK

    @property
    def done(self) -> bool:
        return self._k >= len(self._changed) and self._near_at >= len(self._order) \
            and self._rest is not None and self._rest_at >= len(self._rest)

    def step(self) -> None:
        """One bounded step: the neighbours of the next ``CHANGED_CHUNK`` changed ids; once all
        are found (in the next step, unless the first step found them all), the delta to
        ``BROADCAST_CHUNK`` of them, and to as many others once they have it."""
        changed = self._changed
        k = self._k
        if k < len(changed):
            end = min(len(changed), k + CHANGED_CHUNK)
            near = self._near
            near.update(self._ring.neighbours(changed[k:end]).difference(self._removed))
            near.update(changed[max(k, self._added_at):end])
            self._k = end
            if end < len(changed):
                return
            self._order = sorted(near)
            if k > 0:
                return  # found over several steps: sending is the next one's
        if self._near_at < len(self._order):
            self._to_near(BROADCAST_CHUNK)
            if self._near_at < len(self._order):
                return
        self._to_others(BROADCAST_CHUNK)

    def _to_near(self, most: int) -> None:
        node = self._node
        send = self._send
        delta = self.delta
        k = self._near_at
        end = min(len(self._order), k + most)
        for mid in self._order[k:end]:
            rec = node(mid)
            if rec is not None:
                send(rec.link, delta)
                self.first += 1
        self._near_at = end

    def _to_others(self, most: int) -> None:
        rest = self._rest
        if rest is None:
            rest = self._rest = self._everyone()  # 50,000 nodes: a step's worth of copying
        near = self._near
        send = self._send
        delta = self.delta
        k = self._rest_at
        end = min(len(rest), k + SCAN_CHUNK)
        n = 0
        while k < end:
            rec = rest[k]
            k += 1
            if rec.machine_id not in near:
                send(rec.link, delta)  # a node gone since has a closed link: nothing is sent
                n += 1
                if n == most:
                    break
        self._rest_at = k
