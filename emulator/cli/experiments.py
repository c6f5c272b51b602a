"""`emulator bench`, `e3`, `e3-tcp` and `abuse`: experiments whose commands are only a runner and a
table printer."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console

from emulator.cli.args import count, positive
from emulator.scenario.loader import ScenarioError, load_scenario


def add_bench_command(sub: Any) -> None:
    b = sub.add_parser("bench", help="measure the emulator's own speed and memory")
    b.add_argument("--nodes", type=count(), default=1000)
    b.add_argument("--hours", type=positive, default=1.0)
    b.add_argument("--interval", type=positive, default=3.0)
    b.add_argument("--baseline", action="store_true",
                   help="also run the first design (asyncio core, ring liveness as messages) and give ratios")
    b.add_argument("--json", action="store_true", help="also print the figures as JSON")
    b.add_argument("--out", metavar="JSON", help="write the figures to this file (docs/bench.json)")
    b.add_argument("--table", metavar="JSON", help="only print the docs/results.md table of a bench.json")
    b.set_defaults(func=cmd_bench)



def add_e3_commands(sub: Any) -> None:
    e = sub.add_parser("e3", help="the crash experiment (E3) in every failure-detection mode, with a plot")
    e.add_argument(
        "--experiment", choices=["crash", "rack", "stalls"], default="crash",
        help="crash: 5%% of 7,500 nodes crash (4 modes); rack: 20 consecutive ids; stalls: no crash",
    )
    e.add_argument("--out", default="runs/e3", help="results directory (default runs/e3)")
    e.add_argument("--modes", nargs="+", help="subset of the experiment modes (ring, paper-ring, ...)")
    e.add_argument("--nodes", type=count(), help="scale the cluster (and the jobs) to this many nodes")
    e.add_argument("--scenarios", default="scenarios", help="directory holding the e3-*.toml files")
    e.add_argument("--quiet", action="store_true")
    e.add_argument("--table", metavar="JSON", help="only print the docs/results.md table of an e3.json")
    e.set_defaults(func=cmd_e3)
    et = sub.add_parser("e3-tcp", help="E3 over TCP in real time: the largest cluster that keeps up")
    et.add_argument("--nodes", default="5000,7500", help="cluster sizes, comma-separated (default 5000,7500)")
    et.add_argument("--kill-worker", action="store_true",
                    help="then kill one worker (SIGKILL) at the largest size that kept up")
    et.add_argument("--out", default="runs/e3-tcp", help="results directory (default runs/e3-tcp)")
    et.add_argument("--scenarios", default="scenarios", help="directory holding e3-tcp.toml")
    et.add_argument("--table", metavar="JSON", help="only print the docs/results.md table of an e3-tcp.json")
    et.add_argument("--quiet", action="store_true")
    et.set_defaults(func=cmd_e3_tcp)



def add_abuse_command(sub: Any) -> None:
    a = sub.add_parser("abuse", help="honest TCP nodes' h1 without vs with a hostile client")
    a.add_argument("scenario", nargs="?", help="a TCP scenario, e.g. scenarios/abuse.toml")
    a.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    a.add_argument("--table", metavar="JSON", help="only print docs/security.md's table of such a file")
    a.set_defaults(func=cmd_abuse)


def cmd_bench(args: argparse.Namespace) -> int:
    from emulator.experiments.bench import markdown_table, run_bench

    if args.table:
        print(markdown_table(msgspec.json.decode(Path(args.table).read_bytes())))
        return 0
    report = run_bench(nodes=args.nodes, hours=args.hours, interval_s=args.interval, baseline=args.baseline)
    if args.out:
        Path(args.out).write_bytes(msgspec.json.format(msgspec.json.encode(report)) + b"\n")
    if args.json:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(report)).decode() + "\n")
    return 0


def cmd_e3(args: argparse.Namespace) -> int:
    from rich.table import Table

    from emulator.experiments.e3 import EXPERIMENTS, markdown_table, run_e3

    if args.table:
        print(markdown_table(msgspec.json.decode(Path(args.table).read_bytes())))
        return 0
    console = Console(stderr=True, quiet=args.quiet)
    modes = args.modes or list(EXPERIMENTS[args.experiment])
    out = Path(args.out)
    results = run_e3(
        out, modes, Path(args.scenarios), args.nodes, progress=console.print, experiment=args.experiment,
        console=console,
    )
    t = Table(title=f"E3 {args.experiment}")
    for col in ("mode", "removed", "crashed removed", "false removals", "latency p50/p99/max s",
                "RM msgs/node/min (quiet)", "RM membership bytes (removals)", "wall s"):
        t.add_column(col, justify="right")
    for mode, r in results.items():
        lat = r["detection_latency_s"]
        t.add_row(
            mode, str(r["removals"]), f"{r['crashed_removed']}/{r['crashed']}", str(r["false_removals"]),
            f"{lat['p50']}/{lat['p99']}/{lat['max']}", f"{r['quiet_rm_messages_per_node_minute']:g}",
            f"{r['membership_bytes_removal']:,}" if r["membership_bytes_removal"] is not None else "-",
            f"{r['wall_s']:g}",
        )
    Console(quiet=args.quiet).print(t)
    (out / "e3.json").write_bytes(msgspec.json.format(msgspec.json.encode(results)) + b"\n")
    console.print(f"results in {out}/ (removals.csv, removals.png, e3.json, one directory per mode)")
    return 0


def cmd_e3_tcp(args: argparse.Namespace) -> int:
    from emulator.experiments.e3tcp import markdown_table, run_e3_tcp

    if args.table:
        print(markdown_table(msgspec.json.decode(Path(args.table).read_bytes())))
        return 0
    try:
        sizes = [int(n) for n in args.nodes.split(",")]
    except ValueError:
        raise ScenarioError(f"--nodes: expected sizes like 5000,7500, got {args.nodes!r}") from None
    console = Console(stderr=True, quiet=args.quiet)
    rows = run_e3_tcp(Path(args.out), sizes, Path(args.scenarios), args.kill_worker, console.print)
    print(markdown_table(rows))
    console.print(f"results in {args.out}/ (e3-tcp.json, one directory per run)")
    return 0


def cmd_abuse(args: argparse.Namespace) -> int:
    from emulator.experiments.abuse import compare, markdown_table, write_figures

    if args.table:
        print(markdown_table(msgspec.json.decode(Path(args.table).read_bytes())))
        return 0
    if not args.scenario:
        raise ScenarioError("abuse: give a TCP scenario (e.g. scenarios/abuse.toml) or --table JSON")
    scenario = load_scenario(args.scenario)
    if scenario.transport.kind != "tcp":
        raise ScenarioError(f"{args.scenario}: at `transport.kind`: `emulator abuse` needs \"tcp\"")
    write_figures(compare(scenario), args.out)
    return 0
