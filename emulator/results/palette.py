"""One palette for every chart: the live page (served as /palette.js), report.html (inlined) and
the PNG plots (matplotlib), so a series has the same colour wherever it is drawn."""

from __future__ import annotations

import msgspec

# Categorical colours: runs in a comparison, pools and workload entries. Tableau 10 first (what
# a short list gets), then the rest of Tableau 20, so up to 20 pools (E1 has 24) differ in colour.
SERIES = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
          "#9c755f", "#bab0ac", "#a0cbe8", "#ffbe7d", "#8cd17d", "#b6992d", "#499894", "#86bcb6",
          "#ff9d9a", "#79706e", "#d37295", "#d4a6c8")

# A fixed colour per metric, whichever chart shows it.
METRIC = {
    "cpu_utilization": "#4e79a7",
    "ram_utilization": "#59a14f",
    "fair_cpu_bound": "#a0cbe8",
    "fair_ram_bound": "#8cd17d",
    "sent_per_s": "#4e79a7",
    "responses_per_s": "#59a14f",
    "updates_per_s": "#b07aa1",
    "h1_i": "#76b7b2",
    "h2_i": "#f28e2b",
    "running_tasks": "#4e79a7",
    "pending_tasks": "#f28e2b",
    "refusals": "#f28e2b",
    "fallback_allocations": "#76b7b2",
    "preemptions": "#e15759",
    "nodes": "#4e79a7",
    "removals": "#e15759",
    "rm_busy_fraction": "#e15759",
    "rm_queue_depth": "#79706e",
    "scheduler_queue_depth": "#edc948",
}

# Node states (ring and tables).
STATE = {
    "alive": "#59a14f",
    "unhealthy": "#edc948",
    "suspected": "#f28e2b",
    "paused": "#b07aa1",
    "crashed": "#7b3294",
    "lost": "#e15759",
    "joining": "#a0cbe8",
}

WARMUP_FILL = "rgba(148, 163, 184, 0.18)"  # the warm-up span, shaded
FAULT_MARK = "#e15759"  # a vertical line at each fault


def series_color(i: int) -> str:
    return SERIES[i % len(SERIES)]


def as_js() -> str:
    """The palette as a script defining ``PALETTE`` (for the page and report.html)."""
    doc = {"series": SERIES, "metric": METRIC, "state": STATE, "warmup": WARMUP_FILL, "fault": FAULT_MARK}
    return "const PALETTE = " + msgspec.json.encode(doc).decode() + ";\n"


def mpl_rgba(color: str) -> tuple[float, float, float, float] | str:
    """A CSS ``rgba(r, g, b, a)`` as a matplotlib tuple; a hex colour as is."""
    if not color.startswith("rgba("):
        return color
    r, g, b, a = (float(x) for x in color[5:-1].split(","))
    return (r / 255, g / 255, b / 255, a)
