"""Dominant Resource Fairness over a pool tree, with YARN FairScheduler comparator semantics.

Among siblings (pools or operations): those below their min share ("needy") come first, ordered by
usage / min share on the dominant resource; then by dominant share / weight, then by the
next-dominant share / weight; then by start time (design.md §3): an operation's submission, a pool's
earliest-submitted live operation -- pools and operations alike, at any depth.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from rm.scheduler.policy import PolicyBase
from rm.state.cluster import EPS, NodeRecord
from rm.state.operations import Operation, Pool


def drf_key(
    usage_cpu: float, usage_ram: float, weight: float, min_cpu: float, min_ram: float,
    cap_cpu: float, cap_ram: float,
) -> tuple[int, float, float, float]:
    sc = usage_cpu / cap_cpu if cap_cpu > 0 else 0.0
    sr = usage_ram / cap_ram if cap_ram > 0 else 0.0
    if sc >= sr:
        dom, nxt, used_dom, min_dom = sc, sr, usage_cpu, min_cpu
    else:
        dom, nxt, used_dom, min_dom = sr, sc, usage_ram, min_ram
    if min_dom > 0 and used_dom < min_dom:
        return (0, used_dom / min_dom, 0.0, 0.0)
    return (1, 0.0, dom / weight, nxt / weight)


def start_time(e: Pool | Operation) -> tuple[float, int]:
    """(submission time, id) of an operation; of a pool, its earliest-submitted operation's."""
    if isinstance(e, Operation):
        return (e.submitted_at, e.id)
    firsts = [start_time(op) for op in e.operations] + [start_time(c) for c in e.children]
    return min(firsts, default=(float("inf"), 0))


def _rank(p: Pool) -> int:
    return p.rank


class DRFPolicy(PolicyBase):
    honours_min_share: ClassVar[bool] = True  # needy siblings sort first (drf_key)

    def _key(self, e: Pool | Operation) -> tuple[int, float, float, float, tuple[float, int]]:
        return (*drf_key(
            e.usage_cpu, e.usage_ram, e.weight, e.min_share.cpu, e.min_share.ram_gib,
            self.cluster.cap_cpu, self.cluster.cap_ram,
        ), start_time(e))

    def candidates(self, node: NodeRecord) -> Iterator[Operation]:
        return self._descend(self.root, node.free_cpu + EPS, node.free_ram + EPS)

    def assign(self, node: NodeRecord) -> Operation | None:
        """``candidates``' first, found without its generators (one per pool on the way, every
        task started); a subclass with candidates of its own takes them."""
        if type(self).candidates is not DRFPolicy.candidates:
            return next(self.candidates(node), None)
        return self._first(self.root, node.free_cpu + EPS, node.free_ram + EPS)

    def _children(self, pool: Pool, free_cpu: float, free_ram: float
                  ) -> tuple[list[Pool | Operation], float, float]:
        """A pool's children to descend into, in fairness order, and the room left under it."""
        if pool.capped:  # no task that would take the pool (or one above it) past its maximum
            cpu, ram = pool.room()
            free_cpu, free_ram = min(free_cpu, cpu + EPS), min(free_ram, ram + EPS)
        # The children with pending tasks, in the pool's order of children (the sort below is
        # stable): the pool keeps them, rather than every child being looked at here.
        pending = pool.pending_children
        children: list[Pool | Operation] = (
            list(pending) if len(pending) < 2 else sorted(pending, key=_rank)  # type: ignore[arg-type]
        )
        for op in pool.operations:  # a loop, not a generator: this runs on every node update
            if op.pending:
                demand = op.demand
                if demand.cpu <= free_cpu and demand.ram_gib <= free_ram:
                    children.append(op)
        if len(children) > 1:
            children.sort(key=self._key)
        return children, free_cpu, free_ram

    def _first(self, pool: Pool, free_cpu: float, free_ram: float) -> Operation | None:
        """The first operation ``_descend`` yields (the same children, in the same order)."""
        while len(pool.pending_children) == 1 and not pool.operations and not pool.capped:
            # One child with pending tasks and nothing else to order: the answer is its.
            for child_pool in pool.pending_children:
                pool = child_pool
        if not pool.pending_children and not pool.capped and len(pool.operations) == 1:
            # A pool whose one child is an operation (a pool per user, most decisions): the one
            # candidate ``_children`` would list, without the list.
            op = pool.operations[0]
            demand = op.demand
            return op if op.pending and demand.cpu <= free_cpu and demand.ram_gib <= free_ram else None
        children, free_cpu, free_ram = self._children(pool, free_cpu, free_ram)
        for child in children:
            if isinstance(child, Operation):
                return child
            found = self._first(child, free_cpu, free_ram)
            if found is not None:
                return found
        return None

    def _descend(self, pool: Pool, free_cpu: float, free_ram: float) -> Iterator[Operation]:
        children, free_cpu, free_ram = self._children(pool, free_cpu, free_ram)
        for child in children:
            if isinstance(child, Operation):
                yield child
            else:
                yield from self._descend(child, free_cpu, free_ram)
