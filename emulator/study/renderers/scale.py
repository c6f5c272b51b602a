"""A scale model on paper (docs/scale.md): from measured costs, what 100k and 1M nodes need.

Inputs, all committed result files:
- ``docs/bench.json`` (the bench, 1,000 nodes x 1 h, virtual time: scenarios/studies/bench.toml's
  output, read by ``bench_of``): CPU per
  node-interval of the whole emulation in one process, heartbeats and statuses per node-interval
  in each mode, memory per NodeManager;
- ``docs/e2-sweep.json`` (``make e2``, real time over TCP; a ``sweep.json`` or E2's study output):
  the RM's service times measured in wall time (a heartbeat a + b x statuses, a node update c,
  an allocation d), and the node host's CPU per node-interval at each mode's limit;
- ``docs/scale-*.json`` (the bench study with ``--set nodes=N --set hours=H``): larger runs that check the
  model's virtual-time prediction.

The model is linear: every cost is per node-interval (one node, one heartbeat interval), so CPU
and RM load grow with nodes x emulated time, and the RM, single-threaded, saturates when its
busy fraction reaches 1.
"""

from __future__ import annotations

from typing import Any

from emulator.study.renderers.bench import bench_of
from emulator.study.spec import StudyError
from emulator.study.sweep import sweep_of

INTERVAL_S = 3.0
MODES = ("periodic", "delta")
# The bench's workload (E2): 20 slots per node at 95% load, tasks of 300 s on average.
ALLOCATIONS_PER_NODE_S = 20 * 0.95 / 300
# A node host is planned at this share of one core (headroom for lateness).
HOST_CORE_SHARE = 0.7
SIZES = (100_000, 1_000_000)


def node_host_us(sweep: dict[str, Any], mode: str) -> float:
    """The node host's CPU per node-interval measured at ``mode``'s limit in a TCP sweep (its
    largest node count that kept up; the largest point if none did): hosting nodes in real time,
    which the whole in-process run minus the RM's share cannot give (two measurements on
    different paths, whose difference was once below zero)."""
    rows = [r for r in sweep.get("rows", ()) if r["mode"] == mode
            and r.get("worker_cpu_us_per_node_interval") is not None]
    if not rows:
        raise StudyError(f"{sweep.get('file', 'the E2 sweep')}: no {mode} point measured a node host "
                         "(the scale model needs E2 over TCP: docs/e2-sweep.json)")
    limit = (sweep.get("largest_ok", {}).get(mode) or {}).get("nodes")
    at = [r for r in rows if r["nodes"] == limit] or [max(rows, key=lambda r: r["nodes"])]
    return float(at[0]["worker_cpu_us_per_node_interval"])


def coefficients(bench: dict[str, Any], sweep: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per mode: µs of one process per node-interval (virtual), heartbeats and statuses per
    node-interval, the RM's µs per node-interval in real time, and the node host's, measured."""
    sweep = sweep_of(sweep)
    cal = sweep["calibration_us"]
    bench = bench_of(bench)
    out: dict[str, dict[str, float]] = {}
    for mode in MODES:
        r = bench[mode]
        node_intervals = r["nodes"] * r["emulated_s"] / INTERVAL_S
        hb = r["heartbeats"] / node_intervals
        statuses = r["statuses"] / node_intervals
        rm_us = (
            hb * (cal["heartbeat_us"] + cal["node_update_us"])
            + statuses * cal["heartbeat_per_status_us"]
            + ALLOCATIONS_PER_NODE_S * INTERVAL_S * cal["allocation_us"]
        )
        total_us = r["cpu_s"] / node_intervals * 1e6
        out[mode] = {
            "us_per_node_interval": total_us,
            "heartbeats_per_node_interval": hb,
            "statuses_per_node_interval": statuses,
            "rm_us_per_node_interval": rm_us,
            "node_us_per_node_interval": node_host_us(sweep, mode),
        }
    return out


def predict_cpu_s(coef: dict[str, float], nodes: int, emulated_s: float) -> float:
    return coef["us_per_node_interval"] * nodes * emulated_s / INTERVAL_S / 1e6


def markdown_table(bench: dict[str, Any], sweep: dict[str, Any], *runs: dict[str, Any]) -> str:
    bench, runs = bench_of(bench), tuple(map(bench_of, runs))
    coef = coefficients(bench, sweep)
    mem = bench["memory"]
    busy_b = next(v for k, v in mem.items() if k.startswith("bytes_per_node_with"))
    lines = [
        "| mode | one process, virtual: µs per node-interval | RM (real time): µs per node-interval "
        "| RM saturates at | node host (real time): µs per node-interval | 100k nodes: RM busy, node hosts | "
        "1M nodes: RM busy, node hosts |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in MODES:
        c = coef[mode]
        per_node_rm = c["rm_us_per_node_interval"] / INTERVAL_S / 1e6  # busy fraction per node
        saturation = 1.0 / per_node_rm
        cells = []
        for n in SIZES:
            hosts = n * c["node_us_per_node_interval"] / INTERVAL_S / 1e6 / HOST_CORE_SHARE
            cells.append(f"{n * per_node_rm:.0%}, {hosts:,.1f} cores")
        lines.append(
            f"| {mode} | {c['us_per_node_interval']:.1f} | {c['rm_us_per_node_interval']:.2f} | "
            f"{saturation:,.0f} nodes | {c['node_us_per_node_interval']:.1f} | {cells[0]} | {cells[1]} |"
        )
    lines += [
        "",
        "| check: run | mode | predicted CPU | measured CPU | measured / predicted | peak RSS |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        for mode in MODES:
            r = run[mode]
            pred = predict_cpu_s(coef[mode], r["nodes"], r["emulated_s"])
            lines.append(
                f"| {r['nodes']:,} nodes × {r['emulated_s'] / 60:g} emulated min | {mode} | {pred:,.0f} s | "
                f"{r['cpu_s']:,.0f} s | {r['cpu_s'] / pred:.2f} | {r.get('peak_rss_mb', 0):,} MB |"
            )
    lines += [
        "",
        f"Coefficients from `docs/bench.json` ({bench['periodic']['nodes']:,} nodes × "
        f"{bench['periodic']['emulated_s'] / 3600:g} h, virtual time) and the RM's service times in "
        "`docs/e2-sweep.json` (real time over TCP; the node host's cost at each mode's limit); "
        "memory per NodeManager "
        f"{mem['bytes_per_idle_node']:,} B idle, {busy_b:,} B with 20 containers. Node hosts are "
        f"counted at {HOST_CORE_SHARE:.0%} of a core each.",
    ]
    return "\n".join(lines)


def headline_table(bench: dict[str, Any], *runs: dict[str, Any]) -> str:
    """The README's lines: CPU time of each size in both modes, one process, virtual time."""
    bench, runs = bench_of(bench), tuple(map(bench_of, runs))
    lines = [
        "| one process, virtual time | periodic CPU | delta + ring CPU | peak RSS | the first design |",
        "|---|---|---|---|---|",
    ]
    for r in (bench, *runs):
        p, d = r["periodic"], r["delta"]
        base = r.get("baseline") or {}
        first = ""
        if base:
            bp, bd = base["periodic"]["cpu_s"], base["delta"]["cpu_s"]
            first = f"{bp:.0f} s / {bd:.0f} s ({bp / p['cpu_s']:.2f}× / {bd / d['cpu_s']:.2f}×)"
        span = p["emulated_s"] / 3600
        size = f"{span:g} h" if span >= 1 else f"{p['emulated_s'] / 60:g} min"
        lines.append(
            f"| {p['nodes']:,} nodes × {size} | {p['cpu_s']:,.0f} s | {d['cpu_s']:,.0f} s | "
            f"{d.get('peak_rss_mb', 0):,} MB | {first} |"
        )
    return "\n".join(lines)


def idle_host_table(*summaries: dict[str, Any]) -> str:
    """One worker process hosting idle delta nodes over TCP (scenarios/idle-host-50k.toml), one
    column per run's summary.json: keeping up, start-up and steady state apart."""

    def pair(lag: dict[str, Any], key: str) -> str:
        return f"{lag[key]['p99']:.3f} / {lag[key]['max']:.3f}"

    def column(summary: dict[str, Any]) -> list[str]:
        lag, worker = summary["lag"], summary["workers"][0]
        interval, window = summary["heartbeat_interval_s"], summary["warmup_s"]
        send = lag["heartbeat_send_s"]
        late = [k for k in lag["lagged_intervals"] if k * interval > window]
        return [
            f"{summary['registrations']:,} / {summary['nodes_lost']:,}",
            f"{worker['cpu_s']:.0f} / {worker['wall_s']:.0f}, {worker['max_rss_kib'] / 1024:.0f} MB",
            f"{pair(lag, 'heartbeat_send_s')} ({send['count']:,} samples; "
            f"{100 * send['p99'] / interval:.0f}% of the interval at p99)",
            pair(lag, "worker_loop_s"),
            pair(lag, "rm_loop_s"),
            f"{', '.join(str(k) for k in lag['lagged_intervals']) or 'none'} "
            f"(of {lag['measured_intervals']} measured)",
            ", ".join(map(str, late)) or "none",
            "yes: " + "; ".join(lag["reasons"]) if lag["overloaded"] else "no",
        ]

    labels = [
        "nodes registered / lost",
        "node host CPU s / wall s, peak RSS",
        "heartbeat send lateness p99 / max, emulated s (its samples: the nodes' registration ticks)",
        "node host loop lag p99 / max, s",
        "RM loop lag p99 / max, s",
        "heartbeat intervals that lagged",
        "lagged intervals after the warm-up",
        "marked overloaded",
    ]
    cols = [column(s) for s in summaries]
    first = summaries[0]
    joins = [f"joining over {s['join_over_s']:g} s" if s.get("join_over_s")
             else f"all joining in the first {s['heartbeat_interval_s']:g} s" for s in summaries]
    head = (f"| {first['scenario']}: {first['nodes']:,} idle {first['heartbeat_mode']} nodes, one worker | "
            + " | ".join(joins) + " |")
    lines = [head, "|---|" + "---|" * len(summaries)]
    lines += [f"| {label} | " + " | ".join(c[i] for c in cols) + " |" for i, label in enumerate(labels)]
    return "\n".join(lines) + "\n"
