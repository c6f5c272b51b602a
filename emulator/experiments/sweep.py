"""`emulator sweep FILE`: one scenario over a list of node counts and heartbeat modes (E2).

The file is an ordinary scenario plus a ``[sweep]`` table. Its cluster and workload describe the
base node count; each sweep point scales the node groups and (``scale_workload``) every
operation's task count by n / base, as E2 does (t = n·c·l / a tasks per job). Prints a table,
writes sweep.csv / sweep.json, a Fig. 5-style plot (h1, h2 vs nodes) and a Fig. 8-style plot
(RM CPU vs nodes), and reports per mode the largest n with h1 and h2 >= threshold and the
delta/periodic ratio. Real-time sweeps also print the fitted service-time model, ready to paste
into the virtual-time variant.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import statistics
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from rich.console import Console
from rich.table import Table

from emulator.experiments.sweeptables import largest_ok, markdown_table, saturates_first
from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import run_blocking
from emulator.results.summary import write_results
from emulator.scenario.loader import ScenarioError, scenario_from_dict
from emulator.scenario.schema import SweepConfig
from emulator.study.points import scale_cluster

if TYPE_CHECKING:
    from emulator.harness.dask_hosts import ClusterOptions


def load_sweep(path: Path) -> tuple[dict[str, Any], SweepConfig]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"{path}: not valid TOML: {err}") from None
    cfg = scenario_from_dict(data, str(path)).sweep
    if cfg is None:
        raise ScenarioError(f"{path}: at `sweep`: a sweep file needs a [sweep] table (nodes = [...])")
    del data["sweep"]
    return data, cfg


def point(base: dict[str, Any], cfg: SweepConfig, nodes: int, mode: str, source: str) -> Any:
    """The base scenario scaled to ``nodes`` nodes in heartbeat ``mode``."""
    data = copy.deepcopy(base)
    try:
        scale_cluster(data, nodes, cfg.scale_workload)  # as a study's `nodes` axis does
    except ScenarioError as err:
        raise ScenarioError(f"{source}: {err}") from None
    data.setdefault("heartbeat", {})["mode"] = mode
    data["name"] = f"{data.get('name', 'sweep')}-{mode}-{nodes}"
    return scenario_from_dict(data, source)


def measure(outcome: RunOutcome) -> dict[str, Any]:
    sc = outcome.scenario
    h1, h2 = outcome.h1, outcome.h2
    rm = outcome.rm
    costs = outcome.costs
    row: dict[str, Any] = {
        "mode": sc.heartbeat.mode,
        "nodes": sc.node_count,
        "h1": h1,
        "h2": h2,
        "heartbeats_sent": outcome.nodes.heartbeats_sent,
        "heartbeats_skipped": outcome.nodes.heartbeats_skipped,
        "update_events": rm.counters.update_events,
        "allocations": rm.counters.allocations,
        "nodes_lost": rm.counters.nodes_lost,
        "rm_queue_depth_max": rm.inbound.depth_max,
        "rm_wait_p99_s": rm.inbound.wait_p99_s,
        "wall_s": round(outcome.wall_s, 2),
    }
    if costs is not None:  # real time: measured
        row["rm_cpu_percent"] = costs["rm_cpu_percent"]
        row["rm_busy_fraction"] = costs["rm_busy_fraction"]
        row["rm_cost_us_per_heartbeat"] = costs["rm_cost_us_per_heartbeat"]
        row["messages_to_rm_per_node_minute"] = costs.get("messages_to_rm_per_node_minute")
        row["bytes_to_rm_per_node_minute"] = costs.get("bytes_to_rm_per_node_minute")
        row["service_time_us"] = costs["service_time_us"]
        # The longest the RM's loop was held by one item of each kind (wall µs): the worst p99
        # over message and event types (frame decoding aside), and the continuous-scheduling pass.
        held = {k: v for k, v in costs.get("busy_us_by_type", {}).items() if k != "decode"}
        if held:
            kind = max(held, key=lambda k: held[k]["p99"])
            row["worst_handler"] = kind
            row["worst_handler_p99_us"] = held[kind]["p99"]
            row["worst_handler_max_us"] = max(v["max"] for v in held.values())
        if "SchedulePass" in held:
            row["schedule_pass_p99_us"] = held["SchedulePass"]["p99"]
            row["schedule_pass_max_us"] = held["SchedulePass"]["max"]
    if costs is not None and outcome.nodes.heartbeats_sent:
        # The RM process's CPU (everything: reads, decoding, handlers, writes, the loop) per
        # heartbeat the nodes sent.
        rm_cpu_s = costs["rm_cpu_percent"] / 100 * costs["wall_s"]
        row["rm_process_us_per_heartbeat"] = round(1e6 * rm_cpu_s / outcome.nodes.heartbeats_sent, 1)
    if outcome.workers:  # TCP: the busiest node-hosting process, to set beside the RM
        busiest = max(outcome.workers, key=lambda w: w.cpu_s / w.wall_s if w.wall_s else 0.0)
        row["worker_cpu_percent"] = round(100 * busiest.cpu_s / busiest.wall_s, 1) if busiest.wall_s else None
        row["workers"] = len(outcome.workers)
        hb = outcome.nodes.heartbeats_sent
        cpu = sum(w.cpu_s for w in outcome.workers)
        row["worker_cpu_us_per_heartbeat"] = round(1e6 * cpu / hb, 1) if hb else None
        # What hosting one node for one heartbeat interval costs, whatever it sent (a delta
        # node sends rarely, but ticks its ring every interval); the whole process, start-up too.
        intervals = sc.node_count * sc.run.duration_s / sc.heartbeat.interval_s
        row["worker_cpu_us_per_node_interval"] = round(1e6 * cpu / intervals, 1)
    else:  # virtual time: the service-time model's busy time is the RM's CPU
        busy = (rm.inbound.busy_s + rm.scheduler.busy_s) / sc.run.duration_s
        row["rm_cpu_percent"] = round(100 * busy, 2)
        row["rm_busy_fraction"] = round(busy, 4)
        sent = outcome.nodes.heartbeats_sent + outcome.nodes.registrations
        row["messages_to_rm_per_node_minute"] = round(sent / sc.node_count / (sc.run.duration_s / 60), 3)
    row["lateness_p99_s"] = outcome.lateness.p99 if outcome.lateness.count else None
    # A real-time point whose emulator fell behind real time is no finding, whatever its h1/h2.
    row["overloaded"] = outcome.lag is not None and outcome.lag.overloaded
    if outcome.lag is not None and outcome.lag.reasons:  # which process fell behind, and how far
        row["overload_reasons"] = list(outcome.lag.reasons)
    return row


def calibration(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """Median of the per-run fitted service-time models (wall µs)."""
    fits = [r["service_time_us"] for r in rows if r.get("service_time_us")]
    if not fits:
        return None
    return {k: round(statistics.median(f[k] for f in fits), 3) for k in fits[0]}


def plot(
    rows: list[dict[str, Any]], modes: list[str], threshold: float, title: str, out_dir: Path
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"periodic": "tab:red", "delta": "tab:blue"}
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, key in zip(axes, ("h1", "h2"), strict=True):
        for mode in modes:
            pts = sorted((r["nodes"], r[key]) for r in rows if r["mode"] == mode and r[key] is not None)
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", color=colors.get(mode), label=mode)
        ax.axhline(threshold, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("nodes")
        ax.set_title(f"{key} = min_i({'m_i / n_i' if key == 'h1' else 's_i / a_i'})")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("efficiency")
    fig.suptitle(f"{title}: heartbeat processing (h1) and scheduler update (h2) efficiency")
    fig.tight_layout()
    paths.append(out_dir / f"{title}-h1-h2.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for mode in modes:
        pts = sorted((r["nodes"], r["rm_cpu_percent"]) for r in rows if r["mode"] == mode)
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", color=colors.get(mode), label=mode)
    ax.set_xlabel("nodes")
    ax.set_ylabel("RM CPU %")
    ax.set_title(f"{title}: RM CPU vs cluster size")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    paths.append(out_dir / f"{title}-rm-cpu.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def _fmt(v: Any, spec: str = ".4f") -> str:
    if v is None:
        return "n/a"
    return format(v, spec) if isinstance(v, float) else f"{v:,}"


@contextlib.contextmanager
def dask_hosts(spec: str | None, slices: int) -> Iterator[ClusterOptions | None]:
    """``--cluster``: None (worker processes, as ``emulator run``), a Dask scheduler's address, or
    ``local`` / ``local:N``: a Dask LocalCluster of N worker processes (default: one per slice of
    nodes) on loopback, for the whole sweep."""
    if spec is None:
        yield None
        return
    from emulator.harness.dask_hosts import ClusterError, ClusterOptions

    if spec != "local" and not spec.startswith("local:"):
        yield ClusterOptions(spec)
        return
    count = spec.partition(":")[2]
    if count and not (count.isdigit() and int(count) >= 1):
        raise ScenarioError(f"--cluster {spec}: expected local or local:N with N >= 1")
    try:
        import distributed
    except ImportError as err:
        raise ClusterError(f"--cluster {spec}: needs Dask (pip install 'hbemu[cluster]')") from err
    with distributed.LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=int(count) if count else slices, threads_per_worker=1, processes=True,
        dashboard_address=None, host="127.0.0.1",
    ) as local:
        yield ClusterOptions(local.scheduler_address, ("127.0.0.1", 0))


def run_sweep(path: Path, out: Path, plots_dir: Path | None, nodes: list[int] | None,
              modes: list[str] | None, duration: float | None, console: Console,
              workers: int | str | None = None, speed: float | None = None,
              cluster: str | None = None, warmup: float | None = None) -> dict[str, Any]:
    """``workers``, ``speed``, ``warmup``: override ``transport.workers`` (a count or "auto"),
    ``run.speed`` and ``run.warmup_s``; ``cluster``: host the nodes on a Dask cluster (see
    ``dask_hosts``)."""
    base, cfg = load_sweep(path)
    if warmup is not None:
        base.setdefault("run", {})["warmup_s"] = warmup
    if duration is not None:
        base.setdefault("run", {})["duration_s"] = duration
    if workers is not None:
        base.setdefault("transport", {})["workers"] = workers
    if speed is not None:
        base.setdefault("run", {})["speed"] = speed
    counts = nodes or cfg.nodes
    use_modes = modes or list(cfg.modes)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    first = point(base, cfg, counts[0], use_modes[0], str(path))
    if cluster is not None and first.transport.kind != "tcp":
        raise ScenarioError(f'--cluster: needs transport.kind = "tcp", got "{first.transport.kind}"')
    slices = first.transport.worker_processes() if first.transport.kind == "tcp" else 0
    with dask_hosts(cluster, slices) as hosts:
        for n in counts:
            for mode in use_modes:
                sc = point(base, cfg, n, mode, str(path))
                console.print(f"[bold]{mode}[/] {n:,} nodes ({sc.run.clock}, {sc.transport.kind}) ...",
                              end=" ")
                outcome = run_blocking(sc, cluster=hosts)
                write_results(outcome, out / f"{mode}-{n}")  # summary.json + timeseries.csv per point
                row = measure(outcome)
                for key in ("heartbeats_sent", "heartbeats_skipped"):
                    row[key] = int(row[key])
                rows.append(row)
                console.print(f"h1={_fmt(row['h1'])} h2={_fmt(row['h2'])} "
                              f"RM CPU {row['rm_cpu_percent']:.1f}% ({row['wall_s']:.0f}s wall)")
                # Kept after every point: a sweep cut short (a time limit, Ctrl-C) keeps what it measured.
                _write_json(out, _result(path, cfg, first, slices, cluster, rows, use_modes, None,
                                         planned=len(counts) * len(use_modes)))
    t = Table(title=f"sweep {path.name}")
    cols = ("mode", "nodes", "h1", "h2", "RM CPU %", "busy", "µs/hb", "msgs/node/min", "skipped",
            "lateness p99 s", "wall s")
    for c in cols:
        t.add_column(c, justify="left" if c == "mode" else "right")
    for r in rows:
        t.add_row(r["mode"], f"{r['nodes']:,}", _fmt(r["h1"]), _fmt(r["h2"]),
                  _fmt(r["rm_cpu_percent"], ".1f"),
                  _fmt(r["rm_busy_fraction"], ".3f"), _fmt(r.get("rm_cost_us_per_heartbeat"), ".1f"),
                  _fmt(r.get("messages_to_rm_per_node_minute"), ".2f"), _fmt(r["heartbeats_skipped"]),
                  _fmt(r["lateness_p99_s"], ".4f"), _fmt(r["wall_s"], ".0f"))
    console.print(t)
    limits = {m: largest_ok(rows, m, cfg.threshold) for m in use_modes}
    for m, (n_ok, bounded) in limits.items():
        text = "none" if n_ok is None else f"{'' if bounded else '>= '}{n_ok:,}"
        console.print(f"largest n with h1, h2 >= {cfg.threshold}: {m}: {text}")
    ratio = _ratio_of(limits)
    if ratio is not None:
        lower = "" if limits["delta"][1] else ">= "
        console.print(f"delta / periodic: {lower}{ratio:.2f}x (paper 004: 1.88x)")
    fit = calibration(rows)
    speed = base.get("run", {}).get("speed", 1.0)
    if fit is not None:
        lines = ["[rm.service_time]  # fitted wall µs x speed " + f"{speed:g}"]
        lines += [f"{k} = {v * speed:.3f}" for k, v in fit.items()]
        (out / "calibration.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        console.print("service-time model (wall µs): " + ", ".join(f"{k}={v}" for k, v in fit.items()))
        console.print(f"for the virtual-time variant at speed {speed:g}: {out / 'calibration.toml'}")
    with (out / "sweep.csv").open("w", newline="", encoding="utf-8") as f:
        keys = [k for k in rows[0] if k != "service_time_us"]
        w = csv.DictWriter(f, keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    result = _result(path, cfg, first, slices, cluster, rows, use_modes, fit)
    _write_json(out, result)
    if slices:
        console.print(f"which process saturated first: {saturates_first(result)}")
    pdir = plots_dir or out
    pdir.mkdir(parents=True, exist_ok=True)
    title = base.get("name", path.stem)
    for p in plot(rows, use_modes, cfg.threshold, title, pdir):
        console.print(f"wrote {p}")
    return result


def _ratio_of(limits: dict[str, tuple[int | None, bool]]) -> float | None:
    p, d = limits.get("periodic", (None, False))[0], limits.get("delta", (None, False))[0]
    return d / p if p and d else None


def _result(path: Path, cfg: SweepConfig, first: Any, slices: int, cluster: str | None,
            rows: list[dict[str, Any]], modes: list[str], fit: dict[str, float] | None,
            planned: int | None = None) -> dict[str, Any]:
    """sweep.json's content; ``planned``: the points a sweep still running will have (absent once
    it is done)."""
    limits = {m: largest_ok(rows, m, cfg.threshold) for m in modes}
    result: dict[str, Any] = {
        "file": str(path), "threshold": cfg.threshold, "rows": rows, "calibration_us": fit,
        "speed": first.run.speed, "clock": first.run.clock, "transport": first.transport.kind,
        "workers": slices or None,
        "hosting": None if slices == 0 else "processes" if cluster is None else f"dask {cluster}",
        "largest_ok": {m: {"nodes": v[0], "limited_by_sweep": not v[1]} for m, v in limits.items()},
        "delta_over_periodic": _ratio_of(limits),
    }
    if planned is not None:
        result["points_planned"] = planned
    return result


def _write_json(out: Path, result: dict[str, Any]) -> None:
    (out / "sweep.json").write_bytes(msgspec.json.format(msgspec.json.encode(result)) + b"\n")


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.table:
        print(markdown_table(msgspec.json.decode(Path(args.table).read_bytes())))
        return 0
    if not args.file:
        raise ScenarioError("sweep: give a scenario file with a [sweep] table (or --table JSON)")
    path = Path(args.file)
    out = Path(args.out) if args.out else Path("runs") / f"sweep-{path.stem}"
    nodes = [int(x) for x in args.nodes.split(",")] if args.nodes else None
    modes = args.modes.split(",") if args.modes else None
    if modes and any(m not in ("periodic", "delta") for m in modes):
        raise ScenarioError(f"--modes: expected periodic and/or delta, got {args.modes!r}")
    workers: int | str | None = None
    if args.workers is not None:
        if args.workers != "auto" and not (args.workers.isdigit() and int(args.workers) >= 1):
            raise ScenarioError(f"--workers: expected a count >= 1 or auto, got {args.workers!r}")
        workers = args.workers if args.workers == "auto" else int(args.workers)
    run_sweep(path, out, Path(args.plots_dir) if args.plots_dir else None, nodes, modes, args.duration,
              Console(width=150), workers, args.speed, args.cluster, args.warmup)
    return 0


def add_command(sub: Any) -> None:
    s = sub.add_parser("sweep", help="run a scenario over node counts and heartbeat modes (E2)")
    s.add_argument("file", nargs="?", help="scenario file with a [sweep] table")
    s.add_argument("--out", help="results directory (default runs/sweep-<file>)")
    s.add_argument("--table", metavar="JSON", help="only print the docs' table of a sweep.json")
    s.add_argument("--plots-dir", help="where to write the PNGs (default: --out)")
    s.add_argument("--nodes", help="override sweep.nodes, e.g. 1000,2000")
    s.add_argument("--modes", help="override sweep.modes, e.g. periodic,delta")
    s.add_argument("--duration", type=float, help="override run.duration_s")
    s.add_argument("--workers", help="override transport.workers: node-host processes (a count, or auto)")
    s.add_argument("--speed", type=float, help="override run.speed (real time)")
    s.add_argument("--warmup", type=float, metavar="S",
                   help="override run.warmup_s: emulated seconds not measured (registration, ring joins)")
    s.add_argument("--cluster", metavar="ADDRESS|local[:N]",
                   help="host the nodes on a Dask cluster: a scheduler's address, or local[:N] for a "
                        "LocalCluster of N worker processes started for the sweep (docs/cluster.md)")
    s.set_defaults(func=cmd_sweep)
