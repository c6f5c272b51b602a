"""The PNG plots next to a report (matplotlib's object API, no pyplot state).

Every time axis shades the warm-up and marks each fault with a dashed line; counts start at zero
with whole-number ticks; overlapping series stay visible (the first drawn widest, later ones
thinner and dashed); colours come from ``palette``. A panel with nothing to show is left out.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emulator.results import palette
from emulator.results.rundata import derived

if TYPE_CHECKING:
    from emulator.results.rundata import RunData


def _save(fig: Any, path: Path) -> None:
    fig.savefig(path)


def _figure(rows: int = 1) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.2 * rows), dpi=110, layout="constrained")
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    return fig, list(axes)


def _marks(ax: Any, runs: list[RunData]) -> None:
    """Warm-up shaded (the longest of the runs'), each fault a dashed vertical line."""
    warmup = max((float(r.summary.get("warmup_s") or 0.0) for r in runs), default=0.0)
    if warmup > 0:
        ax.axvspan(0, warmup, color=palette.mpl_rgba(palette.WARMUP_FILL), lw=0, label="warm-up", zorder=0)
    faults = sorted({t for r in runs for t in r.faults})
    for i, t in enumerate(faults):
        ax.axvline(t, color=palette.FAULT_MARK, lw=1.0, ls="--", alpha=0.8, zorder=1,
                   label="fault" if i == 0 else None)


def _counts(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_ylim(bottom=0, top=max(1.0, ax.get_ylim()[1]))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _layer(k: int) -> dict[str, Any]:
    return {"lw": 2.4, "ls": "-"} if k == 0 else {"lw": 1.3, "ls": (0, (6, 2 + 2 * k))}


def _color(runs: list[RunData], i: int, metric: str) -> str:
    return palette.series_color(i) if len(runs) > 1 else palette.METRIC.get(metric, palette.series_color(0))


def _prefix(runs: list[RunData], run: RunData) -> str:
    return f"{run.label}: " if len(runs) > 1 else ""


def plot_utilization(runs: list[RunData], path: Path) -> Path:
    fig, (ax,) = _figure()
    _marks(ax, runs)
    for i, run in enumerate(runs):
        t = run.series["t_s"]
        for k, (col, label) in enumerate((("cpu_utilization", "CPU"), ("ram_utilization", "RAM"))):
            ax.plot(t, [100 * v for v in run.series[col]], color=_color(runs, i, col), **_layer(k),
                    label=f"{_prefix(runs, run)}{label}")
        if len(runs) == 1 and "fair_cpu_bound" in run.series:
            ax.plot(t, [100 * v for v in run.series["fair_cpu_bound"]],
                    color=palette.METRIC["fair_cpu_bound"], lw=1, ls=":", label="pooled-cluster bound (CPU)")
    ax.set_ylabel("allocated / capacity (%)")
    ax.set_xlabel("emulated time (s)")
    ax.set_ylim(0, 105)
    ax.set_title("Utilisation")
    ax.legend(loc="lower right", fontsize=8)
    _save(fig, path)
    return path


def plot_heartbeats(runs: list[RunData], path: Path) -> Path:
    fig, (top, bottom) = _figure(2)
    for ax in (top, bottom):
        _marks(ax, runs)
    for i, run in enumerate(runs):
        d = derived(run)
        t = run.series["t_s"]
        p = _prefix(runs, run)
        for k, (key, label) in enumerate((("sent_per_s", "sent"), ("responses_per_s", "processed"))):
            top.plot(t, d[key], color=_color(runs, i, key), **_layer(k), label=f"{p}{label}")
        for k, (key, label) in enumerate((("h1_i", "m_i/n_i"), ("h2_i", "s_i/a_i"))):
            bottom.plot(t, d[key], color=_color(runs, i, key), **_layer(k), label=f"{p}{label}")
    top.set_title("Heartbeats")
    top.set_ylabel("per emulated second")
    top.set_ylim(bottom=0)
    top.legend(loc="lower right", fontsize=8)
    bottom.set_ylabel("per-interval efficiency")
    bottom.set_xlabel("emulated time (s)")
    bottom.set_ylim(bottom=0)
    bottom.legend(loc="lower right", fontsize=8)
    _save(fig, path)
    return path


def plot_removals(runs: list[RunData], path: Path) -> Path:
    """Registered nodes and, when there were any, the removals (cumulative)."""
    total = sum(len(r.removals) for r in runs)
    fig, axes = _figure(2 if total else 1)
    for ax in axes:
        _marks(ax, runs)
    top = axes[0]
    for i, run in enumerate(runs):
        t = run.series["t_s"]
        top.plot(t, run.series["nodes"], color=_color(runs, i, "nodes"), **_layer(i if len(runs) > 1 else 0),
                 label=f"{_prefix(runs, run)}registered nodes")
        if total:
            cumulative, acc = [], 0.0
            for v in derived(run)["removals"]:
                acc += v
                cumulative.append(acc)
            axes[1].step(t, cumulative, where="post", color=_color(runs, i, "removals"), lw=1.6,
                         label=f"{_prefix(runs, run)}removed (cumulative)")
    top.set_title(f"Nodes and removals ({total} removal{'s' if total != 1 else ''})")
    top.set_ylabel("nodes")
    top.legend(loc="lower left", fontsize=8)
    axes[-1].set_xlabel("emulated time (s)")
    if total:
        axes[1].set_ylabel("nodes removed")
        axes[1].legend(loc="upper left", fontsize=8)
    for ax in axes:  # after plotting: a fixed bottom before it would freeze the top too
        _counts(ax)
    _save(fig, path)
    return path


def share_names(columns: list[str], kind: str) -> list[str]:
    """Pools (kind "pool") or workload entries ("op") with share columns, in header order."""
    out = []
    for c in columns:
        parts = c.split(":")
        if len(parts) >= 3 and parts[0] == kind and parts[-1] == "dominant_share":
            out.append(":".join(parts[1:-1]))
    return out


def plot_shares(runs: list[RunData], path: Path) -> Path | None:
    """Per pool: dominant share (solid) vs fair share (dashed), one colour per pool; one run only
    (side by side the pools of several runs would be a tangle). None: no share columns."""
    if len(runs) != 1:
        return None
    run = runs[0]
    pools = share_names(list(run.series), "pool")
    if not pools:
        return None
    from matplotlib.lines import Line2D

    fig, (ax,) = _figure()
    _marks(ax, runs)
    t = run.series["t_s"]
    for i, name in enumerate(pools):
        c = palette.series_color(i)
        ax.plot(t, run.series[f"pool:{name}:dominant_share"], color=c, lw=2.0, label=name)
        ax.plot(t, run.series[f"pool:{name}:fair_share"], color=c, lw=1.2, ls="--")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("share of the cluster")
    ax.set_xlabel("emulated time (s)")
    ax.set_title("Per pool: dominant share vs fair share")
    # One entry per pool and a key to the two line styles, below the axes: inside them a legend of
    # tens of pools covered the plot (E1 has 24), so the figure grows with its rows instead.
    handles, labels = ax.get_legend_handles_labels()
    keys = [Line2D([], [], color="0.35", lw=2.0), Line2D([], [], color="0.35", lw=1.2, ls="--")]
    handles, labels = keys + handles, ["dominant share", "fair share", *labels]
    ncols = min(6, max(3, math.ceil(len(labels) / 5)))
    fig.set_size_inches(9, 3.2 + 0.2 * math.ceil(len(labels) / ncols))
    fig.legend(handles, labels, loc="outside lower center", fontsize=8, ncols=ncols, frameon=False)
    _save(fig, path)
    return path


def write_plots(runs: list[RunData], directory: Path, prefix: str = "") -> list[Path]:
    paths = [
        plot_utilization(runs, directory / f"{prefix}utilization.png"),
        plot_heartbeats(runs, directory / f"{prefix}heartbeats.png"),
        plot_removals(runs, directory / f"{prefix}removals.png"),
    ]
    shares = plot_shares(runs, directory / f"{prefix}shares.png")
    return paths + ([shares] if shares is not None else [])
