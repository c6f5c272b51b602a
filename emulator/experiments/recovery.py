"""``emulator recovery``: an RM-restart scenario at several cluster sizes, one table of recovery times.

The scenario's ``[sweep]`` table gives the node counts and heartbeat modes (the workload scales
with the node count, as a study's ``nodes`` axis does). Per run: containers running when the RM died,
journal size and the wall time to replay it, when every live node was back and when scheduling
resumed (emulated seconds after the new RM started), and containers kept vs run again; with the
invariant checker on, tasks lost / run twice.
"""

from __future__ import annotations

import argparse
import copy
import json
import tomllib
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from emulator.results.console import run_with_progress
from emulator.results.recording import recorded
from emulator.results.summary import write_results
from emulator.scenario.loader import ScenarioError, scenario_from_dict
from emulator.scenario.schema import RMRestartFault, Scenario, SweepConfig
from emulator.study.points import scale_cluster


def load_sweep(path: Path) -> tuple[dict[str, Any], SweepConfig]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"{path}: not valid TOML: {err}") from None
    cfg = scenario_from_dict(data, str(path)).sweep
    if cfg is None:
        raise ScenarioError(f"{path}: at `sweep`: a recovery scenario needs a [sweep] table (nodes = [...])")
    del data["sweep"]
    return data, cfg


def point(base: dict[str, Any], cfg: SweepConfig, nodes: int, mode: str, source: str) -> Scenario:
    """The base scenario scaled to ``nodes`` nodes in heartbeat ``mode``."""
    data = copy.deepcopy(base)
    try:
        scale_cluster(data, nodes, cfg.scale_workload)
    except ScenarioError as err:
        raise ScenarioError(f"{source}: {err}") from None
    data.setdefault("heartbeat", {})["mode"] = mode
    data["name"] = f"{data.get('name', 'sweep')}-{mode}-{nodes}"
    return scenario_from_dict(data, source)


COLUMNS = (
    ("nodes", "nodes", "{:,}"),
    ("mode", "mode", "{}"),
    ("containers_waiting", "running at crash", "{:,}"),
    ("journal_records", "journal records", "{:,}"),
    ("journal_mib", "journal MiB", "{:.1f}"),
    ("replay_wall_s", "replay wall s", "{:.2f}"),
    ("all_nodes_back_s", "all nodes back s", "{:.2f}"),
    ("scheduling_resumed_s", "scheduling resumed s", "{:.2f}"),
    ("recovery_s", "recovery s", "{:.2f}"),
    ("containers_kept", "kept", "{:,}"),
    ("containers_rerun", "rerun", "{:,}"),
    ("tasks_lost", "tasks lost", "{}"),
    ("tasks_duplicated", "run twice", "{}"),
    ("wall_s", "run wall s", "{:.0f}"),
)


def run_recovery(path: Path, out: Path, nodes: list[int] | None, console: Console) -> list[dict[str, Any]]:
    base, cfg = load_sweep(path)
    rows: list[dict[str, Any]] = []
    for mode in cfg.modes:
        for n in nodes or cfg.nodes:
            sc = point(base, cfg, n, mode, str(path))
            if not any(isinstance(f, RMRestartFault) for f in sc.faults):
                raise ScenarioError(f"{path}: at `faults`: `emulator recovery` needs an `rm_restart` fault")
            run_dir = out / f"{mode}-{n}"
            run_dir.mkdir(parents=True, exist_ok=True)
            console.print(f"[bold]{sc.name}[/]: {n:,} nodes, {mode} ...")
            with recorded(run_dir, "experiment", str(path), sc, {}, [], check_invariants=True) as rec:
                outcome = run_with_progress(sc, console, run_dir / "events.jsonl", check_invariants=True)
                summary = write_results(outcome, run_dir)
                rec.finish(0)
            walls = outcome.restart_replay_wall_s
            for r, wall in zip(summary.get("rm_restarts", []), walls, strict=True):
                row = {"nodes": n, "mode": mode, **r, "replay_wall_s": wall,
                       "journal_mib": r["journal_bytes"] / 2**20,
                       "tasks_lost": summary["tasks_lost"], "tasks_duplicated": summary["tasks_duplicated"],
                       "wall_s": outcome.wall_s}
                rows.append(row)
                console.print(table([row]))
    (out / "recovery.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return rows


def table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="RM restart: recovery (emulated s after the new RM started)")
    for _, title, _ in COLUMNS:
        t.add_column(title, justify="right")
    for row in rows:
        t.add_row(*("n/a" if row.get(k) is None else fmt.format(row[k]) for k, _, fmt in COLUMNS))
    return t


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The README's table, from ``recovery.json``."""
    lines = [
        "| nodes | mode | containers running at the crash | journal replay (wall) | all nodes back, "
        "scheduling resumed | kept / run again | tasks lost / run twice |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['nodes']:,} | {r['mode']} | {r['containers_waiting']:,} | {r['replay_wall_s']:.2f} s "
            f"({r['journal_records']:,} records, {r['journal_mib']:.0f} MiB) | "
            f"{r['all_nodes_back_s']:.2f} s, "
            f"{r['scheduling_resumed_s']:.2f} s | {r['containers_kept']:,} / {r['containers_rerun']:,} | "
            f"{r['tasks_lost']} / {r['tasks_duplicated']} |"
        )
    return "\n".join(lines)


def cmd_recovery(args: argparse.Namespace) -> int:
    if args.table:
        print(markdown_table(json.loads(Path(args.table).read_text(encoding="utf-8"))))
        return 0
    path = Path(args.file)
    out = Path(args.out) if args.out else Path("runs") / f"recovery-{path.stem}"
    nodes = [int(x) for x in args.nodes.split(",")] if args.nodes else None
    console = Console(width=170)
    rows = run_recovery(path, out, nodes, console)
    console.print(table(rows))
    console.print(f"results in {out}/ (recovery.json, one run directory per point)")
    lost = sum(r["tasks_lost"] for r in rows)
    return 0 if rows and lost == 0 else 1


def add_command(sub: Any) -> None:
    s = sub.add_parser("recovery", help="RM restart at several cluster sizes: recovery times")
    s.add_argument("file", nargs="?", default="scenarios/rm-restart.toml",
                   help="scenario with an rm_restart fault and a [sweep] table")
    s.add_argument("--out", help="results directory (default runs/recovery-<file>)")
    s.add_argument("--nodes", help="override sweep.nodes, e.g. 1000,10000")
    s.add_argument("--table", metavar="JSON", help="only print the docs/results.md table of a recovery.json")
    s.set_defaults(func=cmd_recovery)
