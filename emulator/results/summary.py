"""Turning a finished run into summary.json and timeseries.csv (metric names: the registry,
``emulator.results.registry``)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import msgspec

from emulator.harness.outcome import RunOutcome
from emulator.measure.sampler import COLUMNS
from emulator.measure.usage import USAGE_COLUMNS
from emulator.results.jobs import (
    JOBS_FILE,
    SLS_JOBS_FILE,
    jobs_summary,
    write_jobs_csv,
    write_sls_jobs_csv,
)
from emulator.results.usage import binpack_summary, usage_summary


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(float(x), digits)


def build_summary(outcome: RunOutcome) -> dict[str, Any]:
    """Everything here is a function of the scenario and seed (no wall-clock figures)."""
    sc = outcome.scenario
    snap = outcome.rm
    ns = outcome.nodes
    counters = snap.counters
    earlier = outcome.earlier
    window = max(sc.run.duration_s - sc.run.warmup_s, 1e-9)
    inbound = snap.inbound
    events = snap.scheduler
    cap = snap.capacity
    operations = []
    for cfg in sc.workload.operations:
        group = snap.groups.get(cfg.name)
        active = [op for op in outcome.operations if op.group == cfg.name]
        shares = outcome.groups[cfg.name]
        operations.append(
            {
                "name": cfg.name,
                "pool": cfg.pool,
                "running_tasks": sum(op.running for op in active),
                "pending_tasks": sum(op.pending for op in active),
                "completed_tasks": group.completed_tasks if group else 0,
                "operations_submitted": group.operations_submitted if group else 0,
                "operations_finished": group.operations_finished if group else 0,
                "tasks_requeued": group.requeued if group else 0,
                "dominant_share": _r(shares.dominant),
                "fair_share": _r(shares.fair),
                "dominant_share_end": _r(
                    max(
                        sum(op.usage.cpu for op in active) / cap.cpu if cap.cpu > 0 else 0.0,
                        sum(op.usage.ram_gib for op in active) / cap.ram_gib if cap.ram_gib > 0 else 0.0,
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
        "join_over_s": sc.cluster.join_over_s,
        "policy": sc.scheduler.policy,
        "nodes": sc.node_count,
        "nodes_alive_end": snap.nodes,
        "cpu_utilization": _r(snap.window.cpu_utilization),
        "ram_utilization": _r(snap.window.ram_utilization),
        "heartbeats_sent": ns.heartbeats_sent,
        "heartbeat_responses": ns.heartbeat_responses,
        "heartbeats_skipped": ns.heartbeats_skipped,
        "statuses_sent": ns.statuses_sent,
        "update_events": counters.update_events,
        "h1": _r(outcome.h1),
        "h2": _r(outcome.h2),
        "nodes_lost": counters.nodes_lost,
        "registrations": counters.registrations,
        "resyncs": counters.resyncs,
        "allocations": counters.allocations + (earlier.started if earlier else 0),
        "containers_completed": counters.containers_completed + (earlier.completed if earlier else 0),
        "tasks_requeued": counters.tasks_requeued,
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
    if outcome.jobs is not None:
        summary["jobs"] = jobs_summary(outcome.jobs)
    summary.update(scheduling_metrics(outcome, operations))
    summary.update(truth_summary(outcome))
    return summary


def _deviation(dominant: float | None, fair: float | None) -> float | None:
    """Achieved mean dominant share relative to the mean fair share (0 = exactly fair)."""
    if dominant is None or not fair:
        return None
    return _r(dominant / fair - 1.0)


def scheduling_metrics(outcome: RunOutcome, operations: list[dict[str, Any]]) -> dict[str, Any]:
    """Packing, preemption, fairness and fragmentation figures; adds per-operation fields to
    ``operations`` in place."""
    snap = outcome.rm
    policy = snap.policy
    for entry in operations:
        counts = policy.by_group.get(entry["name"])
        offers = counts.offers if counts else 0
        entry["packing_offers"] = offers
        entry["refusals"] = counts.refused if counts else 0
        entry["acceptance_rate"] = _r(counts.accepted / offers) if counts and offers else None
        entry["fairness_deviation"] = _deviation(entry["dominant_share"], entry["fair_share"])
    pools = [
        {
            "name": name,
            "dominant_share": _r(m.dominant),
            "fair_share": _r(m.fair),
            "fairness_deviation": _deviation(m.dominant, m.fair),
        }
        for name, m in outcome.pools.items()
    ]
    devs = [abs(e["fairness_deviation"]) for e in operations if e["fairness_deviation"] is not None]
    offers = sum(c.offers for c in policy.by_group.values())
    accepted = sum(c.accepted for c in policy.by_group.values())
    allocs = snap.counters.allocations
    rows = outcome.window_rows()
    bound_cpu = sum(r.fair_cpu_bound for r in rows) / len(rows) if rows else None
    bound_ram = sum(r.fair_ram_bound for r in rows) / len(rows) if rows else None
    w = snap.window
    cpu, ram = w.cpu_utilization, w.ram_utilization
    pre = snap.preemption
    lost = pre.preempted_cpu_s if pre is not None else 0.0
    excl = (w.used_cpu_s - lost) / w.cap_cpu_s if w.cap_cpu_s > 0 else 0.0
    return {
        "refusals": policy.refusals,
        "fallback_allocations": policy.fallback_allocations,
        "packing_offers": offers,
        "acceptance_rate": _r(accepted / offers) if offers else None,
        "refusals_per_allocation": _r(policy.refusals / allocs) if allocs else None,
        "preemptions": pre.preemptions if pre is not None else 0,
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
    if outcome.earlier is not None:
        # Taken over from the journal: allocations and completions above are the whole run's; the
        # figures one process measures (heartbeats, queues, lag, costs) are the last process's.
        out["resumed"] = True
        out["takeovers"] = [{"died_at_s": round(d, 3), "took_over_at_s": round(u, 3)}
                            for d, u in outcome.earlier.takeovers]
        out["containers_completed_by_earlier_processes"] = outcome.earlier.completed
    if outcome.restarts:
        out["rm_restarts"] = [msgspec.structs.asdict(r) for r in outcome.restarts]
        times = [r.recovery_s for r in outcome.restarts]
        out["recovery_s"] = None if None in times else max(t for t in times if t is not None)
    if outcome.invariants is not None:
        out.update(msgspec.structs.asdict(outcome.invariants))
    mf = outcome.message_faults
    if mf is not None:
        out.update(
            messages_dropped=mf.dropped, messages_duplicated=mf.duplicated,
            messages_reordered=mf.reordered, messages_delayed=mf.delayed,
            commands_resent=outcome.rm.counters.commands_resent,
        )
    return out


def ring_summary(outcome: RunOutcome) -> dict[str, Any]:
    """Failure detection and membership figures."""
    sc = outcome.scenario
    per_node_minute = max(sc.node_count, 1) * (sc.run.duration_s / 60)
    removals = outcome.removals
    out: dict[str, Any] = {
        "false_removals": removals.false_removals,
        "false_removed_nodes": removals.false_removed_nodes,
        "stalled_removals": removals.stalled_removals,
        "crashed_nodes": removals.crashed_nodes,
        "crashed_removed": removals.crashed_removed,
        "crashed_by_scenario": removals.crashed_by_scenario,
        "crashed_from_page": removals.crashed_from_page,
        "crashed_removed_by_scenario": removals.crashed_removed_by_scenario,
        "crashed_removed_from_page": removals.crashed_removed_from_page,
        "detection_latency_s": msgspec.structs.asdict(removals.detection_latency_s),
        "rm_messages_per_node_minute": _r(outcome.to_rm.messages / per_node_minute),
        "rm_bytes_per_node_minute": _r(outcome.to_rm.bytes / per_node_minute),
        "failure_detector": sc.ring.detector if sc.ring_enabled else "rm_liveliness_monitor",
    }
    ms = outcome.rm.membership
    if outcome.ring is not None and ms is not None:
        out.update(
            ring_messages_per_node_minute=_r(outcome.ring.peer_messages / per_node_minute),
            ring_reports=ms.reports,
            ring_reports_rejected=ms.reports_rejected,
            ring_probes=ms.probes,
            ring_refuted=ms.refuted,
            ring_brake_held=ms.brake_held,
            # Probe loss measured on live nodes, and the rounds it (or a slow network) added.
            ring_probe_loss=_r(ms.probe_attempts_lost
                               / max(1, ms.probe_attempts_lost + ms.probe_attempts_answered)),
            ring_probe_rounds_extended=ms.probe_rounds_extended,
            ring_late_answers=ms.late_answers,
            ring_deltas=ms.deltas,
            membership_bytes_join=ms.bytes_join,
            membership_bytes_removal=ms.bytes_removal,
            liveness_lost=outcome.liveness_lost,
        )
    return out


def truth_summary(outcome: RunOutcome) -> dict[str, Any]:
    """Whether the figures can be trusted: a run stopped early, a worker that died, and how far a
    real-time run fell behind real time (``overloaded``: its results are not valid)."""
    out: dict[str, Any] = {}
    if outcome.partial:
        out["partial"] = True
        out["ended_at_s"] = outcome.ended_at_s
    if outcome.failure is not None:
        out["failure"] = outcome.failure
    if outcome.dead_workers:
        out["dead_workers"] = [msgspec.structs.asdict(w) for w in outcome.dead_workers]
    lag = outcome.lag
    if lag is not None:
        out["overloaded"] = lag.overloaded
        out["removals_in_stalls"] = lag.removals_in_stalls  # the emulator's doing, not the nodes'
        out["lag"] = msgspec.to_builtins(lag)
    return out


TIMING_FILE = "timing.json"


def full_summary(outcome: RunOutcome) -> dict[str, Any]:
    """summary.json's document: ``build_summary`` with the sections only some runs have. The
    status page takes its end-of-run figures from it too."""
    summary = build_summary(outcome)
    # Real-time runs: the RM's measured costs and the node workers (wall-clock figures).
    if outcome.costs is not None:
        summary["costs"] = outcome.costs
    if outcome.workers:
        summary["workers"] = [msgspec.structs.asdict(w) for w in outcome.workers]
    if any(op.usage is not None for op in outcome.scenario.workload.operations):
        summary["usage"] = usage_summary(outcome.nodes)
    if outcome.rm.tiers is not None:
        summary["tiers"] = msgspec.to_builtins(outcome.rm.tiers)
    if outcome.scenario.scheduler.placement.policy != "default":
        summary["binpack"] = binpack_summary(outcome.scenario)
        if outcome.machines_used is not None:
            summary["binpack"]["machines_used"] = outcome.machines_used
    return summary


def write_results(outcome: RunOutcome, out_dir: Path) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = full_summary(outcome)
    # Wall-clock figures of any run go to timing.json, so that in virtual time summary.json stays
    # byte-identical for a scenario and seed.
    timing: dict[str, Any] = {"wall_s": round(outcome.wall_s, 3)}
    if outcome.scheduler_decision_us is not None:
        timing["scheduler_decision_us"] = outcome.scheduler_decision_us
    if outcome.restart_replay_wall_s:
        timing["rm_restart_replay_wall_s"] = outcome.restart_replay_wall_s
    (out_dir / TIMING_FILE).write_bytes(msgspec.json.format(msgspec.json.encode(timing)) + b"\n")
    if outcome.jobs is not None:
        write_jobs_csv(outcome.jobs, out_dir / JOBS_FILE)
        write_sls_jobs_csv(outcome.jobs, out_dir / SLS_JOBS_FILE)
    (out_dir / "summary.json").write_bytes(msgspec.json.format(msgspec.json.encode(summary)) + b"\n")
    with (out_dir / "timeseries.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow((*COLUMNS, *outcome.share_columns))
        # Share rows line up with sample rows; a run without them (none taken) gets empty cells.
        blank = ("",) * len(outcome.share_columns)
        shares = outcome.share_rows if len(outcome.share_rows) == len(outcome.rows) else []
        for i, row in enumerate(outcome.rows):
            values = [round(v, 6) if isinstance(v, float) else v for v in msgspec.structs.astuple(row)]
            w.writerow((*values, *(shares[i] if shares else blank)))
    if outcome.usage_rows is not None:
        with (out_dir / "usage_timeseries.csv").open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(USAGE_COLUMNS)
            for urow in outcome.usage_rows:
                w.writerow([round(v, 6) if isinstance(v, float) else v
                            for v in msgspec.structs.astuple(urow)])
    return summary
