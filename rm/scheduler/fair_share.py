"""Fair shares by progressive filling on the pooled cluster (design.md §3).

Every active operation's dominant share rises at a rate equal to its effective weight until its
demand is met or a resource it uses saturates. Effective weights follow the pool tree: a pool's
weight is split among its still-active children in proportion to their weights, so when one
operation stops growing its siblings inherit its rate first. The summed resources ignore node
boundaries, which also makes the result the fragmentation-free bound on utilisation.
"""

from __future__ import annotations

from typing import NamedTuple

from rm.operations import Operation, Pool
from rm.protocol import Resources

_EPS = 1e-12


class FairShares(NamedTuple):
    operations: dict[int, float]  # op id -> dominant share
    usage: dict[int, tuple[float, float]]  # op id -> (cpu, ram) as fractions of capacity
    pools: dict[str, float]  # pool name -> dominant share of its operations' sum
    utilization: Resources  # pooled-cluster bound: fraction of each resource used


def _effective_weights(root: Pool, active: set[int]) -> dict[int, float]:
    out: dict[int, float] = {}

    def has_active(p: Pool) -> bool:
        return any(op.id in active for op in p.operations) or any(has_active(c) for c in p.children)

    def walk(p: Pool, share: float) -> None:
        ops = [op for op in p.operations if op.id in active]
        kids = [c for c in p.children if has_active(c)]
        total = sum(op.weight for op in ops) + sum(c.weight for c in kids)
        if total <= 0:
            return
        for op in ops:
            out[op.id] = share * op.weight / total
        for c in kids:
            walk(c, share * c.weight / total)

    walk(root, 1.0)
    return out


def progressive_filling(
    root: Pool, operations: list[Operation], capacity: Resources
) -> FairShares:
    cap = (capacity.cpu, capacity.ram_gib)
    if cap[0] <= 0 or cap[1] <= 0:
        zero = {op.id: 0.0 for op in operations}
        return FairShares(zero, {i: (0.0, 0.0) for i in zero}, {}, Resources(0.0, 0.0))
    # Per unit of dominant share, op i uses direction[i][j] of resource j (capacity fractions).
    direction: dict[int, tuple[float, float]] = {}
    cap_share: dict[int, float] = {}
    share: dict[int, float] = {}
    for op in operations:
        shares = (op.demand.cpu / cap[0], op.demand.ram_gib / cap[1])
        dom = max(shares)
        share[op.id] = 0.0
        tasks = op.running + len(op.pending)
        if dom <= 0 or tasks == 0:
            continue
        direction[op.id] = (shares[0] / dom, shares[1] / dom)
        cap_share[op.id] = tasks * dom
    used = [0.0, 0.0]
    active = set(direction)
    while active:
        rate = _effective_weights(root, active)
        dt = min((cap_share[i] - share[i]) / rate[i] for i in active)
        for j in (0, 1):
            flow = sum(rate[i] * direction[i][j] for i in active)
            if flow > _EPS:
                dt = min(dt, (1.0 - used[j]) / flow)
        dt = max(dt, 0.0)
        for i in active:
            share[i] += rate[i] * dt
            for j in (0, 1):
                used[j] += rate[i] * dt * direction[i][j]
        saturated = [j for j in (0, 1) if used[j] >= 1.0 - 1e-9]
        done = {
            i for i in active
            if share[i] >= cap_share[i] - 1e-12
            or any(direction[i][j] > _EPS for j in saturated)
        }
        if not done:  # numerical safety: nothing can move any more
            break
        active -= done
    usage = {
        i: (share[i] * direction[i][0], share[i] * direction[i][1]) if i in direction else (0.0, 0.0)
        for i in share
    }
    pools: dict[str, float] = {}
    by_pool_cpu: dict[str, float] = {}
    by_pool_ram: dict[str, float] = {}
    for op in operations:
        if op.id not in direction:
            continue
        s = share[op.id]
        for p in op.pools_up:
            by_pool_cpu[p.name] = by_pool_cpu.get(p.name, 0.0) + s * direction[op.id][0]
            by_pool_ram[p.name] = by_pool_ram.get(p.name, 0.0) + s * direction[op.id][1]
    for name in by_pool_cpu:
        pools[name] = max(by_pool_cpu[name], by_pool_ram[name])
    bound = Resources(min(used[0], 1.0), min(used[1], 1.0))
    return FairShares(share, usage, pools, bound)
