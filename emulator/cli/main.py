"""`emulator` command line: run, rerun, validate, report, bench, ... (grouped in `--help`)."""

from __future__ import annotations

import argparse
import errno
import socket
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from rich.console import Console

from emulator.cli.args import count, non_negative, positive
from emulator.cli.figures import add_command as add_figures_command
from emulator.cli.fuzz import add_command as add_fuzz_command
from emulator.cli.processes import add_commands as add_tcp_commands
from emulator.cli.schema import add_command as add_schema_command
from emulator.cli.traces import add_command as add_import_command
from emulator.experiments.e1 import add_command as add_e1_command
from emulator.experiments.e4 import add_command as add_e4_command
from emulator.experiments.e5 import add_commands as add_borg_commands
from emulator.experiments.efficiency import add_command as add_efficiency_command
from emulator.experiments.recovery import add_command as add_recovery_command
from emulator.experiments.reliability import add_command as add_reliability_command
from emulator.experiments.sweep import add_command as add_sweep_command
from emulator.experiments.usagemsgs import add_command as add_usage_messages_command
from emulator.harness.invariants import InvariantViolation
from emulator.results.console import EXIT_FAILED, EXIT_STOPPED, stopped, verdict
from emulator.scenario.checks import timing_notes
from emulator.scenario.footprint import estimate
from emulator.scenario.loader import ScenarioError, load_scenario
from emulator.scenario.schema import Scenario
from rm.journal import JournalCorrupt, JournalWriteFailed

if TYPE_CHECKING:
    from emulator.harness.dask_hosts import ClusterOptions


def _parse_set(item: str) -> tuple[str, Any]:
    """``a.b=VALUE`` where VALUE is a TOML value; bare words are taken as strings."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(f"--set {item!r}: expected KEY=VALUE, e.g. scheduler.policy=fifo")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.strip(), value


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = dict(_parse_set(item) for item in getattr(args, "set", None) or [])
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
    given = _overrides(args)
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


def _print_notes(path: str, sc: Scenario) -> None:
    for note in timing_notes(sc):
        print(f"note: {path}: at `{note.path}`: {note.message}", file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    from emulator.experiments.e5 import is_e5_file
    from emulator.experiments.e5 import load as load_e5

    for path in args.scenarios:
        if is_e5_file(Path(path)):  # an offline E5 workload (emulator e5), not a cluster scenario
            cfg = load_e5(Path(path))
            print(f"{path}: ok (E5 workload: {cfg.tasks} tasks, {len(cfg.groups)} groups)")
            continue
        sc = load_scenario(path, _overrides(args))
        _print_notes(path, sc)
        mib = estimate(sc).total / (1 << 20)
        print(f"{path}: ok ({sc.node_count} nodes, {len(sc.workload.operations)} operations, "
              f"needs at most about {mib:,.0f} MiB of memory)")
    return 0


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


class _Version(argparse.Action):
    """``--version``: the package version and the source tree's commit (asked of git only then)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the emulator's version and commit, then exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from emulator.results.record import emulator_version, source_commit

        print(f"emulator (hbemu) {emulator_version()}, commit {source_commit()}")
        parser.exit()


# `--help` lists the subcommands by group (argparse only has one flat list); a command missing
# here still shows, under "other".
COMMAND_GROUPS = {
    "run": ("run", "rerun", "report", "compare", "validate"),
    "experiments": ("e1", "e3", "e3-tcp", "sweep", "efficiency", "recovery", "reliability", "abuse",
                    "traces", "e4", "e5", "baselines", "usage-messages"),
    "processes": ("rm", "nodes"),
    "tools": ("bench", "figures", "fuzz", "import", "schema"),
}


def _group_commands(p: argparse.ArgumentParser, sub: Any) -> None:
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    listed = {c for cmds in COMMAND_GROUPS.values() for c in cmds}
    groups = {**COMMAND_GROUPS, "other": tuple(c for c in helps if c not in listed)}
    width = max(len(c) for c in helps) + 2
    lines = []
    for group, cmds in groups.items():
        present = [c for c in cmds if c in helps]
        if present:
            lines.append(f"{group}:")
            lines += [f"  {c:<{width}}{helps[c]}" for c in present]
            lines.append("")
    lines.append("`emulator COMMAND --help` describes a command.")
    p.epilog = "\n".join(lines)
    sub.help = argparse.SUPPRESS  # not the flat list too


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="emulator", description="Cluster scheduler emulator",
                                usage="emulator [-h] [--version] COMMAND ...",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", prog="emulator")

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

    rr = sub.add_parser("rerun", help="run a results directory's recorded scenario again and check "
                        "that the results match")
    rr.add_argument("dir", help="results directory of `emulator run` (scenario.toml and run.json inside)")
    rr.add_argument("--out", help="results directory of the rerun (default DIR-rerun)")
    rr.add_argument("--quiet", action="store_true", help="no progress bar or table (where the results "
                    "are is still said)")
    rr.add_argument("--force", action="store_true", help="replace a run already in the rerun's directory "
                    "(default: it goes to DIR-rerun-2, ...)")
    rr.set_defaults(func=cmd_rerun)

    rp = sub.add_parser("report", help="write report.html for one results directory, or a "
                        "side-by-side report of several")
    rp.add_argument("dirs", nargs="+", help="results directories of `emulator run`")
    rp.add_argument("--out", metavar="DIR", help="several dirs: the directory for compare.html, "
                    "compare.csv, compare.json and the plots (default runs/compare-A-vs-B...)")
    rp.set_defaults(func=cmd_report)

    v = sub.add_parser("validate", help="check scenario files without running them")
    v.add_argument("scenarios", nargs="+")
    v.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field")
    v.set_defaults(func=cmd_validate)

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
    a = sub.add_parser("abuse", help="honest TCP nodes' h1 without vs with a hostile client")
    a.add_argument("scenario", nargs="?", help="a TCP scenario, e.g. scenarios/abuse.toml")
    a.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    a.add_argument("--table", metavar="JSON", help="only print docs/security.md's table of such a file")
    a.set_defaults(func=cmd_abuse)
    add_tcp_commands(sub)
    add_sweep_command(sub)
    add_efficiency_command(sub)
    add_recovery_command(sub)
    add_e1_command(sub)
    add_borg_commands(sub)
    add_e4_command(sub)
    add_usage_messages_command(sub)
    add_reliability_command(sub)
    add_figures_command(sub)
    add_fuzz_command(sub)
    add_import_command(sub)
    add_schema_command(sub)
    _group_commands(p, sub)
    return p


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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except InvariantViolation as err:
        print(f"invariant violated: {err}", file=sys.stderr)
        return 3
    except JournalCorrupt as err:  # a run resumed or restarted from a damaged journal
        print(f"error: {err}", file=sys.stderr)
        return 2
    except JournalWriteFailed as err:  # before the run started (its first snapshot)
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except socket.gaierror as err:  # a host name that stopped resolving after it was checked
        print(f"error: cannot listen: {err.strerror}; choose another address", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
            raise
        # A server could not listen (another RM on the port, or an address not of this machine).
        print(f"error: cannot listen: {err.strerror}; choose another address or port", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_STOPPED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
