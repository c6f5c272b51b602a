"""The RM as a process of its own, serving nodes over TCP; and the multi-process run topology.

``RMProcess`` is the RM side of a TCP run: ResourceManager, workload driver, sampler, TCP server
and cost meter, on a real-time clock whose t = 0 is a shared epoch. ``emulator rm`` runs it alone
(nodes come from ``emulator nodes`` on this or other hosts); ``run_tcp`` (``emulator run`` with
``transport.kind = "tcp"``) also starts the node worker processes itself and merges their
per-interval counters into the time series, so h1/h2 come out as in an in-memory run.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import msgspec

from emulator.harness.eventlog import make_logger
from emulator.harness.nodehost import EpochClock, HostConfig, HostReport, NodeSpec, quiet_gc
from emulator.harness.restarts import RestartLog, scenario_journal
from emulator.harness.runner import ProgressHook, RunOutcome
from emulator.harness.workload import WorkloadDriver
from emulator.measure.costs import RMCostMeter, efficiency
from emulator.measure.sampler import COLUMNS, Sampler
from emulator.scenario.schema import RMRestartFault, Scenario
from emulator.scenario.topology import node_specs, phases
from emulator.time.clock import LoopClock, run, wall_time
from emulator.transport.tcp import TcpServer
from nodemanager.stats import NodeStats
from rm.journal import Journal
from rm.manager import ResourceManager

_N_I = COLUMNS.index("n_i")
_M_I = COLUMNS.index("m_i")
_S_I = COLUMNS.index("s_i")


class _Listener:
    """The TCP server as the restart log sees it: stop serving when the RM dies, serve again on
    the same address when the new one is up (nodes reconnect with backoff and resync)."""

    def __init__(self, server: TcpServer) -> None:
        self._server = server
        self._closing: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def drop_all(self) -> None:
        self._closing = self._spawn(self._server.close())

    def listen(self) -> None:
        self._spawn(self._reopen())

    async def _reopen(self) -> None:
        if self._closing is not None:
            await self._closing
        await self._server.start(*self._server.address)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


class RMProcess:
    def __init__(
        self, scenario: Scenario, clock: LoopClock, events: IO[str] | None, journal: Journal | None = None
    ) -> None:
        """``journal``: the RM's durable record (``emulator.restarts.scenario_journal``)."""
        self.scenario = scenario
        self.clock = clock
        self.log = make_logger(clock, events)
        self.rm = ResourceManager(
            clock, self.log, scenario.rm, scenario.scheduler, heartbeat_mode=scenario.heartbeat.mode,
            queueing=True, journal=journal,
        )
        self.workload = WorkloadDriver(scenario.workload, self.rm, clock, scenario.run.seed, self.log)
        self.workload.install_pools()
        # Node-side counters live in the node processes; merged in after the run (merge_intervals).
        self.node_stats = NodeStats()
        self.sampler = Sampler(
            self.rm, self.node_stats, clock, scenario.sample_interval_s, scenario.run.warmup_s,
            [o.name for o in scenario.workload.operations],
        )
        self.meter = RMCostMeter(self.rm, scenario.sample_interval_s)
        self.server = TcpServer(
            self.meter.wrap_receive(self.rm.receive), self.log, scenario.transport.max_frame_bytes,
            scenario.transport.handshake_timeout_s, scenario.transport.max_connections,
        )
        # Nodes may connect well before the epoch; their registrations are answered from t = 0.
        self.server.handshake_hold = True
        self.meter.install()
        self.server.decode_cost = self.meter.decode
        self.restarts = RestartLog(self.rm, lambda: scenario.node_count, _Listener(self.server))

    async def run(self, until_s: float) -> None:
        """Run the RM from emulated t = 0 (the epoch) to ``until_s``; the server must be started."""
        sc = self.scenario
        clock = self.clock
        quiet_gc()
        await clock.sleep_until(0.0)
        self.server.handshake_hold = False
        self.log.info("run.started", scenario=sc.name, nodes=sc.node_count, mode=sc.heartbeat.mode,
                      transport="tcp", port=self.server.address[1])
        self.meter.start()
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self.rm.run(), name="rm"), tg.create_task(self.sampler.run())]
            self.workload.start()
            for f in sc.faults:
                if isinstance(f, RMRestartFault):
                    clock.call_later(f.at_s, self._restart, f)
            if sc.run.warmup_s > 0:
                clock.call_later(sc.run.warmup_s, self.rm.cluster.reset_integral, sc.run.warmup_s)
            await clock.sleep_until(until_s)
            self.workload.stop()
            self.rm.cluster.advance(clock.now())
            for task in tasks:
                task.cancel()
        self.meter.stop()
        self.log.info("run.finished")

    def _restart(self, fault: RMRestartFault) -> None:
        self.log.info("fault.injected", kind=type(fault).__name__, downtime_s=fault.downtime_s)
        self.restarts.restart(fault.downtime_s)

    def window(self) -> tuple[int, int]:
        """Whole intervals after the warm-up whose heartbeats had a full interval to be answered."""
        interval = self.scenario.sample_interval_s
        run_cfg = self.scenario.run
        first = math.floor(run_cfg.warmup_s / interval) + 2 if run_cfg.warmup_s > 0 else 2
        return first, math.floor(run_cfg.duration_s / interval) - 1

    def rm_side_h2(self) -> float | None:
        """h2 needs only the RM's counters (heartbeat arrivals and timely update events)."""
        m = self.meter
        return efficiency({}, {}, m.arrived_by_interval, m.timely_by_interval, *self.window())[1]

    def costs(self) -> dict[str, Any]:
        sc = self.scenario
        out = self.meter.report(sc.node_count, sc.run.duration_s, sc.run.speed, self.server.stats.snapshot())
        inbound = self.rm.inbound.statistics()
        # Queue waits are measured in emulated seconds; also give them in wall milliseconds.
        out["rm_wait_wall_ms"] = {
            "mean": round(inbound.wait_mean_s / sc.run.speed * 1e3, 3),
            "p99": round(inbound.wait_p99_s / sc.run.speed * 1e3, 3),
            "max": round(inbound.wait_max_s / sc.run.speed * 1e3, 3),
        }
        out["rm_queue_depth_max"] = inbound.depth_max
        out["transport"] = self.server.stats.snapshot()
        return out


def split(items: list[Any], parts: int) -> list[list[Any]]:
    """Contiguous, nearly equal slices (worker i hosts slice i)."""
    k, r = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        stop = start + k + (1 if i < r else 0)
        out.append(items[start:stop])
        start = stop
    return out


def merge_intervals(proc: RMProcess, reports: list[HostReport]) -> tuple[float | None, float | None]:
    """Put the workers' n_i, m_i and the RM's s_i (per-interval attribution, see
    ``emulator.costs.efficiency``) into the time series; returns (h1, h2) over the window."""
    sc = proc.scenario
    interval = sc.sample_interval_s
    sent: dict[int, int] = {}
    answered: dict[int, int] = {}
    for report in reports:
        for iv in report.intervals:
            sent[iv.k] = sent.get(iv.k, 0) + iv.sent
            answered[iv.k] = answered.get(iv.k, 0) + iv.responses
    timely = proc.meter.timely_by_interval
    rows = proc.sampler.rows
    for i, row in enumerate(rows):
        k = round(row[0] / interval)
        new = list(row)
        new[_N_I], new[_M_I], new[_S_I] = sent.get(k, 0), answered.get(k, 0), timely.get(k, 0)
        rows[i] = tuple(new)
    first, last = proc.window()
    return efficiency(sent, answered, proc.meter.arrived_by_interval, timely, first, last)


def sum_node_stats(reports: list[HostReport]) -> NodeStats:
    total = NodeStats()
    for report in reports:
        for name, value in report.totals.items():
            if name == "interval_s":
                total.interval_s = value
            elif name == "lateness_max_s":
                total.lateness_max_s = max(total.lateness_max_s, value)
            else:
                setattr(total, name, getattr(total, name) + value)
    return total


async def _spawn(cfg: HostConfig) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "emulator.harness.nodehost",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(msgspec.json.encode(cfg))
    await proc.stdin.drain()
    proc.stdin.close()
    return proc


async def _collect(proc: asyncio.subprocess.Process, timeout_s: float) -> HostReport:
    try:
        async with asyncio.timeout(timeout_s):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"node worker {proc.pid} did not finish within {timeout_s:.0f}s") from None
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"node worker {proc.pid} failed (exit code {proc.returncode})")
    return msgspec.json.decode(out.strip().splitlines()[-1], type=HostReport)


def host_configs(
    scenario: Scenario, host: str, port: int, workers: int, epoch: float | None, events_dir: Path | None
) -> list[HostConfig]:
    specs = [
        NodeSpec(addr, res, phase)
        for (addr, res), phase in zip(
            node_specs(scenario), phases(scenario, scenario.node_count), strict=True
        )
    ]
    return [
        HostConfig(
            host=host, port=port, nodes=chunk, heartbeat=scenario.heartbeat,
            credentials=scenario.rm.credentials, speed=scenario.run.speed, epoch=epoch,
            duration_s=scenario.run.duration_s, sample_interval_s=scenario.sample_interval_s,
            seed=scenario.run.seed + i, max_frame_bytes=scenario.transport.max_frame_bytes,
            events_path=str(events_dir / f"events.worker-{i}.jsonl") if events_dir else None,
        )
        for i, chunk in enumerate(split(specs, workers))
        if chunk
    ]


async def run_tcp_scenario(
    scenario: Scenario, events: IO[str] | None, events_dir: Path | None, progress: ProgressHook | None
) -> RunOutcome:
    with contextlib.ExitStack() as stack:
        journal = scenario_journal(scenario, events_dir, stack)
        return await _run_tcp(scenario, events, events_dir, progress, journal)


async def _run_tcp(
    scenario: Scenario, events: IO[str] | None, events_dir: Path | None, progress: ProgressHook | None,
    journal: Journal | None,
) -> RunOutcome:
    tc = scenario.transport
    # Everything before the epoch is set-up: workers start, build their nodes and connect.
    margin_s = 2.0 + scenario.node_count / 10_000
    epoch = time.time() + margin_s
    clock = EpochClock(asyncio.get_running_loop(), scenario.run.speed, epoch)
    proc = RMProcess(scenario, clock, events, journal)
    host, port = await proc.server.start(tc.host, tc.port)
    outcome = RunOutcome(scenario, proc.rm, [], proc.node_stats, proc.sampler)
    outcome.extra["restarts"] = proc.restarts
    if progress is not None:
        proc.sampler.listeners.append(lambda row: progress(outcome, row))
    started = wall_time()
    workers = [await _spawn(c) for c in host_configs(scenario, host, port, tc.workers, epoch, events_dir)]
    try:
        await proc.run(scenario.run.duration_s)
        reports = [await _collect(w, 60 + margin_s) for w in workers]
    finally:
        for w in workers:
            if w.returncode is None:
                w.kill()
                await w.wait()
        await proc.server.close()
    outcome.wall_s = wall_time() - started
    h1, h2 = merge_intervals(proc, reports)
    outcome.extra["efficiency"] = {"h1": h1, "h2": h2}
    outcome.node_stats = sum_node_stats(reports)
    outcome.extra["costs"] = proc.costs()
    outcome.extra["workers"] = [
        {"nodes": r.nodes, "cpu_s": r.cpu_s, "wall_s": r.wall_s, "max_rss_kib": r.max_rss_kib,
         "lateness_s": r.lateness_s, "reconnects": r.transport["reconnects"]}
        for r in reports
    ]
    return outcome


def run_tcp_blocking(
    scenario: Scenario, events_path: Path | None = None, progress: ProgressHook | None = None
) -> RunOutcome:
    async def main(_: LoopClock) -> RunOutcome:
        if events_path is None:
            return await run_tcp_scenario(scenario, None, None, progress)
        with events_path.open("w", encoding="utf-8") as sink:
            return await run_tcp_scenario(scenario, sink, events_path.parent, progress)

    return run(main, "realtime", scenario.run.speed)


async def serve_rm(scenario: Scenario, host: str, port: int, epoch: float | None,
                   events: IO[str] | None,
                   on_start: Callable[[RMProcess], None] | None = None,
                   journal_dir: Path | None = None) -> tuple[RMProcess, float]:
    """``emulator rm``: the RM alone, for ``run.duration_s`` emulated seconds from the epoch.
    ``on_start(proc)`` runs before the RM serves (the status page attaches there)."""
    loop = asyncio.get_running_loop()
    clock = EpochClock(loop, scenario.run.speed, epoch if epoch is not None else time.time())
    with contextlib.ExitStack() as stack:
        proc = RMProcess(scenario, clock, events, scenario_journal(scenario, journal_dir, stack))
        if on_start is not None:
            on_start(proc)
        address = await proc.server.start(host, port)
        print(f"rm listening on {address[0]}:{address[1]}", file=sys.stderr, flush=True)
        started = wall_time()
        try:
            await proc.run(scenario.run.duration_s)
        finally:
            await proc.server.close()
        return proc, wall_time() - started
