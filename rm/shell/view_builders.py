"""The RM's views of itself (rm/views/snapshot.py's structs), built from its live state: the whole
snapshot, the fair shares, and the operations, pools and nodes as the status page lists them.
Building one never changes the RM (bar bringing the time integrals up to now)."""

from __future__ import annotations

from typing import Any

import msgspec

from rm.membership.service import MembershipService
from rm.protocol import Resources
from rm.queues.dispatcher import Dispatcher
from rm.scheduler.fair_share import FairShares, progressive_filling
from rm.shell.context import RMContext
from rm.shell.life import RMLife
from rm.state.cluster import Cluster, NodeRecord
from rm.state.operations import Pool
from rm.state.workload import WorkloadBook
from rm.views.snapshot import (
    ContainerView,
    NodeView,
    OperationView,
    PoolView,
    RMSnapshot,
    Share,
    SharesSnapshot,
    UsageWindow,
)


def rm_snapshot(
    life: RMLife, ctx: RMContext, now: float, up: bool, epoch: int, inbound: Dispatcher[Any],
    events: Dispatcher[Any], membership: MembershipService | None,
) -> RMSnapshot:
    cluster = life.cluster
    cluster.advance(now)
    g = ctx.integral
    ops = life.book.operations.values()
    registered_cpu, registered_ram, unhealthy = cluster.registered()
    return RMSnapshot(
        t=now,
        up=up,
        epoch=epoch,
        recovering=life.holding(),
        counters=msgspec.structs.replace(ctx.counters),
        inbound=inbound.statistics(),
        scheduler=events.statistics(),
        nodes=len(cluster.nodes),
        nodes_unhealthy=unhealthy,
        capacity=cluster.capacity,
        allocated=cluster.used,
        registered=Resources(registered_cpu, registered_ram),
        window=UsageWindow(g.used_cpu_s, g.used_ram_s, g.cap_cpu_s, g.cap_ram_s),
        operations=len(life.book.operations),
        running_tasks=sum(op.running for op in ops),
        pending_tasks=life.book.pending_tasks,
        policy=msgspec.structs.replace(
            ctx.policy_counters,
            by_group={k: msgspec.structs.replace(v) for k, v in ctx.policy_counters.by_group.items()},
        ),
        preemption=msgspec.structs.replace(ctx.preemption) if ctx.preemption is not None else None,
        groups={k: msgspec.structs.replace(v) for k, v in ctx.groups.items()},
        membership=membership.snapshot() if membership is not None else None,
        tiers=ctx.tiers.copy() if ctx.tiers is not None else None,
    )


# The most pools an operation counts in (a guard against a cycle in the tree).
_POOL_DEPTH = 63


def fair_shares(book: WorkloadBook, cap: Resources) -> SharesSnapshot:
    """Fair shares of the live operations, and what each achieves now: every operation's own,
    its workload entry's and its pools'."""
    fair = progressive_filling(book.root, list(book.operations.values()), cap)
    shares = _summed_shares(book, cap, fair)
    ok = cap.cpu > 0 and cap.ram_gib > 0
    for op in book.operations.values():
        shares.operations[op.id] = Share(_dominant(op.usage_cpu, op.usage_ram, cap, ok),
                                         fair.operations.get(op.id, 0.0))
    return shares


def sampled_shares(book: WorkloadBook, cap: Resources) -> SharesSnapshot:
    """``fair_shares`` less the operations' own (``operations`` is empty): the workload entries'
    and the pools' shares and tasks, all that the sampler reads each interval."""
    return _summed_shares(book, cap, progressive_filling(book.root, list(book.operations.values()), cap))


def _dominant(cpu: float, ram: float, cap: Resources, ok: bool) -> float:
    return max(cpu / cap.cpu, ram / cap.ram_gib) if ok else 0.0


def _summed_shares(book: WorkloadBook, cap: Resources, fair: FairShares) -> SharesSnapshot:
    """The shares summed by workload entry and by pool, with their tasks; no operation's own."""
    ok = cap.cpu > 0 and cap.ram_gib > 0
    usage: dict[str, list[float]] = {}
    group_tasks: dict[str, tuple[int, int]] = {}
    pool_tasks: dict[str, tuple[int, int]] = {}
    for op in book.operations.values():  # one pass for the entries' figures and the pools'
        u = usage.setdefault(op.group, [0.0, 0.0, 0.0, 0.0])
        f = fair.usage.get(op.id, (0.0, 0.0))
        u[0] += op.usage_cpu
        u[1] += op.usage_ram
        u[2] += f[0]
        u[3] += f[1]
        running, pending = op.running, len(op.pending)
        t = group_tasks.get(op.group, (0, 0))
        group_tasks[op.group] = (t[0] + running, t[1] + pending)
        pool: Pool | None = op.pool
        depth = 0
        while pool is not None and pool.name != "root" and depth < _POOL_DEPTH:
            t = pool_tasks.get(pool.name, (0, 0))
            pool_tasks[pool.name] = (t[0] + running, t[1] + pending)
            pool = pool.parent
            depth += 1
    groups = {g: Share(_dominant(u[0], u[1], cap, ok), max(u[2], u[3])) for g, u in usage.items()}
    pools = {
        name: Share(_dominant(p.usage_cpu, p.usage_ram, cap, ok), fair.pools.get(name, 0.0))
        for name, p in book.pools.items() if name != "root"
    }
    return SharesSnapshot(fair.utilization, {}, groups, pools, group_tasks, pool_tasks)


def operations_view(book: WorkloadBook) -> list[OperationView]:
    return [
        OperationView(
            id=op.id, name=op.name, group=op.group, pool=op.pool.name, state=op.state,
            demand=op.demand, running=op.running, pending=len(op.pending), completed=op.completed,
            total=op.total, usage=Resources(op.usage_cpu, op.usage_ram), submitted_at=op.submitted_at,
        )
        for op in book.operations.values()
    ]


def pools_view(book: WorkloadBook) -> list[PoolView]:
    return [
        PoolView(
            name=p.name, parent=p.parent.name if p.parent is not None else None, weight=p.weight,
            operations=len(p.operations), pending=p.pending_tasks,
            usage=Resources(p.usage_cpu, p.usage_ram),
        )
        for p in book.pools.values()
    ]


def node_view(n: NodeRecord) -> NodeView:
    return NodeView(
        machine_id=n.machine_id, address=n.address, state=n.state.value, total=n.total,
        free=Resources(n.free_cpu, n.free_ram),
        containers=tuple(ContainerView(cid, a.op.id, a.task.index) for cid, a in n.containers.items()),
        last_heartbeat_at=n.last_heartbeat_at,
    )


def nodes_view(cluster: Cluster) -> list[NodeView]:
    return [node_view(n) for n in cluster.nodes.values()]
