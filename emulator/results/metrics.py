"""The metric groups `emulator compare` shows, defined once for its text table, its HTML page and
its CSV: (group, key path in summary.json, label, unit, which direction is better).

A key path is dotted: ``detection_latency_s.p99``; a step into a list of named entries picks the
entry by name (``pools.analytics.dominant_share``), and ``*`` stands for every name or key the runs
have there (``pools.*.dominant_share``: one row per pool). A few rows are computed from other
fields (``derived.*``, e.g. heartbeats per second). A row no run has is left out, so a run made
before a metric existed (or one without jobs) compares with the rest on what they share.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from emulator.results import registry

# How a value is shown: a fraction as a percentage ("frac"), a signed fraction in percentage
# points ("pp"), a whole count, seconds, any other number, or text (no delta, no ratio).
Unit = Literal["frac", "pp", "count", "s", "num", "text"]
Better = Literal["higher", "lower"] | None


@dataclass(frozen=True)
class Metric:
    group: str
    key: str
    label: str
    unit: Unit
    better: Better = None


GROUPS: dict[str, str] = {
    "run": "run",
    "utilisation": "utilisation",
    "fairness": "fairness",
    "heartbeats": "heartbeats and RM load",
    "detection": "failure detection",
    "jobs": "jobs",
}
# Also accepted by --metrics.
ALIASES = {"utilization": "utilisation", "rm": "heartbeats", "failure-detection": "detection",
           "failures": "detection"}


def _m(group: str, rows: Iterable[tuple[str, str, Unit, Better]]) -> list[Metric]:
    out = []
    for key, label, unit, better in rows:
        known = registry.BY_NAME.get(key)
        if known is not None:  # a figure of the metrics registry: its label and unit, as everywhere
            label, unit = known.label, known.unit
        out.append(Metric(group, key, label, unit, better))
    return out


def _percentiles(group: str, key: str, label: str, unit: Unit = "s") -> list[Metric]:
    return _m(group, [(f"{key}.{p}", f"{label} {p}", unit, "lower") for p in ("p50", "p90", "p99", "mean")])


METRICS: tuple[Metric, ...] = (
    *_m("run", [
        ("scenario", "scenario", "text", None),
        ("policy", "policy", "text", None),
        ("heartbeat_mode", "heartbeat mode", "text", None),
        ("failure_detector", "failure detector", "text", None),
        ("nodes", "nodes", "count", None),
        ("seed", "seed", "text", None),
    ]),
    *_m("utilisation", [
        ("cpu_utilization", "mean CPU utilisation", "frac", "higher"),
        ("cpu_utilization_excl_preempted", "CPU utilisation excl. preempted", "frac", "higher"),
        ("ram_utilization", "mean RAM utilisation", "frac", "higher"),
        ("fair_cpu_bound", "pooled bound CPU", "frac", None),
        ("fair_ram_bound", "pooled bound RAM", "frac", None),
        ("fragmentation_gap_cpu", "fragmentation gap CPU", "pp", "lower"),
        ("fragmentation_gap_ram", "fragmentation gap RAM", "pp", "lower"),
        ("allocations", "allocations", "count", None),
        ("containers_completed", "containers completed", "count", "higher"),
        ("refusals", "refusals", "count", None),
        ("refusals_per_allocation", "refusals per allocation", "num", None),
        ("acceptance_rate", "acceptance rate", "frac", None),
        ("fallback_allocations", "fallback allocations", "count", None),
        ("preemptions", "preemptions", "count", "lower"),
        ("preempted_cpu_s", "preempted CPU-seconds", "count", "lower"),
    ]),
    *_m("fairness", [
        ("fairness_deviation", "fairness deviation (mean |rel.|)", "frac", "lower"),
        ("fairness_deviation_max", "fairness deviation (max |rel.|)", "frac", "lower"),
        ("pools.*.dominant_share", "pool {}: mean dominant share", "num", None),
        ("pools.*.fair_share", "pool {}: mean fair share", "num", None),
        ("pools.*.fairness_deviation", "pool {}: fairness deviation", "pp", None),
    ]),
    *_m("heartbeats", [
        ("derived.heartbeats_per_s", "heartbeats sent / s", "num", "lower"),
        ("derived.rm_messages_per_s", "messages to RM / s", "num", "lower"),
        ("derived.rm_bytes_per_s", "bytes to RM / s", "num", "lower"),
        ("rm_messages_per_node_minute", "messages to RM / node / min", "num", "lower"),
        ("rm_bytes_per_node_minute", "bytes to RM / node / min", "num", "lower"),
        ("heartbeats_sent", "heartbeats sent", "count", None),
        ("heartbeat_responses", "heartbeat responses", "count", None),
        ("heartbeats_skipped", "heartbeats skipped", "count", "lower"),
        ("statuses_sent", "container statuses sent", "count", "lower"),
        ("update_events", "scheduler update events", "count", None),
        ("h1", "h1 (min m_i/n_i)", "num", "higher"),
        ("h2", "h2 (min s_i/a_i)", "num", "higher"),
        ("rm_busy_fraction", "RM busy fraction", "frac", "lower"),
        ("rm_queue_depth_max", "RM queue depth max", "count", "lower"),
        ("rm_wait_p99_s", "RM wait p99", "s", "lower"),
        ("scheduler_busy_fraction", "scheduler busy fraction", "frac", "lower"),
        ("ring_messages_per_node_minute", "ring messages / node / min", "num", "lower"),
        ("costs.rm_cpu_percent", "RM CPU % (real time)", "num", "lower"),
        ("costs.rm_busy_fraction", "RM busy fraction (real time)", "frac", "lower"),
        ("costs.rm_cost_us_per_heartbeat", "RM µs per heartbeat (real time)", "num", "lower"),
        ("timing.scheduler_decision_us.p50", "scheduler decision p50 (wall µs)", "num", "lower"),
        ("timing.scheduler_decision_us.p99", "scheduler decision p99 (wall µs)", "num", "lower"),
    ]),
    *_m("detection", [
        ("nodes_lost", "nodes removed", "count", None),
        ("crashed_nodes", "nodes crashed", "count", None),
        ("crashed_removed", "crashed nodes removed", "count", "higher"),
        ("false_removals", "false removals", "count", "lower"),
        ("false_removed_nodes", "nodes falsely removed", "count", "lower"),
        ("stalled_removals", "stalled nodes removed", "count", None),
        ("detection_latency_s.p50", "detection latency p50", "s", "lower"),
        ("detection_latency_s.p99", "detection latency p99", "s", "lower"),
        ("detection_latency_s.max", "detection latency max", "s", "lower"),
        ("tasks_requeued", "tasks requeued", "count", "lower"),
        ("resyncs", "node resyncs", "count", "lower"),
        ("ring_reports", "ring reports", "count", None),
        ("ring_refuted", "ring suspicions refuted", "count", None),
        ("membership_bytes_removal", "membership bytes (removals)", "count", "lower"),
    ]),
    *_m("jobs", [
        ("jobs.count", "jobs", "count", None),
        ("jobs.finished", "jobs finished", "count", "higher"),
    ]),
    *_percentiles("jobs", "jobs.jct_s", "job completion time"),
    *_percentiles("jobs", "jobs.queue_delay_s", "job queueing delay"),
    *_percentiles("jobs", "jobs.slowdown", "job slowdown", "num"),
    *_percentiles("jobs", "jobs.task_wait_s", "task wait"),
    *_m("jobs", [
        ("jobs.per_pool.*.jct_s.p50", "pool {}: job completion time p50", "s", "lower"),
        ("jobs.per_pool.*.jct_s.p99", "pool {}: job completion time p99", "s", "lower"),
    ]),
)


def _derived(s: dict[str, Any]) -> dict[str, Any]:
    """Figures computed from the summary's own fields (per second of the emulated run)."""
    duration: Any = s.get("ended_at_s") or s.get("duration_s")
    nodes = s.get("nodes")
    out: dict[str, Any] = {}
    if _number(duration) and duration > 0 and _number(s.get("heartbeats_sent")):
        out["heartbeats_per_s"] = s["heartbeats_sent"] / duration
    if _number(nodes):
        for key, name in (("rm_messages_per_node_minute", "rm_messages_per_s"),
                          ("rm_bytes_per_node_minute", "rm_bytes_per_s")):
            if _number(s.get(key)):
                out[name] = s[key] * nodes / 60
    return out


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _step(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list):  # a list of named entries (pools, operations)
        for entry in node:
            if isinstance(entry, dict) and entry.get("name") == part:
                return entry
    return None


def lookup(summary: dict[str, Any], key: str) -> Any:
    """The value at a dotted key path (None where the summary has none)."""
    node: Any = {**summary, "derived": _derived(summary)}
    for part in key.split("."):
        node = _step(node, part)
        if node is None:
            return None
    return node


def _names(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [str(k) for k in node]
    if isinstance(node, list):
        return [str(e["name"]) for e in node if isinstance(e, dict) and "name" in e]
    return []


def expand(metric: Metric, summaries: list[dict[str, Any]]) -> list[Metric]:
    """A metric with ``*`` in its key: one per name the runs have there, in first-seen order."""
    if "*" not in metric.key:
        return [metric]
    head, _, tail = metric.key.partition(".*.")
    names: dict[str, None] = {}
    for s in summaries:
        names.update(dict.fromkeys(_names(lookup(s, head))))
    return [
        Metric(metric.group, f"{head}.{n}.{tail}", metric.label.format(n), metric.unit, metric.better)
        for n in names
    ]


class SelectionError(ValueError):
    """A ``--metrics`` word that names no group and matches no key."""


def select(spec: str | None, metrics: Iterable[Metric] = METRICS) -> list[Metric]:
    """``--metrics GROUP[,GROUP|KEY-GLOB...]``; None: every group. The run group (what each run
    is) always comes first."""
    metrics = list(metrics)
    if not spec:
        return metrics
    chosen: set[int] = {i for i, m in enumerate(metrics) if m.group == "run"}
    for word in (w.strip() for w in spec.split(",")):
        if not word:
            continue
        group = ALIASES.get(word, word)
        hits = {i for i, m in enumerate(metrics)
                if m.group == group or fnmatch.fnmatchcase(m.key, word)
                or ("*" in m.key and fnmatch.fnmatchcase(word, m.key))}
        if not hits:
            raise SelectionError(
                f"--metrics {word!r}: neither a group ({', '.join(g for g in GROUPS if g != 'run')}) "
                "nor a summary key (a glob like 'detection_latency_s.*' works too)"
            )
        chosen |= hits
    return [m for i, m in enumerate(metrics) if i in chosen]


@dataclass
class Row:
    """One metric across the runs: the first run is the baseline of every delta and ratio."""

    metric: Metric
    values: list[Any]
    deltas: list[float | None] = field(default_factory=list)  # run i (i >= 1) minus run 0
    ratios: list[float | None] = field(default_factory=list)  # run i / run 0

    def verdict(self, i: int) -> Literal["better", "worse", ""]:
        """Whether run ``i`` (>= 1) moved in the metric's better direction."""
        d = self.deltas[i - 1]
        if d is None or d == 0 or self.metric.better is None:
            return ""
        return "better" if (d > 0) == (self.metric.better == "higher") else "worse"


def rows(summaries: list[dict[str, Any]], metrics: Iterable[Metric] = METRICS,
         keep: Callable[[Metric], bool] = lambda m: False) -> list[Row]:
    """The rows some run has (or ``keep`` wants, e.g. for reference columns), with deltas and
    ratios against the first run."""
    out = []
    for template in metrics:
        for m in expand(template, summaries):
            values = [lookup(s, m.key) for s in summaries]
            if all(v is None for v in values) and not keep(m):
                continue
            row = Row(m, values)
            base = values[0]
            for v in values[1:]:
                numeric = m.unit != "text" and _number(base) and _number(v)
                row.deltas.append(v - base if numeric else None)
                ratio_ok = numeric and m.unit != "pp" and base != 0
                row.ratios.append(v / base if ratio_ok else None)
            out.append(row)
    return out


def fmt_value(value: Any, unit: Unit) -> str:
    if value is None:
        return "n/a"
    if unit == "text" or not _number(value):
        return str(value)
    if unit == "frac":
        return f"{value:.2%}"
    if unit == "pp":
        return f"{value * 100:+.2f} pp"
    if unit == "count":
        return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.3g}"
    if unit == "s":
        return f"{value:,.4g} s"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.4g}"


def fmt_delta(delta: float | None, unit: Unit) -> str:
    if delta is None:
        return ""
    if unit in ("frac", "pp"):
        return f"{delta * 100:+.2f} pp"
    if unit == "count" and float(delta).is_integer():
        return f"{delta:+,.0f}"
    if unit == "s":
        return f"{delta:+,.4g} s"
    return f"{delta:+,.0f}" if abs(delta) >= 1000 else f"{delta:+,.4g}"


def fmt_ratio(ratio: float | None) -> str:
    return "" if ratio is None else f"×{ratio:.3g}"
