"""Running one scenario in this process: the RM side (``RMSide``) plus nodes hosted in memory,
on a virtual clock (or a real-time one, for a served run); ``run_blocking`` also dispatches a TCP run
(``tcprun``) and a Dask one (``dask_hosts``). ``Tick``, ``ProgressHook`` and ``invariants_wanted``
(``runparts``) are importable from here too."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emulator.harness.eventlog import TextSink, make_logger
from emulator.harness.guard import RunGuard, StopRequest
from emulator.harness.hosting import MemoryHosting
from emulator.harness.nodeproc import NodeProcess, RingParts
from emulator.harness.outcome import RunOutcome
from emulator.harness.quietgc import quiet_gc
from emulator.harness.restarts import scenario_journal
from emulator.harness.rmside import RMSide
from emulator.harness.runparts import ProgressHook as ProgressHook
from emulator.harness.runparts import Tick as Tick
from emulator.harness.runparts import invariants_wanted as invariants_wanted
from emulator.harness.runparts import message_fault_plan, outcome
from emulator.measure.costs import RMCostMeter
from emulator.measure.lag import judge
from emulator.measure.machines import MachinesUsed
from emulator.measure.timing import HeartbeatTiming
from emulator.measure.usage import UsageSeries
from emulator.scenario.schema import Scenario
from emulator.scenario.topology import node_specs, phases
from emulator.time.clock import LoopClock, run, wall_time
from emulator.time.desloop import VirtualCore
from emulator.transport.memory import MemoryNetwork
from emulator.transport.metered import Meter, MeteredLink
from emulator.transport.peers import MemoryPeers
from nodemanager.stats import NodeCounters
from rm import Journal, Log

if TYPE_CHECKING:
    from emulator.harness.dask_hosts import ClusterOptions


@dataclass
class RunHandle:
    """A run in progress, for whoever watches it live (the status page)."""

    scenario: Scenario
    side: RMSide
    hosting: MemoryHosting
    clock: LoopClock
    log: Log


# Called once the run is wired up, before anything runs: the live status page's way in.
StartHook = Callable[[RunHandle], None]


async def run_scenario(
    scenario: Scenario,
    clock: LoopClock,
    events: TextSink | None = None,
    progress: ProgressHook | None = None,
    check_invariants: bool | None = None,
    on_start: StartHook | None = None,
    journal_dir: Path | None = None,
    stop: StopRequest | None = None,
) -> RunOutcome:
    """``journal_dir``: where the RM's journal goes when the scenario has one (default: a temporary
    directory removed after the run); ``stop``: another thread's way to end it early."""
    with contextlib.ExitStack() as stack:
        journal = scenario_journal(scenario, journal_dir, stack)
        check = invariants_wanted(check_invariants)
        return await _run(scenario, clock, events, progress, check, on_start, journal, stop)


async def _run(
    scenario: Scenario,
    clock: LoopClock,
    events: TextSink | None,
    progress: ProgressHook | None,
    check_invariants: bool,
    on_start: StartHook | None,
    journal: Journal | None,
    stop: StopRequest | None = None,
) -> RunOutcome:
    sc = scenario
    log = make_logger(clock, events)
    counters = NodeCounters()
    timing = HeartbeatTiming(sc.sample_interval_s)  # n_i, m_i by sending interval, as over TCP
    peers = (
        MemoryPeers(clock, sc.run.seed, sc.transport.latency_s, sc.transport.ring_liveness == "timestamps")
        if sc.ring_enabled else None
    )
    ring = RingParts(sc.ring, peers) if peers is not None else None
    specs = node_specs(sc)
    offsets = phases(sc, len(specs))
    processes = [
        NodeProcess(address, res, sc.heartbeat, clock, counters, log, offset, sc.rm.credentials, ring, timing)
        for (address, res), offset in zip(specs, offsets, strict=True)
    ]
    plan = message_fault_plan(sc, clock)
    to_rm = Meter()

    def wrap(link: Any, direction: str) -> Any:
        link = plan.wrap(link, direction)
        return MeteredLink(link, to_rm) if direction == "to_rm" else link

    network = MemoryNetwork(clock, None, sc.transport.latency_s, wrap, sc.run.seed)
    hosting = MemoryHosting(processes, counters, timing, to_rm, peers, ring.counters if ring else None)
    side = RMSide(
        sc, clock, log, hosting, network, hosting.live_count, journal, check_invariants, hosting.realities
    )
    # The RM's own bound method, not a forwarder: every message to the RM passes here.
    network.deliver_to(side.receive)
    for proc in processes:
        network.connect(proc)
    sampler = side.sampler
    sampler.counters.update(to_rm_messages=lambda: to_rm.messages, to_rm_bytes=lambda: to_rm.bytes)
    if ring is not None:
        sampler.counters["ring_messages"] = ring.peer_messages
    meter: RMCostMeter | None = None
    if sc.run.clock == "realtime":
        meter = RMCostMeter(side.rm)
        meter.install(side.decisions)
    if any(op.usage is not None for op in sc.workload.operations):
        series = side.usage = UsageSeries(counters.usage)

        def sample_usage(row: Any) -> None:
            alloc = side.rm.snapshot().allocated
            series.sample(row.t_s, alloc.cpu, alloc.ram_gib)

        side.on_sample(sample_usage)
    used: MachinesUsed | None = None
    if sc.scheduler.placement.policy != "default":
        machines = used = MachinesUsed(side.rm.nodes_view, sc.run.warmup_s)
        side.on_sample(lambda row: machines.sample(row.t_s))
    handle = RunHandle(sc, side, hosting, clock, log)
    if progress is not None:
        side.on_sample(lambda row: progress(Tick.of(side, row)))
    if on_start is not None:
        on_start(handle)
    guard = RunGuard(asyncio.get_running_loop(), request=stop)
    started = wall_time()
    if meter is not None:
        meter.start()
    with guard:
        side.on_warmed_up.append(timing.restart_lateness)
        side.start()
        for proc in processes:
            proc.start()
        await guard.wait(clock.sleep_until(sc.run.duration_s))
        side.finish()
        realities = None
        if side.checker is not None and not guard.stopped:
            if sc.transport.latency_s > 0:  # commands still on the wire arrive first
                await clock.sleep_until(clock.now() + sc.transport.latency_s)
            for _ in range(3):  # let launches pushed at the last instant arrive
                await asyncio.sleep(0)
            realities = hosting.realities()
    wall_s = wall_time() - started
    costs = None
    if meter is not None:
        meter.stop()
        costs = meter.report(len(processes), sc.run.duration_s, clock.speed, None)
    log.info("run.finished", partial=guard.stopped)
    lag = None
    if side.lag is not None:
        last = max(1, math.floor(sc.run.duration_s / sc.sample_interval_s))
        probe = side.lag
        lag = judge(side.lag_threshold_s, probe.summary(), [], timing.own_summary(), None,
                    probe.worst_by_interval, last, {"the emulator's process": probe.stalls},
                    side.detector_timeout_s, clock.now(), side.removal_times(), sc.run.warmup_s)
    if realities is not None:
        side.end_check(realities, lag)
    out = outcome(side, counters, timing, to_rm, wall_s, plan, ring.settled() if ring else None,
                  peers.counters.lost if peers is not None else 0, costs)
    if lag is not None:
        out.lag = lag
        out.h1, out.h2 = side.sampler.efficiency(frozenset(lag.lagged_intervals))
    if side.usage is not None:
        out.usage_rows = side.usage.rows
    if used is not None:
        out.machines_used = used.summary()
    if guard.stopped:
        out.partial = True
        out.ended_at_s = round(clock.now(), 3)
        out.failure = str(guard.failure) if guard.failure is not None else None
    return out


def run_blocking(
    scenario: Scenario,
    events_path: Path | None = None,
    progress: ProgressHook | None = None,
    check_invariants: bool | None = None,
    cluster: ClusterOptions | None = None,
    core: VirtualCore = "des",
    stop: StopRequest | None = None,
) -> RunOutcome:
    """Run on a fresh loop of the scenario's clock kind; ``cluster``: a TCP run's node hosts on a
    Dask cluster instead of local processes; ``core``: which loop runs virtual time; ``stop``:
    another thread's way to end it early (not for a cluster run)."""
    if cluster is not None:
        from emulator.harness.dask_hosts import run_cluster_blocking

        return run_cluster_blocking(scenario, cluster, events_path, check_invariants, progress)
    if scenario.transport.kind == "tcp":
        from emulator.harness.tcprun import run_tcp_blocking

        return run_tcp_blocking(scenario, events_path, check_invariants, progress, stop)

    async def main(clock: LoopClock) -> RunOutcome:
        if events_path is None:
            return await run_scenario(scenario, clock, None, progress, check_invariants, stop=stop)
        with events_path.open("w", encoding="utf-8") as sink:
            return await run_scenario(
                scenario, clock, sink, progress, check_invariants, journal_dir=events_path.parent, stop=stop
            )

    with quiet_gc(scenario.run.clock == "realtime"):
        result: RunOutcome = run(main, scenario.run.clock, scenario.run.speed, core)
    return result
