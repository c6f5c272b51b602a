"""A study's plots, from its output JSON alone (no run): one line per point of a collected
timeseries column against emulated time, the running total below it where asked, a dotted line
where the scenario's faults start; or (`x`, `y`) figures over an axis, a line per value of another
dimension (E2: h1 and h2 against nodes, a line per heartbeat mode); beside each PNG the CSV of
what it draws."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from emulator.results.registry import BY_NAME
from emulator.study.output import PointResult, StudyOutput
from emulator.study.sections import TIMESERIES
from emulator.study.spec import VARIANT, Plot, Study
from emulator.study.sweep import row
from emulator.study.tables import tables_of

T_S = TIMESERIES + "t_s"


def _label(point: PointResult, several: bool) -> str:
    return point.key if several else point.variant


def coord(p: PointResult, dim: str) -> Any:
    return p.variant if dim == VARIANT else p.coords.get(dim)


def _chosen(points: list[PointResult], plot: Plot) -> list[PointResult]:
    return [p for p in points if all(coord(p, d) == v for d, v in plot.where.items())]


def faults_start(points: list[PointResult]) -> float | None:
    starts = [f["at_s"] for p in points for f in p.scenario.get("faults", []) if "at_s" in f]
    return min(starts) if starts else None


def write_csv(path: Path, points: list[PointResult], plot: Plot, labels: list[str]) -> None:
    longest = max(points, key=lambda p: len(p.collected[T_S]))
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["t_s", *labels])
        for k, t in enumerate(longest.collected[T_S]):
            w.writerow([t, *(p.collected[plot.series][k] if k < len(p.collected[plot.series]) else ""
                             for p in points)])


def draw(path: Path, points: list[PointResult], plot: Plot, labels: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if plot.cumulative else 1
    fig, axes = plt.subplots(panels, 1, figsize=(9, 3.5 * panels + 0.5), sharex=True, squeeze=False)
    styles = ["-", "--", "-.", ":"]
    crash = faults_start(points)
    column = plot.series.removeprefix(TIMESERIES)
    for k, (p, label) in enumerate(zip(points, labels, strict=True)):
        t, ys = p.collected[T_S], [y or 0 for y in p.collected[plot.series]]
        style = {"where": "post", "label": label, "linestyle": styles[k % len(styles)], "linewidth": 1.6}
        axes[0][0].step(t, ys, **style)
        if plot.cumulative:
            axes[1][0].step(t, [sum(ys[: j + 1]) for j in range(len(ys))], **style)
    for (ax,) in axes:
        if crash is not None:
            ax.axvline(crash, color="grey", linestyle=":", linewidth=1)
        if plot.log:
            ax.set_yscale("symlog", linthresh=10)
            ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{column} per sample")
    if plot.cumulative:
        axes[1][0].set_ylabel(f"{column} (cumulative)")
    axes[-1][0].set_xlabel("emulated time (s)")
    faults = " (faults start at the dotted line)" if crash is not None else ""
    axes[0][0].set_title(f"{plot.title or plot.name}{faults}")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


Lines = dict[str, dict[Any, list[tuple[Any, Any]]]]  # y -> line value -> (x, y) pairs


def axis_lines(study: Study, points: list[PointResult], plot: Plot) -> Lines:
    """Per `y`, per value of `lines`: the (x, y) pairs in x order (points without a value left out)."""
    rows = [row(p) for p in points] if study.limits is not None else [{} for _ in points]
    out: Lines = {}
    for y in plot.y:
        by_line: dict[Any, list[tuple[Any, Any]]] = {}
        for p, r in zip(points, rows, strict=True):
            value = p.metrics[y] if y in p.metrics else r.get(y)
            if value is not None:
                by_line.setdefault(coord(p, plot.lines), []).append((coord(p, plot.x), value))
        out[y] = {k: sorted(v) for k, v in by_line.items()}
    return out


def draw_axis(path: Path, study: Study, lines: Lines, plot: Plot) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"periodic": "tab:red", "delta": "tab:blue"}
    fig, axes = plt.subplots(1, len(plot.y), figsize=(1 + 5 * len(plot.y), 4),
                             sharey=True, squeeze=False)
    for ax, y in zip(axes[0], plot.y, strict=True):
        for line, pts in lines[y].items():
            ax.plot(*zip(*pts, strict=True), marker="o", color=colors.get(str(line)), label=str(line))
        if study.limits is not None and y in ("h1", "h2"):
            ax.axhline(study.limits.threshold, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel(plot.x)
        ax.set_title(str(BY_NAME[y].label) if y in BY_NAME else y)
        ax.grid(alpha=0.3)
        ax.legend()
    if len(plot.y) == 1:
        axes[0][0].set_ylabel(plot.y[0])
    fig.suptitle(plot.title or plot.name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_axis_csv(path: Path, lines: Lines, plot: Plot) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([plot.lines, plot.x, *plot.y])
        keys = sorted({(line, x) for y in plot.y for line, pts in lines[y].items() for x, _ in pts},
                      key=lambda k: (str(k[0]), k[1]))
        for line, x in keys:
            w.writerow([line, x, *(dict(lines[y].get(line, [])).get(x, "") for y in plot.y)])


def write_plots(output: StudyOutput, out_dir: Path) -> list[Path]:
    """Every plot of the study into ``out_dir`` (NAME.png, NAME.csv); the files written."""
    study, _ = tables_of(output)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for plot in study.plots:
        if plot.x:
            chosen = _chosen(output.points, plot)
            if chosen:
                lines = axis_lines(study, chosen, plot)
                write_axis_csv(out_dir / f"{plot.name}.csv", lines, plot)
                draw_axis(out_dir / f"{plot.name}.png", study, lines, plot)
                written += [out_dir / f"{plot.name}.csv", out_dir / f"{plot.name}.png"]
            continue
        points = [p for p in _chosen(output.points, plot) if plot.series in p.collected]
        if not points:
            continue
        several = len({p.variant for p in points}) < len(points)
        labels = [_label(p, several) for p in points]
        write_csv(out_dir / f"{plot.name}.csv", points, plot, labels)
        draw(out_dir / f"{plot.name}.png", points, plot, labels)
        written += [out_dir / f"{plot.name}.csv", out_dir / f"{plot.name}.png"]
    return written
