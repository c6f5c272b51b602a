"""The one list of the metrics a run reports: what each is called, its unit, what it means, how
it is computed, when it applies and whether it is a whole-run figure or a value of the moment.

summary.json holds the whole-run figures under these names (a dotted name is a path into it:
``detection_latency_s.p99``); the terminal table and report.html show the ones that apply to the
run; the status page's API gives the whole-run figures under the same names (from the run's own
summary once it is over) and its instantaneous values under ``*_now`` names; /metrics exports
those that have a ``prom`` name; docs/metrics.md is generated from this list.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

import msgspec

# "frac": a fraction shown as a percentage; "count": a whole number; "s": emulated seconds;
# "num": any other number.
Unit = Literal["frac", "count", "s", "num"]
# When a metric applies: every run, or only runs whose scenario has failures to detect
# ("faults": crashes, pauses, or removals the RM made anyway), the ring detector, jobs (traces or
# job workloads), usage models (real usage against limits), Borg tiers, RM restarts, or the
# invariant checker.
Applies = Literal["always", "faults", "ring", "jobs", "usage", "tiers", "restarts", "invariants"]
# "run": a figure of the whole run (its measurement window for averages, all of it for counts);
# "now": a value at one instant of a live run (the status page, /metrics gauges).
Scope = Literal["run", "now"]


class MetricDef(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    label: str
    unit: Unit
    meaning: str
    computed: str
    applies: Applies = "always"
    scope: Scope = "run"
    prom: str | None = None  # its /metrics family, where it has one


def _m(name: str, label: str, unit: Unit, meaning: str, computed: str, applies: Applies = "always",
       scope: Scope = "run", prom: str | None = None) -> MetricDef:
    return MetricDef(name=name, label=label, unit=unit, meaning=meaning, computed=computed,
                     applies=applies, scope=scope, prom=prom)


_WINDOW = "over the measurement window (after the warm-up), time-weighted:"
_LATENCY = ("from the instant a fault crashed a node to the RM's removal of it, over the crashed "
            "nodes the RM removed")

REGISTRY: tuple[MetricDef, ...] = (
    _m("cpu_utilization", "CPU utilisation", "frac", "Allocated CPU over schedulable CPU.",
       f"{_WINDOW} allocated core-seconds / schedulable core-seconds"),
    _m("ram_utilization", "RAM utilisation", "frac", "Allocated RAM over schedulable RAM.",
       f"{_WINDOW} allocated GiB-seconds / schedulable GiB-seconds"),
    _m("heartbeats_sent", "heartbeats sent", "count", "Heartbeats the NodeManagers sent.",
       "the nodes' counter at the end of the run", prom="hbemu_heartbeats_sent"),
    _m("heartbeat_responses", "heartbeat responses", "count",
       "Heartbeat responses the NodeManagers received.", "the nodes' counter at the end of the run",
       prom="hbemu_heartbeat_responses"),
    _m("update_events", "scheduler update events", "count",
       "Node-update events the scheduler processed.", "the RM's counter at the end of the run",
       prom="hbemu_scheduler_update_events"),
    _m("h1", "h1 (min m_i/n_i)", "num",
       "Heartbeat processing efficiency: the worst interval's share of heartbeats answered; 1 when "
       "the RM kept up in every interval.",
       "min over the sample intervals after the warm-up with n_i > 0 whose heartbeats had a whole "
       "interval to be answered (intervals a real-time run lagged in set aside) of m_i / n_i: n_i "
       "heartbeats sent in interval i, m_i of those answered within one interval (in memory and "
       "over TCP alike)"),
    _m("h2", "h2 (min s_i/a_i)", "num",
       "Scheduler update efficiency: the worst interval's share of the heartbeats that reached the "
       "RM that became a scheduler update in time; 1 when the scheduler kept up in every interval.",
       "min over the same intervals as h1 with a_i > 0 of s_i / a_i: a_i heartbeats of registered "
       "nodes that arrived at the RM in interval i, s_i of those whose node update the scheduler "
       "processed within one interval of the arrival (in memory and over TCP alike)"),
    _m("allocations", "allocations", "count", "Containers allocated.",
       "the RM's counter (a resumed run adds the earlier processes')", prom="hbemu_allocations"),
    _m("containers_completed", "containers completed", "count", "Containers that finished successfully.",
       "the RM's counter (a resumed run adds the earlier processes')", prom="hbemu_containers_completed"),
    _m("tasks_requeued", "tasks requeued", "count", "Running tasks put back in the queue.",
       "the RM's counter: tasks of removed nodes and preempted tasks", prom="hbemu_tasks_requeued"),
    _m("refusals", "refusals", "count", "Offers refused by operations (packing).",
       "the scheduler policy's counter", prom="hbemu_refusals"),
    _m("fallback_allocations", "fallback allocations", "count",
       "Allocations made ignoring packing after every offer was refused.",
       "the scheduler policy's counter", prom="hbemu_fallback_allocations"),
    _m("preemptions", "preemptions", "count", "Tasks preempted.",
       "the preemption monitor's counter (0 with preemption off)", prom="hbemu_preemptions"),
    _m("rm_busy_fraction", "RM busy fraction", "frac",
       "Share of emulated time the RM's inbound worker was busy.",
       "emulated service time of the inbound queue / run duration"),
    _m("rm_queue_depth_max", "RM queue depth max", "count", "Deepest the RM's inbound queue got.",
       "the inbound queue's maximum"),
    _m("rm_wait_p99_s", "RM wait p99", "s", "99th percentile of the wait in the RM's inbound queue.",
       "p99 of queue waits, emulated seconds"),
    _m("messages_to_rm_per_node_minute", "messages to RM / node / min", "num",
       "Heartbeats and registrations each node sent the RM per minute.",
       "(heartbeats sent + registrations) / nodes / (duration / 60)"),
    _m("nodes_lost", "nodes removed", "count", "Removals the RM made (a node removed twice counts twice).",
       "the RM's counter of node-lost events", prom="hbemu_nodes_removed"),
    # Failure detection.
    _m("crashed_nodes", "nodes crashed", "count", "Nodes a fault crashed (the scenario's or the page's).",
       "distinct nodes crashed", "faults"),
    _m("crashed_removed", "crashed nodes removed", "count", "Crashed nodes the RM removed.",
       "crashed nodes the RM removed after their crash", "faults"),
    _m("crashed_by_scenario", "nodes crashed by the scenario", "count",
       "Nodes the scenario's own faults crashed.", "distinct nodes crashed by the scenario's faults",
       "faults"),
    _m("crashed_removed_by_scenario", "… of them removed", "count",
       "Nodes crashed by the scenario that the RM removed.", "as crashed_removed, for these nodes",
       "faults"),
    _m("crashed_from_page", "nodes crashed from the status page", "count",
       "Nodes crashed from the status page.", "distinct nodes crashed from the page", "faults"),
    _m("crashed_removed_from_page", "… of them removed", "count",
       "Nodes crashed from the page that the RM removed.", "as crashed_removed, for these nodes",
       "faults"),
    _m("false_removals", "false removals", "count", "Removals of nodes that were alive.",
       "removals of nodes not crashed and not stalled longer than a grace period", "faults",
       prom="hbemu_false_removals"),
    _m("detection_latency_s.p50", "detection latency p50", "s",
       "Median time from a crash to the RM's removal of the node.", f"p50 {_LATENCY}", "faults"),
    _m("detection_latency_s.p99", "detection latency p99", "s",
       "99th percentile of the time from a crash to the removal.", f"p99 {_LATENCY}", "faults"),
    _m("detection_latency_s.max", "detection latency max", "s",
       "Longest time from a crash to the removal.", f"max {_LATENCY}", "faults"),
    _m("ring_messages_per_node_minute", "ring messages / node / min", "num",
       "Liveness messages between nodes on the ring, per node per minute.",
       "ring messages / nodes / (duration / 60)", "ring"),
    _m("ring_refuted", "ring suspicions refuted", "count", "Ring suspicions refuted.",
       "the membership service's counter", "ring"),
    # Jobs (traces and job workloads).
    _m("jobs.count", "jobs", "count", "Jobs submitted.", "rows of jobs.csv", "jobs"),
    _m("jobs.finished", "jobs finished", "count", "Jobs that finished.",
       "jobs with a finish time", "jobs"),
    _m("jobs.jct_s.p50", "job completion time p50", "s", "Median job completion time.",
       "p50 of finish − submit over finished jobs", "jobs"),
    _m("jobs.jct_s.p99", "job completion time p99", "s", "99th percentile of job completion time.",
       "p99 of finish − submit over finished jobs", "jobs"),
    _m("jobs.queue_delay_s.p50", "job queueing delay p50", "s",
       "Median time from a job's submission to its first container's start (its AM's, when it runs one).",
       "p50 of first start − submit over started jobs", "jobs"),
    _m("jobs.slowdown.p50", "job slowdown p50", "num",
       "Median completion time over the job's ideal (uncontended) time.",
       "p50 of completion time / ideal time over finished jobs", "jobs"),
    # Usage models and tiers.
    _m("usage.cpu_slack", "CPU slack", "frac", "Share of CPU limits the tasks did not use.",
       "(limit − usage) / limit, summed over task-time", "usage"),
    _m("usage.ram_slack", "RAM slack", "frac", "Share of RAM limits the tasks did not use.",
       "(limit − usage) / limit, summed over task-time", "usage"),
    _m("usage.ooms", "OOM kills", "count", "Tasks killed for running out of memory.",
       "OOM kills over the task's limit and of nodes out of memory", "usage"),
    _m("usage.ooms_per_task_day", "OOMs per task-day", "num", "OOM kills per day of task time.",
       "OOM kills / task-days", "usage"),
    _m("usage.machine_overflow_fraction", "machine overflow", "frac",
       "Share of node-time whose real usage exceeded the node's capacity.",
       "node-seconds over capacity / node-seconds sampled", "usage"),
    # RM restarts and the invariant checker.
    _m("recovery_s", "RM recovery", "s", "Longest time an RM restart took to recover.",
       "max over the RM restarts of their recovery time", "restarts"),
    _m("tasks_lost", "tasks lost", "count", "Tasks the invariant checker found lost.",
       "the invariant checker's count at the end of the run", "invariants"),
    _m("tasks_duplicated", "tasks duplicated", "count", "Tasks the invariant checker found running twice.",
       "the invariant checker's count at the end of the run", "invariants"),
    # Values of one instant of a live run (the status page and /metrics gauges).
    _m("cpu_utilization_now", "CPU utilisation (now)", "frac", "Allocated / schedulable CPU now.",
       "the RM's snapshot", scope="now"),
    _m("ram_utilization_now", "RAM utilisation (now)", "frac", "Allocated / schedulable RAM now.",
       "the RM's snapshot", scope="now"),
    _m("h1_now", "h1 (last settled interval)", "num",
       "m_i / n_i of the last sample interval whose answers are all in, the one before the latest "
       "sample (the page's efficiency chart): the share of its heartbeats answered within one "
       "interval, at most 1.",
       "heartbeats sent in the interval and answered within one interval / heartbeats sent in it",
       scope="now"),
    _m("h2_now", "h2 (last settled interval)", "num",
       "s_i / a_i of the same interval as h1_now (the page's efficiency chart): the share of the "
       "heartbeats that arrived at the RM in it whose node update was processed within one "
       "interval, at most 1.",
       "heartbeats that arrived in the interval and were updated within one interval / heartbeats "
       "that arrived in it", scope="now"),
    _m("nodes_alive", "nodes alive", "count", "Registered nodes the RM holds healthy now.",
       "registered − unhealthy", scope="now"),
    _m("nodes_unhealthy", "nodes unhealthy", "count", "Registered nodes the RM holds unhealthy now.",
       "the RM's snapshot", scope="now"),
    _m("nodes_gone", "nodes lost (now)", "count",
       "Nodes removed and not registered again: the ring's \"lost\".",
       "distinct removed nodes the RM does not hold now", scope="now"),
    _m("nodes_unregistered", "nodes not registered", "count",
       "Nodes of the cluster the RM neither holds nor removed (not joined yet).",
       "cluster size − registered − lost now", scope="now"),
    _m("running_tasks", "running tasks", "count", "Tasks running now.", "the RM's snapshot", scope="now"),
    _m("pending_tasks", "pending tasks", "count", "Tasks waiting now.", "the RM's snapshot", scope="now"),
)

BY_NAME: dict[str, MetricDef] = {m.name: m for m in REGISTRY}
WHOLE_RUN: tuple[MetricDef, ...] = tuple(m for m in REGISTRY if m.scope == "run")


def lookup(summary: dict[str, Any], name: str) -> Any:
    """The value at a dotted name in a summary (None where it has none)."""
    node: Any = summary
    for part in name.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _positive(summary: dict[str, Any], *names: str) -> bool:
    return any(isinstance(v := summary.get(n), int | float) and v > 0 for n in names)


def contexts(summary: dict[str, Any]) -> frozenset[Applies]:
    """What a run's summary says its scenario had, by the registry's ``applies`` words."""
    out: set[Applies] = {"always"}
    # A crash or pause, or a removal all the same (a false one is exactly what to look at).
    if _positive(summary, "crashed_nodes", "nodes_lost", "stalled_removals", "false_removals"):
        out.add("faults")
    if summary.get("failure_detector") not in (None, "rm_liveliness_monitor"):
        out.add("ring")
    if lookup(summary, "jobs.count"):
        out.add("jobs")
    for key, ctx in (("usage", "usage"), ("tiers", "tiers"),
                     ("rm_restarts", "restarts"), ("tasks_lost", "invariants")):
        if summary.get(key) is not None:
            out.add(ctx)  # type: ignore[arg-type]
    return frozenset(out)


def applicable(summary: dict[str, Any], metrics: Iterable[MetricDef] = WHOLE_RUN) -> list[MetricDef]:
    """The whole-run metrics that apply to this run, in registry order."""
    ctx = contexts(summary)
    return [m for m in metrics if m.scope == "run" and m.applies in ctx]


def fmt(value: Any, unit: Unit) -> str:
    """One value as every output shows it."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return str(value)
    if unit == "frac":
        return f"{value:.2%}"
    if unit == "count":
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:,.4g} s"
    return f"{value:,.4g}"


def rows(summary: dict[str, Any]) -> list[tuple[MetricDef, str]]:
    """(metric, shown value) for each whole-run metric that applies to the run."""
    return [(m, fmt(lookup(summary, m.name), m.unit)) for m in applicable(summary)]


def pool_jct_rows(summary: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Per pool: jobs, finished, JCT p50 / p90 / p99 (runs with jobs)."""
    per_pool = lookup(summary, "jobs.per_pool") or {}
    out = []
    for pool, s in per_pool.items():
        jct = s.get("jct_s") or {}
        out.append((str(pool), [fmt(s.get("count"), "count"), fmt(s.get("finished"), "count"),
                                *(fmt(jct.get(p), "s") for p in ("p50", "p90", "p99"))]))
    return out


POOL_JCT_COLUMNS = ("pool", "jobs", "finished", "JCT p50", "JCT p90", "JCT p99")


_UNITS = {"frac": "fraction", "count": "count", "s": "emulated s", "num": "number"}
_WHEN = {"always": "every run", "faults": "faults or removals", "ring": "ring detector",
         "jobs": "jobs", "usage": "usage models", "tiers": "tiers", "restarts": "RM restarts",
         "invariants": "invariant checker"}


def glossary_markdown() -> str:
    """docs/metrics.md's glossary: one table of the whole-run figures, one of the live values."""
    def table(metrics: Iterable[MetricDef]) -> list[str]:
        lines = ["| name | label | unit | shown for | meaning | computed as | /metrics |",
                 "|---|---|---|---|---|---|---|"]
        for m in metrics:
            prom = f"`{m.prom}_total`" if m.prom else ""
            cells = (f"`{m.name}`", m.label, _UNITS[m.unit], _WHEN[m.applies], m.meaning, m.computed, prom)
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        return lines

    out = ["**Whole-run figures** (summary.json, the terminal table, report.html; the status page "
           "and /metrics once the run is over):", "", *table(WHOLE_RUN), "",
           "**Values of one instant** (the status page's API while a run goes on):", "",
           *table(m for m in REGISTRY if m.scope == "now")]
    return "\n".join(out) + "\n"
