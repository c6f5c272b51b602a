"""Replayed traces under several schedulers: job completion time percentiles side by side.

``emulator traces`` runs scenarios/traces/synth.toml (SLS SYNTH) and google-slice.toml (a Google
2011-format slice) under drf, fifo and packing with three seeds each, writes every run's results
directory and the figures (docs/traces.json); ``emulator traces --table docs/traces.json`` prints
the table of docs/traces.md from them. SYNTH regenerates its jobs from each seed; the Google slice
is the same jobs each time (the seed moves the nodes' heartbeat phases and the cluster's draws).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from emulator.harness.runner import run_blocking
from emulator.results.summary import write_results
from emulator.scenario.loader import load_scenario

WORKLOADS = {"synth": "synth.toml", "google-slice": "google-slice.toml"}
POLICIES = ("drf", "fifo", "packing")
SEEDS = (1, 2, 3)
FIGURES = ("jct_s", "queue_delay_s", "slowdown", "task_wait_s")


def run(scenarios: Path, out: Path, seeds: tuple[int, ...] = SEEDS,
        policies: tuple[str, ...] = POLICIES, quiet: bool = False) -> dict[str, Any]:
    runs = []
    for workload, file in WORKLOADS.items():
        for policy in policies:
            for seed in seeds:
                overrides: dict[str, Any] = {"scheduler.policy": policy, "run.seed": seed}
                if workload == "synth":
                    overrides["workload.trace.seed"] = seed
                scenario = load_scenario(scenarios / file, overrides)
                directory = out / f"{workload}-{policy}-{seed}"
                outcome = run_blocking(scenario)
                summary = write_results(outcome, directory)
                jobs = summary["jobs"]
                row = {
                    "workload": workload, "policy": policy, "seed": seed, "jobs": jobs["count"],
                    "finished": jobs["finished"], "cpu_utilization": summary["cpu_utilization"],
                    **{f: jobs[f] for f in FIGURES},
                    "per_pool_jct_s": {p: v["jct_s"] for p, v in jobs["per_pool"].items()},
                    "scheduler_decision_us": outcome.scheduler_decision_us,
                }
                runs.append(row)
                if not quiet:
                    done = f"{jobs['finished']}/{jobs['count']}"
                    jct = jobs["jct_s"]
                    print(f"{workload:<13} {policy:<8} seed {seed}: {done} jobs, "
                          f"JCT p50 {jct['p50']:.0f} s, p99 {jct['p99']:.0f} s", flush=True)
    return {"command": "emulator traces", "seeds": list(seeds), "runs": runs}


def _mean(rows: list[dict[str, Any]], figure: str, key: str) -> float:
    vals = [r[figure][key] for r in rows if r[figure][key] is not None]
    return statistics.fmean(vals) if vals else float("nan")


def table(data: dict[str, Any]) -> str:
    """Per workload and policy, means over the seeds (completion times of finished jobs)."""
    lines = [
        "| workload | policy | jobs finished | JCT p50 (s) | JCT p90 (s) | JCT p99 (s) | queue delay p90 (s) "
        "| slowdown p50 | slowdown p90 | task wait p90 (s) | CPU util. | decision p50 / p99 (µs, wall) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    runs = data["runs"]
    for workload in dict.fromkeys(r["workload"] for r in runs):
        for policy in dict.fromkeys(r["policy"] for r in runs):
            rows = [r for r in runs if r["workload"] == workload and r["policy"] == policy]
            if not rows:
                continue
            done = sum(r["finished"] for r in rows)
            total = sum(r["jobs"] for r in rows)
            dec50 = statistics.fmean(r["scheduler_decision_us"]["p50"] for r in rows)
            dec99 = statistics.fmean(r["scheduler_decision_us"]["p99"] for r in rows)
            util = statistics.fmean(r["cpu_utilization"] for r in rows)
            lines.append(
                f"| {workload} | {policy} | {done}/{total} | {_mean(rows, 'jct_s', 'p50'):,.0f} "
                f"| {_mean(rows, 'jct_s', 'p90'):,.0f} | {_mean(rows, 'jct_s', 'p99'):,.0f} "
                f"| {_mean(rows, 'queue_delay_s', 'p90'):,.1f} | {_mean(rows, 'slowdown', 'p50'):.2f} "
                f"| {_mean(rows, 'slowdown', 'p90'):.2f} | {_mean(rows, 'task_wait_s', 'p90'):,.0f} "
                f"| {util:.1%} | {dec50:.1f} / {dec99:.1f} |"
            )
    return "\n".join(lines)
