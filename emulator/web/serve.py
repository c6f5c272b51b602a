"""``emulator run FILE --serve [HOST:]PORT``: run a scenario in paced real time behind the page.

A virtual-time run finishes before a browser could draw anything, so a served run always runs
on the ``PacedClock``: emulated time advances ``speed`` times faster than wall time (the
scenario's ``run.speed`` for a real-time scenario, otherwise ``DEFAULT_LIVE_SPEED`` unless
``--speed`` says otherwise), and the page can pause it or change the speed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from emulator.harness.outcome import RunOutcome
from emulator.harness.quietgc import quiet_gc
from emulator.harness.runner import ProgressHook, RunHandle, run_scenario
from emulator.harness.tcprun import run_tcp_scenario
from emulator.results.summary import full_summary
from emulator.scenario.schema import Scenario
from emulator.time.pacing import PacedClock
from emulator.web.app import make_app, start_server
from emulator.web.events import EventTap
from emulator.web.guard import TOKEN_HEADER, allowed_hosts_for
from emulator.web.state import LiveRun

# Emulated seconds per wall second for a virtual-time scenario served live: the quick-start's
# 30 emulated minutes take 90 s to watch.
DEFAULT_LIVE_SPEED = 20.0


def live_scenario(scenario: Scenario, speed: float | None = None) -> Scenario:
    """The scenario switched to the real-time clock at the speed it will be watched at."""
    if speed is None:
        speed = scenario.run.speed if scenario.run.clock == "realtime" else DEFAULT_LIVE_SPEED
    run = msgspec.structs.replace(scenario.run, clock="realtime", speed=speed)
    return msgspec.structs.replace(scenario, run=run)


async def serve_scenario(
    scenario: Scenario,
    host: str,
    port: int,
    *,
    allow_control: bool = False,
    events_path: Path | None = None,
    progress: ProgressHook | None = None,
    on_ready: Callable[[str], None] | None = None,
    on_finished: Callable[[RunOutcome, LiveRun], None] | None = None,
    linger_s: float | None = 0.0,
    push_interval_s: float = 1.0,
    live: LiveRun | None = None,
    allowed_hosts: frozenset[str] = frozenset(),
) -> tuple[RunOutcome, LiveRun]:
    """Serve the page, run the scenario, then keep serving the final state for ``linger_s`` wall
    seconds (None: until cancelled, e.g. by Ctrl-C). ``live`` lets a caller watch the state too."""
    if live is None:
        live = LiveRun(scenario, allow_control=allow_control)
    # Control requests may name loopback, the bound address or these (``web.guard``).
    hosts = allowed_hosts_for(host) | {h.lower() for h in allowed_hosts}
    server = await start_server(make_app(live, push_interval_s, hosts), host, port)
    try:
        if on_ready is not None:
            on_ready(server.url)
        clock = PacedClock(asyncio.get_running_loop(), scenario.run.speed)
        sink: Any = events_path.open("w", encoding="utf-8") if events_path is not None else None
        tap = EventTap(live.events, sink)
        handles: list[RunHandle] = []

        def attach(handle: RunHandle) -> None:
            handles.append(handle)
            live.attach(handle.side, handle.clock, handle.log, handle.hosting.processes)

        try:
            if scenario.transport.kind == "tcp":
                # Nodes in worker processes, on their own clocks: watched, not paused or re-paced.
                outcome = await run_tcp_scenario(
                    scenario, tap, events_path.parent if events_path is not None else None, progress,
                    on_start=lambda proc: live.attach(proc.side, proc.clock, proc.log, None),
                )
            else:
                outcome = await run_scenario(scenario, clock, tap, progress, on_start=attach)
        finally:
            await _stop_cluster(handles, clock)
            tap.close()
        if tap.dropped:  # the page shows it; the file is closed
            live.events.add({"t": live.now(), "event": "run.late_events_dropped", "level": "warning",
                             "count": tap.dropped})
        # The page's end-of-run figures are summary.json's, computed once from the outcome.
        live.finish(full_summary(outcome))
        if on_finished is not None:
            on_finished(outcome, live)
        if outcome.partial:
            return outcome, live  # stopped by a signal: no lingering
        if linger_s is None:
            await asyncio.Event().wait()
        elif linger_s > 0:
            await asyncio.sleep(linger_s)  # wall time on purpose: how long a person may look
        return outcome, live
    finally:
        await server.close()


async def _stop_cluster(handles: list[RunHandle], clock: PacedClock) -> None:
    """The run is over but the page goes on serving: stop its nodes, freeze its clock (no timer
    of the run fires again: no heartbeat, ring message or fault), and let what the loop already
    holds run out before the caller closes the event file."""
    for handle in handles:
        for proc in handle.hosting.processes:
            proc.stop()
    clock.pause()
    for _ in range(3):
        await asyncio.sleep(0)


def serve_blocking(scenario: Scenario, host: str, port: int, **kwargs: Any) -> tuple[RunOutcome, LiveRun]:
    """Run ``serve_scenario`` on a fresh real-time loop (uvloop when available); Ctrl-C stops it."""
    from emulator.time.desloop import new_event_loop

    with quiet_gc(), asyncio.Runner(loop_factory=lambda: new_event_loop("realtime")) as runner:
        return runner.run(serve_scenario(scenario, host, port, **kwargs))


def run_served(args: Any, scenario: Scenario, out: Path, console: Any) -> int:
    """The ``run --serve`` path of the CLI: serve, run, write results and the report, linger."""
    from rich.console import Console

    from emulator.results.console import EXIT_STOPPED, RunProgress, stopped, summary_table, verdict
    from emulator.results.report import write_run_report
    from emulator.results.summary import write_results
    from emulator.web.app import parse_bind

    try:
        host, port = parse_bind(args.serve)
    except ValueError as err:
        console.print(f"[red]error:[/] {err}")
        return 2
    scenario = live_scenario(scenario, args.speed)
    console.print(
        f"[bold]{scenario.name or args.scenario}[/]: {scenario.node_count} nodes, "
        f"{scenario.heartbeat.mode} heartbeats every {scenario.heartbeat.interval_s:g}s, "
        f"{scenario.scheduler.policy}, {scenario.run.duration_s:g}s emulated "
        f"(real time x{scenario.run.speed:g}: {scenario.run.duration_s / scenario.run.speed:,.0f} s to watch)"
    )

    live = LiveRun(scenario, allow_control=args.allow_control)

    def ready(url: str) -> None:
        control = "control on" if args.allow_control else "read-only; --allow-control to inject faults"
        # Printed even with --quiet: without the address the page cannot be found.
        err = Console(stderr=True)
        err.print(f"[bold green]status page:[/] {url}  ({control}; {scenario.run.speed:g}x real time)")
        if live.control_token:  # for scripts; the page fetches it itself
            err.print(f"control token ({TOKEN_HEADER} header): {live.control_token}", highlight=False)

    codes: list[int] = []
    bars: list[RunProgress] = []

    def finished(outcome: RunOutcome, live: LiveRun) -> None:
        for bar in bars:
            bar.emulated(outcome)
        summary = write_results(outcome, out)
        report = write_run_report(out)
        live.results_dir = str(out)
        if outcome.partial:
            codes.append(stopped(outcome, out))
            return
        Console(quiet=args.quiet).print(summary_table(summary, outcome.wall_s))
        console.print(f"results in {out}/ (summary.json, timeseries.csv, events.jsonl, {report.name})")
        codes.append(verdict(outcome, console))
        if args.linger is None:
            console.print(f"run finished; results in {out}/ — still serving the final state, Ctrl-C to quit")

    with RunProgress(scenario.run.duration_s, console, scenario.run.speed) as bar:
        bars.append(bar)
        serve_blocking(
            scenario, host, port, allow_control=args.allow_control, events_path=out / "events.jsonl",
            progress=None if args.quiet else bar.update, on_ready=ready, on_finished=finished,
            linger_s=args.linger, live=live, allowed_hosts=frozenset(args.allow_host or ()),
        )
    return codes[0] if codes else EXIT_STOPPED
