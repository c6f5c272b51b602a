"""summary.json's ``usage`` section (scenarios with usage models; design.md §3b): per-tier
slack and OOMs, machine overflow, throttling slowdown, and how many usage reports heartbeats
carried."""

from __future__ import annotations

from typing import Any

from emulator.harness.workload import instance
from emulator.measure.binpack import ffd, lower_bound
from emulator.scenario.schema import Scenario
from emulator.scenario.topology import node_specs
from nodemanager.stats import NodeCounters, TierUsage
from rm.protocol import TIER_NAMES

DAY_S = 86400.0


def _slack(limit_s: float, used_s: float) -> float | None:
    """Time-weighted relative slack (limit − usage)/limit."""
    return round(1.0 - used_s / limit_s, 6) if limit_s > 0 else None


def _tier(t: TierUsage) -> dict[str, Any]:
    days = t.task_s / DAY_S
    return {
        "cpu_slack": _slack(t.cpu_limit_s, t.cpu_used_s),
        "ram_slack": _slack(t.ram_limit_s, t.ram_used_s),
        "ooms": t.ooms,
        "task_days": round(days, 6),
        "ooms_per_task_day": round(t.ooms / days, 6) if days > 0 else None,
    }


def usage_summary(nodes: NodeCounters) -> dict[str, Any]:
    st = nodes.usage
    total = TierUsage()
    for t in st.tiers.values():
        total.add(t)
    out = _tier(total)
    out.update({
        "ooms_over_limit": st.ooms_limit,
        "ooms_node_overflow": st.ooms_node,
        "machine_overflow_fraction": round(st.overflow_s / st.node_s, 6) if st.node_s > 0 else 0.0,
        "sampled_node_s": round(st.node_s, 3),
        "throttle_slowdown": round(st.finished_run_s / st.finished_work_s, 6) if st.finished_work_s else None,
        "usage_reports_sent": nodes.usage_reports_sent,
        "tiers": {TIER_NAMES[k]: _tier(t) for k, t in sorted(st.tiers.items())},
    })
    return out


def binpack_summary(sc: Scenario) -> dict[str, Any]:
    """The machines the workload needs offline (every entry's tasks at once, one instance each),
    in bins of the cluster's mean node: FFD and a lower bound on the optimum (design.md §3b)."""
    specs = [res for _, res in node_specs(sc)]
    cap = (sum(r.cpu for r in specs) / len(specs), sum(r.ram_gib for r in specs) / len(specs))
    ops = sc.workload.operations
    sizes = [instance(op, sc.run.seed, 0, sc.workload.min_task_seconds)[1:] for op in ops]
    items = [size for op, size in zip(ops, sizes, strict=True) for _ in range(op.task_count)]
    n = ffd(items, cap)
    return {
        "bin_cpu": round(cap[0], 6), "bin_ram_gib": round(cap[1], 6), "tasks": len(items),
        "ffd_machines": n, "lower_bound_machines": lower_bound(items, cap, n), "nodes": len(specs),
    }
