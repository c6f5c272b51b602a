"""`emulator rm` and `emulator nodes`: the RM and the NodeManagers as separate processes (TCP)."""

from __future__ import annotations

import argparse
import errno
import os
import random
import shlex
import socket
import sys
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from emulator.cli.args import count, number, positive
from emulator.cli.nodes_progress import NodesProgress, where_results
from emulator.harness.nodehost import HostConfig, HostReport, NodeSpec, run_workers
from emulator.scenario.credentials import (
    CredentialsError,
    MissingSecretError,
    generate_secret,
    read_secret,
    require_secret,
    with_run_secret,
)
from emulator.scenario.loader import ScenarioError, load_scenario
from emulator.scenario.schema import Scenario
from emulator.time.clock import unix_time
from nodemanager.config import HeartbeatConfig
from rm.protocol import MAX_NODE_RESOURCE, Resources


def parse_address(text: str, flag: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ScenarioError(f"{flag}: expected HOST:PORT (e.g. 127.0.0.1:7077), got {text!r}")
    return host or "127.0.0.1", int(port)


def check_host(host: str, flag: str) -> None:
    """Refuse a host name that does not resolve, before anything is started or written."""
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as err:
        reason = err.strerror if isinstance(err, socket.gaierror) else str(err)
        raise ScenarioError(f"{flag}: cannot resolve the host {host!r}: {reason}") from None


def check_serve(text: str) -> None:
    """--serve's address, checked before a run directory is claimed or anything starts."""
    from emulator.web.app import parse_bind

    try:
        host, _ = parse_bind(text)
    except ValueError as err:
        raise ScenarioError(str(err)) from None
    check_host(host, "--serve")


class RMRun(msgspec.Struct):
    """``rm-run.json``: what a restarted ``emulator rm`` needs to take over its run."""

    scenario: str
    epoch: float  # Unix time of emulated t = 0
    speed: float
    finished: bool = False


def cmd_rm(args: argparse.Namespace) -> int:
    from emulator.results.recording import fit_warmup, recorded
    from emulator.results.rundir import claim

    host, port = parse_address(args.listen, "--listen")
    check_host(host, "--listen")
    if args.serve is not None:
        check_serve(args.serve)
    given: dict[str, Any] = {"run.clock": "realtime", "transport.kind": "tcp"}
    if args.duration is not None:
        given["run.duration_s"] = args.duration
    overrides, adjusted = fit_warmup(args.scenario, given, hint="")
    scenario = load_scenario(args.scenario, overrides)
    try:
        require_secret(scenario, host)  # before anything binds
    except MissingSecretError as err:
        raise ScenarioError(f"--listen {args.listen}: {err}") from None
    if scenario.rm.journal is None:
        # An RM process keeps its journal, so that a new process can take its work over.
        scenario = msgspec.structs.replace(scenario, rm=msgspec.structs.replace(scenario.rm, journal=True))
    out = Path(args.out) if args.out else Path("runs") / f"{Path(args.scenario).stem}-rm"
    with claim(out), recorded(out, "rm", args.scenario, scenario, given, adjusted) as rec:
        status = _serve_rm(args, scenario, out, host, port)
        rec.finish(status)
        return status


def _takeover(args: argparse.Namespace, scenario: Scenario, out: Path) -> tuple[float, float | None]:
    """The run's epoch, and when its earlier RM process died (None: a new run)."""
    from emulator.time.clock import unix_time

    record_path, journal = out / "rm-run.json", out / "rm-journal.jsonl"
    prior = msgspec.json.decode(record_path.read_bytes(), type=RMRun) if record_path.exists() else None
    unfinished = prior is not None and not prior.finished and journal.exists()
    if args.recover and not unfinished:
        raise ScenarioError(f"--recover: {out}/ holds no unfinished run of an RM process to take over")
    if prior is not None and unfinished:
        if not scenario.journaled:
            raise ScenarioError(f"{out}/ holds an unfinished run, but `rm.journal = false`: "
                                "give another --out")
        if prior.scenario != scenario.name or prior.speed != scenario.run.speed:
            raise ScenarioError(
                f"{out}/ holds an unfinished run of scenario {prior.scenario!r} at speed {prior.speed:g}: "
                "resume it with the same scenario and speed, or give another --out"
            )
        if args.start_at is not None and args.start_at != prior.epoch:
            raise ScenarioError(f"--start-at: the run in {out}/ started at {prior.epoch} (Unix time)")
        died = (journal.stat().st_mtime - prior.epoch) * prior.speed
        print(f"resuming the run in {out}/ from its journal (its RM process stopped at t={died:.1f} s)",
              file=sys.stderr, flush=True)
        return prior.epoch, max(0.0, died)
    for stale in ("rm-journal.jsonl", "workload.jsonl"):
        (out / stale).unlink(missing_ok=True)
    epoch = args.start_at if args.start_at is not None else unix_time()
    record_path.write_bytes(msgspec.json.encode(RMRun(scenario.name, epoch, scenario.run.speed)))
    return epoch, None


def _serve_rm(args: argparse.Namespace, scenario: Scenario, out: Path, host: str, port: int) -> int:
    from emulator.harness.outcome import RunOutcome
    from emulator.harness.tcprun import serve_rm
    from emulator.results.console import stopped, summary_table, verdict
    from emulator.results.summary import write_results
    from emulator.time.clock import run

    epoch, resumed_from = _takeover(args, scenario, out)
    made_secret = not scenario.rm.credentials
    if made_secret:
        scenario = with_run_secret(scenario, _loopback_secret(out, resumed_from is not None))

    def announce(rm_host: str, rm_port: int) -> None:
        # The exact command that starts this run's nodes (the secret by file, never on a command line).
        where = socket.gethostname() if rm_host in ("0.0.0.0", "::", "") else rm_host
        where = f"[{where}]" if ":" in where else where
        secret = f" --credentials-file {shlex.quote(str(out / SECRET_FILE))}" if made_secret else ""
        duration = f" --duration {args.duration:g}" if args.duration is not None else ""
        print(f"start its nodes: emulator nodes --connect {where}:{rm_port} --scenario "
              f"{shlex.quote(args.scenario)} --start-at {epoch:.3f}{duration}{secret}",
              file=sys.stderr, flush=True)

    async def main(_: Any) -> RunOutcome:
        live = server = None
        if args.serve is not None:
            from emulator.web.app import make_app, parse_bind, start_server
            from emulator.web.events import EventTap
            from emulator.web.state import LiveRun

            web_host, web_port = parse_bind(args.serve)
            live = LiveRun(scenario)  # read-only: an RM alone has no nodes to crash from the page
            server = await start_server(make_app(live), web_host, web_port)
            print(f"status page: {server.url}", file=sys.stderr, flush=True)

        def attach(proc: Any) -> None:
            if live is not None:
                live.attach(proc.side, proc.clock, proc.log, None)

        try:
            mode = "w" if resumed_from is None else "a"  # a resumed run's events follow the earlier ones
            with (out / "events.jsonl").open(mode, encoding="utf-8") as sink:
                tap: Any = sink if live is None else EventTap(live.events, sink)
                proc, wall, finished = await serve_rm(scenario, host, port, epoch, out, tap,
                                                      on_start=attach, resumed_from=resumed_from,
                                                      announce=announce)
        finally:
            if live is not None:
                live.finish()
            if server is not None:
                await server.close()
        outcome = proc.outcome(wall, [], finished)
        # h1 needs the nodes' counters: see the `emulator nodes` table.
        outcome.h1, outcome.h2 = None, proc.rm_side_h2()
        return outcome

    try:
        outcome: RunOutcome = run(main, "realtime", scenario.run.speed)
    except OSError as err:
        if resumed_from is None and err.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
            # It never served: leave nothing that a later start would take for a run to resume.
            for name in ("rm-run.json", "rm-journal.jsonl", "workload.jsonl", "run.json", "scenario.toml"):
                (out / name).unlink(missing_ok=True)
        raise
    summary = write_results(outcome, out)
    if outcome.partial:
        return stopped(outcome, out, " (start `emulator rm` on it again to resume the run)")
    record_path = out / "rm-run.json"
    record = msgspec.json.decode(record_path.read_bytes(), type=RMRun)
    record_path.write_bytes(msgspec.json.encode(msgspec.structs.replace(record, finished=True)))
    console = Console(quiet=args.quiet, width=140)
    console.print(summary_table(summary, outcome.wall_s))
    console.print(costs_table(summary["costs"]))
    print(f"results in {out}/ (node-side counters are in the `emulator nodes` output)", file=sys.stderr)
    return verdict(outcome, Console(stderr=True, quiet=args.quiet))


SECRET_FILE = "rm-secret"


def _loopback_secret(out: Path, resumed: bool) -> str:
    """A secret for a loopback RM given none: the run's own (kept in ``out`` for its nodes and for
    an RM process that takes the run over)."""
    path = out / SECRET_FILE
    if resumed and path.exists():
        secret = path.read_text(encoding="utf-8").strip()
        if secret:
            return secret
    secret = generate_secret()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(secret + "\n")
    print(f"no shared secret given: made one for this run in {path} "
          f"(emulator nodes --credentials-file {path})", file=sys.stderr, flush=True)
    return secret


def node_configs(args: argparse.Namespace, host: str, port: int) -> list[HostConfig]:
    from emulator.harness.hostconfigs import NodeRangeError, host_configs, split

    if args.scenario:
        sc = load_scenario(args.scenario, {"run.clock": "realtime"})
        try:
            # The same hosts as an in-process TCP run: with the ring on, each carries ring liveness.
            return host_configs(
                sc, host, port, args.workers, args.start_at, None, first=args.first_id, count=args.count,
                # An option names the secret of an RM that made its own (a loopback run without one).
                credentials=_node_secret(args) or sc.rm.credentials, duration_s=args.duration,
                peer_host=args.peer_host or local_address(host),
            )
        except NodeRangeError as err:
            given = f" --count {args.count}" if args.count is not None else ""
            raise ScenarioError(f"{args.scenario}: --first-id {args.first_id}{given}: {err}") from None
    hb = HeartbeatConfig(mode=args.mode, interval_s=args.interval)
    if hb.mode == "delta":
        print("warning: --mode delta without --scenario: these nodes carry no ring monitor, and an RM "
              "running the ring would find them silent; start them with --scenario", file=sys.stderr)
    prefix = args.name_prefix or socket.gethostname()
    rng = random.Random(f"{args.first_id}:phase")
    specs = [
        NodeSpec(f"{prefix}-{args.first_id + i:06d}", Resources(args.cpu, args.ram_gib),
                 rng.uniform(0, hb.interval_s))
        for i in range(args.count)
    ]
    return [
        HostConfig(host=host, port=port, nodes=chunk, heartbeat=hb, credentials=_node_secret(args),
                   speed=args.speed, epoch=args.start_at, duration_s=args.duration,
                   sample_interval_s=hb.interval_s, seed=i)
        for i, chunk in enumerate(split(specs, args.workers))
        if chunk
    ]


def local_address(rm_host: str) -> str:
    """The address of this machine that the RM's host reaches it by (where a node host's peer
    endpoint listens, for the ring's watchers on other hosts). Sends nothing."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((rm_host, 9))
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def _node_secret(args: argparse.Namespace) -> str:
    """The shared secret from --credentials-env / --credentials-file (or, visible to anyone who
    can list processes, --credentials)."""
    given = [f for f in ("credentials", "credentials_env", "credentials_file") if getattr(args, f)]
    if len(given) > 1:
        raise ScenarioError("give the shared secret one way only: --credentials, --credentials-env or "
                            "--credentials-file")
    try:
        return args.credentials or read_secret(args.credentials_env, args.credentials_file, Path.cwd(),
                                               names=("--credentials-env", "--credentials-file"))
    except CredentialsError as err:
        raise ScenarioError(f"emulator nodes: {err}") from None


def cmd_nodes(args: argparse.Namespace) -> int:
    host, port = parse_address(args.connect, "--connect")
    if port == 0:
        raise ScenarioError("--connect: the RM's port is needed (it prints it when it starts)")
    if args.count is None and not args.scenario:
        raise ScenarioError("--count: how many NodeManagers to host (or --scenario FILE, for its nodes)")
    configs = node_configs(args, host, port)
    try:
        with NodesProgress(configs, Console(stderr=True, quiet=args.quiet), unix_time):
            reports = run_workers(configs)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    Console(quiet=args.quiet, width=140).print(workers_table(reports))
    if args.report:
        Path(args.report).write_bytes(msgspec.json.format(msgspec.json.encode(reports)))
    status = _registered(reports, args.connect)
    if status == 0:
        print(where_results(args.connect, args.report), file=sys.stderr)  # --quiet too
    return status


def _registered(reports: list[HostReport], rm: str) -> int:
    """0 if any node registered; otherwise one error line saying why none did, and 1."""
    nodes = sum(r.nodes for r in reports)
    registered = sum(r.counters.registrations for r in reports)
    refused = sum(r.counters.registrations_refused for r in reports)
    if refused and registered:
        print(f"warning: the RM at {rm} refused {refused:,} of the {nodes:,} nodes' registrations "
              "(its events.jsonl says why)", file=sys.stderr)
    if registered or not nodes:
        return 0
    proofs = sum(r.transport.get("proofs_refused", 0) for r in reports)
    if proofs:
        why = (f"it refused their proof of the shared secret ({proofs:,} connections closed after it): a "
               "wrong shared secret (--credentials-file; an RM given none keeps its own in its --out "
               "directory, rm-secret)")
    elif refused:
        why = (f"it refused them ({refused:,} refusals): a wrong shared secret (--credentials-file; an "
               "RM given none keeps its own in its --out directory, rm-secret) or nodes it does not accept")
    else:
        why = "it answered none of their registrations (is its run going on, at that address?)"
    print(f"error: none of the {nodes:,} nodes registered with the RM at {rm}: {why}", file=sys.stderr)
    return 1


def workers_table(reports: list[HostReport]) -> Table:
    t = Table(title="node worker processes")
    for col in ("worker", "nodes", "hb sent", "responses", "h1 (node side)", "lateness p99 s",
                "RSS MiB", "KiB / node", "CPU s", "reconnects"):
        t.add_column(col, justify="right")
    for i, r in enumerate(reports):
        # Whole intervals only: not the first (registration) nor the last (answers still due).
        inner = r.intervals[1:-1]
        ratios = [iv.responses / iv.sent for iv in inner if iv.sent > 0]
        t.add_row(
            str(i), f"{r.nodes:,}", f"{r.counters.heartbeats_sent:,}",
            f"{r.counters.heartbeat_responses:,}", f"{min(ratios):.4f}" if ratios else "n/a",
            f"{r.lateness_s.p99:.4f}", f"{r.max_rss_kib / 1024:.0f}",
            f"{r.max_rss_kib / max(r.nodes, 1):.1f}", f"{r.cpu_s:.1f}", str(r.transport["reconnects"]),
        )
    return t


def costs_table(costs: dict[str, Any]) -> Table:
    t = Table(title=f"RM costs (wall time, speed {costs['speed']:g})")
    for col in ("item", "count", "mean µs", "p50 µs", "p99 µs", "max µs"):
        t.add_column(col, justify="right")
    for kind, h in costs["busy_us_by_type"].items():
        t.add_row(kind, f"{int(h['count']):,}", f"{h['mean']:.2f}", f"{h['p50']:.2f}", f"{h['p99']:.2f}",
                  f"{h['max']:.0f}")
    t.caption = (
        f"RM CPU {costs['rm_cpu_percent']:.1f}%, busy fraction {costs['rm_busy_fraction']:.3f}, "
        f"{costs['rm_cost_us_per_heartbeat']} µs per heartbeat"
    )
    return t


def add_commands(sub: Any) -> None:
    r = sub.add_parser("rm", help="run the RM alone, serving nodes over TCP")
    r.add_argument("scenario", help="scenario file (rm, scheduler, workload, run sections are used)")
    r.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT to listen on (default 127.0.0.1:0)")
    r.add_argument("--duration", type=positive, help="override run.duration_s")
    r.add_argument("--start-at", type=float, help="Unix time of emulated t=0 (default: now)")
    r.add_argument("--out", help="results directory (default runs/<scenario>-rm); an unfinished run in "
                   "it (its RM process died) is resumed from its journal")
    r.add_argument("--recover", action="store_true",
                   help="insist on resuming: fail if the results directory holds no unfinished run")
    r.add_argument("--serve", metavar="[HOST:]PORT", help="serve the live status page (read-only)")
    r.add_argument("--quiet", action="store_true")
    r.set_defaults(func=cmd_rm)

    n = sub.add_parser("nodes", help="host NodeManagers in worker processes, connecting to an RM")
    n.add_argument("--connect", required=True, help="the RM's HOST:PORT")
    n.add_argument("--count", type=count(), help="number of NodeManagers (with --scenario: default, "
                   "the scenario's from --first-id on)")
    n.add_argument("--workers", type=count(high=1024), default=1, help="worker processes (default 1)")
    n.add_argument("--first-id", type=int, default=0, help="index of the first node (several hosts)")
    n.add_argument("--scenario", help="take nodes first-id.. and heartbeat/run settings from this file")
    n.add_argument("--mode", choices=("periodic", "delta"), default="periodic")
    n.add_argument("--interval", type=positive, default=3.0, help="heartbeat interval, emulated s")
    n.add_argument("--cpu", type=number(0, high=MAX_NODE_RESOURCE), default=20.0)
    n.add_argument("--ram-gib", type=number(0, high=MAX_NODE_RESOURCE), default=40.0)
    n.add_argument("--speed", type=positive, default=1.0, help="emulated s per wall s (match the RM)")
    n.add_argument("--duration", type=positive, help="emulated s to run (default: until Ctrl-C)")
    n.add_argument("--start-at", type=float, help="Unix time of emulated t=0 (match the RM)")
    n.add_argument("--credentials", default="", help="shared secret (prefer the two options below: "
                   "a command line is visible to every user of the machine)")
    n.add_argument("--credentials-env", default="", metavar="VAR", help="read the secret from this variable")
    n.add_argument("--credentials-file", default="", metavar="PATH", help="read the secret from this file")
    n.add_argument("--peer-host", help="with --scenario and the ring on: the interface the ring's "
                   "peer endpoint listens on (default: the one that reaches the RM)")
    n.add_argument("--name-prefix", help="node address prefix (default: host name)")
    n.add_argument("--report", metavar="PATH", help="also write the workers' reports (counters) as JSON")
    n.add_argument("--quiet", action="store_true")
    n.set_defaults(func=cmd_nodes)
