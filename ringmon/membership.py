"""Ring membership: a versioned, sorted set of machine ids, the rings laid over it, and the
batched, versioned deltas that carry its changes to the nodes.

A detector uses one ring per *stride*. Stride 1 is the paper's ring (ids in ascending order);
stride s orders ids by ``(id mod s, id)``, so in that ring the successor of id is normally
id + s. Consecutive ids (a rack) are then watched, in the stride ring, by nodes outside the
block, which is what lets a block crash be found in one round.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from ringmon.protocol import Ring, RingDelta


def encode_ids(ids: Iterable[int]) -> tuple[int, ...]:
    """Sorted ids as first value then gaps: small integers, one msgpack byte each when < 128.
    (Built-ins only, no loop in Python: a join storm's delta carries tens of thousands of ids.)"""
    return _gaps(sorted(ids))


def _gaps(ordered: list[int]) -> tuple[int, ...]:
    return tuple(map(operator.sub, ordered, [0, *ordered[:-1]]))


def decode_ids(gaps: Sequence[int]) -> list[int]:
    return list(itertools.accumulate(gaps))


# Queries of one stride a view answers by walking its ids before it builds that stride's order.
INDEX_AFTER_QUERIES = 32

class RingView:
    """An immutable ring version with lazily built per-stride orders (shared by every node that
    holds this version; see ``ViewCache``). ``endpoint(mid)`` says where member ``mid``'s process
    listens for peers ("" when all nodes share one process)."""

    __slots__ = ("_host_of", "_members", "_orders", "_queries", "_where", "hosts", "ids", "version")

    def __init__(
        self, version: int, ids: tuple[int, ...], hosts: tuple[str, ...] = (),
        where: dict[int, int] | None = None, host_of: tuple[int, ...] | None = None,
    ) -> None:
        """``where``: member id -> index in ``hosts``, or ``host_of``: those indexes in the order
        of ``ids`` (only with ``hosts``; each is built from the other when first needed)."""
        self.version = version
        self.ids = ids
        self._members: frozenset[int] | None = None
        self.hosts = hosts
        self._where: dict[int, int] | None = where if where is not None or host_of is not None else {}
        self._host_of = host_of
        self._orders: dict[int, tuple[list[int], dict[int, int]]] = {}
        self._queries: dict[int, int] = {}

    @classmethod
    def of(cls, ring: Ring) -> RingView:
        if not ring.hosts:
            return cls(ring.version, tuple(ring.ids))
        return cls(ring.version, tuple(ring.ids), ring.hosts, host_of=tuple(ring.host_of))

    @property
    def members(self) -> frozenset[int]:
        """The ids as a set, built when first asked (the RM publishes a view per version and
        seldom asks; at 50,000 members a set costs a few ms)."""
        members = self._members
        if members is None:
            members = self._members = frozenset(self.ids)
        return members

    def __contains__(self, mid: int) -> bool:
        ids = self.ids
        k = bisect.bisect_left(ids, mid)
        return k < len(ids) and ids[k] == mid

    def _where_of(self) -> dict[int, int]:
        where = self._where
        if where is None:
            assert self._host_of is not None  # one of the two is given
            where = self._where = dict(zip(self.ids, self._host_of, strict=True))
        return where

    def ring(self) -> Ring:
        if not self.hosts:
            return Ring(version=self.version, ids=self.ids)
        host_of = self._host_of
        if host_of is None:
            host_of = self._host_of = tuple(map(self._where_of().__getitem__, self.ids))
        return Ring(version=self.version, ids=self.ids, hosts=self.hosts, host_of=host_of)

    def endpoint(self, mid: int) -> str:
        k = self._where_of().get(mid, -1)
        return self.hosts[k] if k >= 0 else ""

    def _order(self, stride: int) -> tuple[list[int], dict[int, int]]:
        cached = self._orders.get(stride)
        if cached is None:
            # ``ids`` ascend, so a stable sort by residue alone orders by (id mod stride, id), with
            # no Python call per id (a key function built tuples: 25 ms at 50,000 ids, now 5).
            order = list(self.ids) if stride == 1 else sorted(self.ids, key=stride.__rmod__)
            cached = (order, dict(zip(order, range(len(order)), strict=True)))
            self._orders[stride] = cached
        return cached

    def _indexed(self, stride: int) -> bool:
        """Whether to answer from the stride's built order: a view asked a few times (the RM
        checking a report against an older version) is answered by a walk over the sorted ids
        instead, since building the order costs a sort and a position table of every member (ms at
        tens of thousands)."""
        if stride in self._orders:
            return True
        n = self._queries[stride] = self._queries.get(stride, 0) + 1
        return n > INDEX_AFTER_QUERIES

    def successor(self, mid: int, stride: int = 1) -> int | None:
        """The next member after ``mid`` in the stride ring; None if ``mid`` is alone or absent."""
        if not self._indexed(stride):
            return self._walk(mid, stride, 1)
        order, pos = self._order(stride)
        k = pos.get(mid)
        if k is None or len(order) < 2:
            return None
        return order[(k + 1) % len(order)]

    def predecessor(self, mid: int, stride: int = 1) -> int | None:
        if not self._indexed(stride):
            return self._walk(mid, stride, -1)
        order, pos = self._order(stride)
        k = pos.get(mid)
        if k is None or len(order) < 2:
            return None
        return order[k - 1]

    def _walk(self, mid: int, stride: int, step: int) -> int | None:
        """``mid``'s neighbour (``step`` 1: successor, -1: predecessor) in the order by (id mod
        stride, id), found in the sorted ids: first among its own residue class next to it, else
        the nearest end of the nearest non-empty class, cycling. About ``stride`` steps where ids
        are dense; the same answers as the built order (a property test compares them)."""
        ids = self.ids
        n = len(ids)
        k = bisect.bisect_left(ids, mid)
        if k == n or ids[k] != mid or n < 2:
            return None
        r = mid % stride
        j = k + step
        while 0 <= j < n:  # the same residue class, next to mid
            if ids[j] % stride == r:
                return ids[j]
            j += step
        # The nearest other class in the cycle: for the predecessor the classes below r (then
        # from the top), whose largest member comes first when walking down from the end; for the
        # successor the classes above r (then from 0), smallest member walking up from the start.
        best: tuple[int, int] | None = None  # (distance in classes, id)
        j = n - 1 if step < 0 else 0
        while 0 <= j < n:
            i = ids[j]
            d = ((r - i % stride) if step < 0 else (i % stride - r)) % stride
            if d == 0:  # mid's own class wraps only when mid is its only member
                d = stride
            if best is None or d < best[0]:
                best = (d, i)
                if d == 1:
                    break
            j += step
        return None if best is None else best[1]

    def apply(self, delta: RingDelta) -> RingView:
        if delta.base_version != self.version:
            raise ValueError(f"delta {delta.base_version}->{delta.version} does not apply to {self.version}")
        removed = set(decode_ids(delta.removed))
        added = decode_ids(delta.added)
        ids = [i for i in self.ids if i not in removed]
        ids.extend(added)
        ids.sort()
        hosts = delta.hosts or self.hosts
        where: dict[int, int] | None = None
        if hosts:
            where = {i: k for i, k in self._where_of().items() if i not in removed}
            where.update(zip(added, delta.added_hosts, strict=True))
        return RingView(delta.version, tuple(ids), hosts, where)


class ViewCache:
    """Applying one delta to one version gives one result, and a whole ring of one version is
    one view: the nodes of one process share them instead of each building a 7,500-entry copy
    (ring versions never repeat, across RM restarts too)."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._views: OrderedDict[tuple[int, int], RingView] = OrderedDict()
        self._whole: OrderedDict[int, RingView] = OrderedDict()

    def of(self, ring: Ring) -> RingView:
        hit = self._whole.get(ring.version)
        if hit is None or len(hit.ids) != len(ring.ids):
            hit = RingView.of(ring)
            self._whole[ring.version] = hit
            if len(self._whole) > self._size:
                self._whole.popitem(last=False)
        return hit

    def apply(self, view: RingView, delta: RingDelta) -> RingView:
        key = (view.version, delta.version)
        hit = self._views.get(key)
        if hit is None:
            hit = view.apply(delta)
            self._views[key] = hit
            if len(self._views) > self._size:
                self._views.popitem(last=False)
        return hit


class Membership:
    """The RM's ring: current members (with pending, not yet published, changes) and the
    published version. ``flush`` turns the pending changes into one delta."""

    def __init__(self, strides: Sequence[int] = (1,), version: int = 0) -> None:
        """``version``: the first published version (a restarted RM starts above its old ones)."""
        self.strides = tuple(strides)
        self._ids: list[int] = []
        # Where members' processes listen for peers: a table of endpoints (append-only within
        # one RM life) and each member's index in it. Empty when no member announced one.
        self._hosts: list[str] = []
        self._host_index: dict[str, int] = {}
        self._where: dict[int, int] = {}
        self._host_of: list[int] = []  # beside ``_ids``: each member's index in ``_hosts`` (-1: none)
        # Each stride ring's order as sort keys (``_key``); stride 1's is ``_ids`` itself.
        self._orders: dict[int, list[int]] = {s: self._ids if s == 1 else [] for s in self.strides}
        self._added: set[int] = set()
        self._removed: set[int] = set()
        self._readded: set[int] = set()  # removed and inserted again since the last flush
        # The pending joins as the next delta carries them, built as they come while they come in
        # ascending order (a start-up storm's ids do): the delta is then a copy, not a pass over
        # tens of thousands of ids (each a cache miss in a big process). None: not in order.
        self._joins: tuple[list[int], list[int], list[int]] | None = ([], [], [])  # ids, gaps, hosts
        self.published = RingView(version, ())
        # The last delta's removed and added ids, in order (decoded already, for its sender).
        self.flushed: tuple[list[int], list[int]] = ([], [])

    # ---- membership --------------------------------------------------------------------

    def __contains__(self, mid: int) -> bool:
        k = bisect.bisect_left(self._ids, mid)
        return k < len(self._ids) and self._ids[k] == mid

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def version(self) -> int:
        return self.published.version

    @property
    def pending(self) -> bool:
        return bool(self._added or self._removed)

    @property
    def pending_removals(self) -> int:
        return len(self._removed)

    def insert(self, mid: int, endpoint: str = "") -> None:
        """Add member ``mid``, whose process listens for peers at ``endpoint`` ("" if none)."""
        if mid in self:
            raise ValueError(f"machine id {mid} is already in the ring")
        k = -1
        if endpoint:
            k = self._host_index.get(endpoint, -1)
            if k < 0:
                k = self._host_index[endpoint] = len(self._hosts)
                self._hosts.append(endpoint)
            self._where[mid] = k
        ids = self._ids
        at = bisect.bisect_left(ids, mid)
        ids.insert(at, mid)
        self._host_of.insert(at, k)
        for s, order in self._orders.items():
            if order is not ids:
                bisect.insort(order, _key(mid, s))
        # Removed and re-added in one batch: ``flush`` sends it as removed *and* added, so nodes
        # still learn it is a new member.
        if mid in self._removed:
            self._removed.discard(mid)
            self._readded.add(mid)
        self._added.add(mid)
        joins = self._joins
        if joins is not None:
            ordered, gaps, hosts = joins
            last = ordered[-1] if ordered else 0
            if mid > last:
                ordered.append(mid)
                gaps.append(mid - last)
                hosts.append(k)
            else:
                self._joins = None

    def remove(self, mid: int) -> None:
        k = bisect.bisect_left(self._ids, mid)
        if k == len(self._ids) or self._ids[k] != mid:
            raise ValueError(f"machine id {mid} is not in the ring")
        del self._ids[k]
        del self._host_of[k]
        self._where.pop(mid, None)
        for s, order in self._orders.items():
            if order is not self._ids:
                del order[bisect.bisect_left(order, _key(mid, s))]
        if mid in self._added:
            self._added.discard(mid)
            self._joins = None
        self._readded.discard(mid)
        if mid in self.published:
            self._removed.add(mid)

    def watchers(self, mid: int) -> list[int]:
        """The members that watch ``mid`` (its successor in each ring), current membership."""
        out: list[int] = []
        for s, order in self._orders.items():
            if len(order) < 2:
                continue
            key = _key(mid, s)
            k = bisect.bisect_left(order, key)
            if k == len(order) or order[k] != key:
                continue
            w = order[(k + 1) % len(order)] & _ID_MASK
            if w not in out:
                out.append(w)
        return out

    def neighbours(self, mids: Iterable[int]) -> set[int]:
        """The members next to ``mids`` in every stride ring, current membership: for a member,
        its predecessor and successor; for an id no longer in the ring, the members either side
        of the gap it left. These are the nodes whose watched or watching set a change of
        ``mids`` alters (members of ``mids`` themselves are not included)."""
        out: set[int] = set()
        for s, order in self._orders.items():
            n = len(order)
            if n < 2:
                continue
            for mid in mids:
                key = _key(mid, s)
                k = bisect.bisect_left(order, key)
                present = k < n and order[k] == key
                out.add(order[(k + 1 if present else k) % n] & _ID_MASK)
                out.add(order[k - 1] & _ID_MASK)
        return out.difference(mids)

    # ---- publishing --------------------------------------------------------------------

    def flush(self) -> RingDelta | None:
        """Publish the pending changes as one delta (None if nothing changed)."""
        if not self.pending:
            return None
        base = self.published
        # An id removed and re-inserted within the batch is both removed (old life) and added.
        readded = self._readded
        hosts = tuple(self._hosts)
        removed = sorted(self._removed | readded)
        joins = self._joins
        if joins is not None:
            added, gaps, added_hosts = joins[0], tuple(joins[1]), tuple(joins[2]) if hosts else ()
        else:
            added = sorted(self._added)
            gaps = _gaps(added)
            added_hosts = tuple(map(self._where.__getitem__, added)) if hosts else ()
        self.flushed = (removed, added)
        delta = RingDelta(
            base_version=base.version,
            version=base.version + 1,
            added=gaps,
            removed=_gaps(removed),
            hosts=hosts,
            added_hosts=added_hosts,
        )
        self.published = RingView(
            base.version + 1, tuple(self._ids), hosts, host_of=tuple(self._host_of) if hosts else None,
        )
        self._added.clear()
        self._removed.clear()
        self._readded.clear()
        self._joins = ([], [], [])
        return delta


def combine(deltas: Sequence[RingDelta]) -> RingDelta:
    """One delta equal to applying ``deltas`` (consecutive versions) in turn: a node behind by
    several versions catches up with one message. An id removed and added again within the span
    stays removed *and* added (a new life, as in ``Membership.flush``)."""
    if not deltas:
        raise ValueError("no deltas to combine")
    removed: set[int] = set()
    added: dict[int, int] = {}  # id -> host index (-1: no hosts)
    version = deltas[0].base_version
    for d in deltas:
        if d.base_version != version:
            raise ValueError(f"delta {d.base_version}->{d.version} does not follow {version}")
        version = d.version
        for mid in decode_ids(d.removed):
            if added.pop(mid, None) is None:
                removed.add(mid)
        hosts = d.added_hosts or (-1,) * len(d.added)
        added.update(zip(decode_ids(d.added), hosts, strict=True))
    last = deltas[-1]  # the endpoint table is append-only within an RM life: the last is the longest
    return RingDelta(
        base_version=deltas[0].base_version,
        version=version,
        added=encode_ids(added),
        removed=encode_ids(removed),
        hosts=last.hosts,
        added_hosts=tuple(map(added.__getitem__, sorted(added))) if last.hosts else (),
    )


# A stride ring orders ids by (id mod stride, id): one integer per id, compared in C (ids < 2^40).
_ID_BITS = 40
_ID_MASK = (1 << _ID_BITS) - 1


def _key(mid: int, stride: int) -> int:
    return ((mid % stride) << _ID_BITS) | mid if stride > 1 else mid
