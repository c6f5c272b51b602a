"""A worker process hosting many NodeManagers that reach the RM over TCP.

Started by ``emulator nodes`` / ``emulator run`` (transport = "tcp") as
``python -m emulator.harness.nodehost``: reads one JSON ``HostConfig`` on stdin, runs its nodes in
real time (uvloop) until ``duration_s``, a ``Stop`` from the harness, or SIGTERM/SIGINT, and
writes one JSON ``HostReport`` on stdout.

Each node is a ``NodeProcess``, as in memory. With the ring on, the worker listens on a peer
endpoint (announced by its nodes at registration) and carries ring liveness: in memory between
its own nodes, over TCP (``peers_tcp``) to other workers. With a control endpoint it connects to
the harness, which sends it node faults (applied at their emulated time), liveness loss, and
requests for its nodes' real state.

All processes of a run share an epoch (Unix time of emulated t = 0), so per-interval counters
(n_i heartbeats sent, m_i responses received) line up with the RM's s_i across processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from typing import Annotated, Any

import msgspec

from emulator.harness.answerpass import AnswerPass
from emulator.harness.control import (
    ControlClient,
    Gather,
    LivenessLoss,
    NodeFault,
    Realities,
    Stop,
    ToWorker,
    WorkerHello,
)
from emulator.harness.eventlog import make_logger
from emulator.harness.hostednode import HostedNode
from emulator.harness.hosting import reality
from emulator.harness.hosttiming import BatchedTiming, flush_period_s
from emulator.harness.nodeproc import NodeProcess, RingParts
from emulator.harness.quietgc import quiet_gc
from emulator.measure.lag import LoopLag, StallLog
from emulator.measure.timing import HeartbeatTiming, Interval, LatenessSummary
from emulator.scenario.schema import MessageFault
from emulator.time.clock import EpochClock, LoopClock, RealClock, Scheduler, run, unix_time, wall_time
from emulator.time.wheel import WheelClock, wheel_slot_s
from emulator.transport.backoff import Backoff
from emulator.transport.faulty import FaultWindow, MessageFaultCounters, MessageFaultPlan
from emulator.transport.framing import DEFAULT_MAX_FRAME_BYTES
from emulator.transport.peers import PeerCounters
from emulator.transport.peers_tcp import TcpPeers, split_endpoint
from emulator.transport.tcp import TcpClient, TcpLink
from nodemanager.config import HeartbeatConfig
from nodemanager.stats import NodeCounters
from ringmon.config import RingConfig
from ringmon.ports import RingCounters
from rm import LogHistogram
from rm.protocol import Resources


class NodeSpec(msgspec.Struct, array_like=True, frozen=True):
    address: str
    resources: Resources
    phase_s: float


class HostConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    host: str
    port: Annotated[int, msgspec.Meta(ge=1, le=65535)]
    nodes: list[NodeSpec]
    heartbeat: HeartbeatConfig
    credentials: str = ""
    speed: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    # Unix time of emulated t = 0; None: when this process starts.
    epoch: float | None = None
    # Emulated seconds to run; None: until stopped.
    duration_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    sample_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 3.0
    # Emulated s from which lateness counts (the warm-up: registration is not measured).
    measure_from_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    seed: int = 0
    max_frame_bytes: Annotated[int, msgspec.Meta(ge=64)] = DEFAULT_MAX_FRAME_BYTES
    events_path: str | None = None
    # The ring (None: off); the interface the peer channel listens on.
    ring: RingConfig | None = None
    peer_host: str = "127.0.0.1"
    # The harness's control endpoint ("host:port"; None: no control channel) and our id there.
    control: str | None = None
    worker: int = 0
    # Message faults on the nodes' side of the RM connections (direction "to_rm").
    message_faults: list[MessageFault] = []


class HostReport(msgspec.Struct, kw_only=True, frozen=True):
    worker: int = 0
    nodes: int
    wall_s: float
    cpu_s: float
    max_rss_kib: int
    counters: NodeCounters
    lateness_s: LatenessSummary  # heartbeat ticks, emulated s
    own_lateness_s: LatenessSummary  # the same without ticks an injected pause held back
    loop_lag_s: LatenessSummary  # the event loop, emulated s
    lag_by_interval: dict[int, float]
    loop_stalls: StallLog = msgspec.field(default_factory=StallLog)  # when the loop was stuck
    fault_lateness_s: LatenessSummary  # node faults applied after their emulated time
    transport: dict[str, int]
    intervals: list[Interval]
    ring: RingCounters | None = None
    peers: PeerCounters | None = None
    message_faults: MessageFaultCounters | None = None


def _summary(h: LogHistogram) -> LatenessSummary:
    return LatenessSummary(h.count, h.mean(), h.quantile(0.5), h.quantile(0.99), h.max)


class Worker:
    """The nodes of one worker process and what the harness may do to them."""

    def __init__(self, cfg: HostConfig, clock: LoopClock, log: Any) -> None:
        self.cfg = cfg
        self.clock = clock
        # The nodes' timers (ticks, completions, ring checks) in a timer wheel: thousands of them
        # per second would otherwise each be an event-loop timer of their own.
        self.timers: Scheduler = clock
        if isinstance(clock, RealClock):
            self.timers = WheelClock(clock, wheel_slot_s(cfg.heartbeat.interval_s / cfg.speed))
        self.log = log
        self.counters = NodeCounters()
        self.timing = BatchedTiming(cfg.sample_interval_s)
        self.fault_lateness = LogHistogram()
        self.stop = asyncio.Event()
        self.peers: TcpPeers | None = None
        self.ring: RingParts | None = None
        self.plan = MessageFaultPlan(clock, cfg.seed)
        for f in cfg.message_faults:
            if f.direction in ("to_rm", "both"):
                self.plan.windows.append(FaultWindow(
                    f.at_s, f.at_s + f.duration_s, f.loss, f.duplicate, f.reorder, f.delay_s,
                    frozenset(f.types), "to_rm",
                ))
        self.nodes: list[NodeProcess] = []
        self.by_address: dict[str, NodeProcess] = {}
        self.control: ControlClient | None = None

    async def start_peers(self) -> str:
        cfg = self.cfg
        if cfg.ring is None:
            return ""
        self.peers = TcpPeers(self.timers, self.log, cfg.credentials, cfg.seed, cfg.max_frame_bytes)
        endpoint = await self.peers.start(cfg.peer_host)
        self.ring = RingParts(cfg.ring, self.peers)
        return endpoint

    def build(self, endpoint: str) -> None:
        cfg = self.cfg
        self.nodes = [
            NodeProcess(s.address, s.resources, cfg.heartbeat, self.timers, self.counters, self.log,
                        s.phase_s, cfg.credentials, self.ring, self.timing, endpoint, HostedNode)
            for s in cfg.nodes
        ]
        self.by_address = {n.address: n for n in self.nodes}
        if isinstance(self.timers, WheelClock):  # hosted nodes re-arm their ticks on it directly
            for n in self.nodes:
                assert isinstance(n.node, HostedNode)
                n.node.ticks_on(self.timers)

    def wrap(self, link: TcpLink) -> Any:
        return self.plan.wrap(link, "to_rm")

    # ---- commands from the harness -----------------------------------------------------------

    def handle(self, msg: ToWorker) -> None:
        match msg:
            case NodeFault() | LivenessLoss():
                delay = msg.at_s - self.clock.now()
                if delay > 0:
                    self.clock.call_later(delay, self.apply, msg)
                else:
                    self.apply(msg)
            case Gather(request=request):
                assert self.control is not None
                self.control.send(Realities(request, [reality(n) for n in self.nodes]))
            case Stop():
                self.stop.set()

    def apply(self, msg: NodeFault | LivenessLoss) -> None:
        late = self.clock.now() - msg.at_s
        self.fault_lateness.add(late if late > 0 else 0.0)
        if isinstance(msg, LivenessLoss):
            if self.peers is not None:
                self.peers.set_loss(msg.fraction)
            return
        targets = [self.by_address[a] for a in msg.addresses if a in self.by_address]
        match msg.kind:
            case "crash":
                for n in targets:
                    n.crash()
            case "rejoin":
                for n in targets:
                    n.rejoin()
            case "pause":
                for n, d in zip(targets, msg.durations, strict=True):
                    n.pause(d)
            case "health":
                for n in targets:
                    n.set_healthy(msg.healthy)


async def host_nodes(cfg: HostConfig, clock: LoopClock, signals: bool = True) -> HostReport:
    """``signals``: SIGTERM/SIGINT stop the nodes (only a process's main thread can have them: a
    node host run as a task on a cluster's worker thread has none)."""
    started, cpu0 = wall_time(), time.process_time()
    sink = open(cfg.events_path, "a", encoding="utf-8") if cfg.events_path else None  # noqa: SIM115
    loop = asyncio.get_running_loop()
    lag = LoopLag(loop, clock.now, lambda: cfg.speed, cfg.sample_interval_s)
    stack = contextlib.ExitStack()
    try:
        log = make_logger(clock, sink)
        w = Worker(cfg, clock, log)
        endpoint = await w.start_peers()
        w.build(endpoint)
        wheel = w.timers if isinstance(w.timers, WheelClock) else None
        client = TcpClient(
            cfg.host, cfg.port, clock, log, cfg.max_frame_bytes, Backoff(seed=cfg.seed), wrap=w.wrap,
            secret=cfg.credentials, delivery_clock=wheel,
            answers=AnswerPass(wheel, w.timing) if wheel is not None else None,
        )
        for node in w.nodes:
            client.connect(node)
        if cfg.control is not None:
            w.control = ControlClient(log, w.handle)
            hello = WorkerHello(worker=cfg.worker, pid=os.getpid(), nodes=[n.address for n in w.nodes],
                                peer_endpoint=endpoint)
            await w.control.connect(*split_endpoint(cfg.control), hello, cfg.credentials)
        stack.enter_context(quiet_gc())
        for sig in (signal.SIGTERM, signal.SIGINT) if signals else ():
            loop.add_signal_handler(sig, w.stop.set)
        async with asyncio.TaskGroup() as tg:
            tasks: list[asyncio.Task[Any]] = [tg.create_task(client.run(), name="tcp.client")]
            async with asyncio.timeout(30 / clock.speed + 30):
                await client.wait_connected()
            log.info("host.connected", nodes=len(w.nodes), peer_endpoint=endpoint)
            # Phases count from when a node starts running: start them all at the epoch.
            await clock.sleep_until(0.0)
            lag.start()
            w.timing.flush_every(clock, flush_period_s(len(w.nodes), cfg.heartbeat.interval_s,
                                                       cfg.sample_interval_s))
            if cfg.measure_from_s > 0:
                clock.call_later(cfg.measure_from_s, _warmed_up, lag, w.timing)
            for n in w.nodes:
                n.start()
            ends: list[asyncio.Task[Any]] = [tg.create_task(w.stop.wait())]
            if cfg.duration_s is not None:
                ends.append(tg.create_task(clock.sleep_until(cfg.duration_s)))
            if w.control is not None and w.control.lost is not None:
                ends.append(tg.create_task(_wait(w.control.lost)))  # the harness is gone: stop
            tasks += ends
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            lag.stop()
            for node in w.nodes:
                node.stop()
            if w.control is not None:
                w.control.close()
            client.close()
            if w.peers is not None:
                await w.peers.close()
            for task in tasks:
                task.cancel()
    finally:
        stack.close()
        if sink is not None:
            sink.close()
    return HostReport(
        worker=cfg.worker,
        nodes=len(cfg.nodes),
        wall_s=round(wall_time() - started, 3),
        cpu_s=round(time.process_time() - cpu0, 3),
        max_rss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        counters=w.counters,
        lateness_s=w.timing.summary(),
        own_lateness_s=w.timing.own_summary(),
        loop_lag_s=lag.summary(),
        lag_by_interval=lag.worst_by_interval,
        loop_stalls=lag.stalls,
        fault_lateness_s=_summary(w.fault_lateness),
        transport=client.stats.snapshot(),
        intervals=w.timing.intervals(),
        ring=w.ring.counters if w.ring is not None else None,
        peers=w.peers.counters if w.peers is not None else None,
        message_faults=w.plan.counters if w.plan.windows else None,
    )


def _warmed_up(lag: LoopLag, timing: HeartbeatTiming) -> None:
    lag.restart()
    timing.restart_lateness()


async def _wait(fut: asyncio.Future[None]) -> None:
    await fut


def main() -> int:
    raw = sys.stdin.buffer.read()
    try:
        cfg = msgspec.json.decode(raw, type=HostConfig)
    except msgspec.ValidationError as err:
        print(f"nodehost: bad config: {err}", file=sys.stderr)
        return 2

    async def go(_: LoopClock) -> HostReport:
        loop = asyncio.get_running_loop()
        epoch = cfg.epoch if cfg.epoch is not None else unix_time()
        return await host_nodes(cfg, EpochClock(loop, cfg.speed, epoch))

    with contextlib.suppress(KeyboardInterrupt):
        try:
            report = run(go, "realtime", cfg.speed)
        except (TimeoutError, OSError) as err:
            print(f"nodehost: cannot reach the RM at {cfg.host}:{cfg.port} or the harness: {err}",
                  file=sys.stderr)
            return 1
        sys.stdout.buffer.write(msgspec.json.encode(report) + b"\n")
        sys.stdout.flush()
        return 0
    return 130


if __name__ == "__main__":
    sys.exit(main())


def run_workers(configs: list[HostConfig]) -> list[HostReport]:
    """Start one worker process per config, wait for all, return their reports (``emulator nodes``).

    Ctrl-C reaches the workers too (same process group); each stops and still reports.
    """
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "emulator.harness.nodehost"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        for _ in configs
    ]
    for proc, cfg in zip(procs, configs, strict=True):
        assert proc.stdin is not None
        proc.stdin.write(msgspec.json.encode(cfg))
        proc.stdin.close()
    reports = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            while True:
                try:
                    out = proc.stdout.read()
                    proc.wait()
                    break
                except KeyboardInterrupt:
                    continue  # the worker got the signal too: wait for its report
            if proc.returncode != 0 or not out.strip():
                raise RuntimeError(f"node worker {proc.pid} failed (exit code {proc.returncode})")
            reports.append(msgspec.json.decode(out.strip().splitlines()[-1], type=HostReport))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return reports
