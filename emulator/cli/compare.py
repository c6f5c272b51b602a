"""`emulator report` and `compare`: results directories written up, alone or side by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console


def add_report_command(sub: Any) -> None:
    rp = sub.add_parser("report", help="write report.html for one results directory, or a "
                        "side-by-side report of several")
    rp.add_argument("dirs", nargs="+", help="results directories of `emulator run`")
    rp.add_argument("--out", metavar="DIR", help="several dirs: the directory for compare.html, "
                    "compare.csv, compare.json and the plots (default runs/compare-A-vs-B...)")
    rp.set_defaults(func=cmd_report)



def add_compare_command(sub: Any) -> None:
    c = sub.add_parser("compare", help="print result directories side by side")
    c.add_argument("dirs", nargs="*", metavar="DIR", help="results directories (summary.json inside)")
    c.add_argument(
        "--reference", choices=["thesis-e1"],
        help="add reference columns (thesis-e1: the thesis's Table 4.3, without / with packing)",
    )
    c.add_argument("--operations", action="store_true", help="also the per-operation shares")
    c.add_argument("--metrics", metavar="GROUP[,GROUP...]",
                   help="only these groups: utilisation, fairness, heartbeats (and RM load), detection "
                   "(failure detection), jobs; or summary keys, globs allowed (detection_latency_s.*)")
    c.add_argument("--out", metavar="DIR",
                   help="also write compare.html, compare.csv, compare.json and the plots into DIR")
    c.add_argument("--table", metavar="JSON", help="only print a saved compare.json as a Markdown table")
    c.add_argument("--html", help=argparse.SUPPRESS)  # replaced by --out: said so, exit 2
    c.set_defaults(func=cmd_compare)


def cmd_report(args: argparse.Namespace) -> int:
    """One directory: its report.html inside it. Several: the comparison's files in --out."""
    from emulator.results.report import ReportError, write_run_report

    if len(args.dirs) == 1 and args.out is None:
        try:
            path = write_run_report(Path(args.dirs[0]))
        except ReportError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"report written to {path}")
        return 0
    return _write_comparison(args.dirs, args.out, None, None, Console())


def _write_comparison(dirs: list[str], out: str | None, reference: str | None, metrics: str | None,
                      console: Console) -> int:
    from emulator.results.compare import CompareError, compare, load_summary, run_names
    from emulator.results.compare_page import default_out, write_outputs

    paths = [Path(d) for d in dirs]
    try:
        names = run_names(paths)
        summaries = [load_summary(d) for d in paths]
        c = compare(list(zip(names, summaries, strict=True)), reference, metrics)
        page = write_outputs(c, paths, summaries, Path(out) if out else default_out(names))
    except CompareError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    console.print(f"comparison written to {page.parent}/ ({page.name}, compare.csv, compare.json, plots)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from emulator.results.compare import (
        CompareError,
        compare,
        comparison_table,
        load_summary,
        operations_table,
        run_names,
    )
    from emulator.results.compare_page import check_out

    if args.table:
        from emulator.results.compare import markdown_table

        try:
            print(markdown_table(msgspec.json.decode(Path(args.table).read_bytes())))
        except (OSError, msgspec.DecodeError, KeyError, TypeError) as err:
            print(f"error: {args.table}: not a compare.json of `emulator compare --out`: {err}",
                  file=sys.stderr)
            return 2
        return 0
    if args.html:
        print("error: --html FILE is replaced by --out DIR (DIR/compare.html, compare.csv, compare.json "
              "and the plots)", file=sys.stderr)
        return 2
    try:
        if args.out:  # a bad --out is said before the table, not after it
            check_out(Path(args.out), [Path(d) for d in args.dirs])
        names = run_names([Path(d) for d in args.dirs])
        summaries = list(zip(names, (load_summary(d) for d in args.dirs), strict=True))
        table = comparison_table(compare(summaries, args.reference, args.metrics))
    except CompareError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    console = Console()
    if not console.is_terminal:  # piped into a file: keep the columns readable
        console = Console(width=200)
    console.print(table)
    if args.operations:
        console.print(operations_table(summaries))
    if args.out:
        return _write_comparison(args.dirs, args.out, args.reference, args.metrics, console)
    return 0
