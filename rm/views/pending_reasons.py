"""Why an operation's tasks wait: computed on request from the scheduler's own state, never on
the heartbeat path.

For each operation with pending tasks, kube-scheduler style: how many of the cluster's nodes
could take one of its tasks now and, for the others, why not (not schedulable, too little CPU or
memory, refused by the placement/admission rule), with the closest node's shortfall. Then who
goes first when a task's worth of room frees up: the policy's own ``candidates`` order on a probe
node with exactly that room (so DRF, FIFO, tiers and placement answer with their real order),
with each operation ahead's pool, dominant share and tier. Then what the operation's own state
says: pools above their fair share, packing refusals in a row, tasks requeued after a
preemption or a lost node, the RM holding scheduling while it recovers.

Counts are keyed by what they count: ``nodes_*`` count nodes, ``*_tasks`` tasks,
``operations_*`` operations, ``pools_*`` pools, ``packing_refusals_in_a_row`` offers;
``rm_recovering`` is 1 while the RM holds scheduling.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from rm.borg.placement import PlacementPolicy
from rm.borg.tiers import TieredPolicy
from rm.protocol import TIER_NAMES, Resources
from rm.scheduler.fair_share import progressive_filling
from rm.scheduler.policies.packing import PackingPolicy
from rm.scheduler.policy import Policy
from rm.state.cluster import EPS, Cluster, NodeRecord
from rm.state.operations import Operation
from rm.state.workload import WorkloadBook

# Operations ahead listed by name (the count covers them all).
AHEAD_LISTED = 5


class Shortfall(msgspec.Struct, frozen=True):
    """What one task lacks on the node closest to fitting it."""

    address: str
    cpu: float  # missing cores (0: enough)
    ram_gib: float  # missing GiB (0: enough)


class Ahead(msgspec.Struct, frozen=True):
    """An operation the policy serves first on room that would fit this one's task."""

    id: int
    name: str
    pool: str
    dominant_share: float
    tier: str


class PendingReasons(msgspec.Struct, frozen=True):
    op_id: int
    name: str
    pool: str
    pending: int
    reasons: dict[str, int]  # reason -> count (see the module docstring for the units)
    lines: list[str]  # the reasons in words, most decisive first
    closest: Shortfall | None = None
    ahead: list[Ahead] = msgspec.field(default_factory=list)


class _NoLink:
    """The probe node's link: the probe is never sent anything."""

    closed = True

    def send(self, msg: Any) -> None:
        raise AssertionError("the pending-reasons probe node was sent a message")

    def close(self) -> None:
        pass


def _layers(policy: Policy) -> tuple[Policy, bool]:
    """The policy under the tier layer, and whether tiers order it."""
    if isinstance(policy, TieredPolicy):
        return policy.inner, True
    return policy, isinstance(policy, PlacementPolicy)


def _fits(policy: Policy, node: NodeRecord, op: Operation) -> bool:
    if isinstance(policy, PlacementPolicy):
        return policy.fits(node, op)
    return node.schedulable and node.fits(op.demand)


class _NodeTally(msgspec.Struct):
    counts: dict[str, int]
    closest: Shortfall | None
    fitting: int


def _alike(policy: Policy, nodes: list[NodeRecord]) -> list[tuple[NodeRecord, int]]:
    """The nodes as (one of them, how many) by free resources and state: a fill-one-node policy's
    fit depends on nothing else, so a busy cluster of one node shape is tallied in a few steps.
    (Placement's rules also look at a node's tasks: each node on its own there.)"""
    if isinstance(policy, PlacementPolicy):
        return [(n, 1) for n in nodes]
    groups: dict[tuple[float, float, bool], list[Any]] = {}
    for n in nodes:
        g = groups.get((n.free_cpu, n.free_ram, n.schedulable))
        if g is None:
            groups[(n.free_cpu, n.free_ram, n.schedulable)] = [n, 1]
        else:
            g[1] += 1
    return [(g[0], g[1]) for g in groups.values()]


def _tally(policy: Policy, nodes: list[tuple[NodeRecord, int]], op: Operation) -> _NodeTally:
    """Why each node cannot take one task of ``op`` now (a node may lack both resources)."""
    counts: dict[str, int] = {}
    best: tuple[float, Shortfall] | None = None
    fitting = 0
    d = op.demand

    def add(key: str) -> None:
        counts[key] = counts.get(key, 0) + alike

    for node, alike in nodes:
        if not node.schedulable:
            add("nodes_not_schedulable")
            continue
        if _fits(policy, node, op):  # the policy's own test (placement's may overcommit)
            fitting += alike
            continue
        cpu = max(0.0, d.cpu - node.free_cpu)
        ram = max(0.0, d.ram_gib - node.free_ram)
        if cpu <= EPS and ram <= EPS:
            add("nodes_refused_by_placement")  # room enough, refused by a tier or admission rule
            continue
        if cpu > EPS:
            add("nodes_insufficient_cpu")
        if ram > EPS:
            add("nodes_insufficient_ram")
        # Closest: the smallest missing fraction of the task's own demand, summed over resources.
        gap = (cpu / d.cpu if d.cpu > 0 else 0.0) + (ram / d.ram_gib if d.ram_gib > 0 else 0.0)
        if best is None or gap < best[0]:
            best = (gap, Shortfall(node.address, round(cpu, 3), round(ram, 3)))
    return _NodeTally(counts, best[1] if best is not None else None, fitting)


def _probe(demand: Resources, now: float) -> NodeRecord:
    """A node with exactly one task's room, as room looks when one such task's worth frees up."""
    return NodeRecord(-1, "(probe)", Resources(demand.cpu, demand.ram_gib), _NoLink(), now)


def _ahead(policy: Policy, op: Operation, cap: Resources, now: float) -> list[Ahead]:
    """Operations the policy serves before ``op`` on room that fits one of its tasks."""
    out: list[Ahead] = []
    for other in policy.candidates(_probe(op.demand, now)):
        if other is op:
            return out
        out.append(Ahead(other.id, other.name, other.pool.name, round(other.dominant_share(cap), 4),
                         TIER_NAMES[other.spec.tier]))
    return out  # not a candidate even there (a placement rule): everyone listed goes first


def explain(
    policy: Policy, cluster: Cluster, book: WorkloadBook, now: float, holding: bool,
    op_ids: set[int] | None = None,
) -> list[PendingReasons]:
    """The reasons of every operation with pending tasks (``op_ids``: only these)."""
    waiting = [op for op in book.operations.values()
               if op.pending and (op_ids is None or op.id in op_ids)]
    if not waiting:
        return []
    cap = cluster.capacity
    nodes = list(cluster.nodes.values())
    alike = _alike(policy, nodes)
    fair = progressive_filling(book.root, list(book.operations.values()), cap)
    inner, tiered = _layers(policy)
    packing = inner.controllers if isinstance(inner, PackingPolicy) else {}
    tallies: dict[tuple[float, float, int], _NodeTally] = {}
    out: list[PendingReasons] = []
    for op in waiting:
        # The node tally depends on the demand (and, for placement, the tier) only.
        key = (op.demand.cpu, op.demand.ram_gib, op.spec.tier)
        tally = tallies.get(key)
        if tally is None:
            tally = tallies[key] = _tally(policy, alike, op)
        reasons = dict(tally.counts)
        lines: list[str] = []
        if holding:
            reasons["rm_recovering"] = 1
            lines.append("the RM holds scheduling: it restarted and waits for its nodes to report back")
        if not nodes:
            lines.append("no node is registered")
        elif tally.fitting == 0:
            parts = ", ".join(f"{n} {k.removeprefix('nodes_').replace('_', ' ')}"
                              for k, n in sorted(tally.counts.items()))
            lines.append(f"0/{len(nodes)} nodes have room for a task ({_demand(op.demand)}): {parts}")
            if tally.closest is not None:
                c = tally.closest
                lines.append(f"closest: {c.address} lacks {_lack(c)}")
        else:
            reasons["nodes_with_room"] = tally.fitting
            lines.append(f"{tally.fitting}/{len(nodes)} nodes have room for a task ({_demand(op.demand)}): "
                         "it starts at their next node update")
        ahead = _ahead(policy, op, cap, now)
        if ahead:
            _order_reason(op, ahead, tiered, cap, reasons, lines)
        _pool_reasons(op, fair.pools, cap, reasons, lines)
        ctrl = packing.get(op.id)
        if ctrl is not None and ctrl.consecutive_refusals > 0:
            reasons["packing_refusals_in_a_row"] = ctrl.consecutive_refusals
            lines.append(f"packing refused the last {ctrl.consecutive_refusals} offers "
                         f"({ctrl.refused} of {ctrl.offers} so far): "
                         "it waits for a node its task packs better on")
        requeued = sum(1 for t in op.pending if t.attempts > 0)
        if requeued:
            reasons["requeued_tasks"] = requeued
            lines.append(f"{requeued} of its waiting tasks ran before and were requeued "
                         "(preempted, or their node was lost)")
        out.append(PendingReasons(op.id, op.name, op.pool.name, len(op.pending), reasons, lines,
                                  tally.closest if tally.fitting == 0 else None, ahead))
    return out


def _order_reason(op: Operation, ahead: list[Ahead], tiered: bool, cap: Resources,
                  reasons: dict[str, int], lines: list[str]) -> None:
    """Who the policy serves first on room that fits one of ``op``'s tasks."""
    reasons["operations_ahead"] = len(ahead)
    higher = [a for a in ahead if tiered and TIER_NAMES.index(a.tier) > op.spec.tier]
    if higher:
        reasons["operations_ahead_higher_tier"] = len(higher)
    listed = ", ".join(f"{a.name} ({a.pool}, share {a.dominant_share:.3f}"
                       + (f", tier {a.tier}" if a in higher else "") + ")"
                       for a in ahead[:AHEAD_LISTED])
    more = f" and {len(ahead) - AHEAD_LISTED} more" if len(ahead) > AHEAD_LISTED else ""
    tier = f", tier {TIER_NAMES[op.spec.tier]}" if tiered else ""
    who = "1 operation goes" if len(ahead) == 1 else f"{len(ahead)} operations go"
    lines.append(f"{who} first when room frees up, in the policy's order (this one's share "
                 f"{op.dominant_share(cap):.3f}{tier}): {listed}{more}")


def _pool_reasons(op: Operation, fair: dict[str, float], cap: Resources, reasons: dict[str, int],
                  lines: list[str]) -> None:
    """The pools above ``op`` (not the root) at their maximum or above their fair share."""
    if not op.pool.takes(op.demand):
        cpu, ram = op.pool.room()
        reasons["pool_at_maximum"] = 1
        room = [f"{max(v, 0.0):g} {unit}" for v, unit in ((cpu, "cpu"), (ram, "GiB")) if v < math.inf]
        lines.append(f"its pool is at its maximum: room for {' and '.join(room)} more, a task needs "
                     f"{_demand(op.demand)}")
    over = []
    for p in op.pools_up[:-1]:
        fair_share = fair.get(p.name, 0.0)
        used = Resources(p.usage_cpu, p.usage_ram).dominant_share(cap)
        if used > fair_share + 1e-6:
            over.append(f"pool {p.name} uses {used:.3f} of the cluster, "
                        f"above its fair share {fair_share:.3f}")
    if over:
        reasons["pools_above_fair_share"] = len(over)
        lines.extend(over)


def _demand(d: Resources) -> str:
    return f"{d.cpu:g} cpu, {d.ram_gib:g} GiB"


def _lack(c: Shortfall) -> str:
    parts = ([f"{c.cpu:g} cpu"] if c.cpu > 0 else []) + ([f"{c.ram_gib:g} GiB"] if c.ram_gib > 0 else [])
    return " and ".join(parts)
