"""A rich progress bar over emulated time, plus the end-of-run summary table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import Tick, run_blocking
from emulator.results import registry
from emulator.scenario.schema import Scenario
from emulator.time.clock import wall_time


class RunProgress:
    """Emulated time against wall time: "emulating" with an ETA, then "writing results" at 100%;
    a real-time run that falls behind says so once, with what to change, while it runs."""

    def __init__(self, duration_s: float, console: Console, speed: float | None = None) -> None:
        """``speed``: a real-time run's speed, named in the advice when it falls behind."""
        self._speed = speed
        self._warned = False
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("t={task.completed:,.0f}/{task.total:,.0f}s"),
            TextColumn("{task.fields[hb]:>9,.0f} hb/s"),
            TextColumn("now: cpu {task.fields[cpu]:6.1%} ram {task.fields[ram]:6.1%}"),
            TextColumn("{task.fields[lag]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task("emulating", total=duration_s, hb=0.0, cpu=0.0, ram=0.0, lag="")
        self._last_wall = wall_time()
        self._last_sent = 0

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def update(self, tick: Tick) -> None:
        now = wall_time()
        dt = now - self._last_wall
        if dt < 0.2:
            return
        row = tick.row
        rate = (tick.heartbeats - self._last_sent) / dt
        self._last_wall, self._last_sent = now, tick.heartbeats
        lag = ""
        if tick.lag_s is not None:
            behind = tick.lag_s > tick.lag_threshold_s
            lag = f"[{'bold red' if behind else 'dim'}]lag {tick.lag_s:.2f}s{' BEHIND' if behind else ''}[/]"
        self._progress.update(
            self._task, completed=row.t_s, hb=rate, cpu=row.cpu_utilization, ram=row.ram_utilization, lag=lag
        )
        if tick.lag_s is not None and tick.lag_s > tick.lag_threshold_s and not self._warned:
            self._warned = True
            speed = f" (now {self._speed:g})" if self._speed is not None else ""
            self._progress.console.print(
                f"[bold red]falling behind real time[/] at t={row.t_s:,.0f}s (lag {tick.lag_s:.2f}s, "
                f"threshold {tick.lag_threshold_s:.2f}s): if it goes on, the run will be marked overloaded; "
                f"lower `run.speed`{speed} or the number of nodes (--set run.speed=..., "
                "--set cluster.nodes=...), or close what else runs on this machine"
            )

    def emulated(self, outcome: RunOutcome) -> None:
        """The run is over (or stopped): the bar to where it got, and the results being written."""
        task = self._progress.tasks[0]
        end = outcome.ended_at_s if outcome.partial and outcome.ended_at_s is not None else task.total
        self._progress.update(self._task, completed=end, description="writing results")


def run_with_progress(scenario: Scenario, console: Console, events_path: Path | None = None,
                      check_invariants: bool | None = None) -> RunOutcome:
    """One run of an experiment, with the progress bar unless ``console`` is quiet."""
    if console.quiet:
        return run_blocking(scenario, events_path, check_invariants=check_invariants)
    with RunProgress(scenario.run.duration_s, console) as bar:
        return run_blocking(scenario, events_path, bar.update, check_invariants)


def summary_table(summary: dict[str, Any], wall_s: float) -> Table:
    window = f"{summary['warmup_s']:g}–{summary['duration_s']:g} s"
    t = Table(title=f"{summary['scenario'] or 'scenario'} — {summary['nodes']} nodes, "
              f"{summary['heartbeat_mode']} heartbeats, {summary['policy']}",
              caption=f"utilisation: mean over {window}\ncounts: whole run")
    t.add_column("metric")
    t.add_column("value", justify="right")
    # The registry's whole-run metrics that apply to this scenario (faults, jobs, usage ...).
    for metric, text in registry.rows(summary):
        t.add_row(metric.label, text)
    t.add_row("wall time (s)", f"{wall_s:.2f}")
    ops = Table(title="operations", caption=f"shares: means over {window}; running: at the end")
    for col in ("name", "pool", "running", "completed", "dominant share", "fair share"):
        ops.add_column(col, justify="left" if col in ("name", "pool") else "right")
    for op in summary["operations"]:
        ops.add_row(
            op["name"], op["pool"], str(op["running_tasks"]), f"{op['completed_tasks']:,}",
            f"{op['dominant_share']:.3f}", f"{op['fair_share']:.3f}",
        )
    grid = Table.grid()
    grid.add_row(t)
    if summary["operations"]:
        grid.add_row(ops)
    if pools := registry.pool_jct_rows(summary):
        jobs = Table(title="jobs by pool", caption="job completion time (JCT): finished jobs")
        for col in registry.POOL_JCT_COLUMNS:
            jobs.add_column(col, justify="left" if col == "pool" else "right")
        for pool, cells in pools:
            jobs.add_row(pool, *cells)
        grid.add_row(jobs)
    return grid


# Exit statuses besides 0: bad input (2), an invariant violated (3), an overloaded real-time run
# (4: its results are not valid), stopped by a signal (130).
EXIT_OVERLOADED = 4
EXIT_STOPPED = 130
EXIT_FAILED = 5  # stopped by an error the run cannot go on after (a journal write failed)


def stopped(outcome: RunOutcome, out: Path, hint: str = "") -> int:
    """A run stopped by a signal (EXIT_STOPPED) or an error (EXIT_FAILED): one plain line (no
    wrapping, no traceback)."""
    if outcome.failure is not None:
        print(f"error: {outcome.failure}: the run stopped at t={outcome.ended_at_s:g} s, partial results "
              f"in {out}/{hint}", file=sys.stderr)
        return EXIT_FAILED
    print(f"stopped at t={outcome.ended_at_s:g} s: partial results in {out}/{hint}", file=sys.stderr)
    return EXIT_STOPPED


def verdict(outcome: RunOutcome, console: Console) -> int:
    """0, or EXIT_OVERLOADED with the reasons when a real-time run fell behind real time."""
    lag = outcome.lag
    if lag is None or not lag.overloaded:
        return 0
    Console(stderr=True).print(
        "[bold red]overloaded: the emulator fell behind real time, results not valid[/] ("
        + "; ".join(lag.reasons) + f"; threshold {lag.threshold_s:g} s). Lower run.speed or the cluster size."
    )
    return EXIT_OVERLOADED
