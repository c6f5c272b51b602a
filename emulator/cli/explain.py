"""`emulator explain RUN_DIR|SCENARIO [--job ID] [--at SECONDS]`: why operations wait.

The scenario (a results directory's recorded one, or a scenario file) is emulated again in
virtual time in this process (same seed: the same run) and the RM is asked, at the chosen moment,
why each operation with waiting tasks waits (rm/views/pending_reasons.py: the scheduler's own state
and order).
The moment: ``--at`` seconds, or by default the sample where the most tasks waited. Nothing is
written; the run is stopped once the moment has passed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import msgspec

from emulator.scenario.loader import ScenarioError
from rm import OperationView, PendingReasons

if TYPE_CHECKING:  # without importing the harness at CLI start-up
    from emulator.harness.runner import RunHandle
    from emulator.scenario.schema import Scenario


def add_command(sub: Any) -> None:
    e = sub.add_parser("explain", help="why operations wait: per waiting operation, the scheduler's "
                       "reasons and their counts")
    e.add_argument("target", metavar="RUN_DIR|SCENARIO",
                   help="a results directory (its recorded scenario) or a scenario file")
    e.add_argument("--job", metavar="ID", help="only this operation: its id, its name (dashboards#3) or "
                   "its workload entry (dashboards: each of its operations)")
    e.add_argument("--at", type=float, metavar="SECONDS",
                   help="the emulated moment to explain (default: the sample where the most tasks waited)")
    e.add_argument("--json", action="store_true", help="print the reasons as JSON")
    e.set_defaults(func=cmd_explain)


@dataclass
class Moment:
    """What the RM said at one emulated moment."""

    t_s: float = -1.0
    waiting_tasks: int = -1
    reasons: list[PendingReasons] = field(default_factory=list)
    live: list[OperationView] = field(default_factory=list)


class Capture:
    """The run's start hook: asks the RM at ``at`` (then stops the run), or at each sample that
    beats the most waiting tasks seen so far."""

    def __init__(self, at: float | None, stop: Any) -> None:
        self.at = at
        self.moment = Moment()
        self._stop = stop

    def on_start(self, handle: RunHandle) -> None:
        rm = handle.side.rm

        def take(t: float) -> None:
            self.moment = Moment(t, rm.snapshot().pending_tasks, rm.pending_reasons(), rm.operations_view())

        if self.at is not None:
            def at_moment() -> None:
                take(self.at or 0.0)
                self._stop.request()

            handle.clock.call_later(self.at, at_moment)
            return

        def on_row(row: Any) -> None:
            if row.pending_tasks > self.moment.waiting_tasks:
                take(row.t_s)

        handle.side.on_sample(on_row)


def _scenario(target: str) -> tuple[Scenario, str]:
    """The scenario to emulate, and what it is (for the heading)."""
    from emulator.results.record import RECORD_FILE, SCENARIO_FILE
    from emulator.scenario.loader import load_scenario

    p = Path(target)
    if p.is_dir():
        if not (p / RECORD_FILE).is_file() or not (p / SCENARIO_FILE).is_file():
            raise ScenarioError(f"{p}: no {RECORD_FILE} and {SCENARIO_FILE}: not the directory of an "
                                "`emulator run` (give a results directory or a scenario file)")
        return load_scenario(p / SCENARIO_FILE), f"the run in {p}"
    if not p.exists():
        raise ScenarioError(f"{p}: no such results directory or scenario file")
    return load_scenario(p), str(p)


def _emulable(scenario: Scenario, source: str, err: TextIO) -> Scenario:
    """In this process, in virtual time: a real-time or TCP scenario is emulated in memory."""
    from emulator.scenario.loader import with_overrides

    changes: dict[str, Any] = {}
    if scenario.run.clock != "virtual":
        changes["run.clock"] = "virtual"
    if scenario.transport.kind != "memory":
        changes["transport.kind"] = "memory"
    if changes:
        what = ", ".join(f"{k} = {v!r}" for k, v in changes.items())
        print(f"note: explained in memory, in virtual time ({what}): the same workload and policy, "
              "not the same wall-clock timing", file=err)
        return with_overrides(scenario, changes, source)
    return scenario


def capture(scenario: Scenario, at: float | None) -> Moment:
    """Emulate ``scenario`` and ask the RM at ``at`` (None: where the most tasks waited)."""
    from emulator.harness.guard import StopRequest
    from emulator.harness.runner import run_scenario
    from emulator.time.clock import LoopClock, run

    if at is not None and not 0 <= at <= scenario.run.duration_s:
        raise ScenarioError(f"--at {at:g}: expected a moment of the run, 0 to {scenario.run.duration_s:g} s")
    stop = StopRequest()
    cap = Capture(at, stop)

    async def main(clock: LoopClock) -> None:
        await run_scenario(scenario, clock, None, None, False, on_start=cap.on_start, stop=stop)

    run(main, "virtual")
    return cap.moment


def _is(op: OperationView, job: str) -> bool:
    """``job`` names ``op``: its id, its name, or its workload entry (a looping user's every run)."""
    return job in (str(op.id), op.name, op.group)


def _select(moment: Moment, job: str | None) -> list[PendingReasons]:
    if job is None:
        return moment.reasons
    live = [op for op in moment.live if _is(op, job)]
    if not live:
        names = ", ".join(f"{op.name} (id {op.id})" for op in moment.live[:8]) or "none"
        more = f" and {len(moment.live) - 8} more" if len(moment.live) > 8 else ""
        raise ScenarioError(f"--job {job}: no such operation at t={moment.t_s:g} s "
                            f"(an id, a name or a workload entry; live operations: {names}{more})")
    ids = {op.id for op in live}
    return [r for r in moment.reasons if r.op_id in ids]


def render(moment: Moment, source: str, chosen: list[PendingReasons], job: str | None,
           at: float | None) -> str:
    when = f"t={moment.t_s:g} s" + ("" if at is not None else f" (the sample where the most tasks waited: "
                                                           f"{moment.waiting_tasks})")
    lines = [f"{source}, emulated to {when}"]
    if not chosen:
        if job is not None:
            lines.extend(f"{op.name} (id {op.id}) has no waiting task: {op.running} running, "
                         f"{op.completed} of {op.total} done" for op in moment.live if _is(op, job))
        else:
            lines.append("no operation has a waiting task")
        return "\n".join(lines) + "\n"
    total = sum(r.pending for r in chosen)
    lines.append(f"{len(chosen)} operation{'s' if len(chosen) != 1 else ''} with {total} waiting "
                 f"task{'s' if total != 1 else ''}")
    by_id = {o.id: o for o in moment.live}
    for r in chosen:
        view = by_id.get(r.op_id)
        of = f" of {view.total}" if view is not None else ""
        lines.append("")
        lines.append(f"{r.name} (id {r.op_id}, pool {r.pool}): {r.pending}{of} tasks waiting")
        lines.extend(f"  {line}" for line in r.lines)
        lines.append("  counts: " + ", ".join(f"{k}={v}" for k, v in r.reasons.items()))
    return "\n".join(lines) + "\n"


def cmd_explain(args: argparse.Namespace) -> int:
    scenario, source = _scenario(args.target)
    scenario = _emulable(scenario, args.target, sys.stderr)
    moment = capture(scenario, args.at)
    chosen = _select(moment, args.job)
    if args.json:
        doc = {"t_s": moment.t_s, "waiting_tasks": moment.waiting_tasks, "operations": chosen}
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(doc)).decode() + "\n")
    else:
        sys.stdout.write(render(moment, source, chosen, args.job, args.at))
    return 0
