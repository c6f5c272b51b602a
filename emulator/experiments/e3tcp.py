"""`emulator e3-tcp`: E3 over TCP in real time (speed 1), for the largest cluster this machine
emulates while the emulator keeps up with real time.

The RM runs in this process, the NodeManagers in worker processes; ring liveness crosses between
workers over TCP peer connections. For each cluster size the crash run (a seeded 5% crash at
400 s); then, at the largest size that kept up, the same run with one worker process killed with
SIGKILL instead (all its nodes die together). A run whose lag exceeded the threshold is marked
overloaded: its detection figures are not a finding.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import msgspec

from emulator.harness.runner import run_blocking
from emulator.results.summary import write_results
from emulator.scenario.loader import ScenarioError, scenario_from_dict
from emulator.scenario.schema import Scenario, scale_tasks

SCENARIO = "e3-tcp.toml"


def e3_tcp_scenario(path: Path, nodes: int, kill_worker: bool) -> Scenario:
    """The scenario at ``nodes`` nodes (jobs scaled as t = n·c·l/a); ``kill_worker``: worker 0
    is killed at the crash time instead of the random 5% crash."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ScenarioError(f"{path}: {err}") from None
    group = data["cluster"]["nodes"][0]
    scale = nodes / group["count"]
    group["count"] = nodes
    for op in data["workload"]["operations"]:
        scale_tasks(op, scale)
    at = min(f["at_s"] for f in data["faults"])
    if kill_worker:
        data["faults"] = [{"kind": "worker_kill", "at_s": at, "worker": 0}]
    data["name"] = f"e3-tcp-{nodes}{'-kill' if kill_worker else ''}"
    return scenario_from_dict(data, str(path))


def figures(summary: dict[str, Any], sc: Scenario, kill: bool) -> dict[str, Any]:
    lag = summary["lag"]
    costs = summary.get("costs", {})

    def p99(part: dict[str, Any] | None) -> float | None:
        return round(part["p99"], 4) if part else None

    return {
        "nodes": sc.node_count,
        "workers": sc.transport.worker_processes(),
        "fault": "worker_kill" if kill else "crash 5%",
        "crashed": summary["crashed_nodes"],
        "crashed_removed": summary["crashed_removed"],
        "false_removals": summary["false_removals"],
        "detection_latency_s": summary["detection_latency_s"],
        "overloaded": summary["overloaded"],
        "lag_threshold_s": lag["threshold_s"],
        "lag_p99_s": {
            "rm_loop": p99(lag["rm_loop_s"]),
            "worker_loop": p99(lag["worker_loop_s"]),
            "heartbeat_send": p99(lag["heartbeat_send_s"]),
            "fault_injection_max": round(faults["max"], 4) if (faults := lag["fault_injection_s"]) else None,
        },
        "lagged_intervals": len(lag["lagged_intervals"]),
        "rm_cpu_percent": costs.get("rm_cpu_percent"),
        "dead_workers": summary.get("dead_workers", []),
    }


def run_e3_tcp(
    out: Path, sizes: list[int], scenarios_dir: Path, kill_worker: bool, progress: Any = None
) -> list[dict[str, Any]]:
    """The crash run at each size, then (``kill_worker``) the worker-kill run at the largest size
    that was not overloaded."""
    out.mkdir(parents=True, exist_ok=True)
    path = scenarios_dir / SCENARIO
    rows: list[dict[str, Any]] = []
    runs = [(n, False) for n in sizes]
    for i, (nodes, kill) in enumerate(runs):
        sc = e3_tcp_scenario(path, nodes, kill)
        if progress is not None:
            progress(f"{sc.name}: {nodes} nodes in {sc.transport.worker_processes()} workers, "
                     f"{sc.run.duration_s:g} s of real time ...")
        run_dir = out / sc.name
        run_dir.mkdir(parents=True, exist_ok=True)
        outcome = run_blocking(sc, run_dir / "events.jsonl")
        row = figures(write_results(outcome, run_dir), sc, kill)
        row["wall_s"] = round(outcome.wall_s, 1)
        rows.append(row)
        if progress is not None:
            lat = row["detection_latency_s"]
            progress(f"  removed {row['crashed_removed']}/{row['crashed']}, false {row['false_removals']}, "
                     f"p99 {lat['p99']} s, overloaded {row['overloaded']}, lag p99 {row['lag_p99_s']}")
        if kill_worker and i == len(sizes) - 1:
            fine = [r["nodes"] for r in rows if not r["overloaded"]]
            if fine:
                runs.append((max(fine), True))
    (out / "e3-tcp.json").write_bytes(msgspec.json.format(msgspec.json.encode(rows)) + b"\n")
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The README's table, from ``e3-tcp.json``."""
    lines = [
        "| nodes (workers) | fault | crashed removed | false removals | detection p50 / p99 / max | "
        "lag p99: RM loop / worker loop / heartbeats (threshold) | overloaded | RM CPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lat, lag = r["detection_latency_s"], r["lag_p99_s"]
        lines.append(
            f"| {r['nodes']:,} ({r['workers']}) | {r['fault']} | {r['crashed_removed']} / {r['crashed']} | "
            f"{r['false_removals']} | {lat['p50']:g} / {lat['p99']:g} / {lat['max']:g} s | "
            f"{lag['rm_loop']:g} / {lag['worker_loop']:g} / {lag['heartbeat_send']:g} s "
            f"({r['lag_threshold_s']:g} s) | {'**yes**' if r['overloaded'] else 'no'} | "
            f"{r['rm_cpu_percent']:g}% |"
        )
    return "\n".join(lines)
