"""Run reports: PNG plots and a self-contained report.html for one results directory, and a
side-by-side report of several (the builder behind ``emulator report A B ...`` and ``compare``).

Reads only the files ``emulator run`` writes (summary.json, timeseries.csv, events.jsonl), so a
report can be rebuilt at any time. The HTML inlines the vendored uPlot library, the data and the
styles: it opens offline from anywhere. Plots use matplotlib's object API (no pyplot state).
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import msgspec

from emulator.results import registry
from emulator.results.chartspec import charts_for
from emulator.results.palette import as_js
from emulator.results.plots import write_plots
from emulator.results.rundata import ReportError, RunData, derived, load_run

__all__ = ["ReportError", "RunData", "derived", "load_run", "render_html", "write_compare_report",
           "write_plots", "write_run_report"]

STATIC = Path(__file__).parent.parent / "web" / "static"
# Charts get at most this many points per series (a long run is decimated by striding).
MAX_POINTS = 2000

# What each run is; its metrics follow from the registry (those that apply to its scenario).
RUN_KEYS = (
    ("nodes", "nodes", "count"),
    ("heartbeat_mode", "heartbeat mode", "text"),
    ("policy", "policy", "text"),
    ("duration_s", "emulated duration (s)", "num"),
)


def _decimate(values: list[float], step: int) -> list[float | None]:
    return [None if (v is None or math.isnan(v)) else round(v, 6) for v in values[::step]]


def chart_data(run: RunData) -> dict[str, Any]:
    step = max(1, math.ceil(len(run.series["t_s"]) / MAX_POINTS))
    cols = {**run.series, **derived(run)}
    return {"label": run.label, "series": {k: _decimate(v, step) for k, v in cols.items()},
            "warmup_s": float(run.summary.get("warmup_s") or 0.0), "faults": run.faults}


# ---- HTML ----------------------------------------------------------------------------------


def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "—"
    if kind == "pct" and isinstance(value, int | float):
        return f"{100 * value:.2f}%"
    if kind == "int" and isinstance(value, int | float):
        return f"{value:,.0f}"
    if kind == "num" and isinstance(value, int | float):
        return f"{value:,.4g}"
    return html.escape(str(value))


def summary_rows(runs: list[RunData]) -> list[tuple[str, list[str]]]:
    """The run rows, then each registry metric that applies to one of the runs (n/a in the others)."""
    rows = [(label, [_fmt(r.summary.get(key), "int" if kind == "count" else kind) for r in runs])
            for key, label, kind in RUN_KEYS]
    wanted = {m.name for r in runs for m in registry.applicable(r.summary)}
    for metric in registry.WHOLE_RUN:
        if metric.name not in wanted:
            continue
        values = [registry.lookup(r.summary, metric.name) for r in runs]
        if all(v is None for v in values):
            continue  # a metric no run has (a feature this build or those runs lack)
        rows.append((metric.label, [html.escape(registry.fmt(v, metric.unit)) for v in values]))
    return rows


def _jobs_tables(runs: list[RunData]) -> str:
    """Runs with jobs: per pool, job completion time percentiles."""
    parts = []
    for run in runs:
        pools = registry.pool_jct_rows(run.summary)
        if not pools:
            continue
        title = f"<h3>{html.escape(run.label)}</h3>" if len(runs) > 1 else ""
        parts.append(title + _table(list(registry.POOL_JCT_COLUMNS),
                                    [[html.escape(p), *cells] for p, cells in pools], "num"))
    return "".join(parts)


def _table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _operations_tables(runs: list[RunData]) -> str:
    parts = []
    for run in runs:
        ops = run.summary.get("operations") or []
        if not ops:
            continue
        rows = [[html.escape(str(o.get("name"))), html.escape(str(o.get("pool"))),
                 _fmt(o.get("completed_tasks"), "int"), _fmt(o.get("operations_finished"), "int"),
                 _fmt(o.get("dominant_share"), "num"), _fmt(o.get("fair_share"), "num"),
                 _fmt(o.get("refusals"), "int"), _fmt(o.get("preemptions"), "int")]
                for o in ops]
        title = f"<h3>{html.escape(run.label)}</h3>" if len(runs) > 1 else ""
        parts.append(title + _table(
            ["operation", "pool", "tasks done", "ops finished", "mean dominant share", "mean fair share",
             "refusals", "preemptions"], rows, "num"))
    return "".join(parts)


def _tiers_tables(runs: list[RunData]) -> str:
    """Per Borg tier: slack and OOMs (usage models) and preemptions (tiers), one table per run."""
    parts = []
    for run in runs:
        usage = (run.summary.get("usage") or {}).get("tiers") or {}
        if not usage:
            continue
        rows = [[html.escape(name), _fmt(t.get("cpu_slack"), "pct"), _fmt(t.get("ram_slack"), "pct"),
                 _fmt(t.get("ooms"), "int"), _fmt(t.get("ooms_per_task_day"), "num"),
                 _fmt(t.get("task_days"), "num")] for name, t in usage.items()]
        title = f"<h3>{html.escape(run.label)}</h3>" if len(runs) > 1 else ""
        parts.append(title + _table(["tier", "CPU slack", "RAM slack", "OOM kills", "OOMs per task-day",
                                     "task-days"], rows, "num"))
    return "".join(parts)


def render_html(runs: list[RunData], title: str, images: list[str]) -> str:
    uplot_js = (STATIC / "vendor" / "uPlot.iife.min.js").read_text(encoding="utf-8")
    uplot_css = (STATIC / "vendor" / "uPlot.min.css").read_text(encoding="utf-8")
    report_js = (STATIC / "report.js").read_text(encoding="utf-8")
    charts_js = (STATIC / "charts.js").read_text(encoding="utf-8")
    report_css = (STATIC / "report.css").read_text(encoding="utf-8")
    data = msgspec.json.encode([chart_data(r) for r in runs]).decode().replace("</", "<\\/")
    charts = msgspec.json.encode(charts_for(runs)).decode().replace("</", "<\\/")
    summary = _table(["metric", *[r.label for r in runs]],
                     [[label, *vals] for label, vals in summary_rows(runs)], "num summary")
    # The charts are drawn once, interactively; the PNGs of the same figures are only linked.
    links = " · ".join(f'<a href="{html.escape(i)}">{html.escape(i)}</a>' for i in images)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{uplot_css}</style><style>{report_css}</style>
</head><body>
<header><h1>{html.escape(title)}</h1>
<p class="sub">hbemu run report · {len(runs)} run{"s" if len(runs) != 1 else ""} ·
all times are emulated seconds</p></header>
<main>
<section><h2>Summary</h2>{summary}</section>
<section><h2>Charts</h2><p class="note">Shaded: the warm-up (left out of the averages); dashed
red lines: faults.</p><div id="charts" class="charts"></div></section>
<section><h2>Operations</h2>{_operations_tables(runs) or "<p>no operations</p>"}</section>
{f"<section><h2>Jobs</h2>{jobs}</section>" if (jobs := _jobs_tables(runs)) else ""}
{f"<section><h2>Usage by tier</h2>{tiers}</section>" if (tiers := _tiers_tables(runs)) else ""}
<section class="pngs"><h2>PNG plots</h2><p>Next to this report: {links or "none"}</p></section>
</main>
<script>{uplot_js}</script>
<script>{as_js()}</script>
<script>{charts_js}</script>
<script>const REPORT_CHARTS = {charts};</script>
<script>const REPORT_DATA = {data};</script>
<script>{report_js}</script>
</body></html>
"""


def write_run_report(directory: Path) -> Path:
    """PNG plots and report.html inside one results directory; returns the HTML path."""
    run = load_run(directory)
    images = [p.name for p in write_plots([run], directory)]
    path = directory / "report.html"
    title = f"{run.summary.get('scenario') or directory.name} — run report"
    path.write_text(render_html([run], title, images), encoding="utf-8")
    return path


def write_compare_report(directories: list[Path], out: Path) -> Path:
    """A side-by-side report of several runs at ``out`` (an .html file); its PNGs go next to it,
    named after it (``<stem>-utilization.png`` ...)."""
    if not directories:
        raise ReportError("give at least one results directory")
    runs = [load_run(d) for d in directories]
    out.parent.mkdir(parents=True, exist_ok=True)
    images = [p.name for p in write_plots(runs, out.parent, prefix=f"{out.stem}-")]
    title = "Comparison: " + " vs ".join(r.label for r in runs)
    out.write_text(render_html(runs, title, images), encoding="utf-8")
    return out
