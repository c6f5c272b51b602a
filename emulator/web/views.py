"""The JSON documents of the /api/ endpoints, built from the live run on request.

Features that land on other branches (ring membership, refusals, preemptions, RM cost
accounting) are read with ``getattr`` and reported as ``null`` when this build lacks them.
"""

from __future__ import annotations

from typing import Any

from emulator.web.state import SERIES_COLUMNS, LiveRun, counter
from rm.cluster import NodeState as RMNodeState
from rm.scheduler.fair_share import progressive_filling

NODE_SORT_KEYS = ("machine_id", "address", "cpu", "ram_gib", "free_cpu", "free_ram_gib",
                  "containers", "last_heartbeat_age_s", "state")

# One character per machine id in the ring payload (thousands of nodes in a few KB).
RING_CODES = {"free": ".", "alive": "a", "unhealthy": "u", "suspected": "s", "paused": "p",
              "crashed": "c", "lost": "l"}

MEMBERSHIP_EVENTS = ("node.registered", "node.reregistered", "node.lost", "node.unhealthy",
                     "node.healthy", "ring.", "membership.")


def _r(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


def cluster(live: LiveRun) -> dict[str, Any]:
    sc = live.scenario
    doc: dict[str, Any] = {
        "scenario": sc.name,
        "description": sc.description.strip(),
        "phase": live.phase.value,
        "t_s": _r(live.now(), 3),
        "duration_s": sc.run.duration_s,
        "speed": live.clock.speed if live.clock is not None else sc.run.speed,
        "heartbeat_mode": sc.heartbeat.mode,
        "heartbeat_interval_s": sc.heartbeat.interval_s,
        "policy": sc.scheduler.policy,
        "nodes_total": sc.node_count,
        "allow_control": live.allow_control,
        "results_dir": live.results_dir,
    }
    out = live.outcome
    if out is None:
        return doc
    rm = out.rm
    cl = rm.cluster
    unhealthy = sum(1 for n in cl.nodes.values() if n.state is RMNodeState.UNHEALTHY)
    total_cpu = sum(n.total.cpu for n in cl.nodes.values())
    total_ram = sum(n.total.ram_gib for n in cl.nodes.values())
    ops = list(rm.operations.values())
    inbound = rm.inbound.statistics()
    events = rm.events.statistics()
    ns = out.node_stats
    injected = {"crashed": 0, "paused": 0}
    for hit in live.injected.values():
        injected[hit.kind] = injected.get(hit.kind, 0) + 1
    h1, h2 = out.sampler.efficiency()
    doc.update(
        nodes_alive=len(cl.nodes) - unhealthy,
        nodes_unhealthy=unhealthy,
        nodes_registered=len(cl.nodes),
        nodes_lost=rm.stats.nodes_lost,
        false_removals=live.false_removals,
        injected=injected,
        capacity={"cpu": _r(cl.cap_cpu), "ram_gib": _r(cl.cap_ram)},
        allocated={"cpu": _r(cl.used_cpu), "ram_gib": _r(cl.used_ram)},
        registered_resources={"cpu": _r(total_cpu), "ram_gib": _r(total_ram)},
        cpu_utilization=_r(cl.used_cpu / cl.cap_cpu) if cl.cap_cpu > 0 else 0.0,
        ram_utilization=_r(cl.used_ram / cl.cap_ram) if cl.cap_ram > 0 else 0.0,
        operations=len(ops),
        running_tasks=sum(op.running for op in ops),
        pending_tasks=sum(len(op.pending) for op in ops),
        heartbeats_sent=ns.heartbeats_sent,
        heartbeat_responses=ns.heartbeat_responses,
        update_events=rm.stats.update_events,
        allocations=rm.stats.allocations,
        containers_completed=rm.stats.containers_completed,
        tasks_requeued=rm.stats.tasks_requeued,
        refusals=counter(rm, "refusals"),
        fallback_allocations=counter(rm, "fallback_allocations"),
        preemptions=counter(rm, "preemptions"),
        h1=None if h1 is None else _r(h1),
        h2=None if h2 is None else _r(h2),
        rm_queue_depth=inbound.depth,
        rm_queue_depth_max=inbound.depth_max,
        rm_busy_s=_r(inbound.busy_s),
        rm_wait_p99_s=_r(inbound.wait_p99_s, 6),
        scheduler_queue_depth=events.depth,
        detection_latency_s=_latency_summary(live),
    )
    return doc


def _latency_summary(live: LiveRun) -> dict[str, float] | None:
    values = sorted(live.detection.values)
    if not values:
        return None

    def q(p: float) -> float:
        return _r(values[min(len(values) - 1, int(p * len(values)))], 3)

    return {"count": live.detection.count, "p50": q(0.5), "p99": q(0.99), "max": _r(values[-1], 3)}


def _node_rows(live: LiveRun) -> list[dict[str, Any]]:
    out = live.outcome
    if out is None:
        return []
    now = live.now()
    by_address = out.rm.cluster.by_address
    rows = []
    for nm in out.nodes:
        rec = by_address.get(nm.address)
        hit = live.injected.get(nm.address)
        if rec is not None:
            state = "unhealthy" if rec.state is RMNodeState.UNHEALTHY else "alive"
        elif nm.state.value in ("new", "registering"):
            state = nm.state.value
        else:
            state = "lost"
        mid = rec.machine_id if rec is not None else (nm.machine_id if nm.machine_id > 0 else None)
        rows.append({
            "machine_id": mid,
            "address": nm.address,
            "cpu": nm.resources.cpu,
            "ram_gib": nm.resources.ram_gib,
            "free_cpu": _r(rec.free_cpu, 3) if rec is not None else None,
            "free_ram_gib": _r(rec.free_ram, 3) if rec is not None else None,
            "containers": len(rec.containers) if rec is not None else 0,
            "last_heartbeat_age_s": _r(now - rec.last_heartbeat_at, 2) if rec is not None else None,
            "state": state,
            "injected": hit.kind if hit is not None else None,
        })
    return rows


def nodes(live: LiveRun, q: str = "", page: int = 1, per_page: int = 25,
          sort: str = "machine_id", desc: bool = False, state: str = "") -> dict[str, Any]:
    rows = _node_rows(live)
    if q:
        needle = q.strip().lower()
        rows = [r for r in rows if needle in r["address"].lower() or str(r["machine_id"]) == needle]
    if state:
        rows = [r for r in rows if r["state"] == state or r["injected"] == state]
    key = sort if sort in NODE_SORT_KEYS else "machine_id"
    # None sorts last whichever the direction.
    present = [r for r in rows if r[key] is not None]
    missing = [r for r in rows if r[key] is None]
    present.sort(key=lambda r: r[key], reverse=desc)
    rows = present + missing
    per_page = max(1, min(per_page, 500))
    pages = max(1, -(-len(rows) // per_page))
    page = max(1, min(page, pages))
    start = (page - 1) * per_page
    return {"total": len(rows), "page": page, "pages": pages, "per_page": per_page, "sort": key,
            "desc": desc, "rows": rows[start:start + per_page]}


def operations(live: LiveRun) -> dict[str, Any]:
    out = live.outcome
    if out is None:
        return {"operations": [], "pools": []}
    rm = out.rm
    cap = rm.cluster.capacity
    fair, fair_pools = _fair_shares(rm)
    refused, preempted = _group_counters(rm)
    ops = []
    for op in rm.operations.values():
        ops.append({
            "id": op.id,
            "name": op.name,
            "group": op.group,
            "pool": op.pool.name,
            "state": op.state.value,
            "demand": {"cpu": op.demand.cpu, "ram_gib": op.demand.ram_gib},
            "running": op.running,
            "pending": len(op.pending),
            "completed": op.completed,
            "total": op.total,
            "dominant_share": _r(op.dominant_share(cap)) if cap.cpu > 0 else 0.0,
            "fair_share": fair.get(op.id),
            "refusals": refused.get(op.group),
            "preemptions": preempted.get(op.group),
            "submitted_at_s": _r(op.submitted_at, 2),
        })
    pools = []
    for name, pool in rm.pools.items():
        if name == "root":
            continue
        share = max(pool.usage_cpu / cap.cpu if cap.cpu > 0 else 0.0,
                    pool.usage_ram / cap.ram_gib if cap.ram_gib > 0 else 0.0)
        members = [o for o in ops if o["pool"] == name]
        pools.append({
            "name": name,
            "parent": pool.parent.name if pool.parent is not None else None,
            "weight": pool.weight,
            "operations": len(pool.operations),
            "running": sum(o["running"] for o in members),
            "pending": pool.pending_tasks,
            "dominant_share": _r(share),
            "fair_share": fair_pools.get(name, 0.0),
        })
    groups = [{"name": g, "pool": s.pool, "completed_tasks": s.completed_tasks,
               "operations_finished": s.operations_finished, "requeued": s.requeued}
              for g, s in rm.groups.items()]
    return {"operations": ops, "pools": pools, "groups": groups,
            "refusals": counter(rm, "refusals"), "fallback_allocations": counter(rm, "fallback_allocations"),
            "preemptions": counter(rm, "preemptions")}


def _group_counters(rm: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Refusals and preemptions per workload group (a looping user's operations share one), from
    the packing policy's per-group counters and the preemptor's records, where this build has them."""
    by_group = getattr(getattr(getattr(rm, "policy", None), "stats", None), "by_group", None) or {}
    refused = {g: int(c[2]) for g, c in by_group.items() if len(c) >= 3}
    preempted: dict[str, int] = {}
    preemptor = getattr(rm, "preemptor", None)
    for rec in getattr(preemptor, "records", ()) or ():
        victim = getattr(rec, "victim", None)
        if victim is not None:
            preempted[victim] = preempted.get(victim, 0) + 1
    if preemptor is not None:
        for g in getattr(rm, "groups", {}):
            preempted.setdefault(g, 0)
    if by_group or getattr(getattr(rm, "policy", None), "stats", None) is not None:
        for g in getattr(rm, "groups", {}):
            refused.setdefault(g, 0)
    return refused, preempted


def _fair_shares(rm: Any) -> tuple[dict[int, float], dict[str, float]]:
    ops = list(rm.operations.values())
    if not ops:
        return {}, {}
    fair = progressive_filling(rm.root, ops, rm.cluster.capacity)
    return ({i: _r(v) for i, v in fair.operations.items()}, {n: _r(v) for n, v in fair.pools.items()})


def ring(live: LiveRun) -> dict[str, Any]:
    """Every machine id from 1 to the largest seen, coded by state (see RING_CODES)."""
    out = live.outcome
    if out is None:
        return {"version": None, "size": 0, "max_id": 0, "states": "", "changes": []}
    rm = out.rm
    rm_ring = getattr(rm, "ring", None) or getattr(getattr(rm, "membership", None), "ring", None)
    ids = getattr(rm_ring, "ids", None)
    version = getattr(rm_ring, "version", None)
    members = set(ids) if ids is not None else set(rm.cluster.nodes)
    suspected = set(getattr(rm, "suspected", ()) or ())
    by_id = rm.cluster.nodes
    lost_ids = {r.machine_id for r in live.removals}
    max_id = max([0, *members, *lost_ids, *by_id])
    codes = []
    for mid in range(1, max_id + 1):
        rec = by_id.get(mid)
        hit = live.injected.get(rec.address) if rec is not None else None
        if mid in members or rec is not None:
            if hit is not None:
                st = hit.kind
            elif mid in suspected:
                st = "suspected"
            elif rec is not None and rec.state is RMNodeState.UNHEALTHY:
                st = "unhealthy"
            else:
                st = "alive"
        elif mid in lost_ids:
            st = "lost"
        else:
            st = "free"
        codes.append(RING_CODES[st])
    changes = live.events.since(0, limit=40, kinds=MEMBERSHIP_EVENTS)
    changes.reverse()
    return {
        "version": version,
        "source": "rm.ring" if ids is not None else "registered nodes",
        "size": len(members),
        "max_id": max_id,
        "states": "".join(codes),
        "codes": RING_CODES,
        "changes": changes,
    }


def events(live: LiveRun, since: int = 0, limit: int = 200, kinds: tuple[str, ...] = ()) -> dict[str, Any]:
    items = live.events.since(since, limit=limit, kinds=kinds)
    return {"last_seq": live.events.last_seq, "total": live.events.total, "events": items}


def timeseries(live: LiveRun, since_t: float = -1.0) -> dict[str, Any]:
    return {
        "columns": list(SERIES_COLUMNS),
        "interval_s": live.scenario.sample_interval_s,
        "series": live.series_since(since_t),
    }
