"""Runs over TCP: the RM side in this process behind a TCP server, nodes in worker processes.

``TcpRM`` is the RM process: the same ``RMSide`` as an in-memory run, on a real-time clock whose
t = 0 is an epoch shared with the workers, plus the TCP server, the control server its workers
join (node faults, the nodes' real state for the invariant checker, news of a dead worker), the
cost meter and the event-loop lag probe. ``emulator rm`` runs it alone (nodes come from
``emulator nodes`` on this or other hosts); ``run_tcp`` (``emulator run`` with
``transport.kind = "tcp"``) also starts the worker processes itself and merges their
per-interval counters into the time series, so h1/h2 come out as in an in-memory run.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol

import msgspec

from emulator.harness.control import ControlServer, WorkerLink
from emulator.harness.eventlog import TextSink, make_logger
from emulator.harness.guard import RunGuard, StopRequest
from emulator.harness.hostconfigs import host_configs
from emulator.harness.hosting import NodeReality
from emulator.harness.nodehost import HostConfig, HostReport
from emulator.harness.outcome import RunOutcome, WorkerSummary
from emulator.harness.quietgc import quiet_gc
from emulator.harness.restarts import scenario_journal
from emulator.harness.rmside import RMSide
from emulator.harness.runparts import ProgressHook, Tick, invariants_wanted, message_fault_plan, outcome
from emulator.harness.workers import WorkerHosting, collect, spawn, sum_message_faults, sum_ring
from emulator.harness.workload import SubmissionLog
from emulator.measure.arrivals import worst_ratio
from emulator.measure.costs import RMCostMeter
from emulator.measure.lag import judge, merge_worst
from emulator.measure.timing import HeartbeatTiming
from emulator.scenario.credentials import with_run_secret
from emulator.scenario.schema import Scenario
from emulator.scenario.topology import node_specs
from emulator.time.clock import EpochClock, LoopClock, run, unix_time, wall_time
from emulator.transport.metered import Meter
from emulator.transport.tcp import TcpServer
from rm import Journal

# Wall seconds node faults are handed to the workers ahead of their emulated time.
FAULT_LEAD_WALL_S = 0.5


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


class TcpRM:
    def __init__(
        self, scenario: Scenario, clock: LoopClock, events: TextSink | None, journal: Journal | None = None,
        check_invariants: bool = False, known_nodes: bool = True,
        submissions: SubmissionLog | None = None, resumed_from: float | None = None,
    ) -> None:
        """``journal``: the RM's durable record (``emulator.harness.restarts.scenario_journal``);
        ``known_nodes``: the scenario's nodes are the run's (False: whatever workers join);
        ``submissions``, ``resumed_from``: see ``RMSide``."""
        self.scenario = scenario
        self.clock = clock
        self.log = make_logger(clock, events)
        tc = scenario.transport
        self.plan = message_fault_plan(scenario, clock)
        self.server = TcpServer(
            self._receive, self.log, tc.max_frame_bytes, tc.handshake_timeout_s, tc.max_connections,
            wrap=lambda link: self.plan.wrap(link, "to_node"), secret=scenario.rm.credentials,
        )
        # Nodes may connect well before the epoch; their registrations are answered from t = 0.
        self.server.handshake_hold = True
        self.control = ControlServer(self.log, scenario.rm.credentials, self._joined, self._died)
        self.hosting = WorkerHosting(
            [a for a, _ in node_specs(scenario)] if known_nodes else [], self.control, self._machine_ids,
            scenario.ring_enabled, FAULT_LEAD_WALL_S * scenario.run.speed, clock.now,
        )
        self.side = RMSide(
            scenario, clock, self.log, self.hosting, _Listener(self.server), self._live_nodes,
            journal, check_invariants, self._fresh_realities, submissions, resumed_from,
        )
        self.rm = self.side.rm
        self.meter = RMCostMeter(self.rm)
        self.meter.install(self.side.decisions)
        # The RM's receive (it stamps heartbeat arrivals for a_i, s_i, h2); connections, all made
        # from here on, call it directly.
        self.server.receive = self.side.receive
        self.server.decode_cost = self.meter.decode
        self._gathering: asyncio.Task[None] | None = None
        self.guard: RunGuard | None = None
        self._final: list[NodeReality] | None = None  # the nodes at the end, for the end check
        self.on_worker_lost: Callable[[int], None] | None = None  # told a dead worker's id
        if self.side.checker is not None:
            self.side.on_sample(self._maybe_gather)

    def _receive(self, link: Any, msg: Any) -> None:
        self.side.receive(link, msg)

    def _machine_ids(self) -> dict[str, int]:
        return {n.address: n.machine_id for n in self.rm.nodes_view()}

    def _live_nodes(self) -> int:
        fates = self.side.faults.fates
        return sum(1 for a in self.hosting.addresses() if not fates.is_down(a))

    # ---- workers ------------------------------------------------------------------------------

    def _joined(self, link: WorkerLink) -> None:
        self.hosting.joined(link)

    def _died(self, link: WorkerLink) -> None:
        """A worker process died (kill -9): its nodes crashed together; the ring must find them."""
        self.hosting.died(link)
        self.side.faults.lost_worker(link.nodes)
        if self.on_worker_lost is not None:
            self.on_worker_lost(link.worker)

    # ---- the nodes' real state, for the invariant checker --------------------------------------

    def _maybe_gather(self, _row: Any) -> None:
        checker = self.side.checker
        if checker is None or self._gathering is not None or not checker.ring_settled():
            return
        ring = self.rm.ring_snapshot()
        version = ring.version if ring is not None else -1
        self._gathering = asyncio.ensure_future(self._gather(version))

    async def _gather(self, version: int) -> None:
        try:
            realities = await self.hosting.gather()
            self.hosting.gathered = (version, realities)
        except TimeoutError:
            self.log.warning("control.gather_timeout")
        finally:
            self._gathering = None

    def _fresh_realities(self) -> list[NodeReality] | None:
        got = self.hosting.gathered
        ring = self.rm.ring_snapshot()
        if got is None or ring is None or got[0] != ring.version:
            return None
        return got[1]

    # ---- the run ---------------------------------------------------------------------------

    async def start_servers(self, host: str, port: int) -> tuple[str, int]:
        address = await self.server.start(host, port)
        await self.control.start(host, 0)
        return address

    async def run(self, until_s: float, stop: StopRequest | None = None) -> bool:
        """Run the RM from emulated t = 0 (the epoch) to ``until_s``; the servers must be started.
        Returns False if a signal (or ``stop``) stopped it first."""
        with quiet_gc():
            return await self._run(until_s, stop)

    async def _run(self, until_s: float, stop: StopRequest | None) -> bool:
        clock = self.clock
        await clock.sleep_until(0.0)
        self.server.handshake_hold = False
        self.meter.start()
        guard = self.guard = RunGuard(asyncio.get_running_loop(), request=stop)
        with guard:
            self.side.start()
            await guard.wait(clock.sleep_until(until_s))
            finished = not guard.stopped
            self.control.finished()
            self.side.finish()
            if self.side.checker is not None and finished:
                self._final = await self.hosting.gather()
        self.meter.stop()
        self.control.stop_all()
        self.log.info("run.finished", partial=not finished)
        return finished

    def window(self) -> tuple[int, int]:
        """Whole intervals after the warm-up whose heartbeats had a full interval to be answered."""
        interval = self.scenario.sample_interval_s
        run_cfg = self.scenario.run
        first = math.floor(run_cfg.warmup_s / interval) + 2 if run_cfg.warmup_s > 0 else 2
        return first, math.floor(run_cfg.duration_s / interval) - 1

    def rm_side_h2(self) -> float | None:
        """h2 needs only the RM's counters (heartbeat arrivals and timely update events)."""
        first, last = self.window()
        return self.side.arrivals.h2(range(first, last + 1))

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

    def outcome(self, wall_s: float, reports: list[HostReport], finished: bool = True) -> RunOutcome:
        """The run's outcome, with the workers' counters merged into the time series."""
        self.hosting.add_reports(reports)
        worst = max((r.lateness_s for r in reports), key=lambda s: s.p99, default=None)
        lateness = worst if worst is not None else HeartbeatTiming().summary()
        own = max((r.own_lateness_s for r in reports), key=lambda s: s.p99, default=lateness)
        faults = [r.fault_lateness_s for r in reports if r.fault_lateness_s.count]
        first, last = self.window()
        probe = self.side.lag
        assert probe is not None
        lag = judge(
            self.side.lag_threshold_s,
            probe.summary(),
            [r.loop_lag_s for r in reports],
            own,
            max(faults, key=lambda s: s.max) if faults else None,
            merge_worst([probe.worst_by_interval, *(r.lag_by_interval for r in reports)]),
            max(0, last - first + 1),
            {"the RM process": probe.stalls, **{f"worker {r.worker}": r.loop_stalls for r in reports}},
            self.side.detector_timeout_s, self.clock.now(), self.side.removal_times(),
            self.scenario.run.warmup_s,
        )
        if self._final is not None:
            self.side.end_check(self._final, lag)
        out = outcome(
            self.side, self.hosting.counters(), HeartbeatTiming(), Meter(), wall_s, self.plan,
            sum_ring(reports), sum(r.peers.lost for r in reports if r.peers is not None), self.costs(),
        )
        out.message_faults = sum_message_faults(
            [self.plan.counters if self.plan.windows else None, *(r.message_faults for r in reports)]
        )
        out.lateness = lateness
        out.lag = lag
        out.h1, out.h2 = self._merge_intervals(out, frozenset(out.lag.lagged_intervals))
        out.workers = [
            WorkerSummary(r.nodes, r.cpu_s, r.wall_s, r.max_rss_kib, r.lateness_s, r.transport["reconnects"])
            for r in reports
        ]
        out.dead_workers = list(self.hosting.dead)
        if not finished:
            out.partial = True
            out.ended_at_s = round(self.clock.now(), 3)
            failure = self.guard.failure if self.guard is not None else None
            out.failure = str(failure) if failure is not None else None
        return out

    def _merge_intervals(
        self, out: RunOutcome, set_aside: frozenset[int]
    ) -> tuple[float | None, float | None]:
        """Put the workers' n_i, m_i and the RM's final a_i, s_i (``emulator.measure.arrivals``)
        into the time series; returns (h1, h2): min m_i/n_i and min s_i/a_i over the window's
        intervals, but for those ``set_aside``, as in memory."""
        interval = self.scenario.sample_interval_s
        nodes = self.hosting.heartbeat_intervals()  # the reports' intervals (add_reports)
        sent, answered = nodes.sent_by_interval, nodes.answered_by_interval
        rm_hb = self.side.arrivals
        out.rows = [
            msgspec.structs.replace(
                row, n_i=sent.get(k, 0), m_i=answered.get(k, 0),
                a_i=rm_hb.arrived_in(k), s_i=rm_hb.timely_in(k),
            )
            for row in out.rows
            for k in (round(row.t_s / interval),)
        ]
        first, last = self.window()
        ks = [k for k in range(first, last + 1) if k not in set_aside]
        return (
            worst_ratio((answered.get(k, 0), sent.get(k, 0)) for k in ks),
            rm_hb.h2(ks),
        )


class Placement(Protocol):
    """Where a TCP run's node hosts run: local subprocesses (``Subprocesses``), or tasks on a
    cluster (``emulator.harness.dask_hosts``). One host per ``HostConfig``; a report per config."""

    setup_s: float  # extra wall seconds before the epoch for the hosts to start

    async def start(self, configs: list[HostConfig]) -> None: ...

    def lost(self, worker: int) -> None:
        """Host ``worker``'s control connection dropped: it died (its report will not come)."""
        ...

    async def collect(self, timeout_s: float) -> list[HostReport | None]:
        """Each host's report, in config order (None: it died or did not finish in time)."""
        ...

    async def close(self) -> None:
        """Stop whatever still runs."""
        ...


class Subprocesses:
    """Node hosts as child processes of this one (``python -m emulator.harness.nodehost``)."""

    setup_s = 0.0

    def __init__(self) -> None:
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self, configs: list[HostConfig]) -> None:
        self.procs = [await spawn(c) for c in configs]

    def lost(self, worker: int) -> None:
        pass  # collect() sees its exit

    async def collect(self, timeout_s: float) -> list[HostReport | None]:
        return [await collect(w, timeout_s) for w in self.procs]

    async def close(self) -> None:
        for w in self.procs:
            if w.returncode is None:
                w.kill()
                await w.wait()


async def run_tcp_scenario(
    scenario: Scenario,
    events: TextSink | None,
    events_dir: Path | None,
    progress: ProgressHook | None = None,
    check_invariants: bool | None = None,
    on_start: Callable[[TcpRM], None] | None = None,
    placement: Placement | None = None,
    listen: tuple[str, int] | None = None,
    stop: StopRequest | None = None,
) -> RunOutcome:
    """``placement``: where the node hosts run (default: subprocesses of this one); ``listen``: the
    RM's address (default: the scenario's ``transport.host``/``port``), told to the hosts;
    ``stop``: another thread's way to end the run early."""
    # The workers are ours: without a secret of the scenario's, they get one made for this run.
    scenario = with_run_secret(scenario)
    hosts = placement if placement is not None else Subprocesses()
    with contextlib.ExitStack() as stack:
        journal = scenario_journal(scenario, events_dir, stack)
        tc = scenario.transport
        # Everything before the epoch is set-up: workers start, build their nodes and connect.
        margin_s = 2.0 + scenario.node_count / 5_000 + hosts.setup_s
        epoch = unix_time() + margin_s
        clock = EpochClock(asyncio.get_running_loop(), scenario.run.speed, epoch)
        proc = TcpRM(scenario, clock, events, journal, invariants_wanted(check_invariants))
        proc.on_worker_lost = hosts.lost
        host, port = await proc.start_servers(*(listen or (tc.host, tc.port)))
        control = f"{proc.control.address[0]}:{proc.control.address[1]}"
        if progress is not None:
            side = proc.side
            side.on_sample(lambda row: progress(Tick.of(side, row)))
        if on_start is not None:
            on_start(proc)
        started = wall_time()
        configs = host_configs(scenario, host, port, tc.worker_processes(), epoch, events_dir, control)
        finished = False
        try:
            await hosts.start(configs)
            finished = await proc.run(scenario.run.duration_s, stop)
            results = await hosts.collect(30 + margin_s)
        finally:
            await hosts.close()
            await proc.control.close()
            await proc.server.close()
        reports = [r for r in results if r is not None]
        return proc.outcome(wall_time() - started, reports, finished)


def run_tcp_blocking(
    scenario: Scenario, events_path: Path | None = None, check_invariants: bool | None = None,
    progress: ProgressHook | None = None, stop: StopRequest | None = None,
) -> RunOutcome:
    async def main(_: LoopClock) -> RunOutcome:
        if events_path is None:
            return await run_tcp_scenario(scenario, None, None, progress, check_invariants, stop=stop)
        with events_path.open("w", encoding="utf-8") as sink:
            return await run_tcp_scenario(scenario, sink, events_path.parent, progress, check_invariants,
                                          stop=stop)

    result: RunOutcome = run(main, "realtime", scenario.run.speed)
    return result


async def serve_rm(scenario: Scenario, host: str, port: int, epoch: float, run_dir: Path,
                   events: TextSink | None,
                   on_start: Callable[[TcpRM], None] | None = None,
                   resumed_from: float | None = None,
                   announce: Callable[[str, int], None] | None = None) -> tuple[TcpRM, float, bool]:
    """``emulator rm``: the RM alone, for ``run.duration_s`` emulated seconds from the epoch
    (Unix time), keeping its journal and its clients' submissions in ``run_dir``;
    ``resumed_from``: take over from the run's earlier RM process, which died then. ``on_start(proc)``
    runs before the RM serves (the status page attaches there). Returns the RM process, its
    wall time, and whether it ran to its end (False: stopped by a signal)."""
    loop = asyncio.get_running_loop()
    clock = EpochClock(loop, scenario.run.speed, epoch)
    with contextlib.ExitStack() as stack:
        journal = scenario_journal(scenario, run_dir, stack)
        submissions = SubmissionLog(run_dir / "workload.jsonl")
        stack.callback(submissions.close)
        proc = TcpRM(scenario, clock, events, journal, known_nodes=False, submissions=submissions,
                     resumed_from=resumed_from)
        if on_start is not None:
            on_start(proc)
        address = await proc.start_servers(host, port)
        print(f"rm listening on {address[0]}:{address[1]} (control {proc.control.address[0]}:"
              f"{proc.control.address[1]})", file=sys.stderr, flush=True)
        if announce is not None:
            announce(address[0], address[1])
        started = wall_time()
        try:
            finished = await proc.run(scenario.run.duration_s)
        finally:
            await proc.control.close()
            await proc.server.close()
        return proc, wall_time() - started, finished

