"""Building and running one scenario: RM, nodes, transport, workload, faults, sampler."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from emulator.harness.eventlog import make_logger
from emulator.harness.faults import FaultInjector
from emulator.harness.invariants import InvariantChecker, InvariantViolation
from emulator.harness.restarts import RestartLog, live_count, scenario_journal
from emulator.harness.workload import WorkloadDriver
from emulator.measure.costs import RMCostMeter
from emulator.measure.removals import RemovalLog
from emulator.measure.sampler import Sampler
from emulator.scenario.schema import MessageFault, RMStallFault, Scenario
from emulator.scenario.topology import node_specs, phases
from emulator.time.clock import LoopClock, run, wall_time
from emulator.transport.faulty import FaultWindow, MessageFaultPlan
from emulator.transport.memory import MemoryNetwork
from emulator.transport.metered import Meter, MeteredLink
from emulator.transport.peers import MemoryPeers
from nodemanager.node import NodeManager
from nodemanager.stats import NodeStats
from ringmon.membership import ViewCache
from ringmon.monitor import RingMonitor
from ringmon.ports import RingStats
from rm.journal import Journal
from rm.manager import ResourceManager
from rm.membership import MembershipService


@dataclass
class RunOutcome:
    scenario: Scenario
    rm: ResourceManager
    nodes: list[NodeManager]
    node_stats: NodeStats
    sampler: Sampler
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


ProgressHook = Callable[[RunOutcome, tuple[float, ...]], None]
# Called once the run is wired up, before anything runs: the live status page's way in.
# ``outcome.extra`` then also holds "clock", "log" and "faults".
StartHook = Callable[[RunOutcome], None]


async def run_scenario(
    scenario: Scenario,
    clock: LoopClock,
    events: IO[str] | None = None,
    progress: ProgressHook | None = None,
    check_invariants: bool | None = None,
    on_start: StartHook | None = None,
    journal_dir: Path | None = None,
) -> RunOutcome:
    """``journal_dir``: where the RM's journal goes when the scenario has one (default: a temporary
    directory removed after the run)."""
    with contextlib.ExitStack() as stack:
        journal = scenario_journal(scenario, journal_dir, stack)
        return await _run_scenario(scenario, clock, events, progress, check_invariants, on_start, journal)


async def _run_scenario(
    scenario: Scenario,
    clock: LoopClock,
    events: IO[str] | None,
    progress: ProgressHook | None,
    check_invariants: bool | None,
    on_start: StartHook | None,
    journal: Journal | None,
) -> RunOutcome:
    if check_invariants is None:
        check_invariants = os.environ.get("HBEMU_CHECK_INVARIANTS") == "1"
    log = make_logger(clock, events)
    rm = ResourceManager(
        clock, log, scenario.rm, scenario.scheduler, heartbeat_mode=scenario.heartbeat.mode,
        queueing=scenario.run.clock == "realtime"
        or any(isinstance(f, RMStallFault) for f in scenario.faults),
        journal=journal,
    )
    workload = WorkloadDriver(scenario.workload, rm, clock, scenario.run.seed, log)
    workload.install_pools()
    stats = NodeStats()
    specs = node_specs(scenario)
    offsets = phases(scenario, len(specs))
    nodes = [
        NodeManager(
            address, res, scenario.heartbeat, clock, stats, log,
            phase_s=offset, credentials=scenario.rm.credentials,
        )
        for (address, res), offset in zip(specs, offsets, strict=True)
    ]
    message_faults = MessageFaultPlan(clock, scenario.run.seed)
    for f in scenario.faults:
        if isinstance(f, MessageFault):
            message_faults.windows.append(FaultWindow(
                f.at_s, f.at_s + f.duration_s, f.loss, f.duplicate, f.reorder, f.delay_s,
                frozenset(f.types), f.direction,
            ))
    to_rm = Meter()

    def wrap(link: Any, direction: str) -> Any:
        link = message_faults.wrap(link, direction)
        return MeteredLink(link, to_rm) if direction == "to_rm" else link

    network = MemoryNetwork(clock, rm, scenario.transport.latency_s, wrap, scenario.run.seed)
    for node in nodes:
        network.connect(node)
    peers, membership, ring_stats = _wire_ring(scenario, clock, rm, nodes, offsets, log)
    sampler = Sampler(
        rm, stats, clock, scenario.sample_interval_s, scenario.run.warmup_s,
        [o.name for o in scenario.workload.operations],
    )
    outcome = RunOutcome(scenario, rm, nodes, stats, sampler)
    outcome.extra["message_faults"] = message_faults
    meter: RMCostMeter | None = None
    if scenario.run.clock == "realtime":
        meter = RMCostMeter(rm)
        meter.install()
    checker = InvariantChecker(rm, nodes, membership, message_faults) if check_invariants else None
    outcome.extra["invariants"] = checker
    if checker is not None:
        sampler.listeners.append(lambda _row: checker.check_step())
    if progress is not None:
        sampler.listeners.append(lambda row: progress(outcome, row))
    restarts = RestartLog(rm, live_count(nodes), network)
    faults = FaultInjector(
        scenario.faults, nodes, clock, scenario.run.seed, log, rm=rm, peers=peers, restart_rm=restarts.restart
    )
    removals = RemovalLog(nodes, faults.crashed_at, clock, scenario.ring.grace_s)
    rm.node_lost.append(removals.on_lost)
    outcome.extra.update(
        to_rm=to_rm, peers=peers, membership=membership, ring_stats=ring_stats, removals=removals,
        restarts=restarts, network=network,
    )
    sampler.counters.update(
        removals=lambda: len(removals.removals),
        to_rm_messages=lambda: to_rm.messages,
        to_rm_bytes=lambda: to_rm.bytes,
    )
    if ring_stats is not None and membership is not None:
        sampler.counters.update(
            ring_messages=lambda: ring_stats.peer_messages,
            ring_update_bytes=lambda: membership.stats.bytes_total,
        )
    if on_start is not None:
        outcome.extra.update(clock=clock, log=log, faults=faults)
        on_start(outcome)
    log.info(
        "run.started", scenario=scenario.name, nodes=len(nodes), mode=scenario.heartbeat.mode,
        policy=scenario.scheduler.policy, seed=scenario.run.seed,
    )
    started = wall_time()
    if meter is not None:
        meter.start()
    try:
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(rm.run(), name="rm")]
            tasks += [tg.create_task(n.run(), name=n.address) for n in nodes]
            tasks.append(tg.create_task(sampler.run(), name="sampler"))
            workload.start()
            faults.start()
            if scenario.run.warmup_s > 0:
                clock.call_later(scenario.run.warmup_s, rm.cluster.reset_integral, scenario.run.warmup_s)
            await clock.sleep_until(scenario.run.duration_s)
            if not sampler.rows or sampler.rows[-1][0] < clock.now():
                sampler.sample()  # the final row, whatever the timer order at the last instant
            workload.stop()
            rm.cluster.advance(clock.now())
            if checker is not None:
                for _ in range(3):  # let launches pushed at the last instant arrive
                    await asyncio.sleep(0)
                checker.check_quiescent()
            for task in tasks:
                task.cancel()
    except* InvariantViolation as group:
        # Raised inside a task (the sampler): surface the first violation itself, not the group.
        raise group.exceptions[0] from None
    outcome.wall_s = wall_time() - started
    if meter is not None:
        meter.stop()
        outcome.extra["costs"] = meter.report(len(nodes), scenario.run.duration_s, clock.speed, None)
    log.info("run.finished")
    return outcome


def _wire_ring(
    scenario: Scenario,
    clock: LoopClock,
    rm: ResourceManager,
    nodes: list[NodeManager],
    offsets: list[float],
    log: Any,
) -> tuple[MemoryPeers | None, MembershipService | None, RingStats | None]:
    """The ring monitor on every node, the peer channel between them, the RM's membership."""
    if not scenario.ring_enabled:
        return None, None, None
    cfg = scenario.ring
    peers = MemoryPeers(clock, scenario.run.seed, scenario.transport.latency_s)
    membership = MembershipService(rm, cfg)
    views = ViewCache()
    stats = RingStats()
    for node, offset in zip(nodes, offsets, strict=True):
        node.monitor = RingMonitor(
            cfg, clock, peers, node.send_to_rm, views, stats, log,
            stall_age=node.stalled_for, on_removed=node.ring_removed, phase_s=offset,
        )
    return peers, membership, stats


def run_blocking(
    scenario: Scenario,
    events_path: Path | None = None,
    progress: ProgressHook | None = None,
    check_invariants: bool | None = None,
) -> RunOutcome:
    """Run on a fresh loop of the scenario's clock kind."""
    if scenario.transport.kind == "tcp":
        from emulator.harness.rmserver import run_tcp_blocking  # imports this module

        return run_tcp_blocking(scenario, events_path, progress)

    async def main(clock: LoopClock) -> RunOutcome:
        if events_path is None:
            return await run_scenario(scenario, clock, None, progress, check_invariants)
        with events_path.open("w", encoding="utf-8") as sink:
            return await run_scenario(
                scenario, clock, sink, progress, check_invariants, journal_dir=events_path.parent
            )

    return run(main, scenario.run.clock, scenario.run.speed)
