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
    return row


def largest_ok(rows: list[dict[str, Any]], mode: str, threshold: float) -> tuple[int | None, bool]:
    """Largest n of ``mode`` such that it and every smaller n keep h1, h2 >= threshold; and whether
    a larger n failed (False: the true limit may be higher than the sweep went)."""
    best = None
    for r in sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["nodes"]):
        if (r["h1"] is None or r["h2"] is None or r["h1"] < threshold or r["h2"] < threshold
                or r.get("overloaded")):
            return best, True
        best = r["nodes"]
    return best, False


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
    ratio = None
    if "periodic" in limits and "delta" in limits and limits["periodic"][0] and limits["delta"][0]:
        ratio = limits["delta"][0] / limits["periodic"][0]
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
    result = {
        "file": str(path), "threshold": cfg.threshold, "rows": rows, "calibration_us": fit,
        "speed": first.run.speed, "clock": first.run.clock, "transport": first.transport.kind,
        "workers": slices or None,
        "hosting": None if slices == 0 else "processes" if cluster is None else f"dask {cluster}",
        "largest_ok": {m: {"nodes": v[0], "limited_by_sweep": not v[1]} for m, v in limits.items()},
        "delta_over_periodic": ratio,
    }
    (out / "sweep.json").write_bytes(msgspec.json.format(msgspec.json.encode(result)) + b"\n")
    pdir = plots_dir or out
    pdir.mkdir(parents=True, exist_ok=True)
    title = base.get("name", path.stem)
    for p in plot(rows, use_modes, cfg.threshold, title, pdir):
        console.print(f"wrote {p}")
    return result


def markdown_table(result: dict[str, Any]) -> str:
    """The docs' table, from a ``sweep.json``."""
    lines = [
        "| mode | nodes | h1 | h2 | RM CPU % | RM busy | µs / hb | RM process µs / hb | node host CPU % "
        "| node host µs / node-interval | msgs / node / min | bytes / node / min | skipped "
        "| lateness p99 (s) | RM wait p99 (s) | overloaded |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ok = result["threshold"]

    def h(v: float | None) -> str:
        return "n/a" if v is None else f"**{v:.3f}**" if v >= ok else f"{v:.3f}"

    def f(r: dict[str, Any], key: str, spec: str) -> str:
        v = r.get(key)  # a virtual-time sweep measures no wall costs and no bytes
        return "–" if v is None else format(v, spec)

    for r in result["rows"]:
        lines.append(
            f"| {r['mode']} | {r['nodes']:,} | {h(r['h1'])} | {h(r['h2'])} | "
            f"{f(r, 'rm_cpu_percent', '.1f')} | {f(r, 'rm_busy_fraction', '.3f')} | "
            f"{f(r, 'rm_cost_us_per_heartbeat', '.1f')} | {f(r, 'rm_process_us_per_heartbeat', '.1f')} | "
            f"{f(r, 'worker_cpu_percent', '.1f')} | {f(r, 'worker_cpu_us_per_node_interval', '.1f')} | "
            f"{f(r, 'messages_to_rm_per_node_minute', '.2f')} | "
            f"{f(r, 'bytes_to_rm_per_node_minute', ',.0f')} | "
            f"{f(r, 'heartbeats_skipped', ',')} | {f(r, 'lateness_p99_s', '.2f')} | "
            f"{f(r, 'rm_wait_p99_s', '.2f')} | {'**yes**' if r.get('overloaded') else 'no'} |"
        )
    best = result["largest_ok"]
    # "≥": no point of the mode failed, so its limit may lie beyond the sweep's largest n.
    at_least = {m: "≥ " if v.get("limited_by_sweep") else "" for m, v in best.items()}
    parts = [f"{m} {at_least[m]}{v['nodes']:,}" if v["nodes"] else f"{m} none" for m, v in best.items()]
    ratio = result.get("delta_over_periodic")
    lines.append("")
    lines.append(f"Largest n with h1, h2 ≥ {ok:g}: **{', '.join(parts)}"
                 + (f", ratio {at_least.get('delta', '')}{ratio:.2f}×**" if ratio is not None else "**"))
    return "\n".join(lines)


def costs_table(result: dict[str, Any]) -> str:
    """Per real-time point: how long one item held the RM's loop, and what each process spent."""
    lines = [
        "| mode | nodes | speed | overloaded | worst handler p99 (µs) | any handler max (µs) "
        "| scheduling pass p99 / max (µs) | RM process µs / hb | node host µs / node-interval |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def f(r: dict[str, Any], key: str, spec: str = ",.0f") -> str:
        v = r.get(key)
        return "–" if v is None else format(v, spec)

    for r in result["rows"]:
        worst = f"{f(r, 'worst_handler_p99_us')} ({r['worst_handler']})" if r.get("worst_handler") else "–"
        lines.append(
            f"| {r['mode']} | {r['nodes']:,} | {result.get('speed', '–')} | "
            f"{'**yes**' if r.get('overloaded') else 'no'} | {worst} | {f(r, 'worst_handler_max_us')} | "
            f"{f(r, 'schedule_pass_p99_us')} / {f(r, 'schedule_pass_max_us')} | "
            f"{f(r, 'rm_process_us_per_heartbeat', '.1f')} | "
            f"{f(r, 'worker_cpu_us_per_node_interval', '.1f')} |"
        )
    return "\n".join(lines) + "\n"


PAPER_RATIO = 1.88
PAPER_E2 = ("paper (YARN, Mao et al.)", "~4,000–4,500", "~7,500–8,000", f"{PAPER_RATIO}×")


def _largest(sweeps: list[dict[str, Any]], mode: str) -> int | None:
    """The largest node count at which ``mode`` kept h1 and h2 at the threshold and was not
    overloaded, over several sweeps of one setup (a grid and its extra points)."""
    ok = [r["nodes"] for sw in sweeps for r in sw["rows"]
          if r["mode"] == mode and not r.get("overloaded") and r["h1"] is not None and r["h2"] is not None
          and min(r["h1"], r["h2"]) >= sw["threshold"]]
    return max(ok) if ok else None


def _busier(r: dict[str, Any]) -> str:
    who = "node host" if r["worker_cpu_percent"] > r["rm_cpu_percent"] else "RM"
    return f"{who} (RM {r['rm_cpu_percent']:.0f}%, node host {r['worker_cpu_percent']:.0f}%)"


def _open_ended(sweeps: list[dict[str, Any]], mode: str) -> bool:
    """No point of ``mode`` failed in these sweeps: its limit may lie beyond their largest n."""
    return all(largest_ok(sw["rows"], mode, sw["threshold"])[1] is False for sw in sweeps)


def _ratio(p: int, d: int, bound: str) -> str:
    """delta/periodic with its bound, and where it stands against the paper's when that is known."""
    r = d / p
    if bound != "≤ " and r >= PAPER_RATIO:
        note = f" (at least the paper's {PAPER_RATIO}×)"
    elif bound != "≥ " and r < PAPER_RATIO:
        note = f" (below the paper's {PAPER_RATIO}×)"
    else:
        note = ""
    return f"{bound}{r:.2f}×{note}"


def saturates_first(sweep: dict[str, Any]) -> str:
    """Which process was busier at each mode's limit (its largest size that kept up) and at the
    first size past it (real-time TCP sweeps, CPU of each process over the same window)."""
    verdicts = []
    for mode in ("periodic", "delta"):
        best, failed = largest_ok(sweep["rows"], mode, sweep["threshold"])
        rows = [r for r in sweep["rows"] if r["mode"] == mode and r.get("worker_cpu_percent") is not None]
        at = [r for r in rows if r["nodes"] == best]
        past = [r for r in rows if best is None or r["nodes"] > best]
        if not failed or not past:
            continue
        parts = []
        if at:
            parts.append(f"at the limit {_busier(at[0])}")
        parts.append(f"past it {_busier(min(past, key=lambda r: r['nodes']))}")
        verdicts.append(f"{mode}: busier " + ", ".join(parts))
    return "; ".join(verdicts) if verdicts else "no limit reached"


def headline_table(real: dict[str, Any], virtual: dict[str, Any], *more: dict[str, Any]) -> str:
    """The README's E2 row set: the paper, the real-time TCP sweep (and each repeat of it among
    ``more``: a row of its own), the virtual-time sweep (with the virtual ``more``, e.g. delta at
    larger sizes)."""
    lines = ["| largest cluster with h1, h2 ≥ 0.99 | periodic | delta | delta / periodic |",
             "|---|---|---|---|", "| " + " | ".join(PAPER_E2) + " |"]
    speed, workers = real.get("speed", 20), real.get("workers") or 1
    setup = f"speed {speed:g}, {workers} node-host process{'es' if workers > 1 else ''}"
    reals = [real, *(m for m in more if m.get("clock") == "realtime")]
    rows: list[tuple[str, list[dict[str, Any]]]] = [
        (f"real time over TCP, {setup}{', run again' if i else ''} ({saturates_first(r)})", [r])
        for i, r in enumerate(reals)
    ]
    rows.append(("virtual time, RM service-time model fitted to a real-time run (docs/scalability.md §5.2)",
                 [virtual, *(m for m in more if m.get("clock") != "realtime")]))
    for label, sweeps in rows:
        p, d = _largest(sweeps, "periodic"), _largest(sweeps, "delta")
        p_more, d_more = _open_ended(sweeps, "periodic"), _open_ended(sweeps, "delta")
        bound = "–" if p_more and d_more else "≥ " if d_more else "≤ " if p_more else ""
        ratio = _ratio(p, d, bound) if p and d and bound != "–" else "–"
        p_txt = f"{'≥ ' if p_more else ''}{p:,}" if p else "none"
        d_txt = f"{'≥ ' if d_more else ''}{d:,}" if d else "none"
        lines.append(f"| {label} | {p_txt} | {d_txt} | {ratio} |")
    return "\n".join(lines) + "\n"


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
