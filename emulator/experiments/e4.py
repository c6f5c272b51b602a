"""E4: Autopilot (design.md §3b, the lecture's Autopilot results).

One scenario (``scenarios/e4-autopilot.toml``) run three ways: hard memory limits as users set
them (the request; the file as written), soft limits (every operation's ``usage.ram_limit =
"soft"``: only a full machine's memory kills, lowest tier first), and Autopilot
(``scheduler.autopilot.enabled = true``: hard limits set from the usage histograms). Per run
the lecture's quantities: relative slack (limit − usage)/limit, time-weighted, and OOMs per
task-day; beside them Google's production figures. The workload is synthetic: compare the
direction and the ratios, not the absolute values.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from emulator.harness.runner import run_blocking
from emulator.results.summary import write_results
from emulator.scenario.loader import ScenarioError, load_scenario
from emulator.scenario.schema import Scenario

# Google production (the lecture): relative slack and OOMs per task-day.
LECTURE = {
    "hard": {"slack": 0.60, "ooms_per_task_day": 0.069},
    "soft": {"slack": 0.46, "ooms_per_task_day": 0.19},
    "autopilot": {"slack": 0.31, "ooms_per_task_day": 0.002},
}
MODES = ("hard", "soft", "autopilot")


def overrides(mode: str, sc: Scenario) -> dict[str, Any]:
    if mode == "soft":
        return {f"workload.operations.{i}.usage.ram_limit": "soft"
                for i, op in enumerate(sc.workload.operations) if op.usage is not None}
    if mode == "autopilot":
        return {"scheduler.autopilot.enabled": True}
    return {}


def run_e4(path: Path, out: Path) -> dict[str, Any]:
    base = load_scenario(path)
    if not any(op.usage is not None for op in base.workload.operations):
        raise ScenarioError(f"{path}: at `workload.operations`: E4 needs operations with a `usage` table")
    rows = []
    for mode in MODES:
        sc = load_scenario(path, overrides(mode, base))
        summary = write_results(run_blocking(sc), out / mode)
        u = summary["usage"]
        rows.append({
            "mode": mode, "ram_slack": u["ram_slack"], "cpu_slack": u["cpu_slack"],
            "ooms": u["ooms"], "ooms_per_task_day": u["ooms_per_task_day"], "task_days": u["task_days"],
            "ooms_over_limit": u["ooms_over_limit"], "ooms_node_overflow": u["ooms_node_overflow"],
            "machine_overflow_fraction": u["machine_overflow_fraction"],
            "tiers": u["tiers"], "containers_completed": summary["containers_completed"],
            "lecture": LECTURE[mode],
        })
        print(f"{mode}: RAM slack {u['ram_slack']:.3f}, OOMs/task-day {u['ooms_per_task_day']}", flush=True)
    return {"scenario": str(path), "rows": rows}


def markdown_table(data: dict[str, Any]) -> str:
    lines = [
        "| limits | RAM slack (lecture) | CPU slack | OOMs per task-day (lecture) | OOMs: over limit / "
        "full machine | machine overflow | tasks completed |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        lec = r["lecture"]
        lines.append(
            f"| {r['mode']} | {r['ram_slack'] * 100:.1f}% ({lec['slack'] * 100:.0f}%) | "
            f"{r['cpu_slack'] * 100:.1f}% | {r['ooms_per_task_day']:.3g} ({lec['ooms_per_task_day']}) | "
            f"{r['ooms_over_limit']:,} / {r['ooms_node_overflow']:,} | "
            f"{r['machine_overflow_fraction'] * 100:.2f}% | {r['containers_completed']:,} |"
        )
    rows = {r["mode"]: r for r in data["rows"]}
    if {"hard", "autopilot"} <= rows.keys():
        h, a = rows["hard"], rows["autopilot"]
        ratio = h["ooms_per_task_day"] / a["ooms_per_task_day"] if a["ooms_per_task_day"] else float("inf")
        lines.append("")
        lines.append(f"Autopilot vs hard limits: RAM slack {h['ram_slack'] * 100:.1f}% -> "
                     f"{a['ram_slack'] * 100:.1f}% (lecture 60% -> 31%); OOMs per task-day / {ratio:.1f} "
                     f"(lecture / {0.069 / 0.002:.1f}).")
    return "\n".join(lines)


def cmd_e4(args: argparse.Namespace) -> int:
    if args.table:
        print(markdown_table(json.loads(Path(args.table).read_text(encoding="utf-8"))))
        return 0
    data = run_e4(Path(args.file), Path(args.runs))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(markdown_table(data))
    return 0


def add_command(sub: Any) -> None:
    e = sub.add_parser("e4", help="Autopilot: slack and OOMs with hard limits, soft limits, Autopilot")
    e.add_argument("file", nargs="?", default="scenarios/e4-autopilot.toml")
    e.add_argument("--out", default="docs/e4.json")
    e.add_argument("--runs", default="runs/e4", help="where the three runs' results go")
    e.add_argument("--table", metavar="JSON", help="only print the table of an e4.json")
    e.set_defaults(func=cmd_e4)
