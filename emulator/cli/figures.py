"""`emulator figures`: the README's and docs' figure tables, from the committed result files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from emulator.results.figures import FigureError, blocks, refresh, render, stale


def add_command(sub: Any) -> None:
    f = sub.add_parser("figures", help="print or refresh the figure tables from the committed result files")
    f.add_argument("names", nargs="*", metavar="NAME",
                   help="print these figures' tables (default: list them)")
    f.add_argument("--write", nargs="+", type=Path, metavar="FILE",
                   help="re-render every <!-- figure: NAME --> block in these markdown files")
    f.add_argument("--check", nargs="+", type=Path, metavar="FILE",
                   help="exit 1 if a figure block in these files differs from its result file")
    f.set_defaults(func=cmd_figures)


def cmd_figures(args: argparse.Namespace) -> int:
    from emulator.cli.figure_table import FIGURES  # every experiment's renderer: only for this command

    try:
        if args.write:
            for path in args.write:
                text = path.read_text(encoding="utf-8")
                path.write_text(refresh(FIGURES, text), encoding="utf-8")
                print(f"{path}: {len(blocks(text))} figure blocks refreshed")
            return 0
        if args.check:
            bad = [f"{path}: {name}" for path in args.check for name in stale(FIGURES, path)]
            for line in bad:
                print(f"stale figure block {line} (run: emulator figures --write FILE)", file=sys.stderr)
            return 1 if bad else 0
        if not args.names:
            for name, fig in FIGURES.items():
                print(f"{name:<14} {fig.source:<26} {fig.command}")
            return 0
        for name in args.names:
            print(render(FIGURES, name))
        return 0
    except (FigureError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
