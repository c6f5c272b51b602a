"""`emulator run`, `rerun` and `validate`: the commands that load one scenario file (with its
``--set`` overrides) and run or check it."""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from rich.console import Console

from emulator.cli.args import non_negative, positive
from emulator.results.console import stopped, verdict
from emulator.scenario.checks import timing_notes
from emulator.scenario.footprint import estimate
from emulator.scenario.loader import ScenarioError, load_scenario
from emulator.scenario.schema import Scenario

if TYPE_CHECKING:
    from emulator.harness.dask_hosts import ClusterOptions


def add_run_command(sub: Any) -> None:
    r = sub.add_parser("run", help="run a scenario file and write its results")
    r.add_argument("scenario")
    r.add_argument("--out", help="results directory (default runs/<scenario name>)")
    r.add_argument("--seed", type=int, help="override run.seed")
    r.add_argument("--duration", type=positive, help="override run.duration_s")
    r.add_argument(
        "--set", action="append", metavar="KEY=VALUE",
        help="override a scenario field, e.g. --set scheduler.policy=fifo (repeatable)",
    )
    r.add_argument("--quiet", action="store_true", help="no progress bar or table (where the results "
                   "are is still said)")
    r.add_argument("--force", action="store_true", help="replace the run already in the results directory "
                   "(default: a directory holding a run is kept and this run goes to DIR-2, DIR-3, ...)")
    r.add_argument(
        "--check-invariants", action="store_true",
        help="check capacity, exactly-once tasks and RM/node agreement; stop on a violation",
    )
    r.add_argument("--serve", metavar="[HOST:]PORT",
                   help="watch the run live on a status page (real time; default host 127.0.0.1)")
    r.add_argument("--allow-control", action="store_true",
                   help="with --serve: let the page pause the run and crash or pause nodes")
    r.add_argument("--allow-host", action="append", metavar="NAME",
                   help="with --allow-control: a host name the page may be reached by for control, "
                   "besides loopback and the --serve address (repeatable; guards against DNS rebinding)")
    r.add_argument("--speed", type=positive,
                   help="with --serve: emulated seconds per wall second (default: the scenario's "
                   "speed for a realtime scenario, else 20)")
    r.add_argument("--linger", type=non_negative, metavar="SECONDS",
                   help="with --serve: keep serving this long after the run (default: until Ctrl-C)")
    r.add_argument("--cluster", metavar="ADDRESS",
                   help="a TCP scenario's node hosts as tasks on this Dask scheduler, e.g. tcp://hostA:8786 "
                   "(docs/cluster.md; pip install 'hbemu[cluster]')")
    r.add_argument("--listen", metavar="HOST:PORT",
                   help="with --cluster: where the RM listens, an address the cluster's machines reach "
                   "(default: the scenario's transport.host and port)")
    r.set_defaults(func=cmd_run)



def add_rerun_command(sub: Any) -> None:
    rr = sub.add_parser("rerun", help="run a results directory's recorded scenario again and check "
                        "that the results match")
    rr.add_argument("dir", help="results directory of `emulator run` (scenario.toml and run.json inside)")
    rr.add_argument("--out", help="results directory of the rerun (default DIR-rerun)")
    rr.add_argument("--quiet", action="store_true", help="no progress bar or table (where the results "
                    "are is still said)")
    rr.add_argument("--force", action="store_true", help="replace a run already in the rerun's directory "
                    "(default: it goes to DIR-rerun-2, ...)")
    rr.set_defaults(func=cmd_rerun)



def add_validate_command(sub: Any) -> None:
    v = sub.add_parser("validate", help="check scenario files without running them")
    v.add_argument("scenarios", nargs="+")
    v.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field")
    v.set_defaults(func=cmd_validate)


def parse_set(item: str) -> tuple[str, Any]:
    """``a.b=VALUE`` where VALUE is a TOML value; bare words are taken as strings."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(f"--set {item!r}: expected KEY=VALUE, e.g. scheduler.policy=fifo")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.strip(), value


def scenario_overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = dict(parse_set(item) for item in getattr(args, "set", None) or [])
    if getattr(args, "seed", None) is not None:
        out["run.seed"] = args.seed
    if getattr(args, "duration", None) is not None:
        out["run.duration_s"] = args.duration
    return out


SERVE_ONLY = (("allow_control", "--allow-control"), ("allow_host", "--allow-host"), ("speed", "--speed"),
              ("linger", "--linger"))


def cmd_run(args: argparse.Namespace) -> int:
    from emulator.cli.execute import run_directory
    from emulator.results.recording import fit_warmup

    if getattr(args, "listen", None) is not None and getattr(args, "cluster", None) is None:
        raise ScenarioError("--listen: only with --cluster (where the cluster's machines reach the RM)")
    if args.serve is None:
        # Silently ignoring them would run something other than what was asked for.
        flags = [flag for name, flag in SERVE_ONLY if getattr(args, name) not in (None, False)]
        if flags:
            raise ScenarioError(f"{', '.join(flags)}: only with --serve (a run on the status page)")
    else:
        from emulator.cli.processes import check_serve

        check_serve(args.serve)
    given = scenario_overrides(args)
    overrides, adjusted = fit_warmup(args.scenario, given)
    scenario = load_scenario(args.scenario, overrides)
    cluster = _cluster_options(args, scenario)
    console = Console(stderr=True, quiet=args.quiet)
    _print_notes(args.scenario, scenario)
    force = bool(getattr(args, "force", False))
    out = _results_directory(Path(args.out) if args.out else Path("runs") / Path(args.scenario).stem, force)
    # `rerun` replays the original's choice (`check`), whatever HBEMU_CHECK_INVARIANTS says now.
    check = True if args.check_invariants else getattr(args, "check", None)
    served = args.serve is not None
    with run_directory(out, args.scenario, scenario, given, adjusted, check, served, force) as rec:
        status = _run(args, scenario, out, console, check, cluster)
        rec.finish(status)
        return status


def _results_directory(requested: Path, force: bool) -> Path:
    """Never over an earlier run unasked: ``runs/quickstart`` holding one, the run goes to
    ``runs/quickstart-2`` (said on stderr) unless ``--force`` replaces it."""
    from emulator.results.rundir import fresh_directory

    out = fresh_directory(requested, force)
    if out != requested:
        print(f"note: {requested}/ holds an earlier run; this run goes to {out}/ "
              "(--force replaces the earlier one)", file=sys.stderr)
    return out


def cmd_rerun(args: argparse.Namespace) -> int:
    from emulator.results.record import RECORD_FILE, SCENARIO_FILE, load_record
    from emulator.results.recording import report_rerun

    src = Path(args.dir)
    try:
        record = load_record(src)
    except FileNotFoundError:
        raise ScenarioError(f"{src}: no {RECORD_FILE}: not the directory of an `emulator run`") from None
    except (OSError, msgspec.DecodeError) as err:
        raise ScenarioError(f"{src}/{RECORD_FILE}: cannot be read: {err}") from None
    if record.command == "rm":
        raise ScenarioError(f"{src}: made by `emulator {record.command}` (an RM serving nodes over TCP): "
                            f"start it again with `emulator {record.command} {src / SCENARIO_FILE}`")
    requested = Path(args.out) if args.out else src.with_name(src.resolve().name + "-rerun")
    if requested.resolve() == src.resolve():
        raise ScenarioError(f"--out {requested}: the rerun would overwrite the run it reproduces")
    out = _results_directory(requested, args.force)
    # The recorded scenario already holds every override; the run's options are replayed as they were.
    run_args = argparse.Namespace(
        scenario=str(src / SCENARIO_FILE), out=str(out), seed=None, duration=None, set=None,
        quiet=args.quiet, check_invariants=False, check=record.check_invariants, serve=None,
        allow_control=False, allow_host=None, speed=None, linger=None, force=args.force,
    )
    if record.served:
        print(f"rerun: {src} was run on a status page (paced real time); this rerun is not served",
              file=sys.stderr)
    return report_rerun(src, out, record, cmd_run(run_args))


def _cluster_options(args: argparse.Namespace, scenario: Scenario) -> ClusterOptions | None:
    """``--cluster`` / ``--listen`` (docs/cluster.md): only for a TCP scenario run unserved."""
    from emulator.cli.processes import parse_address
    from emulator.harness.dask_hosts import ClusterOptions

    if getattr(args, "cluster", None) is None:
        return None
    if scenario.transport.kind != "tcp":
        raise ScenarioError(f'{args.scenario}: at `transport.kind`: --cluster needs "tcp" (nodes in worker '
                            f'processes), got "{scenario.transport.kind}"; or add --set transport.kind=tcp')
    if args.serve is not None:
        raise ScenarioError("--cluster: not with --serve")
    listen = parse_address(args.listen, "--listen") if args.listen is not None else None
    if listen is not None and listen[0] in ("0.0.0.0", "::", ""):
        raise ScenarioError(f"--listen {args.listen}: give an address of this machine that the cluster's "
                            "machines reach (it is told to them), not a wildcard")
    return ClusterOptions(args.cluster, listen)


def _run(args: argparse.Namespace, scenario: Scenario, out: Path, console: Console,
         check: bool | None, cluster: ClusterOptions | None = None) -> int:
    from emulator.cli.execute import execute
    from emulator.results.console import RunProgress, summary_table

    if args.serve is not None:
        from emulator.web.serve import run_served

        status = run_served(args, scenario, out, console)
        if args.quiet:  # the page's own lines are quiet; where the results are is always said
            print(f"results in {out}/", file=sys.stderr)
        return status
    console.print(
        f"[bold]{scenario.name or args.scenario}[/]: {scenario.node_count} nodes, "
        f"{scenario.heartbeat.mode} heartbeats every {scenario.heartbeat.interval_s:g}s, "
        f"{scenario.scheduler.policy}, {scenario.run.duration_s:g}s emulated ({scenario.run.clock})"
    )
    if cluster is not None:
        console.print(f"node hosts on the Dask cluster at {cluster.address}")
    if args.quiet:
        outcome, summary = execute(scenario, out, check=check, cluster=cluster)
    else:
        speed = scenario.run.speed if scenario.run.clock == "realtime" else None
        with RunProgress(scenario.run.duration_s, console, speed) as bar:
            outcome, summary = execute(scenario, out, bar.update, check, cluster=cluster,
                                       emulated=bar.emulated)
    if outcome.partial:
        # Stopped by Ctrl-C / SIGTERM: one line, the partial results are on disk.
        return stopped(outcome, out)
    Console(quiet=args.quiet).print(summary_table(summary, outcome.wall_s))
    # Said with --quiet too: a run may have gone to another directory than asked (runs/NAME-2).
    print(f"results in {out}/ (summary.json, timeseries.csv, events.jsonl, report.html, *.png)",
          file=sys.stderr)
    return verdict(outcome, console)


def _print_notes(path: str, sc: Scenario) -> None:
    for note in timing_notes(sc):
        print(f"note: {path}: at `{note.path}`: {note.message}", file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    for path in args.scenarios:
        sc = load_scenario(path, scenario_overrides(args))
        _print_notes(path, sc)
        mib = estimate(sc).total / (1 << 20)
        print(f"{path}: ok ({sc.node_count} nodes, {len(sc.workload.operations)} operations, "
              f"needs at most about {mib:,.0f} MiB of memory)")
    return 0
