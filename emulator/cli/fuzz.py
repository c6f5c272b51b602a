"""`emulator fuzz`: the scenario fuzzer (emulator/fuzz.py) as a command. Kept apart so the CLI
works without hypothesis, which only this command needs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_command(sub: Any) -> None:
    f = sub.add_parser("fuzz", help="fuzz scenario files (hypothesis): every input loads and runs, or "
                       "gives one clear error; exit 1 on any crash")
    f.add_argument("--examples", type=int, default=20_000, help="inputs to try (default 20,000)")
    f.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    f.add_argument("--keep-failures", type=Path, metavar="DIR", help="save crashing inputs here")
    f.add_argument("--no-run", action="store_true", help="only load the inputs, do not run valid ones")
    f.add_argument("--json", action="store_true", help="print the figures as JSON")
    f.set_defaults(func=cmd_fuzz)


def cmd_fuzz(args: argparse.Namespace) -> int:
    try:
        from emulator.experiments.fuzz import fuzz
    except ImportError as err:  # hypothesis is a test extra
        print(f"error: `emulator fuzz` needs hypothesis ({err}); pip install -e '.[test]' or make fuzz",
              file=sys.stderr)
        return 2
    report = fuzz(args.examples, args.seed, args.keep_failures, not args.no_run,
                  lambda line: print(line, file=sys.stderr, flush=True))
    for failure in report.failures:
        print(failure)
    if args.json:
        print(json.dumps(report.summary(), indent=2))
    else:
        print(f"inputs tried {report.inputs:,}: valid runs {report.valid_runs:,}, clear errors "
              f"{report.clear_errors:,}, crashes {report.crashes}, slow runs stopped {report.slow_runs} "
              f"({report.wall_s:.0f} s wall, seed {args.seed}, "
              f"inputs digest {report.summary()['inputs_digest']})")
        for kind, (n, valid) in sorted(report.by_kind.items()):
            print(f"  {kind:<16} {n:>7,} inputs, {valid:>6,} valid")
    return 1 if report.crashes else 0


def markdown_table(data: dict[str, Any]) -> str:
    """The figure of one round (`emulator fuzz --json`): totals, then inputs and valid ones by kind."""
    lines = ["| inputs tried | valid scenarios run | clear errors | crashes | slow runs | wall | seed "
             "| inputs digest |",
             "|---|---|---|---|---|---|---|---|",
             f"| **{data['inputs_tried']:,}** | {data['valid_runs']:,} | {data['clear_errors']:,} | "
             f"**{data['crashes']}** | {data['slow_runs']} | {data['wall_s']:.0f} s | {data['seed']} | "
             f"`{data['inputs_digest']}` |",
             "", "| kind | inputs | valid |", "|---|---|---|"]
    lines += [f"| {kind} | {v['inputs']:,} | {v['valid']:,} |" for kind, v in data["by_kind"].items()]
    return "\n".join(lines) + "\n"
