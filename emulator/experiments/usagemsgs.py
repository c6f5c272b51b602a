"""How usage reporting changes NM -> RM messages (design.md §3b): usage-quickstart.toml with and
without its usage models (the same workload otherwise), periodic and delta heartbeats. Periodic
heartbeats carry every usage-modelled container's usage at every beat (no extra messages, bigger ones); delta
heartbeats carry a container's usage only when it moved by more than the threshold, and such a
change makes an otherwise idle delta node send a heartbeat (more messages than without usage)."""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path
from typing import Any

from emulator.harness.runner import run_blocking
from emulator.results.summary import build_summary
from emulator.scenario.loader import load_scenario, scenario_from_dict, with_overrides
from emulator.scenario.schema import Scenario

FILE = "scenarios/usage-quickstart.toml"


def _without_usage(path: str) -> Scenario:
    doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    for op in doc.get("workload", {}).get("operations", []):
        op.pop("usage", None)
    return scenario_from_dict(doc, f"{path} (usage models removed)", Path(path).parent)


def run(path: str = FILE) -> list[dict[str, Any]]:
    rows = []
    for label, base in ((f"{Path(path).stem}, no usage models", _without_usage(path)),
                        (Path(path).stem, load_scenario(path))):
        for mode in ("periodic", "delta"):
            sc = with_overrides(base, {"heartbeat.mode": mode}, path, Path(path).parent)
            outcome = run_blocking(sc)
            s = build_summary(outcome)
            rows.append({
                "scenario": label, "mode": mode, "heartbeats_sent": s["heartbeats_sent"],
                "statuses_sent": s["statuses_sent"], "to_rm_bytes": outcome.to_rm.bytes,
                "usage_reports_sent": outcome.nodes.usage_reports_sent,
                "containers_completed": s["containers_completed"],
            })
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| scenario | heartbeats | heartbeats sent | bytes to the RM | container statuses | "
             "usage entries | tasks completed |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['scenario']} | {r['mode']} | {r['heartbeats_sent']:,} | "
                     f"{r['to_rm_bytes']:,} | {r['statuses_sent']:,} | {r['usage_reports_sent']:,} | "
                     f"{r['containers_completed']:,} |")
    return "\n".join(lines)


def cmd(args: argparse.Namespace) -> int:
    if args.table:
        print(markdown_table(json.loads(Path(args.table).read_text(encoding="utf-8"))))
        return 0
    rows = run()
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(markdown_table(rows))
    return 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("usage-messages", help="NM->RM messages with and without usage reporting")
    p.add_argument("--out", default="docs/usage-messages.json")
    p.add_argument("--table", metavar="JSON", help="only print the table of such a file")
    p.set_defaults(func=cmd)
