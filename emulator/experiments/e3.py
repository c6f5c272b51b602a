"""`emulator e3`: the crash experiment (paper 004 §3.4, Fig. 9) in every failure-detection mode,
one removals-over-time CSV and plot, and the figures of docs/ring.md.

Modes (the scenario files hold everything; a mode only overrides a few fields):
- ``ring``: delta heartbeats + the improved ``kring`` detector (scenarios/e3-crash.toml);
- ``paper-ring``: the same with the paper's single-successor ``ring`` detector;
- ``periodic``: periodic heartbeats + the RM liveliness monitor, RM overloaded through its
  service-time model (scenarios/e3-crash-periodic.toml);
- ``periodic-no-overload``: the same with a zero-cost RM.
"""

from __future__ import annotations

import csv
import tomllib
from pathlib import Path
from typing import Any

from rich.console import Console

from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import invariants_wanted
from emulator.results.console import run_with_progress
from emulator.results.recording import recorded
from emulator.results.summary import write_results
from emulator.scenario.loader import ScenarioError, scenario_from_dict
from emulator.scenario.schema import Scenario, scale_tasks

MODES: dict[str, tuple[str, dict[str, Any]]] = {
    "ring": ("e3-crash.toml", {}),
    "paper-ring": ("e3-crash.toml", {"ring.detector": "ring"}),
    "periodic": ("e3-crash-periodic.toml", {}),
    "periodic-no-overload": ("e3-crash-periodic.toml", {"rm.service_time": {}, "faults": "crash-only"}),
}
# Companion experiments of issue 4, each for both ring detectors.
EXPERIMENTS: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {
    "crash": MODES,
    "rack": {
        "ring": ("e3-rack.toml", {}),
        "paper-ring": ("e3-rack.toml", {"ring.detector": "ring"}),
    },
    "stalls": {
        "ring": ("e3-stalls.toml", {}),
        "paper-ring": ("e3-stalls.toml", {"ring.detector": "ring"}),
    },
}
# Messages to the RM "while nothing fails" are measured over this window (before the crash).
QUIET_WINDOW_S = (100.0, 400.0)


def e3_scenario(
    mode: str, scenarios_dir: Path, nodes: int | None = None, experiment: str = "crash"
) -> Scenario:
    """The scenario of ``mode``; ``nodes`` scales the cluster, the jobs (t = n·c·l/a) and the RM's
    per-message costs."""
    modes = EXPERIMENTS[experiment]
    if mode not in modes:
        raise ScenarioError(f"unknown mode {mode!r} for {experiment}; choose from {', '.join(modes)}")
    name, overrides = modes[mode]
    path = scenarios_dir / name
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ScenarioError(f"{path}: {err}") from None
    for dotted, value in overrides.items():
        if dotted == "faults":  # keep only the crash
            data["faults"] = [f for f in data.get("faults", []) if f.get("kind") == "crash"]
            continue
        target = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value
    data["name"] = f"e3-{experiment}-{mode}"
    if nodes is not None:
        group = data["cluster"]["nodes"][0]
        scale = nodes / group["count"]
        group["count"] = nodes
        for op in data["workload"]["operations"]:
            scale_tasks(op, scale)
        # Per-message RM costs grow as the cluster shrinks, so the RM's time to go round all
        # nodes (what decides whether heartbeats queue past the expiry) stays the same.
        costs = data.get("rm", {}).get("service_time", {})
        for key in costs:
            costs[key] = costs[key] / scale
    return scenario_from_dict(data, str(path))


def figures(outcome: RunOutcome, summary: dict[str, Any]) -> dict[str, Any]:
    sc = outcome.scenario
    lo, hi = QUIET_WINDOW_S
    rows = [r for r in outcome.rows if lo < r.t_s <= hi]
    minutes = (hi - lo) / 60
    n = sc.node_count
    quiet_msgs = sum(r.to_rm_messages for r in rows) / n / minutes
    quiet_bytes = sum(r.to_rm_bytes for r in rows) / n / minutes
    quiet_ring = sum(r.ring_messages for r in rows) / n / minutes
    return {
        "nodes": n,
        "detector": summary["failure_detector"],
        "removals": summary["nodes_lost"],
        "crashed": summary["crashed_nodes"],
        "crashed_removed": summary["crashed_removed"],
        "false_removals": summary["false_removals"],
        "false_removed_nodes": summary["false_removed_nodes"],
        "detection_latency_s": summary["detection_latency_s"],
        "membership_bytes_removal": summary.get("membership_bytes_removal"),
        "membership_bytes_join": summary.get("membership_bytes_join"),
        "quiet_rm_messages_per_node_minute": round(quiet_msgs, 3),
        "quiet_rm_bytes_per_node_minute": round(quiet_bytes, 1),
        "quiet_ring_messages_per_node_minute": round(quiet_ring, 3),
        "rm_wait_max_s": summary["rm_wait_max_s"],
        "wall_s": round(outcome.wall_s, 1),
    }


def removal_bins(outcome: RunOutcome, bin_s: float) -> tuple[list[int], list[int]]:
    """Removals and false removals per ``bin_s`` of emulated time."""
    nbins = int(outcome.scenario.run.duration_s // bin_s) + 1
    total, false = [0] * nbins, [0] * nbins
    for r in outcome.removal_log:
        k = min(int(r.t_s // bin_s), nbins - 1)
        total[k] += 1
        false[k] += r.false
    return total, false


def write_removals_csv(path: Path, bins: dict[str, tuple[list[int], list[int]]], bin_s: float) -> None:
    modes = list(bins)
    nbins = max(len(b[0]) for b in bins.values())
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["t_s", *(f"{m}_{kind}" for m in modes for kind in ("removals", "false_removals"))])
        for k in range(nbins):
            row: list[Any] = [round(k * bin_s, 3)]
            for m in modes:
                total, false = bins[m]
                row += [total[k] if k < len(total) else 0, false[k] if k < len(false) else 0]
            w.writerow(row)


def plot_removals(
    csv_path: Path, png_path: Path, crash_at_s: float | None = None, title: str = "E3"
) -> None:
    """Removals per bin and cumulative removals over time, one line per mode (cf. Fig. 9)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with csv_path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    t = [float(r["t_s"]) for r in rows]
    modes = [c.removesuffix("_removals") for c in rows[0] if c.endswith("_removals") and "false" not in c]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    styles = ["-", "--", "-.", ":"]
    for k, m in enumerate(modes):
        per_bin = [int(r[f"{m}_removals"]) for r in rows]
        cum = [sum(per_bin[: j + 1]) for j in range(len(per_bin))]
        style = {"where": "post", "label": m, "linestyle": styles[k % len(styles)], "linewidth": 1.6}
        ax1.step(t, per_bin, **style)
        ax2.step(t, cum, **style)
    for ax in (ax1, ax2):
        if crash_at_s is not None:
            ax.axvline(crash_at_s, color="grey", linestyle=":", linewidth=1)
        # Log-like scale: tens of thousands of false removals and a few hundred real ones.
        ax.set_yscale("symlog", linthresh=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    ax1.set_ylabel(f"nodes removed per {t[1] - t[0]:g} s" if len(t) > 1 else "nodes removed")
    ax2.set_ylabel("nodes removed (cumulative)")
    ax2.set_xlabel("emulated time (s)")
    ax1.set_title(f"{title}: node removals over time (faults start at the dotted line)")
    ax1.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)


def run_e3(
    out: Path,
    modes: list[str],
    scenarios_dir: Path = Path("scenarios"),
    nodes: int | None = None,
    bin_s: float = 10.0,
    progress: Any = None,
    experiment: str = "crash",
    console: Console | None = None,
) -> dict[str, dict[str, Any]]:
    """``console``: where each mode's progress bar goes (none without it)."""
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    bins: dict[str, tuple[list[int], list[int]]] = {}
    crash_at: float | None = None
    for mode in modes:
        scenario = e3_scenario(mode, scenarios_dir, nodes, experiment)
        starts = [f.at_s for f in scenario.faults]
        if starts:
            crash_at = min(starts) if crash_at is None else min(crash_at, *starts)
        if progress is not None:
            progress(f"E3 {mode}: {scenario.node_count} nodes, {scenario.run.duration_s:g} s emulated ...")
        (out / mode).mkdir(exist_ok=True)
        source = str(scenarios_dir / EXPERIMENTS[experiment][mode][0])
        with recorded(out / mode, "experiment", source, scenario, {}, [],
                      check_invariants=invariants_wanted(None)) as rec:
            outcome = run_with_progress(scenario, console or Console(quiet=True), out / mode / "events.jsonl")
            summary = write_results(outcome, out / mode)
            rec.finish(0)
        results[mode] = figures(outcome, summary)
        bins[mode] = removal_bins(outcome, bin_s)
        if progress is not None:
            r = results[mode]
            progress(
                f"  {mode}: removed {r['removals']}, false {r['false_removals']}, "
                f"latency {r['detection_latency_s']}, wall {r['wall_s']} s"
            )
    write_removals_csv(out / "removals.csv", bins, bin_s)
    plot_removals(out / "removals.csv", out / "removals.png", crash_at, f"E3 {experiment}")
    return results


MODE_LABELS = {
    "ring": "delta + `kring` (ours)",
    "paper-ring": "delta + paper `ring`",
    "periodic": "periodic + liveliness monitor, RM overloaded",
    "periodic-no-overload": "periodic, no overload",
}


def markdown_table(results: dict[str, dict[str, Any]]) -> str:
    """The README's table, from an ``e3.json`` (docs/ring-e3.json)."""
    lines = [
        "| mode | nodes removed | false removals (nodes) | detection p50 / p99 / max | "
        "msgs to RM per node-min (no failures) | wall |",
        "|---|---|---|---|---|---|",
    ]
    for mode, r in results.items():
        lat = r["detection_latency_s"]
        lines.append(
            f"| {MODE_LABELS.get(mode, mode)} | {r['removals']:,} | {r['false_removals']:,} "
            f"({r['false_removed_nodes']:,}) | {lat['p50']:g} / {lat['p99']:g} / {lat['max']:g} s | "
            f"{r['quiet_rm_messages_per_node_minute']:g} | {r['wall_s']:g} s |"
        )
    return "\n".join(lines)
