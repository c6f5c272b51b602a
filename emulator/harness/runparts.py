"""What every way of running a scenario shares: the in-memory run (``runner``), the TCP run
(``tcprun``) and node hosts on Dask (``dask_hosts``). Apart from ``runner`` so that the TCP and Dask
runs need not import the module that dispatches to them."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import msgspec

from emulator.harness.outcome import RemovalRecord, RunOutcome, ShareMean, Traffic
from emulator.harness.rmside import RMSide
from emulator.measure.sampler import SampleRow
from emulator.measure.timing import HeartbeatTiming
from emulator.scenario.schema import MessageFault, Scenario
from emulator.time.clock import LoopClock
from emulator.transport.faulty import FaultWindow, MessageFaultPlan
from emulator.transport.metered import Meter
from nodemanager.stats import NodeCounters


class Tick(msgspec.Struct, frozen=True):
    """What a progress display shows at each sample."""

    row: SampleRow
    heartbeats: int  # processed by the RM so far
    lag_s: float | None  # real time: the worst event-loop lateness of the last interval (emulated s)
    lag_threshold_s: float

    @classmethod
    def of(cls, side: RMSide, row: SampleRow) -> Tick:
        lag = None
        if side.lag is not None:
            k = round(row.t_s / side.sampler.interval_s)
            lag = side.lag.worst_by_interval.get(k, 0.0)
        return cls(row, side.rm.counters().heartbeats, lag, side.lag_threshold_s)


ProgressHook = Callable[[Tick], None]


def invariants_wanted(check: bool | None) -> bool:
    return check if check is not None else os.environ.get("HBEMU_CHECK_INVARIANTS") == "1"


def message_fault_plan(scenario: Scenario, clock: LoopClock) -> MessageFaultPlan:
    plan = MessageFaultPlan(clock, scenario.run.seed)
    for f in scenario.faults:
        if isinstance(f, MessageFault):
            plan.windows.append(FaultWindow(
                f.at_s, f.at_s + f.duration_s, f.loss, f.duplicate, f.reorder, f.delay_s,
                frozenset(f.types), f.direction,
            ))
    return plan


def outcome(
    side: RMSide, counters: NodeCounters, timing: HeartbeatTiming, to_rm: Meter, wall_s: float,
    plan: MessageFaultPlan, ring: Any, liveness_lost: int, costs: dict[str, Any] | None,
) -> RunOutcome:
    sampler = side.sampler
    h1, h2 = sampler.efficiency()
    log = side.removals
    return RunOutcome(
        scenario=side.scenario,
        wall_s=wall_s,
        rm=side.rm.snapshot(),
        operations=side.rm.operations_view(),
        rows=list(sampler.rows),
        share_columns=side.shares.columns,
        share_rows=list(side.shares.rows),
        groups={g: ShareMean(m.dominant, m.fair, m.samples) for g, m in sampler.groups.items()},
        pools={g: ShareMean(m.dominant, m.fair, m.samples) for g, m in sampler.pools.items()},
        h1=h1,
        h2=h2,
        nodes=counters,
        lateness=timing.summary(),
        removals=log.summary(),
        removal_log=[RemovalRecord(r.t_s, log.is_false(r), r.machine_id, r.latency_s) for r in log.removals],
        restarts=side.restarts.summary(),
        restart_replay_wall_s=side.restarts.replay_walls(),
        to_rm=Traffic(to_rm.messages, to_rm.bytes),
        invariants=side.checker.summary() if side.checker is not None else None,
        message_faults=plan.counters if plan.windows else None,
        ring=ring,
        liveness_lost=liveness_lost,
        costs=costs,
        jobs=side.jobs.report(),
        scheduler_decision_us=side.decisions.summary(),
        earlier=side.rm.earlier if side.rm.earlier.takeovers else None,
    )
