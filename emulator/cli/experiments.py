"""`emulator efficiency`, `e3-tcp` and `abuse`: experiments whose commands are only a runner and
a table printer. (The bench is a study: scenarios/studies/bench.toml.)"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console

from emulator.cli.args import count
from emulator.scenario.loader import ScenarioError, load_scenario


def add_efficiency_command(sub: Any) -> None:
    e = sub.add_parser("efficiency", help="RM cost per heartbeat, periodic vs delta, next to the floor")
    e.add_argument("--nodes", type=count(), default=1000)
    e.set_defaults(func=cmd_efficiency)


def add_e3_tcp_command(sub: Any) -> None:
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


def cmd_efficiency(args: argparse.Namespace) -> int:
    from emulator.models.bench.efficiency import run_efficiency

    run_efficiency(args.nodes)
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
