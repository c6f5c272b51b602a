"""`emulator import FORMAT FILE -o scenario.toml`: a trace written out as a scenario, to inspect,
edit and run (``[workload.trace]`` replays one without the intermediate file)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from emulator.cli.args import count, non_negative, positive
from emulator.scenario.schema import MAX_TRACE_BYTES, MAX_TRACE_TASKS
from emulator.scenario.traces import FORMATS


def add_command(sub: Any) -> None:
    i = sub.add_parser("import", help="convert a trace (SLS, Rumen, SYNTH, Google 2011/2019, SWF, "
                       "Alibaba 2018) into a scenario file")
    i.add_argument("format", choices=FORMATS, help="the trace format")
    i.add_argument("file", type=Path, help="the trace file")
    i.add_argument("-o", "--out", type=Path, required=True, help="the scenario file to write")
    i.add_argument("--nodes", type=Path, metavar="FILE", help="SLS nodes (topology) file: the cluster")
    i.add_argument("--node-count", type=count(),
                   help="the cluster: this many nodes of --node-cpu/--node-ram-gib")
    i.add_argument("--node-cpu", type=positive, default=16.0, help="cpu per node with --node-count (16)")
    i.add_argument("--node-ram-gib", type=positive, default=64.0, help="GiB per node with --node-count (64)")
    i.add_argument("--pool", default="", help="every job in this pool (default: the trace's queue or tier)")
    i.add_argument("--sample", type=count(), default=1, help="keep every n-th job (default 1: all)")
    i.add_argument("--start-s", type=non_negative, default=0.0, help="skip the trace's first seconds")
    i.add_argument("--span-s", type=positive, help="keep jobs submitted within this many seconds")
    i.add_argument("--max-jobs", type=count(), help="keep at most this many jobs")
    i.add_argument("--rebase", action="store_true", default=None,
                   help="submit the first kept job at 0 (default: SLS and SYNTH keep their absolute submit "
                   "times, Rumen's count from its first job; Google, Alibaba and SWF traces are re-based)")
    i.add_argument("--no-am", dest="am", action="store_false",
                   help="no AM container per job (SLS, Rumen, SYNTH run one: 1 vcore / 1 GiB)")
    i.add_argument("--am-type", action="append", default=[], metavar="TYPE=KIND", dest="am_types",
                   type=am_type_mapping,
                   help="SLS: run the trace's AM type TYPE as KIND (mapreduce, dag or stream), as SLS's "
                   "yarn.sls.am.type.TYPE names a simulator; repeatable (default: other types are skipped)")
    i.add_argument("--scale", type=positive, default=1.0, dest="time_scale",
                   help="multiply trace times by this (0.1: ten times faster)")
    i.add_argument("--machine-cpu", type=positive, default=32.0,
                   help="Google 2011/2019: cpu of the largest machine (32)")
    i.add_argument("--machine-ram-gib", type=positive, default=128.0,
                   help="Google 2011/2019, Alibaba 2018: GiB of the largest machine (128)")
    i.add_argument("--machine-events", type=Path, metavar="FILE",
                   help="Google 2011: the machine_events table, the cluster")
    i.add_argument("--instances", type=Path, metavar="FILE",
                   help="Alibaba 2018: batch_instance.csv, each instance's own run")
    i.add_argument("--collections", type=Path, metavar="FILE",
                   help="Google 2019: collection_events, the jobs' submit times and priorities")
    i.add_argument("--queues", type=Path, metavar="FILE",
                   help="a YARN fair-scheduler.xml: its queues become pools (and root's policy the "
                   "scheduler's)")
    i.add_argument("--max-tasks", type=count(high=100_000_000), default=MAX_TRACE_TASKS,
                   help=f"refuse a trace of more tasks than this, before expanding it ({MAX_TRACE_TASKS:,})")
    i.add_argument("--max-bytes", type=count(high=1 << 40), default=MAX_TRACE_BYTES,
                   help=f"refuse a trace file larger than this ({MAX_TRACE_BYTES:,})")
    i.add_argument("--policy", help="scheduler.policy of the scenario (default: the emulator's default)")
    i.add_argument("--duration-s", type=positive, help="run length (default: 1.5 x the last job's ideal end)")
    i.add_argument("--run", type=Path, metavar="DIR",
                   help="then run the scenario into DIR, as `emulator run SCENARIO --out DIR` would")
    i.set_defaults(func=cmd_import)


def am_type_mapping(text: str) -> tuple[str, str]:
    """``spark=dag`` -> ("spark", "dag")."""
    name, sep, kind = text.partition("=")
    if not sep or not name.strip() or kind.strip() not in ("mapreduce", "dag", "stream"):
        raise argparse.ArgumentTypeError(f"expected TYPE=mapreduce, TYPE=dag or TYPE=stream, got {text!r}")
    return name.strip(), kind.strip()


def cmd_import(args: argparse.Namespace) -> int:
    import msgspec

    from emulator.results.record import to_toml
    from emulator.scenario.loader import ScenarioError, scenario_from_dict
    from emulator.scenario.schema import TraceConfig
    from emulator.scenario.traces.convert import import_scenario, trace_limits
    from emulator.scenario.traces.model import NodeGroup, TraceError
    from emulator.scenario.traces.sls import read_nodes

    cfg = TraceConfig(
        format=args.format, path=str(args.file), pool=args.pool, sample=args.sample, start_s=args.start_s,
        span_s=args.span_s, max_jobs=args.max_jobs, time_scale=args.time_scale, rebase=args.rebase,
        am=args.am, am_types=dict(args.am_types), machine_cpu=args.machine_cpu,
        machine_ram_gib=args.machine_ram_gib, max_tasks=args.max_tasks, max_bytes=args.max_bytes,
        machine_events=str(args.machine_events or ""), instances=str(args.instances or ""),
        collections=str(args.collections or ""),
    )
    try:
        nodes = None
        if args.nodes is not None:
            nodes, warnings = read_nodes(args.nodes, trace_limits(cfg))
            for w in warnings:
                print(f"warning: {w}", file=sys.stderr)
        elif args.node_count is not None:
            nodes = [NodeGroup(args.node_count, args.node_cpu, args.node_ram_gib)]
        with progress_bar(f"reading {args.file.name}") as progress:
            data, trace = import_scenario(cfg, args.file, nodes, args.policy, args.duration_s, progress)
        queue_warnings = []
        if args.queues is not None:
            from emulator.scenario.traces import queues

            allocations = queues.read(args.queues, queues.cluster_total(data))
            queue_warnings = queues.apply(data, allocations, args.queues)
    except TraceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for w in [*trace.warnings, *queue_warnings]:
        print(f"warning: {w}", file=sys.stderr)
    try:
        scenario = scenario_from_dict(msgspec.json.decode(msgspec.json.encode(data)), str(args.out),
                                      args.out.parent)
    except ScenarioError as err:
        print(f"error: the scenario made of {args.file} is not valid: {err}", file=sys.stderr)
        return 2
    header = "".join(f"# {n}\n" for n in trace.notes)
    text = f"# emulator import {args.format} {args.file}\n{header}\n" + to_toml(data)
    args.out.write_text(text, encoding="utf-8")
    jobs = len({o.get("job", o["name"]) for o in data["workload"]["operations"]})
    ops = scenario.workload.operations
    tasks = sum(o.task_count for o in ops if not o.lasts_for_job)
    ams = sum(o.task_count for o in ops if o.lasts_for_job)
    print(f"{args.out}: {jobs} jobs, {len(ops)} operations, {tasks} tasks"
          f"{f' and {ams} AM containers' if ams else ''}, {scenario.node_count} nodes, run "
          f"{scenario.run.duration_s:g} s")
    if args.run is None:
        return 0
    from emulator.cli.run import cmd_run

    return cmd_run(argparse.Namespace(
        scenario=str(args.out), out=str(args.run), seed=None, duration=None, set=None, quiet=False,
        check_invariants=False, check=None, serve=None, allow_control=False, allow_host=None, speed=None,
        linger=None))


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A bar over the bytes of a trace read, on a terminal; nothing otherwise (a pipe, a log)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
