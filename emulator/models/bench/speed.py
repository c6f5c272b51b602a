"""The bench's measurements of the emulator itself: the speed of a virtual-time run of E2's
workload (one heartbeat mode, one design) and the memory per hosted NodeManager. The bench study
(scenarios/studies/bench.toml) runs each as a point, one at a time in one process, so that both
modes are measured under the same machine conditions.
"""

from __future__ import annotations

import gc
import resource
import time
import tracemalloc
from typing import Any

from emulator.harness.eventlog import make_logger
from emulator.harness.nodeproc import NodeProcess
from emulator.harness.runner import run_blocking
from emulator.scenario.loader import scenario_from_dict
from emulator.scenario.schema import Scenario
from emulator.time.clock import LoopClock, run
from emulator.time.desloop import VirtualCore
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
                   ring_liveness: str = "timestamps", seed: int = 1) -> Scenario:
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
            "run": {"duration_s": hours * 3600, "seed": seed},
        },
        "<bench>",
    )


def speed(nodes: int, hours: float, interval_s: float, mode: str, design: str = "des",
          seed: int = 1) -> dict[str, Any]:
    core, liveness = DESIGNS[design]
    scenario = bench_scenario(nodes, hours, interval_s, mode, liveness, seed)
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
        # The process's peak so far (the points run in order in one process: the last covers all).
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


def machine() -> dict[str, Any]:
    """What the figures were measured on (wall times mean little without it)."""
    import os
    import platform

    return {"cores": os.cpu_count(), "python": platform.python_version(), "system": platform.system()}
