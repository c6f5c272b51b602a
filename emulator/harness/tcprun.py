"""Runs over TCP: the RM side in this process behind a TCP server, nodes in worker processes.

``TcpRM`` is the RM process: the same ``RMSide`` as an in-memory run, on a real-time clock whose
t = 0 is an epoch shared with the workers, plus the TCP server and the cost meter. ``emulator rm``
runs it alone (nodes come from ``emulator nodes`` on this or other hosts); ``run_tcp`` (``emulator
run`` with ``transport.kind = "tcp"``) also starts the node worker processes itself and merges
their per-interval counters into the time series, so h1/h2 come out as in an in-memory run.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import msgspec

from emulator.harness.eventlog import TextSink, make_logger
from emulator.harness.guard import RunGuard
from emulator.harness.hosting import NodeReality
from emulator.harness.nodehost import HostConfig, HostReport, NodeSpec, quiet_gc
from emulator.harness.outcome import RunOutcome, WorkerSummary
from emulator.harness.restarts import scenario_journal
from emulator.harness.rmside import RMSide
from emulator.harness.runner import ProgressHook, invariants_wanted, outcome
from emulator.measure.costs import RMCostMeter, efficiency
from emulator.measure.timing import HeartbeatTiming
from emulator.scenario.schema import Scenario
from emulator.scenario.topology import node_specs, phases
from emulator.time.clock import EpochClock, LoopClock, run, wall_time
from emulator.transport.faulty import MessageFaultPlan
from emulator.transport.metered import Meter
from emulator.transport.tcp import TcpServer
from nodemanager.stats import NodeCounters
from rm.journal import Journal


class _Listener:
    """The TCP server as the restart log sees it: stop serving when the RM dies, serve again on
    the same address when the new one is up (nodes reconnect with backoff and resync)."""

    def __init__(self, server: TcpServer) -> None:
        self._server = server
        self._closing: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def drop_all(self) -> None:
        self._closing = self._spawn(self._server.close())

    def listen(self) -> None:
        self._spawn(self._reopen())

    async def _reopen(self) -> None:
        if self._closing is not None:
            await self._closing
        await self._server.start(*self._server.address)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


class WorkerHosting:
    """Nodes in worker processes; their counters arrive with the workers' reports at the end."""

    def __init__(self, addresses: list[str]) -> None:
        self._addresses = addresses
        self._counters = NodeCounters()

    def addresses(self) -> list[str]:
        return self._addresses

    def counters(self) -> NodeCounters:
        return self._counters

    def crash(self, addresses: list[str]) -> None:
        raise NotImplementedError("node faults over TCP")

    def rejoin(self, addresses: list[str]) -> None:
        raise NotImplementedError("node faults over TCP")

    def pause(self, addresses: list[str], durations: list[float]) -> None:
        raise NotImplementedError("node faults over TCP")

    def set_healthy(self, addresses: list[str], healthy: bool) -> None:
        raise NotImplementedError("node faults over TCP")

    def set_liveness_loss(self, fraction: float) -> bool:
        return False

    def machine_ids(self) -> dict[str, int]:
        return {}

    def realities(self) -> list[NodeReality]:
        return []

    def add_reports(self, reports: list[HostReport]) -> None:
        total = self._counters
        for report in reports:
            for name, value in msgspec.structs.asdict(report.counters).items():
                setattr(total, name, getattr(total, name) + value)


class TcpRM:
    def __init__(
        self, scenario: Scenario, clock: LoopClock, events: TextSink | None, journal: Journal | None = None,
        check_invariants: bool = False,
    ) -> None:
        """``journal``: the RM's durable record (``emulator.harness.restarts.scenario_journal``)."""
        # Ring monitors do not run in the worker processes (yet): no ring over TCP.
        ring = msgspec.structs.replace(scenario.ring, enabled=False)
        scenario = msgspec.structs.replace(scenario, ring=ring)
        self.scenario = scenario
        self.clock = clock
        self.log = make_logger(clock, events)
        tc = scenario.transport
        self.server = TcpServer(
            self._receive, self.log, tc.max_frame_bytes, tc.handshake_timeout_s, tc.max_connections
        )
        # Nodes may connect well before the epoch; their registrations are answered from t = 0.
        self.server.handshake_hold = True
        self.hosting = WorkerHosting([a for a, _ in node_specs(scenario)])
        self.side = RMSide(
            scenario, clock, self.log, self.hosting, _Listener(self.server), lambda: scenario.node_count,
            journal, check_invariants,
        )
        self.rm = self.side.rm
        self.meter = RMCostMeter(self.rm, scenario.sample_interval_s)
        self.meter.install()
        self._stamped = self.meter.wrap_receive(self.rm.receive)
        self.server.decode_cost = self.meter.decode

    def _receive(self, link: Any, msg: Any) -> None:
        self._stamped(link, msg)

    async def run(self, until_s: float) -> None:
        """Run the RM from emulated t = 0 (the epoch) to ``until_s``; the server must be started."""
        clock = self.clock
        quiet_gc()
        await clock.sleep_until(0.0)
        self.server.handshake_hold = False
        self.meter.start()
        guard = RunGuard(asyncio.get_running_loop())
        with guard:
            self.side.start()
            await guard.wait(clock.sleep_until(until_s))
            self.side.finish()
        self.meter.stop()
        self.log.info("run.finished")

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

    def outcome(self, wall_s: float, reports: list[HostReport]) -> RunOutcome:
        """The run's outcome, with the workers' counters merged into the time series."""
        self.hosting.add_reports(reports)
        out = outcome(
            self.side, self.hosting.counters(), HeartbeatTiming(), Meter(), wall_s,
            MessageFaultPlan(self.clock, 0), None, 0, self.costs(),
        )
        h1, h2 = self._merge_intervals(out, reports)
        out.h1, out.h2 = h1, h2
        out.lateness = max((r.lateness_s for r in reports), key=lambda s: s.p99, default=out.lateness)
        out.workers = [
            WorkerSummary(r.nodes, r.cpu_s, r.wall_s, r.max_rss_kib, r.lateness_s, r.transport["reconnects"])
            for r in reports
        ]
        return out

    def _merge_intervals(
        self, out: RunOutcome, reports: list[HostReport]
    ) -> tuple[float | None, float | None]:
        """Put the workers' n_i, m_i and the RM's s_i (per-interval attribution, see
        ``emulator.measure.costs.efficiency``) into the time series; returns (h1, h2)."""
        interval = self.scenario.sample_interval_s
        sent: dict[int, int] = {}
        answered: dict[int, int] = {}
        for report in reports:
            for iv in report.intervals:
                sent[iv.k] = sent.get(iv.k, 0) + iv.sent
                answered[iv.k] = answered.get(iv.k, 0) + iv.responses
        timely = self.meter.timely_by_interval
        out.rows = [
            msgspec.structs.replace(
                row, n_i=sent.get(k, 0), m_i=answered.get(k, 0), s_i=timely.get(k, 0)
            )
            for row in out.rows
            for k in (round(row.t_s / interval),)
        ]
        first, last = self.window()
        return efficiency(sent, answered, self.meter.arrived_by_interval, timely, first, last)


def split(items: list[Any], parts: int) -> list[list[Any]]:
    """Contiguous, nearly equal slices (worker i hosts slice i)."""
    k, r = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        stop = start + k + (1 if i < r else 0)
        out.append(items[start:stop])
        start = stop
    return out


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
    scenario: Scenario,
    events: TextSink | None,
    events_dir: Path | None,
    progress: ProgressHook | None = None,
    check_invariants: bool | None = None,
) -> RunOutcome:
    with contextlib.ExitStack() as stack:
        journal = scenario_journal(scenario, events_dir, stack)
        tc = scenario.transport
        # Everything before the epoch is set-up: workers start, build their nodes and connect.
        margin_s = 2.0 + scenario.node_count / 10_000
        epoch = time.time() + margin_s
        clock = EpochClock(asyncio.get_running_loop(), scenario.run.speed, epoch)
        proc = TcpRM(scenario, clock, events, journal, invariants_wanted(check_invariants))
        host, port = await proc.server.start(tc.host, tc.port)
        if progress is not None:
            rm = proc.rm
            proc.side.on_sample(lambda row: progress(row, rm.counters().heartbeats))
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
        return proc.outcome(wall_time() - started, reports)


def run_tcp_blocking(
    scenario: Scenario, events_path: Path | None = None, check_invariants: bool | None = None,
    progress: ProgressHook | None = None,
) -> RunOutcome:
    async def main(_: LoopClock) -> RunOutcome:
        if events_path is None:
            return await run_tcp_scenario(scenario, None, None, progress, check_invariants)
        with events_path.open("w", encoding="utf-8") as sink:
            return await run_tcp_scenario(scenario, sink, events_path.parent, progress, check_invariants)

    result: RunOutcome = run(main, "realtime", scenario.run.speed)
    return result


async def serve_rm(scenario: Scenario, host: str, port: int, epoch: float | None,
                   events: TextSink | None,
                   on_start: Callable[[TcpRM], None] | None = None,
                   journal_dir: Path | None = None) -> tuple[TcpRM, float]:
    """``emulator rm``: the RM alone, for ``run.duration_s`` emulated seconds from the epoch.
    ``on_start(proc)`` runs before the RM serves (the status page attaches there)."""
    loop = asyncio.get_running_loop()
    clock = EpochClock(loop, scenario.run.speed, epoch if epoch is not None else time.time())
    with contextlib.ExitStack() as stack:
        proc = TcpRM(scenario, clock, events, scenario_journal(scenario, journal_dir, stack))
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


