"""Run reports: PNG plots and a self-contained report.html for one results directory, and a
side-by-side report of several (the builder behind ``emulator report A B ...`` and ``compare``).

Reads only the files ``emulator run`` writes (summary.json, timeseries.csv, events.jsonl), so a
report can be rebuilt at any time. The HTML inlines the vendored uPlot library, the data and the
styles: it opens offline from anywhere. Plots use matplotlib's object API (no pyplot state).
"""

from __future__ import annotations

import csv
import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

STATIC = Path(__file__).parent.parent / "web" / "static"
# Charts get at most this many points per series (a long run is decimated by striding).
MAX_POINTS = 2000

SUMMARY_KEYS = (
    ("nodes", "nodes", "int"),
    ("heartbeat_mode", "heartbeat mode", "str"),
    ("policy", "policy", "str"),
    ("duration_s", "emulated duration (s)", "num"),
    ("cpu_utilization", "CPU utilisation", "pct"),
    ("cpu_utilization_excl_preempted", "CPU utilisation excl. preempted", "pct"),
    ("ram_utilization", "RAM utilisation", "pct"),
    ("heartbeats_sent", "heartbeats sent", "int"),
    ("heartbeat_responses", "heartbeat responses", "int"),
    ("update_events", "scheduler update events", "int"),
    ("h1", "h1 (min m_i/n_i)", "num"),
    ("h2", "h2 (min s_i/n_i)", "num"),
    ("rm_busy_fraction", "RM busy fraction", "pct"),
    ("rm_queue_depth_max", "RM queue depth max", "int"),
    ("rm_wait_p99_s", "RM wait p99 (s)", "num"),
    ("messages_to_rm_per_node_minute", "messages to RM / node / min", "num"),
    ("nodes_lost", "nodes lost", "int"),
    ("false_removals", "false removals", "int"),
    ("allocations", "allocations", "int"),
    ("containers_completed", "containers completed", "int"),
    ("tasks_requeued", "tasks requeued", "int"),
    ("refusals", "refusals", "int"),
    ("fallback_allocations", "fallback allocations", "int"),
    ("preemptions", "preemptions", "int"),
)


class ReportError(ValueError):
    """A results directory that cannot be reported on (missing or malformed files)."""


@dataclass
class RunData:
    directory: Path
    summary: dict[str, Any]
    series: dict[str, list[float]]
    removals: list[float] = field(default_factory=list)  # emulated times of node.lost events

    @property
    def label(self) -> str:
        name = self.summary.get("scenario") or self.directory.name
        return name if name == self.directory.name else f"{name} ({self.directory.name})"


def load_run(directory: Path) -> RunData:
    summary_path = directory / "summary.json"
    ts_path = directory / "timeseries.csv"
    for p in (summary_path, ts_path):
        if not p.is_file():
            raise ReportError(f"{p}: missing (is {directory} a results directory of `emulator run`?)")
    try:
        summary = msgspec.json.decode(summary_path.read_bytes(), type=dict[str, Any])
    except msgspec.DecodeError as err:
        raise ReportError(f"{summary_path}: not valid JSON ({err})") from None
    series: dict[str, list[float]] = {}
    with ts_path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or header[0] != "t_s":
            raise ReportError(f"{ts_path}: expected a header row starting with `t_s`")
        cols: list[list[float]] = [[] for _ in header]
        for lineno, row in enumerate(reader, start=2):
            try:
                values = [float(v) if v != "" else math.nan for v in row]
            except ValueError:
                raise ReportError(f"{ts_path}:{lineno}: non-numeric value in {row}") from None
            if len(values) != len(header):
                raise ReportError(f"{ts_path}:{lineno}: {len(values)} values, header has {len(header)}")
            for c, v in zip(cols, values, strict=True):
                c.append(v)
        series = dict(zip(header, cols, strict=True))
    return RunData(directory, summary, series, _removal_times(directory / "events.jsonl"))


def _removal_times(path: Path) -> list[float]:
    if not path.is_file():
        return []
    out = []
    decode = msgspec.json.Decoder(dict[str, Any]).decode
    with path.open("rb") as f:
        for line in f:
            if b'"node.lost"' not in line:
                continue
            try:
                ev = decode(line)
            except msgspec.DecodeError:
                continue
            if ev.get("event") == "node.lost":
                out.append(float(ev.get("t", 0.0)))
    return out


def derived(run: RunData) -> dict[str, list[float]]:
    """Per-interval rates and ratios the charts show, from the raw time-series columns."""
    s = run.series
    t = s["t_s"]
    dt = [b - a for a, b in zip([0.0, *t[:-1]], t, strict=True)]

    def rate(col: str) -> list[float]:
        values = s.get(col, [math.nan] * len(t))
        return [v / d if d > 0 else math.nan for v, d in zip(values, dt, strict=True)]

    def ratio(num: str, den: str) -> list[float]:
        return [a / b if b > 0 else math.nan for a, b in zip(s[num], s[den], strict=True)]

    removals = [0.0] * len(t)
    j = 0
    for rt in sorted(run.removals):
        while j < len(t) and t[j] < rt:
            j += 1
        if j < len(t):
            removals[j] += 1
    out = {
        "sent_per_s": rate("n_i"),
        "responses_per_s": rate("m_i"),
        "updates_per_s": rate("s_i"),
        "h1_i": ratio("m_i", "n_i"),
        "h2_i": ratio("s_i", "n_i"),
        "removals": removals,
    }
    return out


def _decimate(values: list[float], step: int) -> list[float | None]:
    return [None if (v is None or math.isnan(v)) else round(v, 6) for v in values[::step]]


def chart_data(run: RunData) -> dict[str, Any]:
    step = max(1, math.ceil(len(run.series["t_s"]) / MAX_POINTS))
    cols = {**run.series, **derived(run)}
    return {"label": run.label, "series": {k: _decimate(v, step) for k, v in cols.items()}}


# ---- PNG plots ---------------------------------------------------------------------------

COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04")


def _figure(rows: int = 1) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.2 * rows), dpi=110, layout="constrained")
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    return fig, axes


def plot_utilization(runs: list[RunData], path: Path) -> Path:
    fig, (ax,) = _figure()
    for i, run in enumerate(runs):
        c = COLORS[i % len(COLORS)]
        t = run.series["t_s"]
        prefix = f"{run.label}: " if len(runs) > 1 else ""
        ax.plot(t, [100 * v for v in run.series["cpu_utilization"]], color=c, lw=1.4, label=f"{prefix}CPU")
        ax.plot(t, [100 * v for v in run.series["ram_utilization"]], color=c, lw=1.4, ls="--",
                label=f"{prefix}RAM")
        if len(runs) == 1 and "fair_cpu_bound" in run.series:
            ax.plot(t, [100 * v for v in run.series["fair_cpu_bound"]], color="#9ca3af", lw=1, ls=":",
                    label="pooled-cluster bound (CPU)")
    ax.set_ylabel("allocated / capacity (%)")
    ax.set_xlabel("emulated time (s)")
    ax.set_ylim(0, 105)
    ax.set_title("Utilisation")
    ax.legend(loc="lower right", fontsize=8)
    fig.savefig(path)
    return path


def plot_heartbeats(runs: list[RunData], path: Path) -> Path:
    fig, (top, bottom) = _figure(2)
    for i, run in enumerate(runs):
        c = COLORS[i % len(COLORS)]
        d = derived(run)
        t = run.series["t_s"]
        prefix = f"{run.label}: " if len(runs) > 1 else ""
        top.plot(t, d["sent_per_s"], color=c, lw=1.3, label=f"{prefix}sent")
        top.plot(t, d["responses_per_s"], color=c, lw=1.1, ls="--", label=f"{prefix}processed")
        bottom.plot(t, d["h1_i"], color=c, lw=1.2, label=f"{prefix}m_i/n_i")
        bottom.plot(t, d["h2_i"], color=c, lw=1.0, ls=":", label=f"{prefix}s_i/n_i")
    top.set_title("Heartbeats")
    top.set_ylabel("per emulated second")
    top.legend(loc="lower right", fontsize=8)
    bottom.set_ylabel("per-interval efficiency")
    bottom.set_xlabel("emulated time (s)")
    bottom.legend(loc="lower right", fontsize=8)
    fig.savefig(path)
    return path


def plot_removals(runs: list[RunData], path: Path) -> Path:
    fig, (top, bottom) = _figure(2)
    for i, run in enumerate(runs):
        c = COLORS[i % len(COLORS)]
        t = run.series["t_s"]
        prefix = f"{run.label}: " if len(runs) > 1 else ""
        top.plot(t, run.series["nodes"], color=c, lw=1.4, label=f"{prefix}registered nodes")
        d = derived(run)
        cumulative = []
        acc = 0.0
        for v in d["removals"]:
            acc += v
            cumulative.append(acc)
        bottom.step(t, cumulative, where="post", color=c, lw=1.4, label=f"{prefix}removed (cumulative)")
    top.set_title(f"Nodes and removals ({sum(len(r.removals) for r in runs)} removals)")
    top.set_ylabel("nodes")
    top.legend(loc="lower left", fontsize=8)
    bottom.set_ylabel("nodes removed")
    bottom.set_xlabel("emulated time (s)")
    bottom.legend(loc="upper left", fontsize=8)
    fig.savefig(path)
    return path


def write_plots(runs: list[RunData], directory: Path, prefix: str = "") -> list[Path]:
    return [
        plot_utilization(runs, directory / f"{prefix}utilization.png"),
        plot_heartbeats(runs, directory / f"{prefix}heartbeats.png"),
        plot_removals(runs, directory / f"{prefix}removals.png"),
    ]


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
    rows = []
    for key, label, kind in SUMMARY_KEYS:
        values = [r.summary.get(key) for r in runs]
        if all(v is None for v in values):
            continue  # a metric no run has (a feature this build or those runs lack)
        rows.append((label, [_fmt(v, kind) for v in values]))
    return rows


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


def render_html(runs: list[RunData], title: str, images: list[str]) -> str:
    uplot_js = (STATIC / "vendor" / "uPlot.iife.min.js").read_text(encoding="utf-8")
    uplot_css = (STATIC / "vendor" / "uPlot.min.css").read_text(encoding="utf-8")
    report_js = (STATIC / "report.js").read_text(encoding="utf-8")
    report_css = (STATIC / "report.css").read_text(encoding="utf-8")
    data = msgspec.json.encode([chart_data(r) for r in runs]).decode().replace("</", "<\\/")
    summary = _table(["metric", *[r.label for r in runs]],
                     [[label, *vals] for label, vals in summary_rows(runs)], "num summary")
    imgs = "".join(f'<a href="{html.escape(i)}"><img src="{html.escape(i)}" alt="{html.escape(i)}" '
                   f'loading="lazy" onerror="this.parentNode.remove()"></a>' for i in images)
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
<section><h2>Charts</h2><div id="charts" class="charts"></div></section>
<section><h2>Operations</h2>{_operations_tables(runs) or "<p>no operations</p>"}</section>
<section class="pngs"><h2>Plots (PNG files next to this report)</h2>{imgs}</section>
</main>
<script>{uplot_js}</script>
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
