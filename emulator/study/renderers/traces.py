"""Replayed traces under several schedulers: job completion time percentiles side by side, from
the output of `emulator study scenarios/studies/traces.toml` (docs/traces.json; `make traces`).

The study runs scenarios/traces/synth.toml (SLS SYNTH) and google-slice.toml (a Google 2011-format
slice) under drf, fifo and packing with three seeds each; its variants are named WORKLOAD-SEED
(SYNTH regenerates its jobs from each seed), its `scheduler.policy` axis the policy.
"""

from __future__ import annotations

import statistics
from typing import Any

POLICY = "scheduler.policy"
NEEDED = ("jobs", "timing.scheduler_decision_us")


class NotTraces(ValueError):
    """A study output without what the table needs."""


def _runs(output: dict[str, Any]) -> list[dict[str, Any]]:
    lacking = [c for c in NEEDED if c not in output["study"].get("collect", [])]
    if lacking or POLICY not in output["study"].get("axes", {}):
        raise NotTraces(f"{output['file']}: the traces table needs the study to collect "
                        f"{', '.join(NEEDED)} and vary `{POLICY}`")
    return [{"workload": p["variant"].rsplit("-", 1)[0], "policy": p["coords"][POLICY],
             "cpu_utilization": p["metrics"]["cpu_utilization"], **p["collected"]["jobs"],
             "scheduler_decision_us": p["collected"]["timing.scheduler_decision_us"]}
            for p in output["points"]]


def _mean(rows: list[dict[str, Any]], figure: str, key: str) -> float:
    vals = [r[figure][key] for r in rows if r[figure][key] is not None]
    return statistics.fmean(vals) if vals else float("nan")


def table(output: dict[str, Any]) -> str:
    """Per workload and policy, means over the seeds (completion times of finished jobs)."""
    lines = [
        "| workload | policy | jobs finished | JCT p50 (s) | JCT p90 (s) | JCT p99 (s) | queue delay p90 (s) "
        "| slowdown p50 | slowdown p90 | task wait p90 (s) | CPU util. | decision p50 / p99 (µs, wall) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    runs = _runs(output)
    for workload in dict.fromkeys(r["workload"] for r in runs):
        for policy in dict.fromkeys(r["policy"] for r in runs):
            rows = [r for r in runs if r["workload"] == workload and r["policy"] == policy]
            if not rows:
                continue
            done = sum(r["finished"] for r in rows)
            total = sum(r["count"] for r in rows)
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
