"""`emulator bench`: the emulator's own speed (virtual time) and memory per NodeManager.

Both heartbeat modes run the same E2-style workload in one invocation, so their ratio is
measured under the same machine conditions.
"""

from __future__ import annotations

import gc
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from emulator.experiments.floor import floor_us_per_heartbeat
from emulator.harness.eventlog import make_logger
from emulator.harness.nodeproc import NodeProcess
from emulator.harness.runner import run_blocking
from emulator.scenario.loader import scenario_from_dict
from emulator.scenario.schema import Scenario
from emulator.time.clock import LoopClock, VirtualCore, run
from nodemanager.config import HeartbeatConfig
from nodemanager.stats import NodeCounters
from rm.protocol import ContainerLaunch, LaunchContainers, RegisterResponse, Resources

SLOTS_PER_NODE = 20  # E2: c = 20 containers per node
LOAD = 0.95
JOBS = 30


# The design measured, and the first design kept for comparison: asyncio's loop as the virtual
# clock and every ring liveness a message.
DESIGNS: dict[str, tuple[VirtualCore, str]] = {
    "des": ("des", "timestamps"),
    "asyncio": ("asyncio", "messages"),
}


def bench_scenario(nodes: int, hours: float, interval_s: float, mode: str,
                   ring_liveness: str = "timestamps") -> Scenario:
    tasks = max(1, round(nodes * SLOTS_PER_NODE * LOAD / JOBS))
    return scenario_from_dict(
        {
            "name": f"bench-{mode}",
            "cluster": {"nodes": [{"count": nodes, "cpu": SLOTS_PER_NODE, "ram_gib": 2 * SLOTS_PER_NODE}]},
            "heartbeat": {"mode": mode, "interval_s": interval_s},
            "transport": {"ring_liveness": ring_liveness},
            "workload": {
                "operations": [
                    {
                        "name": f"job{j:02d}",
                        "pool": f"user{j:02d}",
                        "cpu": 1,
                        "ram_gib": 2,
                        "tasks": tasks,
                        "seconds_mean": 300,
                        "seconds_deviation": 60,
                        "submit_at_s": 10 * j,
                        "loop": True,
                    }
                    for j in range(JOBS)
                ]
            },
            "run": {"duration_s": hours * 3600, "seed": 1},
        },
        "<bench>",
    )


def speed(nodes: int, hours: float, interval_s: float, mode: str, design: str = "des") -> dict[str, Any]:
    core, liveness = DESIGNS[design]
    scenario = bench_scenario(nodes, hours, interval_s, mode, liveness)
    cpu0 = time.process_time()
    outcome = run_blocking(scenario, core=core)
    if outcome.partial:  # stopped by Ctrl-C / SIGTERM: a cut-short run is no speed figure
        raise KeyboardInterrupt
    cpu = time.process_time() - cpu0
    wall = outcome.wall_s
    sent = outcome.nodes.heartbeats_sent
    allocs = outcome.rm.counters.allocations
    return {
        "mode": mode,
        "design": design,
        "nodes": nodes,
        "emulated_s": scenario.run.duration_s,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "heartbeats": sent,
        "statuses": outcome.nodes.statuses_sent,
        "heartbeats_per_cpu_s": round(sent / cpu),
        "us_per_heartbeat": round(cpu / sent * 1e6, 2),
        "heartbeats_per_wall_s": round(sent / wall),
        "tasks_scheduled": allocs,
        "tasks_per_wall_s": round(allocs / wall),
        "emulated_per_wall": round(scenario.run.duration_s / wall, 1),
        # The process's peak so far (modes run in order: the delta figure covers both).
        "peak_rss_mb": round(peak_rss_mb()),
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_per_node(count: int = 5000, containers: int = SLOTS_PER_NODE) -> dict[str, float]:
    """tracemalloc bytes per hosted node (``NodeProcess``: the NodeManager, its process gate and
    its timers), registered and idle, then with ``containers`` running ones."""

    async def main(clock: LoopClock) -> dict[str, float]:
        log = make_logger(clock, None)
        cfg = HeartbeatConfig(interval_s=3.0)
        counters = NodeCounters()
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        nodes = [
            NodeProcess(f"n{i}", Resources(32, 64), cfg, clock, counters, log, 1.0) for i in range(count)
        ]
        for n in nodes:
            n.start()
        await clock.sleep(1.5)  # every node has sent Register and waits for its next tick
        for i, n in enumerate(nodes):
            n.receive(RegisterResponse(action="normal", machine_id=i + 1))
        idle = tracemalloc.get_traced_memory()[0] - base
        launch = tuple(ContainerLaunch(c, Resources(1, 2), 1e6) for c in range(containers))
        for n in nodes:
            n.receive(LaunchContainers(containers=launch))
        busy = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        for n in nodes:
            n.stop()
        return {
            "nodes": count,
            "bytes_per_idle_node": round(idle / count),
            f"bytes_per_node_with_{containers}_containers": round(busy / count),
        }

    result: dict[str, float] = run(main, "virtual")
    return result


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_bench(nodes: int = 1000, hours: float = 1.0, interval_s: float = 3.0,
              progress: Callable[[str], None] = _stderr, baseline: bool = False) -> dict[str, Any]:
    """``progress``: a line as each part starts and ends (a default bench takes minutes).
    ``baseline``: also run the first design (asyncio core, liveness messages), each mode right
    after the current design's run, and report the CPU-time ratios."""
    console = Console()
    console.print(f"bench: {nodes} nodes x {hours:g} emulated h, {interval_s:g}s heartbeats, virtual time")
    results = []
    base: dict[str, dict[str, Any]] = {}
    for mode in ("periodic", "delta"):
        for design in ("des", "asyncio") if baseline else ("des",):
            progress(f"bench: {mode} ({design}): started ({nodes:,} nodes, {hours:g} emulated h)")
            r = speed(nodes, hours, interval_s, mode, design)
            progress(f"bench: {mode} ({design}): finished in {r['cpu_s']:.1f} s CPU ({r['heartbeats']:,} "
                     f"heartbeats, {r['emulated_per_wall']:,}x emulated speed)")
            if design == "des":
                results.append(r)
            else:
                base[mode] = r
    periodic, delta = results
    progress("bench: floor: started (a minimal periodic heartbeat loop, 3 x 300,000 heartbeats)")
    floor = floor_us_per_heartbeat(nodes)
    progress(f"bench: floor: {floor:.2f} µs per heartbeat")
    for r in results:
        r["x_floor"] = round(r["us_per_heartbeat"] / floor, 1)
    progress("bench: memory per NodeManager: started (5,000 nodes, tracemalloc)")
    mem = memory_per_node()
    progress("bench: memory per NodeManager: finished")
    t = Table(title="emulator speed (wall time of a virtual-time run)")
    for col in ("mode", "wall s", "CPU s", "heartbeats", "hb / CPU s", "µs / hb", "× floor",
                "tasks / wall s", "emulated s / wall s"):
        t.add_column(col, justify="right")
    for r in (periodic, delta):
        t.add_row(
            r["mode"], f"{r['wall_s']:.1f}", f"{r['cpu_s']:.1f}", f"{r['heartbeats']:,}",
            f"{r['heartbeats_per_cpu_s']:,}", f"{r['us_per_heartbeat']:.1f}", f"{r['x_floor']:g}",
            f"{r['tasks_per_wall_s']:,}", f"{r['emulated_per_wall']:,}",
        )
    console.print(t)
    ratio = periodic["wall_s"] / delta["wall_s"] if delta["wall_s"] > 0 else float("inf")
    console.print(f"wall-time ratio periodic / delta: {ratio:.2f}x; floor (minimal periodic heartbeat "
                  f"loop, emulator/experiments/floor.py): {floor:.2f} µs per heartbeat")
    console.print(
        "memory per NodeManager (tracemalloc): "
        + ", ".join(f"{k} = {v:,}" for k, v in mem.items() if k != "nodes")
    )
    if base:
        console.print("first design (asyncio core, liveness messages), same invocation: " + ", ".join(
            f"{m} {b['cpu_s']:.1f} s CPU ({b['cpu_s'] / r['cpu_s']:.2f}x the current)"
            for m, b, r in (("periodic", base["periodic"], periodic), ("delta", base["delta"], delta))))
    return {
        "periodic": periodic, "delta": delta, "periodic_over_delta_wall": round(ratio, 3), "memory": mem,
        "baseline": base,
        "floor_us_per_heartbeat": round(floor, 2),
        "machine": machine(),
    }


def machine() -> dict[str, Any]:
    """What the figures were measured on (wall times mean little without it)."""
    import os
    import platform

    return {"cores": os.cpu_count(), "python": platform.python_version(), "system": platform.system()}


def markdown_table(report: dict[str, Any]) -> str:
    """The README's table, from a ``bench.json`` (``emulator bench --out``)."""
    lines = [
        "| mode | wall time | CPU time | heartbeats | heartbeats / CPU s | µs / heartbeat (× floor) "
        "| tasks scheduled / wall s | emulated s / wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    names = {"periodic": "periodic (+ RM liveliness monitor)", "delta": "delta (+ `kring` ring monitor)"}
    for mode in ("periodic", "delta"):
        r = report[mode]
        lines.append(
            f"| {names[mode]} | {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s | {r['heartbeats']:,} | "
            f"{r['heartbeats_per_cpu_s']:,} | {r['us_per_heartbeat']:.1f} ({r['x_floor']:g}×) | "
            f"{r['tasks_per_wall_s']:,} | {r['emulated_per_wall']:,} |"
        )
    mem, m = report["memory"], report.get("machine", {})
    busy = next(v for k, v in mem.items() if k.startswith("bytes_per_node_with"))
    lines.append("")
    lines.append(
        f"{report['periodic']['nodes']:,} nodes × {report['periodic']['emulated_s'] / 3600:g} emulated h; "
        f"periodic / delta wall-time ratio {report['periodic_over_delta_wall']:.2f}; floor "
        f"{report['floor_us_per_heartbeat']:.2f} µs per periodic heartbeat; memory per NodeManager "
        f"{mem['bytes_per_idle_node']:,} B idle, {busy:,} B with 20 containers (tracemalloc); "
        f"{m.get('cores', '?')} cores, Python {m.get('python', '?')}."
    )
    base = report.get("baseline") or {}
    if base:
        lines.append("")
        lines.append(
            "The first design (asyncio's loop as the virtual clock, every ring liveness a message), "
            "measured in the same invocation: "
            + "; ".join(
                f"{mode} {base[mode]['cpu_s']:.1f} s CPU, {base[mode]['cpu_s'] / report[mode]['cpu_s']:.2f}× "
                "the current design's"
                for mode in ("periodic", "delta")
            )
            + "."
        )
    return "\n".join(lines)
