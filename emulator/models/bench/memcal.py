"""Measuring what a run costs in memory per node, per task and per running container: where the
constants of ``emulator/scenario/footprint.py`` come from.

``python -m emulator.models.bench.memcal`` runs small scenarios (virtual time, in memory), each in
a fresh process, at two sizes per quantity and prints the growth of peak RSS per unit: the peak
(Linux VmHWM) over the RSS just before the run, so garbage made and freed during the run counts,
as the machine must hold it. Per node includes its timers (heartbeat, ring ticks), its ring
monitor and the RM's record; per container its place in the node's completion heap, the RM's
allocation, the ledger entry and its place in (periodic) heartbeats.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

DURATION_S = 60.0


def node_doc(nodes: int, mode: str) -> dict[str, Any]:
    return {
        "cluster": {"nodes": [{"count": nodes, "cpu": 20, "ram_gib": 40}]},
        "heartbeat": {"mode": mode},
        "run": {"duration_s": DURATION_S},
    }


def task_doc(tasks: int) -> dict[str, Any]:
    """One small node: nearly every task stays pending."""
    return {
        "cluster": {"nodes": [{"count": 1, "cpu": 1, "ram_gib": 1}]},
        "workload": {"operations": [
            {"name": "a", "cpu": 1, "ram_gib": 1, "tasks": tasks, "seconds_mean": 1e5},
        ]},
        "run": {"duration_s": DURATION_S},
    }


def container_doc(nodes: int, mode: str) -> dict[str, Any]:
    """Every node full (20 containers) with tasks that outlast the run."""
    doc = node_doc(nodes, mode)
    doc["workload"] = {"operations": [
        {"name": "a", "cpu": 1, "ram_gib": 2, "tasks": 20 * nodes, "seconds_mean": 1e5},
    ]}
    return doc


def _rss_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize()


def _peak_rss_bytes() -> int:
    """VmHWM: unlike ``ru_maxrss``, not inherited across exec from a bigger parent (pytest)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def measure_one(doc: dict[str, Any]) -> dict[str, int]:
    """In this process: run ``doc``; the RSS before the run and the peak growth during it."""
    from emulator.harness.runner import run_blocking
    from emulator.scenario.loader import scenario_from_dict

    sc = scenario_from_dict(doc, "<memcal>")
    before = _rss_bytes()
    run_blocking(sc, check_invariants=False)
    peak = _peak_rss_bytes()
    return {"base": before, "growth": max(0, peak - before)}


def measure(doc: dict[str, Any]) -> dict[str, int]:
    """``measure_one`` in a fresh interpreter (peak RSS never goes down)."""
    out = subprocess.run(
        [sys.executable, "-m", "emulator.models.bench.memcal", "--one", json.dumps(doc)],
        check=True, capture_output=True, text=True,
    )
    result: dict[str, int] = json.loads(out.stdout)
    return result


def calibrate() -> dict[str, float]:
    """Bytes per unit: ``node_<mode>``, ``task`` (pending), ``container_<mode>`` (running, over
    its task), and ``base`` (the RSS of an interpreter with the emulator loaded)."""
    figures: dict[str, float] = {}
    t_small, t_large = 200_000, 800_000
    a, b = measure(task_doc(t_small)), measure(task_doc(t_large))
    figures["task"] = (b["growth"] - a["growth"]) / (t_large - t_small)
    figures["base"] = float(a["base"])
    small, large = 2_000, 8_000
    for mode in ("periodic", "delta"):
        a, b = measure(node_doc(small, mode)), measure(node_doc(large, mode))
        per_node = figures[f"node_{mode}"] = (b["growth"] - a["growth"]) / (large - small)
        n_small, n_large = small // 4, large // 4
        c, d = measure(container_doc(n_small, mode)), measure(container_doc(n_large, mode))
        added = 20 * (n_large - n_small)
        per_container = (d["growth"] - c["growth"] - per_node * (n_large - n_small)) / added
        figures[f"container_{mode}"] = per_container - figures["task"]
    return figures


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        print(json.dumps(measure_one(json.loads(argv[1]))))
        return 0
    for name, value in calibrate().items():
        print(f"{name:<28} {value:>14,.0f} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
