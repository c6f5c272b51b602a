"""Turning a finished run into summary.json and timeseries.csv (metric names of design.md §6)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import msgspec

from emulator.harness.runner import RunOutcome
from emulator.measure.sampler import COLUMNS


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(float(x), digits)


def build_summary(outcome: RunOutcome) -> dict[str, Any]:
    """Everything here is a function of the scenario and seed (no wall-clock figures)."""
    sc = outcome.scenario
    rm = outcome.rm
    ns = outcome.node_stats
    sampler = outcome.sampler
    h1, h2 = sampler.efficiency()
    window = max(sc.run.duration_s - sc.run.warmup_s, 1e-9)
    inbound = rm.inbound.statistics()
    events = rm.events.statistics()
    cap = rm.cluster.capacity
    operations = []
    for cfg in sc.workload.operations:
        group = rm.groups.get(cfg.name)
        active = [op for op in rm.operations.values() if op.group == cfg.name]
        shares = sampler.groups[cfg.name]
        n = shares.samples or 1
        operations.append(
            {
                "name": cfg.name,
                "pool": cfg.pool,
                "running_tasks": sum(op.running for op in active),
                "pending_tasks": sum(len(op.pending) for op in active),
                "completed_tasks": group.completed_tasks if group else 0,
                "operations_submitted": group.operations_submitted if group else 0,
                "operations_finished": group.operations_finished if group else 0,
                "tasks_requeued": group.requeued if group else 0,
                "dominant_share": _r(shares.dominant_sum / n),
                "fair_share": _r(shares.fair_sum / n),
                "dominant_share_end": _r(
                    max(
                        sum(op.usage_cpu for op in active) / cap.cpu if cap.cpu > 0 else 0.0,
                        sum(op.usage_ram for op in active) / cap.ram_gib if cap.ram_gib > 0 else 0.0,
                    )
                ),
            }
        )
    summary = {
        "scenario": sc.name,
        "seed": sc.run.seed,
        "clock": sc.run.clock,
        "duration_s": sc.run.duration_s,
        "warmup_s": sc.run.warmup_s,
        "heartbeat_mode": sc.heartbeat.mode,
        "heartbeat_interval_s": sc.heartbeat.interval_s,
        "policy": sc.scheduler.policy,
        "nodes": sc.node_count,
        "nodes_alive_end": len(rm.cluster.nodes),
        "cpu_utilization": _r(rm.cluster.integral.cpu_utilization()),
        "ram_utilization": _r(rm.cluster.integral.ram_utilization()),
        "heartbeats_sent": ns.heartbeats_sent,
        "heartbeat_responses": ns.heartbeat_responses,
        "heartbeats_skipped": ns.heartbeats_skipped,
        "statuses_sent": ns.statuses_sent,
        "update_events": rm.stats.update_events,
        "h1": _r(h1),
        "h2": _r(h2),
        "nodes_lost": rm.stats.nodes_lost,
        "registrations": rm.tracker.stats.registrations,
        "resyncs": rm.tracker.stats.resyncs,
        "allocations": rm.stats.allocations,
        "containers_completed": rm.stats.containers_completed,
        "tasks_requeued": rm.stats.tasks_requeued,
        "rm_queue_depth_max": inbound.depth_max,
        "rm_wait_mean_s": _r(inbound.wait_mean_s),
        "rm_wait_p99_s": _r(inbound.wait_p99_s),
        "rm_wait_max_s": _r(inbound.wait_max_s),
        "rm_busy_fraction": _r(inbound.busy_s / sc.run.duration_s),
        "scheduler_queue_depth_max": events.depth_max,
        "scheduler_busy_fraction": _r(events.busy_s / sc.run.duration_s),
        "messages_to_rm_per_node_minute": _r(
            (ns.heartbeats_sent + ns.registrations) / max(sc.node_count, 1) / (sc.run.duration_s / 60)
        ),
        "measurement_window_s": window,
        **ring_summary(outcome),
        **restart_summary(outcome),
        "operations": operations,
    }
    summary.update(scheduling_metrics(outcome, operations))
    return summary


def _deviation(dominant: float | None, fair: float | None) -> float | None:
    """Achieved mean dominant share relative to the mean fair share (0 = exactly fair)."""
    if dominant is None or not fair:
        return None
    return _r(dominant / fair - 1.0)


def scheduling_metrics(outcome: RunOutcome, operations: list[dict[str, Any]]) -> dict[str, Any]:
    """Packing, preemption, fairness and fragmentation figures (issue 3); adds per-operation
    fields to ``operations`` in place."""
    sc = outcome.scenario
    rm = outcome.rm
    stats = rm.policy.stats
    for entry in operations:
        offers, accepted, refused = stats.by_group.get(entry["name"], (0, 0, 0))
        entry["packing_offers"] = offers
        entry["refusals"] = refused
        entry["acceptance_rate"] = _r(accepted / offers) if offers else None
        entry["fairness_deviation"] = _deviation(entry["dominant_share"], entry["fair_share"])
    pools = []
    for name, acc in outcome.sampler.pools.items():
        n = acc.samples or 1
        dom, fair = acc.dominant_sum / n, acc.fair_sum / n
        pools.append(
            {
                "name": name,
                "dominant_share": _r(dom),
                "fair_share": _r(fair),
                "fairness_deviation": _deviation(dom, fair),
            }
        )
    devs = [abs(e["fairness_deviation"]) for e in operations if e["fairness_deviation"] is not None]
    offers = sum(c[0] for c in stats.by_group.values())
    accepted = sum(c[1] for c in stats.by_group.values())
    allocs = rm.stats.allocations
    rows = outcome.sampler.window_rows()
    cols = {c: i for i, c in enumerate(COLUMNS)}
    bound_cpu = sum(r[cols["fair_cpu_bound"]] for r in rows) / len(rows) if rows else None
    bound_ram = sum(r[cols["fair_ram_bound"]] for r in rows) / len(rows) if rows else None
    integral = rm.cluster.integral
    cpu, ram = integral.cpu_utilization(), integral.ram_utilization()
    preemptor = rm.preemptor
    lost = preemptor.preempted_cpu_s(sc.run.warmup_s) if preemptor is not None else 0.0
    excl = (integral.used_cpu_s - lost) / integral.cap_cpu_s if integral.cap_cpu_s > 0 else 0.0
    return {
        "refusals": stats.refusals,
        "fallback_allocations": stats.fallback_allocations,
        "packing_offers": offers,
        "acceptance_rate": _r(accepted / offers) if offers else None,
        "refusals_per_allocation": _r(stats.refusals / allocs) if allocs else None,
        "preemptions": preemptor.preemptions if preemptor is not None else 0,
        "preempted_cpu_s": _r(lost, 3),
        "cpu_utilization_excl_preempted": _r(excl),
        "fairness_deviation": _r(sum(devs) / len(devs)) if devs else None,
        "fairness_deviation_max": _r(max(devs)) if devs else None,
        "fair_cpu_bound": _r(bound_cpu),
        "fair_ram_bound": _r(bound_ram),
        # Pooled-cluster bound (progressive filling on summed resources) minus what was achieved.
        "fragmentation_gap_cpu": _r(bound_cpu - cpu) if bound_cpu is not None else None,
        "fragmentation_gap_ram": _r(bound_ram - ram) if bound_ram is not None else None,
        "pools": pools,
    }


def restart_summary(outcome: RunOutcome) -> dict[str, Any]:
    """RM restarts (recovery times, containers kept), with the invariant checker on the exactly-once
    task accounting, and with message faults what they did."""
    out: dict[str, Any] = {}
    restarts = outcome.extra.get("restarts")
    if restarts is not None and restarts.records:
        out["rm_restarts"] = restarts.summary()
        times = [r["recovery_s"] for r in out["rm_restarts"]]
        out["recovery_s"] = None if None in times else max(times)
    checker = outcome.extra.get("invariants")
    if checker is not None:
        out.update(checker.summary())
    plan = outcome.extra.get("message_faults")
    if plan is not None and plan.windows:
        out.update(
            messages_dropped=plan.dropped, messages_duplicated=plan.duplicated,
            messages_reordered=plan.reordered, messages_delayed=plan.delayed,
            commands_resent=outcome.rm.stats.commands_resent,
        )
    return out


def ring_summary(outcome: RunOutcome) -> dict[str, Any]:
    """Failure detection and membership figures (issue 4); empty for runs built without them."""
    extra = outcome.extra
    sc = outcome.scenario
    if "removals" not in extra:
        return {}
    per_node_minute = max(sc.node_count, 1) * (sc.run.duration_s / 60)
    removals = extra["removals"].summary()
    out: dict[str, Any] = {
        "false_removals": removals["false_removals"],
        "false_removed_nodes": removals["false_removed_nodes"],
        "stalled_removals": removals["stalled_removals"],
        "crashed_nodes": removals["crashed_nodes"],
        "crashed_removed": removals["crashed_removed"],
        "detection_latency_s": removals["detection_latency_s"],
        "rm_messages_per_node_minute": _r(extra["to_rm"].messages / per_node_minute),
        "rm_bytes_per_node_minute": _r(extra["to_rm"].bytes / per_node_minute),
        "failure_detector": sc.ring.detector if sc.ring_enabled else "rm_liveliness_monitor",
    }
    stats = extra.get("ring_stats")
    membership = extra.get("membership")
    if stats is not None and membership is not None:
        ms = membership.stats
        out.update(
            ring_messages_per_node_minute=_r(stats.peer_messages / per_node_minute),
            ring_reports=ms.reports,
            ring_reports_rejected=ms.reports_rejected + ms.reports_unregistered,
            ring_probes=ms.probes,
            ring_refuted=ms.refuted,
            ring_brake_held=ms.brake_held,
            ring_deltas=ms.deltas,
            membership_bytes_join=ms.bytes_join,
            membership_bytes_removal=ms.bytes_removal,
            liveness_lost=extra["peers"].lost,
        )
    return out


def write_results(outcome: RunOutcome, out_dir: Path) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = build_summary(outcome)
    # Real-time runs: the RM's measured costs and the node workers (wall-clock figures).
    for key in ("costs", "workers"):
        if key in outcome.extra:
            summary[key] = outcome.extra[key]
    # TCP runs attribute heartbeats per interval across processes (emulator.costs.efficiency).
    summary.update(outcome.extra.get("efficiency", {}))
    (out_dir / "summary.json").write_bytes(msgspec.json.format(msgspec.json.encode(summary)) + b"\n")
    with (out_dir / "timeseries.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for row in outcome.sampler.rows:
            w.writerow([round(v, 6) if isinstance(v, float) else v for v in row])
    return summary
