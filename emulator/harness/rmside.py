"""The RM side of a run, assembled once for every transport.

``RMSide`` holds the ResourceManager (with its ring membership service and journal), the
workload's clients, the sampler, the fault injector with its record of node fates, the removal
and restart logs and, when asked, the invariant checker. In-memory and TCP runs build the same
``RMSide``; they differ only in how nodes are hosted (``NodeHosting``) and how the RM listens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from emulator.harness.faults import FaultInjector
from emulator.harness.hosting import NodeHosting, NodeReality
from emulator.harness.invariants import InvariantChecker
from emulator.harness.quietheap import warm_heap
from emulator.harness.restarts import Listener, RestartLog
from emulator.harness.workload import SubmissionLog, WorkloadDriver
from emulator.measure.arrivals import RMArrivals
from emulator.measure.decisions import DecisionTimer
from emulator.measure.jobs import JobRecorder
from emulator.measure.lag import LagReport, LoopLag
from emulator.measure.removals import RemovalLog
from emulator.measure.sampler import Sampler, SampleRow
from emulator.measure.shares import ShareSeries
from emulator.measure.usage import UsageSeries
from emulator.scenario.schema import MessageFault, Scenario
from emulator.time.clock import LoopClock
from rm import Journal, Log, ResourceManager

# Real-time runs this big keep a warm heap (``emulator.harness.quietheap``): below it a per-node
# table's growth faults in under 0.5 ms. About what the RM's growing tables take per node.
WARM_HEAP_FROM_NODES = 20_000
WARM_HEAP_KIB_PER_NODE = 2


def detector_timeout_s(sc: Scenario) -> float | None:
    """How long a silent node goes unsuspected (emulated s): the quickest failure detector on. A
    stall of the emulator longer than this removes nodes that are alive."""
    timeouts = []
    if sc.ring_enabled:
        ring = sc.ring
        timeouts.append(ring.interval_s * (1.0 if ring.detector == "ring" else ring.suspect_after))
    monitor = sc.rm.liveliness_monitor
    if monitor if monitor is not None else sc.heartbeat.mode == "periodic":
        timeouts.append(sc.rm.expiry_s)
    return min(timeouts, default=None)


class RMSide:
    def __init__(
        self,
        scenario: Scenario,
        clock: LoopClock,
        log: Log,
        hosting: NodeHosting,
        listener: Listener,
        live_nodes: Callable[[], int],
        journal: Journal | None = None,
        check_invariants: bool = False,
        realities: Callable[[], list[NodeReality] | None] | None = None,
        submissions: SubmissionLog | None = None,
        resumed_from: float | None = None,
    ) -> None:
        """``listener``: the transport's RM side (dropped and reopened by an RM restart);
        ``live_nodes()``: nodes that should come back after a restart; ``realities()``: every
        node's real state now, for the invariant checker (None when not available now);
        ``submissions``: the clients' record of what they submitted; ``resumed_from``: this
        process takes over from an earlier RM process of the run that died then (emulated s),
        with its journal and submissions."""
        self._resumed_from = resumed_from
        resume = resumed_from is not None
        self.scenario = scenario
        self.clock = clock
        self.log = log
        self.hosting = hosting
        sc = scenario
        if sc.run.clock == "realtime" and sc.node_count >= WARM_HEAP_FROM_NODES:
            # The RM's per-node tables grow by megabytes at once: their pages mapped before the run.
            warm_heap(sc.node_count * WARM_HEAP_KIB_PER_NODE // 1024)
        self.rm = ResourceManager(
            clock, log, sc.rm, sc.scheduler, heartbeat_mode=sc.heartbeat.mode,
            ring=sc.ring if sc.ring_enabled else None, journal=journal, resume=resume,
        )
        # Job-level results, and the wall time of each scheduler decision.
        self.jobs = JobRecorder(clock.now)
        self.rm.observe(self.jobs)
        self.decisions = DecisionTimer()
        self.rm.instrument(lambda handler: handler, self.decisions.wrap)
        # a_i and s_i (h2): the RM stamps each registered node's heartbeat as it arrives (one
        # clock reading and registration check for both); transports deliver through ``receive``.
        self.arrivals = RMArrivals(clock, sc.sample_interval_s)
        self.decisions.observer = self.arrivals.observer
        self.rm.observe_heartbeat_arrivals(self.arrivals.stamp)
        self.receive = self.rm.receive
        self.workload = WorkloadDriver(sc.workload, self.rm, clock, sc.run.seed, submissions, self.jobs)
        if not resume:
            self.workload.install_pools()  # a resumed RM has its pools from the journal
        self.sampler = Sampler(
            self.rm, hosting.heartbeat_intervals(), self.arrivals, clock,
            sc.sample_interval_s, sc.run.warmup_s, [o.name for o in sc.workload.operations],
        )
        # Per-pool and per-entry figures, one row per sample (timeseries.csv's extra columns).
        wl = sc.workload
        pools = [*(p.parent for p in wl.pools if p.parent != "root"), *(p.name for p in wl.pools),
                 *(o.pool for o in wl.operations)]
        self.shares = ShareSeries(self.rm, pools, [o.name for o in wl.operations])
        self.sampler.listeners.append(lambda _row: self.shares.on_sample(_row, self.sampler.last_shares))
        # Real usage beside allocation, for runs with usage models whose nodes run in this process.
        self.usage: UsageSeries | None = None
        self.restarts = RestartLog(self.rm, clock, live_nodes, listener)
        self.faults = FaultInjector(
            sc.faults, hosting, clock, sc.run.seed, log, self.rm, self.restarts.restart
        )
        self.removals = RemovalLog(self.faults.fates, clock, sc.ring.grace_s)
        self.rm.observe(self.removals)
        self.sampler.counters["removals"] = lambda: len(self.removals.removals)
        membership = self.rm.membership
        if membership is not None:
            stats = membership.stats
            self.sampler.counters["ring_update_bytes"] = lambda: stats.bytes_join + stats.bytes_removal
        self._realities = realities or (lambda: None)
        # Real time: how far this process's event loop falls behind (emulated s).
        self.lag: LoopLag | None = None
        self.on_warmed_up: list[Callable[[], None]] = []  # e.g. the nodes' lateness, in memory
        self.lag_threshold_s = sc.run.lag_threshold * sc.heartbeat.interval_s
        if sc.run.clock == "realtime":
            loop = asyncio.get_running_loop()
            self.lag = LoopLag(loop, clock.now, lambda: clock.speed, sc.sample_interval_s,
                               stall_floor_s=self.lag_threshold_s)
        self.detector_timeout_s = detector_timeout_s(sc)
        self.checker: InvariantChecker | None = None
        if check_invariants:
            windows = [(f.at_s, f.at_s + f.duration_s) for f in sc.faults if isinstance(f, MessageFault)]
            self.checker = InvariantChecker(
                self.rm, sc.ring.interval_s if sc.ring_enabled else None, lambda: windows,
                sc.scheduler.placement.overcommit,
            )
            checker = self.checker
            self.sampler.listeners.append(lambda _row: checker.check_step(self._realities()))

    def removal_times(self) -> list[float]:
        return [r.t_s for r in self.removals.removals]

    def on_sample(self, listener: Callable[[SampleRow], None]) -> None:
        self.sampler.listeners.append(listener)

    def start(self) -> None:
        """Emulated t = 0 (or now): the RM's timers, the workload, the faults, the sampler."""
        sc = self.scenario
        self.log.info(
            "run.started", scenario=sc.name, nodes=sc.node_count, mode=sc.heartbeat.mode,
            policy=sc.scheduler.policy, seed=sc.run.seed, transport=sc.transport.kind,
        )
        if self._resumed_from is not None:
            self.restarts.resume(self._resumed_from)
            self.workload.resume()
        self.rm.start()
        if self.lag is not None:
            self.lag.start()
        self.sampler.start()
        self.workload.start()
        self.faults.start(resumed=self._resumed_from is not None)
        if sc.run.warmup_s > 0:
            self.clock.call_later(sc.run.warmup_s - self.clock.now(), self._warmed_up, sc.run.warmup_s)

    def _warmed_up(self, at: float) -> None:
        """The measurement window starts: registration's lag is not the run's (as for h1/h2)."""
        self.rm.start_measurement(at)
        if self.lag is not None:
            self.lag.restart()
        for hook in self.on_warmed_up:
            hook()

    def finish(self) -> None:
        """The end of the run: a final sample, no more submissions, nothing more fires."""
        sampler = self.sampler
        if not sampler.rows or sampler.rows[-1].t_s < self.clock.now():
            sampler.sample()  # the final row, whatever the timer order at the last instant
        sampler.stop()
        self.workload.stop()
        self.rm.stop()
        if self.lag is not None:
            self.lag.stop()

    def end_check(self, nodes: list[NodeReality], lag: LagReport | None) -> None:
        """Compare the RM's containers with the nodes' at the end, unless the emulator fell behind
        real time: then commands and reports are still in flight and the comparison means nothing."""
        if self.checker is None:
            return
        if lag is not None and lag.overloaded:
            self.checker.skip_end_check("the run was overloaded")
            self.log.warning("invariants.end_check_skipped", reason="overloaded")
        else:
            self.checker.check_quiescent(nodes)
