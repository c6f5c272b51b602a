"""Ring membership: a versioned, sorted set of machine ids, the rings laid over it, and the
batched, versioned deltas that carry its changes to the nodes.

A detector uses one ring per *stride*. Stride 1 is the paper's ring (ids in ascending order);
stride s orders ids by ``(id mod s, id)``, so in that ring the successor of id is normally
id + s. Consecutive ids (a rack) are then watched, in the stride ring, by nodes outside the
block, which is what lets a block crash be found in one round.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from ringmon.protocol import Ring, RingDelta


def encode_ids(ids: Iterable[int]) -> tuple[int, ...]:
    """Sorted ids as first value then gaps: small integers, one msgpack byte each when < 128."""
    out: list[int] = []
    prev = 0
    for i in sorted(ids):
        out.append(i - prev)
        prev = i
    return tuple(out)


def decode_ids(gaps: Sequence[int]) -> list[int]:
    out: list[int] = []
    acc = 0
    for g in gaps:
        acc += g
        out.append(acc)
    return out


# Queries of one stride a view answers by walking its ids before it builds that stride's order.
INDEX_AFTER_QUERIES = 32

class RingView:
    """An immutable ring version with lazily built per-stride orders (shared by every node that
    holds this version; see ``ViewCache``). ``endpoint(mid)`` says where member ``mid``'s process
    listens for peers ("" when all nodes share one process)."""

    __slots__ = ("_orders", "_queries", "_where", "hosts", "ids", "members", "version")

    def __init__(
        self, version: int, ids: tuple[int, ...], hosts: tuple[str, ...] = (),
        where: dict[int, int] | None = None,
    ) -> None:
        """``where``: member id -> index in ``hosts`` (only with ``hosts``)."""
        self.version = version
        self.ids = ids
        self.members = frozenset(ids)
        self.hosts = hosts
        self._where = where or {}
        self._orders: dict[int, tuple[list[int], dict[int, int]]] = {}
        self._queries: dict[int, int] = {}

    @classmethod
    def of(cls, ring: Ring) -> RingView:
        where = dict(zip(ring.ids, ring.host_of, strict=True)) if ring.hosts else None
        return cls(ring.version, tuple(ring.ids), ring.hosts, where)

    def ring(self) -> Ring:
        if not self.hosts:
            return Ring(version=self.version, ids=self.ids)
        where = self._where
        return Ring(version=self.version, ids=self.ids, hosts=self.hosts,
                    host_of=tuple(where[i] for i in self.ids))

    def endpoint(self, mid: int) -> str:
        k = self._where.get(mid)
        return self.hosts[k] if k is not None else ""

    def _order(self, stride: int) -> tuple[list[int], dict[int, int]]:
        cached = self._orders.get(stride)
        if cached is None:
            order = list(self.ids) if stride == 1 else sorted(self.ids, key=lambda i: (i % stride, i))
            cached = (order, {m: k for k, m in enumerate(order)})
            self._orders[stride] = cached
        return cached

    def _indexed(self, stride: int) -> bool:
        """Whether to answer from the stride's built order: a view asked a few times (the RM
        checking a report against an older version) is answered by a walk over the sorted ids
        instead, since building the order costs a sort of every member (~18 ms at 24,000)."""
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
            where = {i: k for i, k in self._where.items() if i not in removed}
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
        self._orders: dict[int, list[tuple[int, int]]] = {s: [] for s in self.strides}
        self._added: set[int] = set()
        self._removed: set[int] = set()
        self.published = RingView(version, ())

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
        if endpoint:
            k = self._host_index.get(endpoint)
            if k is None:
                k = self._host_index[endpoint] = len(self._hosts)
                self._hosts.append(endpoint)
            self._where[mid] = k
        bisect.insort(self._ids, mid)
        for s, order in self._orders.items():
            bisect.insort(order, _key(mid, s))
        # Removed and re-added in one batch: ``flush`` sends it as removed *and* added, so nodes
        # still learn it is a new member.
        self._removed.discard(mid)
        self._added.add(mid)

    def remove(self, mid: int) -> None:
        k = bisect.bisect_left(self._ids, mid)
        if k == len(self._ids) or self._ids[k] != mid:
            raise ValueError(f"machine id {mid} is not in the ring")
        del self._ids[k]
        self._where.pop(mid, None)
        for s, order in self._orders.items():
            del order[bisect.bisect_left(order, _key(mid, s))]
        if mid in self._added and mid not in self.published.members:
            self._added.discard(mid)
        else:
            self._added.discard(mid)
            self._removed.add(mid)

    def watchers(self, mid: int) -> list[int]:
        """The members that watch ``mid`` (its successor in each ring), current membership."""
        out: list[int] = []
        for s, order in self._orders.items():
            if len(order) < 2:
                continue
            k = bisect.bisect_left(order, _key(mid, s))
            if k == len(order) or order[k][1] != mid:
                continue
            w = order[(k + 1) % len(order)][1]
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
                k = bisect.bisect_left(order, _key(mid, s))
                present = k < n and order[k][1] == mid
                out.add(order[(k + 1 if present else k) % n][1])
                out.add(order[k - 1][1])
        return out.difference(mids)

    # ---- publishing --------------------------------------------------------------------

    def flush(self) -> RingDelta | None:
        """Publish the pending changes as one delta (None if nothing changed)."""
        if not self.pending:
            return None
        base = self.published
        # An id removed and re-inserted within the batch is both removed (old life) and added.
        readded = {i for i in self._added if i in base.members}
        hosts = tuple(self._hosts)
        where = self._where
        delta = RingDelta(
            base_version=base.version,
            version=base.version + 1,
            added=encode_ids(self._added),
            removed=encode_ids(self._removed | readded),
            hosts=hosts,
            added_hosts=tuple(where[i] for i in sorted(self._added)) if hosts else (),
        )
        self.published = RingView(base.version + 1, tuple(self._ids), hosts, dict(where) if hosts else None)
        self._added.clear()
        self._removed.clear()
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
        added_hosts=tuple(added[i] for i in sorted(added)) if last.hosts else (),
    )


def _key(mid: int, stride: int) -> tuple[int, int]:
    return (mid % stride, mid) if stride > 1 else (0, mid)
