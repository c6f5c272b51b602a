"""A worker process hosting many NodeManagers that reach the RM over TCP.

Started by ``emulator nodes`` / ``emulator run`` (transport = "tcp") as
``python -m emulator.harness.nodehost``: reads one JSON ``HostConfig`` on stdin, runs its nodes in real
time (uvloop) until ``duration_s`` or SIGTERM/SIGINT, and writes one JSON ``HostReport`` on stdout.

All processes of a run share an epoch (Unix time of emulated t = 0), so per-interval counters
(n_i heartbeats sent, m_i responses received) line up with the RM's s_i across processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import resource
import signal
import subprocess
import sys
import time
from typing import Annotated, Any

import msgspec

from emulator.harness.eventlog import make_logger
from emulator.harness.nodeproc import NodeProcess
from emulator.measure.timing import HeartbeatTiming, Interval, LatenessSummary
from emulator.time.clock import EpochClock, LoopClock, run, wall_time
from emulator.transport.backoff import Backoff
from emulator.transport.framing import DEFAULT_MAX_FRAME_BYTES
from emulator.transport.tcp import TcpClient
from nodemanager.config import HeartbeatConfig
from nodemanager.stats import NodeCounters
from rm.protocol import Resources


def quiet_gc() -> None:
    """Long-lived set-up objects out of the collector's way: a full collection over tens of
    thousands of nodes stalls the loop for tens of ms, i.e. late heartbeats at high speed."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)


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
    # Emulated seconds to run; None: until SIGTERM / SIGINT.
    duration_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    sample_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 3.0
    seed: int = 0
    max_frame_bytes: Annotated[int, msgspec.Meta(ge=64)] = DEFAULT_MAX_FRAME_BYTES
    events_path: str | None = None


class HostReport(msgspec.Struct, kw_only=True, frozen=True):
    nodes: int
    wall_s: float
    cpu_s: float
    max_rss_kib: int
    counters: NodeCounters
    lateness_s: LatenessSummary
    transport: dict[str, int]
    intervals: list[Interval]


async def host_nodes(cfg: HostConfig, clock: LoopClock) -> HostReport:
    started, cpu0 = wall_time(), time.process_time()
    sink = open(cfg.events_path, "a", encoding="utf-8") if cfg.events_path else None  # noqa: SIM115
    try:
        log = make_logger(clock, sink)
        counters = NodeCounters()
        timing = HeartbeatTiming(cfg.sample_interval_s)
        client = TcpClient(
            cfg.host, cfg.port, clock, log, cfg.max_frame_bytes, Backoff(seed=cfg.seed)
        )
        nodes = [
            NodeProcess(s.address, s.resources, cfg.heartbeat, clock, counters, log, s.phase_s,
                        cfg.credentials, timing=timing)
            for s in cfg.nodes
        ]
        for node in nodes:
            client.connect(node)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        quiet_gc()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with asyncio.TaskGroup() as tg:
            tasks: list[asyncio.Task[Any]] = [tg.create_task(client.run(), name="tcp.client")]
            async with asyncio.timeout(30 / clock.speed + 30):
                await client.wait_connected()
            log.info("host.connected", nodes=len(nodes))
            # Phases count from when a node starts running: start them all at the epoch.
            await clock.sleep_until(0.0)
            for n in nodes:
                n.start()
            ends: list[asyncio.Task[Any]] = [tg.create_task(stop.wait())]
            if cfg.duration_s is not None:
                ends.append(tg.create_task(clock.sleep_until(cfg.duration_s)))
            tasks += ends
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            for node in nodes:
                node.stop()
            client.close()
            for task in tasks:
                task.cancel()
    finally:
        if sink is not None:
            sink.close()
    return HostReport(
        nodes=len(cfg.nodes),
        wall_s=round(wall_time() - started, 3),
        cpu_s=round(time.process_time() - cpu0, 3),
        max_rss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        counters=counters,
        lateness_s=timing.summary(),
        transport=client.stats.snapshot(),
        intervals=timing.intervals(),
    )


def main() -> int:
    raw = sys.stdin.buffer.read()
    try:
        cfg = msgspec.json.decode(raw, type=HostConfig)
    except msgspec.ValidationError as err:
        print(f"nodehost: bad config: {err}", file=sys.stderr)
        return 2

    async def go(_: LoopClock) -> HostReport:
        loop = asyncio.get_running_loop()
        epoch = cfg.epoch if cfg.epoch is not None else time.time()
        return await host_nodes(cfg, EpochClock(loop, cfg.speed, epoch))

    with contextlib.suppress(KeyboardInterrupt):
        try:
            report = run(go, "realtime", cfg.speed)
        except TimeoutError:
            print(f"nodehost: cannot connect to the RM at {cfg.host}:{cfg.port}", file=sys.stderr)
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
