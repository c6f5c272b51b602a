"""Fair shares: hierarchical DRF by progressive filling on the pooled cluster (design.md §3).

Among the children of a pool (sub-pools and operations) the quantity that rises at the same
weighted rate is the dominant share of each child's *aggregate* usage, as the scheduler compares
them. Each child's share is clamp(level x weight, min(min share, demand), demand), YARN's
``ComputeFairShares``: min shares come first, demand caps. When a resource saturates, every
operation using it stops; the others keep rising. The summed resources ignore node boundaries,
which also makes the result the fragmentation-free bound on utilisation.

Each node of the tree is described by its *curve*: its usage (cpu, ram as capacity fractions) as
a piecewise-linear function of its dominant share. A pool's curve is built from its children's by
walking its level through every breakpoint, so shares come out exact (no bisection).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from itertools import pairwise
from typing import NamedTuple

from rm.protocol import Resources
from rm.state.operations import Operation, Pool

_EPS = 1e-12
_SAT = 1e-9

# (share, cpu, ram): share increasing (equal shares allowed: usage jumps there), usage nondecreasing.
Curve = list[tuple[float, float, float]]


class FairShares(NamedTuple):
    operations: dict[int, float]  # op id -> dominant share
    usage: dict[int, tuple[float, float]]  # op id -> (cpu, ram) as fractions of capacity
    pools: dict[str, float]  # pool name -> dominant share of its aggregate fair usage
    utilization: Resources  # pooled-cluster bound: fraction of each resource used


class _Node:
    __slots__ = ("cap", "children", "curve", "direction", "floor", "levels", "max_cpu", "max_ram", "min_cpu",
                 "min_ram", "name", "op_id", "weight")

    def __init__(self, name: str, weight: float, min_cpu: float, min_ram: float) -> None:
        self.name = name
        self.weight = weight
        self.min_cpu = min_cpu
        self.min_ram = min_ram
        self.max_cpu = self.max_ram = math.inf  # pools: their maximum, as shares of the cluster
        self.children: list[_Node] = []
        self.op_id = -1
        self.direction = (0.0, 0.0)  # leaves: usage per unit of dominant share
        self.cap = 0.0  # largest share: demand met (or frozen by a saturated resource)
        self.floor = 0.0
        self.curve: Curve = []
        # pools: (level, cpu, ram) at each breakpoint of the level; usage is linear in between
        self.levels: list[tuple[float, float, float]] = []


_INF = float("inf")


def _at(curve: Curve, s: float) -> tuple[float, float]:
    """Usage at share ``s`` (the largest usage where the curve jumps at ``s``)."""
    if len(curve) == 2:
        # An operation's curve (and a small pool's): the search below, without searching.
        (s0, c0, r0), (s1, c1, r1) = curve
        if s < s0:
            return (0.0, 0.0)
        if s >= s1:
            return c1, r1
        t = (s - s0) / (s1 - s0) if s1 > s0 else 1.0
        return c0 + t * (c1 - c0), r0 + t * (r1 - r0)
    i = bisect_right(curve, (s, _INF, _INF)) - 1
    if i < 0:
        return (0.0, 0.0)
    if i >= len(curve) - 1:
        return curve[-1][1], curve[-1][2]
    s0, c0, r0 = curve[i]
    s1, c1, r1 = curve[i + 1]
    t = (s - s0) / (s1 - s0) if s1 > s0 else 1.0
    return c0 + t * (c1 - c0), r0 + t * (r1 - r0)


def _floor_share(curve: Curve, min_cpu: float, min_ram: float) -> float:
    """Smallest share at which the node stops being 'needy' for the scheduler: its usage of its
    dominant resource (CPU on a tie) reaches its min share of that resource."""
    if min_cpu <= 0 and min_ram <= 0:
        return 0.0

    def met(c: float, r: float) -> bool:
        if c <= 0 and r <= 0:  # nothing used yet: below a positive min share whichever dominates
            return False
        return c >= min_cpu - _EPS if c >= r else r >= min_ram - _EPS

    for (s0, c0, r0), (s1, c1, r1) in pairwise(curve):
        if not met(c1, r1):
            continue
        # The condition first holds inside this segment: cut it where dominance flips, then solve
        # the dominant resource's linear equation in the piece where that happens.
        cuts = [0.0, 1.0]
        dc, dr = c1 - c0, r1 - r0
        if (c0 - r0) * (c1 - r1) < 0 and dc != dr:
            cuts.insert(1, (r0 - c0) / (dc - dr))
        for a, b in pairwise(cuts):
            cb, rb = c0 + b * dc, r0 + b * dr
            if not met(cb, rb):
                continue
            ca, ra = c0 + a * dc, r0 + a * dr
            if met(ca, ra):
                return s0 + a * (s1 - s0)
            mid = (a + b) / 2
            cpu_dom = c0 + mid * dc >= r0 + mid * dr
            lo, hi, target = (ca, cb, min_cpu) if cpu_dom else (ra, rb, min_ram)
            t = a + (b - a) * ((target - lo) / (hi - lo) if hi > lo else 1.0)
            return s0 + min(max(t, a), b) * (s1 - s0)
    return curve[-1][0]


def _ceiling_share(curve: Curve, max_cpu: float, max_ram: float) -> float:
    """Largest share at which the node's usage stays within its maximum of both resources."""
    for (s0, c0, r0), (s1, c1, r1) in pairwise(curve):
        if c1 <= max_cpu + _EPS and r1 <= max_ram + _EPS:
            continue
        t = 1.0
        if c1 > max_cpu + _EPS:
            t = min(t, (max_cpu - c0) / (c1 - c0) if c1 > c0 else 0.0)
        if r1 > max_ram + _EPS:
            t = min(t, (max_ram - r0) / (r1 - r0) if r1 > r0 else 0.0)
        return s0 + max(t, 0.0) * (s1 - s0)
    return curve[-1][0]


def _child_share(k: _Node, level: float) -> float:
    return min(max(level * k.weight, k.floor), k.cap)


def _sum_at(kids: list[_Node], shares: list[float]) -> tuple[float, float]:
    c = r = 0.0
    for k, s in zip(kids, shares, strict=True):
        u = _at(k.curve, s)
        c += u[0]
        r += u[1]
    return c, r


# What ``_sum_at_level`` reads of a child, taken once per pool build rather than per level:
# (weight, floor, cap, curve, the curve's last point).
_Kid = tuple[float, float, float, Curve, tuple[float, float, float]]


def _searched(curve: Curve) -> Curve:
    """The curve ``_at`` searches, less a first point that shares its share with the next (a
    pool's curve starts (0, 0, 0), (0, 0, 0) while its children use nothing at level 0): the
    search never stops there at a share >= 0, so a one-child pool's curve is searched as the
    two points it is."""
    if len(curve) > 2 and curve[0][0] == curve[1][0]:
        return curve[1:]
    return curve


def _specs(kids: list[_Node]) -> list[_Kid]:
    return [(k.weight, k.floor, k.cap, _searched(k.curve), k.curve[-1]) for k in kids]


def _sum_at_level(kids: list[_Kid], level: float) -> tuple[float, float]:
    """``_sum_at(kids, [_child_share(k, level) for k in kids])`` in one loop (the same sums, in
    the same order): a pool's curve takes it at every breakpoint of every child."""
    c = r = 0.0
    for weight, floor, cap, curve, end in kids:
        s = level * weight  # _child_share, as max() and min() pick
        if floor > s:
            s = floor
        if cap < s:
            s = cap
        if s >= end[0]:
            # At or past its last point (a child at its cap, at every level above its own): _at's
            # end of the curve, with no search.
            c += end[1]
            r += end[2]
            continue
        if len(curve) != 2:
            # _at, inlined (a pool's curve: the root takes it at each of its ~2 x children levels).
            i = bisect_right(curve, (s, _INF, _INF)) - 1
            if i < 0:
                continue  # no usage below the curve (adding 0.0 changes no sum: they are >= +0.0)
            s0, c0, r0 = curve[i]
            s1, c1, r1 = curve[i + 1]
            t = (s - s0) / (s1 - s0) if s1 > s0 else 1.0
            c += c0 + t * (c1 - c0)
            r += r0 + t * (r1 - r0)
            continue
        # _at on an operation's two-point curve (adding its (0, 0) below the curve changes nothing).
        (s0, c0, r0), (s1, c1, r1) = curve
        if s < s0:
            continue
        t = (s - s0) / (s1 - s0) if s1 > s0 else 1.0
        c += c0 + t * (c1 - c0)
        r += r0 + t * (r1 - r0)
    return c, r


def _build(node: _Node) -> None:
    """Fill in ``curve``, ``cap`` and ``floor`` bottom-up from the leaves' caps."""
    if not node.children:
        d = node.direction
        node.curve = [(0.0, 0.0, 0.0), (node.cap, node.cap * d[0], node.cap * d[1])]
    else:
        one = _one_leaf_levels(node.children[0]) if len(node.children) == 1 else None
        if one is not None:
            node.levels = one
        else:
            ls, specs = _children_marks(node)
            node.levels = _levels(ls, specs)
        # Below the children's floors summed (oversubscribed min shares) the floors scale down.
        node.curve = [(0.0, 0.0, 0.0)] + [(max(c, r), c, r) for _, c, r in node.levels]
        node.cap = node.curve[-1][0]
        if node.max_cpu < math.inf or node.max_ram < math.inf:
            # YARN's maxResources: the pool's fair share stops where its usage reaches it.
            top = _ceiling_share(node.curve, node.max_cpu, node.max_ram)
            if top < node.cap:
                c, r = _at(node.curve, top)
                node.curve = [pt for pt in node.curve if pt[0] < top] + [(top, c, r)]
                node.cap = top
    node.floor = min(_floor_share(node.curve, node.min_cpu, node.min_ram), node.cap)


def _one_leaf_levels(leaf: _Node) -> list[tuple[float, float, float]] | None:
    """``_levels(*_children_marks(pool))`` for a pool whose one child is an operation (a pool per
    user: most pools), the same floats without the general machinery: the operation's curve runs
    straight from 0 to its cap, so a level needs no search and no flip can lie between two (its
    cpu and ram keep their order). None when the child is a pool or drops out (cap 0)."""
    if leaf.children:
        return None
    _build(leaf)
    cap, w, f = leaf.cap, leaf.weight, leaf.floor
    if cap <= 0:
        return None
    _, c_end, r_end = leaf.curve[-1]
    levels: list[tuple[float, float, float]] = []
    for lv in sorted({0.0, f / w, cap / w}):
        s = lv * w  # _sum_at_level's clamp and interpolation, on the curve (0, 0, 0) -> (cap, ...)
        if f > s:
            s = f
        if cap < s:
            s = cap
        if s >= cap:
            levels.append((lv, c_end, r_end))
        else:
            t = s / cap
            levels.append((lv, t * c_end, t * r_end))
    return levels


def _children_marks(node: _Node) -> tuple[list[float], list[_Kid]]:
    """Build the children (dropping those with nothing to run); the levels where one of them
    changes course, in order, and what ``_sum_at_level`` reads of them."""
    for k in node.children:
        _build(k)
    kids = [k for k in node.children if k.cap > 0]
    node.children = kids
    marks = {0.0}
    for k in kids:
        marks.add(k.floor / k.weight)
        marks.add(k.cap / k.weight)
        if len(k.curve) > 2:  # a two-point curve runs from share 0 to its cap: no point inside
            marks.update(s / k.weight for s, _, _ in k.curve if k.floor < s < k.cap)
    return sorted(marks), _specs(kids)


def _levels(ls: list[float], specs: list[_Kid]) -> list[tuple[float, float, float]]:
    """(level, cpu, ram) at each level of ``ls`` and where the dominant resource flips between
    two of them, in order."""
    levels = [(lv, *_sum_at_level(specs, lv)) for lv in ls]
    # Where the pool's dominant resource flips inside a segment its share has a kink.
    flips: list[tuple[float, float, float]] = []
    for (l0, c0, r0), (l1, c1, r1) in pairwise(levels):
        if (c0 - r0) * (c1 - r1) < 0:
            t = (r0 - c0) / ((c1 - c0) - (r1 - r0))
            flips.append((l0 + t * (l1 - l0), c0 + t * (c1 - c0), r0 + t * (r1 - r0)))
    # ``ls`` is sorted without repeats, so ``levels`` is already in order when nothing flips.
    return sorted(levels + flips) if flips else levels


# How far below the cluster's size the root's usage at its top level must stay for the levels
# under it to be skipped: far above the float error of any sum (some 1e-16 per operation).
_ROOM = 1e-6


def _build_root(root: _Node) -> None:
    """The root's ``levels``, all that ``_root_level`` reads of it (its curve is no one's). When
    the whole demand fits with room to spare (usage at the top level below 1 - _ROOM of both
    resources) every level fits, and ``_root_level`` picks the top one: only the last segment
    is taken (its flip is the one point that can lie past the top level by a rounding), not the
    whole curve's (levels x children sums, the most of a sample's fair shares)."""
    if not root.children:
        _build(root)
        return
    ls, specs = _children_marks(root)
    if len(ls) > 2 and ls[-1] > ls[-2] * (1.0 + _ROOM):
        c, r = _sum_at_level(specs, ls[-1])
        if c <= 1.0 - _ROOM and r <= 1.0 - _ROOM:
            root.levels = _levels(ls[-2:], specs)
            return
    root.levels = _levels(ls, specs)


def _targets(node: _Node, level: float | None, scale: float) -> list[float]:
    if level is None:  # inside the floors: each child gets the same fraction of its floor
        return [scale * k.floor for k in node.children]
    return [min(max(level * k.weight, k.floor), k.cap) for k in node.children]  # _child_share


def _level_for_share(node: _Node, s: float) -> tuple[float | None, float]:
    """The pool's level giving it dominant share ``s`` (the largest such level), or the scale of
    its children's floors when ``s`` is below them."""
    pts = node.levels
    s0 = max(pts[0][1], pts[0][2])
    if s < s0 - _EPS:
        return None, (s / s0 if s0 > 0 else 0.0)
    shares = [max(c, r) for _, c, r in pts]
    i = bisect_right(shares, s + _EPS) - 1
    if i >= len(pts) - 1:
        return pts[-1][0], 1.0
    l0, l1 = pts[i][0], pts[i + 1][0]
    a, b = shares[i], shares[i + 1]
    t = (s - a) / (b - a) if b > a else 1.0
    return l0 + min(max(t, 0.0), 1.0) * (l1 - l0), 1.0


def _assign(node: _Node, share: float, ops: dict[int, float], pools: dict[str, float]) -> None:
    if not node.children:
        ops[node.op_id] = min(share, node.cap)
        return
    pools[node.name] = share
    level, scale = _level_for_share(node, share)
    for k, s in zip(node.children, _targets(node, level, scale), strict=True):
        if k.children:
            _assign(k, s, ops, pools)
        else:  # an operation: _assign's first case, without the call
            ops[k.op_id] = min(s, k.cap)


def _root_level(root: _Node) -> tuple[float | None, float]:
    """Largest level of the root at which the pooled usage fits the cluster."""
    pts = root.levels
    c0, r0 = pts[0][1], pts[0][2]
    if max(c0, r0) > 1.0:
        return None, 1.0 / max(c0, r0)
    for (l0, c0, r0), (l1, c1, r1) in pairwise(pts):
        if c1 <= 1.0 and r1 <= 1.0:
            continue
        t = 1.0
        if c1 > 1.0:
            t = min(t, (1.0 - c0) / (c1 - c0))
        if r1 > 1.0:
            t = min(t, (1.0 - r0) / (r1 - r0))
        return l0 + t * (l1 - l0), 1.0
    return pts[-1][0], 1.0


def _tree(
    root: Pool, operations: list[Operation], cap: tuple[float, float]
) -> tuple[_Node, dict[int, _Node]]:
    by_pool: dict[int, list[Operation]] = {}
    for op in operations:
        by_pool.setdefault(id(op.pool), []).append(op)
    leaves: dict[int, _Node] = {}
    return _make(root, by_pool, leaves, cap), leaves


def _make(
    p: Pool, by_pool: dict[int, list[Operation]], leaves: dict[int, _Node], cap: tuple[float, float]
) -> _Node:
    # A module function, not a recursive closure: that would be a reference cycle holding the
    # whole tree until the garbage collector found it (each sample, in a real-time RM's loop).
    n = _Node(p.name, p.weight, p.min_share.cpu / cap[0], p.min_share.ram_gib / cap[1])
    n.max_cpu, n.max_ram = p.max_cpu / cap[0], p.max_ram / cap[1]
    for op in by_pool.get(id(p), ()):
        shares = (op.demand.cpu / cap[0], op.demand.ram_gib / cap[1])
        dom = max(shares)
        tasks = op.running + len(op.pending)
        if dom > 0 and tasks > 0:
            # An operation with nothing to run is no leaf: its pool's build would drop it.
            leaf = _Node(op.name, op.weight, op.min_share.cpu / cap[0], op.min_share.ram_gib / cap[1])
            leaf.op_id = op.id
            leaf.direction = (shares[0] / dom, shares[1] / dom)
            leaf.cap = tasks * dom
            leaves[op.id] = leaf
            n.children.append(leaf)
    for c in p.children:
        child = _make(c, by_pool, leaves, cap)
        if child.children:  # nor is a pool with nothing to run under it
            n.children.append(child)
    return n


def progressive_filling(
    root: Pool, operations: list[Operation], capacity: Resources
) -> FairShares:
    cap = (capacity.cpu, capacity.ram_gib)
    if cap[0] <= 0 or cap[1] <= 0:
        zero = {op.id: 0.0 for op in operations}
        return FairShares(zero, {i: (0.0, 0.0) for i in zero}, {}, Resources(0.0, 0.0))
    tree, leaves = _tree(root, operations, cap)
    frozen: set[int] = set()
    shares: dict[int, float] = {}
    pools: dict[str, float] = {}
    used = (0.0, 0.0)
    while True:
        _build_root(tree)
        shares, pools = {}, {}
        if not tree.children:
            break
        level, scale = _root_level(tree)
        targets = _targets(tree, level, scale)
        used = _sum_at(tree.children, targets)
        for k, s in zip(tree.children, targets, strict=True):
            _assign(k, s, shares, pools)
        saturated = [j for j in (0, 1) if used[j] >= 1.0 - _SAT]
        # Every operation using a saturated resource stops where it is; the others rise on.
        stop = {
            i for i, leaf in leaves.items()
            if i not in frozen and shares.get(i, 0.0) < leaf.cap - _EPS
            and any(leaf.direction[j] > _EPS for j in saturated)
        }
        if not stop:
            break
        for i in stop:
            leaves[i].cap = shares.get(i, 0.0)
        frozen |= stop
    share = {op.id: shares.get(op.id, 0.0) for op in operations}
    usage = {
        i: (s * leaves[i].direction[0], s * leaves[i].direction[1]) if i in leaves else (0.0, 0.0)
        for i, s in share.items()
    }
    pools.pop(root.name, None)
    bound = Resources(min(used[0], 1.0), min(used[1], 1.0))
    return FairShares(share, usage, pools, bound)
