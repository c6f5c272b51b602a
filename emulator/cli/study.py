"""`emulator study FILE`: run a study file's points into one JSON; `--table JSON`: its tables."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from emulator.cli.args import count
from emulator.cli.run import parse_set
from emulator.results.console import EXIT_STOPPED
from emulator.study.output import StudyOutput, read_output
from emulator.study.plots import write_plots
from emulator.study.runner import StudyRun, default_jobs
from emulator.study.spec import StudyError
from emulator.study.tables import markdown


def add_command(sub: Any) -> None:
    s = sub.add_parser("study", help="run a study file (a scenario or a model x variants x axes -> metrics, "
                       "tables); docs/studies.md")
    s.add_argument("file", nargs="?", help="the study (.toml), e.g. "
                   "scenarios/studies/quickstart-heartbeats.toml")
    s.add_argument("--out", type=Path, metavar="JSON",
                   help="the study's output (default runs/studies/NAME.json); points already in it are "
                   "not run again")
    s.add_argument("--jobs", type=count(1, 1024), default=default_jobs(),
                   help="points run at once, each in its own process "
                   f"(default: cores - 1, here {default_jobs()})")
    s.add_argument("--runs", type=Path, metavar="DIR",
                   help="also keep each point's full results in DIR/POINT/ "
                   "(for emulator rerun, compare, report)")
    s.add_argument("--force", action="store_true", help="run every point again, whatever the output holds")
    s.add_argument("--table", type=Path, metavar="JSON",
                   help="only print the tables of a study's output (nothing is run)")
    s.add_argument("--plots", type=Path, metavar="DIR",
                   help="also write the study's plots (its [[plots]]) into DIR, as PNG and CSV")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                   help="override a scenario field (or a model parameter) of every point, under the "
                   "variants' overrides, e.g. --set transport.workers=2 (repeatable; kept in the output)")
    s.add_argument("--axis", action="append", metavar="NAME=V1,V2", default=[],
                   help="run an axis of the study over these values instead of the file's, e.g. "
                   "--axis nodes=1000,2000 --axis heartbeat.mode=delta (repeatable)")
    s.add_argument("--cluster", metavar="ADDRESS|local[:N]",
                   help="host a TCP study's nodes on a Dask cluster: a scheduler's address, or local[:N] "
                   "for a LocalCluster of N worker processes started for the study (docs/cluster.md)")
    s.add_argument("--quiet", action="store_true", help="no line per point")
    s.set_defaults(func=cmd_study)


def cmd_study(args: argparse.Namespace) -> int:
    if args.table is not None:
        if args.set or args.axis or args.cluster:
            raise StudyError("--table JSON prints a finished study's tables: --set, --axis and --cluster "
                             "are for running one")
        if args.file is not None:
            raise StudyError("--table JSON prints a finished study's tables: give it without a study file")
        output = read_output(args.table)
        print(markdown(output), end="")
        _plots(output, args.plots)
        return 0
    if args.file is None:
        raise StudyError("study: give a study file (scenarios/studies/*.toml) or --table JSON")
    source = Path(args.file)
    out = args.out or Path("runs") / "studies" / f"{source.stem}.json"
    say = (lambda _: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    sets = dict(parse_set(item) for item in args.set)
    axes = dict(_parse_axis(item) for item in args.axis)
    study = StudyRun(source, out, jobs=args.jobs, runs_dir=args.runs, force=args.force, say=say,
                     sets=sets, axes=axes, cluster=args.cluster)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops the study as Ctrl-C does
    try:
        output = study.run()
    except KeyboardInterrupt:
        print(f"interrupted: {len(study.done)} of {len(study.points)} points are in {out}; the same "
              "command resumes the study", file=sys.stderr)
        return EXIT_STOPPED
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(markdown(output), end="")
    _plots(output, args.plots)
    print(f"results in {out} (emulator study --table {out} prints the tables again)", file=sys.stderr)
    return 0


def _parse_axis(item: str) -> tuple[str, list[Any]]:
    """``NAME=V1,V2``: each value a TOML value, bare words taken as strings."""
    name, sep, raw = item.partition("=")
    if not sep or not name.strip() or not raw.strip():
        raise StudyError(f"--axis {item!r}: expected NAME=V1,V2, e.g. nodes=1000,2000")
    return name.strip(), [parse_set(f"v={v.strip()}")[1] for v in raw.split(",")]


def _plots(output: StudyOutput, out_dir: Path | None) -> None:
    if out_dir is not None:
        for path in write_plots(output, out_dir):
            print(f"wrote {path}", file=sys.stderr)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
