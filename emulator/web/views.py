"""The JSON documents of the /api/ endpoints, built from the live run on request: the RM's
snapshots and views, the page's own record of removals and injected faults, and (when the nodes
are in this process) the nodes' own state."""

from __future__ import annotations

from typing import Any

from emulator.results import registry
from emulator.results.usage import usage_summary
from emulator.web.state import LiveRun
from rm import PendingReasons

NODE_SORT_KEYS = ("machine_id", "address", "cpu", "ram_gib", "free_cpu", "free_ram_gib",
                  "containers", "last_heartbeat_age_s", "state")


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
        "warmup_s": sc.run.warmup_s,
        "speed": live.clock.speed if live.clock is not None else sc.run.speed,
        "heartbeat_mode": sc.heartbeat.mode,
        "heartbeat_interval_s": sc.heartbeat.interval_s,
        "policy": sc.scheduler.policy,
        "nodes_total": sc.node_count,
        "allow_control": live.allow_control,
        "results_dir": live.results_dir,
        # The cards' labels: the metrics registry's, so that the page names figures as the
        # summary, the report and the terminal table do.
        "labels": {m.name: m.label for m in registry.REGISTRY},
    }
    run = live.run
    if run is None:
        return doc
    snap = run.side.rm.snapshot()
    counters = snap.counters
    nodes = run.side.hosting.counters()
    faults = live.fault_counts()
    h1, h2 = run.side.sampler.efficiency()
    cap, used = snap.capacity, snap.allocated
    doc.update(
        nodes_alive=snap.nodes - snap.nodes_unhealthy,
        nodes_unhealthy=snap.nodes_unhealthy,
        nodes_registered=snap.nodes,
        nodes_lost=counters.nodes_lost,
        false_removals=live.false_removals,
        # "crashed / paused by you" is the page's alone; the scenario's faults are counted apart.
        injected=faults["page"],
        scenario_faults=faults["scenario"],
        capacity={"cpu": _r(cap.cpu), "ram_gib": _r(cap.ram_gib)},
        allocated={"cpu": _r(used.cpu), "ram_gib": _r(used.ram_gib)},
        registered_resources={"cpu": _r(snap.registered.cpu), "ram_gib": _r(snap.registered.ram_gib)},
        # Whole-run names hold whole-run figures (so far); the values of this instant are *_now.
        cpu_utilization=_r(snap.window.cpu_utilization),
        ram_utilization=_r(snap.window.ram_utilization),
        cpu_utilization_now=_r(snap.cpu_utilization),
        ram_utilization_now=_r(snap.ram_utilization),
        nodes_gone=len(live.gone),
        operations=snap.operations,
        running_tasks=snap.running_tasks,
        pending_tasks=snap.pending_tasks,
        heartbeats_sent=nodes.heartbeats_sent,
        heartbeat_responses=nodes.heartbeat_responses,
        update_events=counters.update_events,
        allocations=counters.allocations,
        containers_completed=counters.containers_completed,
        tasks_requeued=counters.tasks_requeued,
        refusals=snap.policy.refusals,
        fallback_allocations=snap.policy.fallback_allocations,
        preemptions=snap.preemption.preemptions if snap.preemption is not None else None,
        h1=None if h1 is None else _r(h1),
        h2=None if h2 is None else _r(h2),
        **_efficiency_now(live),
        rm_queue_depth=snap.inbound.depth,
        rm_queue_depth_max=snap.inbound.depth_max,
        rm_busy_s=_r(snap.inbound.busy_s),
        rm_wait_p99_s=_r(snap.inbound.wait_p99_s, 6),
        scheduler_queue_depth=snap.scheduler.depth,
        detection_latency_s=_latency_summary(live),
        # Wall µs per scheduling event (SLS's "timecost"): what a scheduler costs, not what it does.
        scheduler_decision_us=run.side.decisions.summary(),
        # Runs with usage models: per-tier slack and OOMs, machine overflow (the nodes' truth).
        usage=usage_summary(nodes) if run.side.usage is not None else None,
        lag=_lag(live),
    )
    if live.summary is not None:
        doc.update(final_figures(live.summary))
    return doc


def final_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """The registry's whole-run figures from the run's summary.json document, under its names:
    the page's figures at the end are exactly the summary's."""
    out = {m.name: summary[m.name] for m in registry.WHOLE_RUN if "." not in m.name and m.name in summary}
    out["detection_latency_s"] = summary.get("detection_latency_s")
    return out


def _efficiency_now(live: LiveRun) -> dict[str, float | None]:
    """m_i/n_i and s_i/a_i of the last settled sample interval, the one before the last sample (the
    last one's answers and updates are still coming); None before one with heartbeats."""
    if len(live.series) < 2:
        return {"h1_now": None, "h2_now": None}
    row = dict(zip(live.columns, live.series[-2], strict=False))
    n = row.get("n_i") or 0
    a = row.get("a_i") or 0
    return {"h1_now": _r(row["m_i"] / n) if n else None, "h2_now": _r(row["s_i"] / a) if a else None}


def _lag(live: LiveRun) -> dict[str, Any] | None:
    """How far the emulator itself is behind real time (None in virtual time)."""
    run = live.run
    if run is None or run.side.lag is None:
        return None
    lag = run.side.lag.summary()
    threshold = run.side.lag_threshold_s
    return {"p99_s": _r(lag.p99, 4), "max_s": _r(lag.max, 4), "threshold_s": _r(threshold, 4),
            "overloaded": lag.p99 > threshold}


def _latency_summary(live: LiveRun) -> dict[str, float] | None:
    values = sorted(live.detection.values)
    if not values:
        return None

    def q(p: float) -> float:
        return _r(values[min(len(values) - 1, int(p * len(values)))], 3)

    return {"count": live.detection.count, "p50": q(0.5), "p99": q(0.99), "max": _r(values[-1], 3)}


def _node_rows(live: LiveRun) -> list[dict[str, Any]]:
    run = live.run
    if run is None:
        return []
    now = live.now()
    records = {n.address: n for n in run.side.rm.nodes_view()}
    procs = {p.address: p for p in run.processes} if run.processes is not None else {}
    # Every node of the scenario when they are here; otherwise the ones the RM knows.
    addresses = list(procs) if procs else list(records)
    rows = []
    for address in addresses:
        rec = records.get(address)
        proc = procs.get(address)
        hit = live.injected.get(address)
        if rec is not None:
            state = "unhealthy" if rec.state == "unhealthy" else "alive"
        elif proc is not None and proc.state.value in ("new", "registering"):
            state = proc.state.value
        else:
            state = "lost"
        mid = rec.machine_id if rec is not None else (
            proc.machine_id if proc is not None and proc.machine_id > 0 else None
        )
        total = rec.total if rec is not None else (proc.resources if proc is not None else None)
        rows.append({
            "machine_id": mid,
            "address": address,
            "cpu": total.cpu if total is not None else None,
            "ram_gib": total.ram_gib if total is not None else None,
            "free_cpu": _r(rec.free.cpu, 3) if rec is not None else None,
            "free_ram_gib": _r(rec.free.ram_gib, 3) if rec is not None else None,
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


def pending_reasons(live: LiveRun) -> dict[int, PendingReasons]:
    """Why waiting tasks wait, per operation id: asked of the RM on request (rm/views/pending_reasons.py),
    once per emulated moment however many clients and pushes ask (the page's stream asks each push)."""
    run = live.run
    if run is None:
        return {}
    now = live.now()
    if live.pending_memo is None or live.pending_memo[0] != now:
        live.pending_memo = (now, {r.op_id: r for r in run.side.rm.pending_reasons()})
    return live.pending_memo[1]


def operations(live: LiveRun) -> dict[str, Any]:
    run = live.run
    if run is None:
        return {"operations": [], "pools": []}
    rm = run.side.rm
    snap = rm.snapshot()
    shares = rm.shares()
    why = pending_reasons(live)
    ops: list[dict[str, Any]] = []
    for op in rm.operations_view():
        reasons = why.get(op.id)
        share = shares.operations.get(op.id)
        group = snap.groups.get(op.group)
        offers = snap.policy.by_group.get(op.group)
        ops.append({
            "id": op.id,
            "name": op.name,
            "group": op.group,
            "pool": op.pool,
            "state": op.state,
            "demand": {"cpu": op.demand.cpu, "ram_gib": op.demand.ram_gib},
            "running": op.running,
            "pending": op.pending,
            "completed": op.completed,
            "total": op.total,
            "dominant_share": _r(share.dominant) if share is not None else 0.0,
            "fair_share": _r(share.fair) if share is not None else None,
            "refusals": offers.refused if offers is not None else 0,
            "preemptions": group.preempted if group is not None and snap.preemption is not None else None,
            "submitted_at_s": _r(op.submitted_at, 2),
            "pending_reasons": reasons.reasons if reasons is not None else {},
            "pending_why": reasons.lines if reasons is not None else [],
        })
    pools = []
    for pool in rm.pools_view():
        if pool.parent is None:
            continue
        share = shares.pools.get(pool.name)
        members = [o for o in ops if o["pool"] == pool.name]
        pools.append({
            "name": pool.name,
            "parent": pool.parent,
            "weight": pool.weight,
            "operations": pool.operations,
            "running": sum(int(o["running"]) for o in members),
            "pending": pool.pending,
            "dominant_share": _r(share.dominant) if share is not None else 0.0,
            "fair_share": _r(share.fair) if share is not None else 0.0,
        })
    groups = [{"name": g, "pool": s.pool, "completed_tasks": s.completed_tasks,
               "operations_finished": s.operations_finished, "requeued": s.requeued}
              for g, s in snap.groups.items()]
    return {"operations": ops, "pools": pools, "groups": groups,
            "refusals": snap.policy.refusals, "fallback_allocations": snap.policy.fallback_allocations,
            "preemptions": snap.preemption.preemptions if snap.preemption is not None else None}


def events(live: LiveRun, since: int = 0, limit: int = 200, kinds: tuple[str, ...] = ()) -> dict[str, Any]:
    items = live.events.since(since, limit=limit, kinds=kinds)
    return {"last_seq": live.events.last_seq, "total": live.events.total, "events": items}


def timeseries(live: LiveRun, since_t: float = -1.0) -> dict[str, Any]:
    return {
        "columns": list(live.columns),
        "interval_s": live.scenario.sample_interval_s,
        "series": live.series_since(since_t),
    }
