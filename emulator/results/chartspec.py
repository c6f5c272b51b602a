"""Which charts report.html draws, and how: decided here (testable), drawn by report.js.

Each chart appears once; a chart none of whose series has a non-zero value is left out (the
scheduler chart of a DRF run without preemption, removals of a run without any); registered
nodes and removals get their own axes (thousands vs a handful). Series colours come from the
palette: by metric for one run, by run when several are side by side (then the series of one
run differ by dash).
"""

from __future__ import annotations

import math
from typing import Any

from emulator.results import palette
from emulator.results.plots import share_names
from emulator.results.rundata import RunData, derived

# (id, title, y kind, [(column, label, bound-only)]); y kind: pct (x100, 0-100), count, ratio, share
CHARTS: tuple[tuple[str, str, str, tuple[tuple[str, str, bool], ...]], ...] = (
    ("utilization", "Utilisation (%)", "pct", (
        ("cpu_utilization", "CPU", False), ("ram_utilization", "RAM", False),
        ("fair_cpu_bound", "CPU bound (pooled)", True), ("fair_ram_bound", "RAM bound (pooled)", True))),
    ("tasks", "Tasks: running and pending", "count", (
        ("running_tasks", "running", False), ("pending_tasks", "pending", False))),
    ("heartbeats", "Heartbeats per emulated second", "count", (
        ("sent_per_s", "sent", False), ("responses_per_s", "processed", False),
        ("updates_per_s", "scheduler updates", False))),
    ("efficiency", "Per-interval efficiency (h1ᵢ = mᵢ/nᵢ, h2ᵢ = sᵢ/aᵢ)", "ratio", (
        ("h1_i", "mᵢ/nᵢ", False), ("h2_i", "sᵢ/aᵢ", False))),
    ("queues", "RM queue depth", "count", (
        ("rm_queue_depth", "inbound", False), ("scheduler_queue_depth", "scheduler", False))),
    ("scheduler", "Scheduler: refusals, fallback allocations, preemptions (cumulative)", "count", (
        ("refusals", "refusals", False), ("fallback_allocations", "fallbacks", False),
        ("preemptions", "preemptions", False))),
    ("nodes", "Registered nodes", "count", (("nodes", "registered nodes", False),)),
    ("removals", "Nodes removed per interval", "count", (("removals", "removals", False),)),
    # Runs with usage models (usage_timeseries.csv): real usage beside what was reserved.
    ("usage_cpu", "CPU: allocated, limits and real usage (cores)", "count", (
        ("usage:cpu_allocated", "allocated", False), ("usage:cpu_limit", "limits", False),
        ("usage:cpu_used", "used", False))),
    ("usage_ram", "Memory: allocated, limits and real usage (GiB)", "count", (
        ("usage:ram_allocated_gib", "allocated", False), ("usage:ram_limit_gib", "limits", False),
        ("usage:ram_used_gib", "used", False))),
    ("ooms", "OOM kills per interval", "count", (("usage:ooms", "OOM kills", False),)),
    ("overflow", "Machine overflow: node-time with usage above capacity (%)", "pct", (
        ("usage:overflow_fraction", "overflow", False),)),
)


def _nonzero(values: list[float] | None) -> bool:
    return bool(values) and any(v != 0 and not math.isnan(v) for v in values or ())


def _series(runs: list[RunData], cols: list[dict[str, list[float]]],
            keys: list[tuple[str, str, bool, str, bool]]) -> list[dict[str, Any]]:
    """``keys``: (column, label, bound-only, colour for one run, dashed)."""
    multi = len(runs) > 1
    out = []
    for ri, (run, c) in enumerate(zip(runs, cols, strict=True)):
        for k, (key, label, bound, color, dashed) in enumerate(keys):
            if key not in c or (bound and multi):
                continue
            out.append({
                "run": ri, "key": key, "label": f"{run.label}: {label}" if multi else label,
                "color": palette.series_color(ri) if multi else color,
                # One run: the first series wide and solid, later ones thinner (and dashed when
                # asked), so a series lying on another still shows. Several: dash by series.
                "width": 2.4 if k == 0 else 1.5,
                "dash": [7, 3 + 2 * k] if (multi and k > 0) or dashed or bound else None,
                "has_data": _nonzero(c[key]),
            })
    return out


def charts_for(runs: list[RunData]) -> list[dict[str, Any]]:
    cols = [{**r.series, **derived(r)} for r in runs]
    charts: list[dict[str, Any]] = []
    for cid, title, kind, keys in CHARTS:
        spec = [(key, label, bound, palette.METRIC.get(key, palette.series_color(k)), False)
                for k, (key, label, bound) in enumerate(keys)]
        charts.append({"id": cid, "title": title, "y": kind, "series": _series(runs, cols, spec)})
    # Per pool and per workload entry, from the share columns (one colour per pool / entry).
    header = list(dict.fromkeys(c for r in runs for c in r.series))
    for kind, what, count, count_label in (("pool", "pool", "running", "running tasks"),
                                           ("op", "workload entry", "pending", "pending tasks")):
        names = share_names(header, kind)
        if not names:
            continue
        shares = []
        for i, n in enumerate(names):
            color = palette.series_color(i)
            shares += [(f"{kind}:{n}:dominant_share", f"{n} dominant", False, color, False),
                       (f"{kind}:{n}:fair_share", f"{n} fair", False, color, True)]
        counts = [(f"{kind}:{n}:{count}", n, False, palette.series_color(i), False)
                  for i, n in enumerate(names)]
        charts.append({"id": f"{kind}_share", "title": f"Per {what}: dominant share vs fair share",
                       "y": "share", "series": _series(runs, cols, shares)})
        charts.append({"id": f"{kind}_{count}", "title": f"Per {what}: {count_label}", "y": "count",
                       "series": _series(runs, cols, counts)})
    kept = []
    for chart in charts:
        flags = [s.pop("has_data") for s in chart["series"]]
        if any(flags):
            kept.append(chart)
    return kept
