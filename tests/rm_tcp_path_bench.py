"""CPU per periodic heartbeat of the RM's TCP path, in process and without sockets (issue 34
part 3: what the RM process spends per heartbeat besides its handlers)::

    PYTHONPATH=$PWD python -m tests.rm_tcp_path_bench [--nodes 4000] [--duration 300] [--window 50]

Assembled as ``TcpRM`` does: ``RMSide`` from scenarios/e2-scale-sweep.toml scaled to ``--nodes``
(periodic), the cost meter installed on the run's decision timer, and one real server connection
of the TCP transport with a fake socket. Real NodeManagers on a fake clock send through a frame
encoder; every 50 emulated ms what they sent is one read at the RM (~180 frames at 4,000 nodes, as
over TCP at speed 20), and what the RM's flush writes is decoded back to them 0.5 ms later. Timed
(thread CPU) over the last ``--window`` emulated s, when the nodes are full: the RM's reads (decode,
dispatch, handlers, answers framed) with their flush, and the RM's timers. Deterministic work, so
two checkouts compare by alternating runs of this (the machine's noise aside); a run over TCP
(`emulator study scenarios/studies/e2.toml`) adds the kernel's and the event loop's share.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emulator.harness import rmside
from emulator.harness.eventlog import make_logger
from emulator.harness.quietgc import quiet_gc
from emulator.measure.costs import RMCostMeter
from emulator.scenario.loader import scenario_from_dict
from emulator.study.points import scale_cluster
from emulator.transport.framing import FrameDecoder, FrameEncoder
from emulator.transport.server import TcpServer, _ServerConnection
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeManager
from nodemanager.stats import NodeCounters
from rm.protocol import NodeInbound, Resources
from tests.helpers import FakeClock, FakeTimer
from tests.rm_maxima_bench import Hosting, Listener

READ_EVERY_S = 0.05  # emulated s between two reads at the RM
LATENCY_S = 0.0005  # emulated, RM to node
_RM_MODULES = ("rm.", "emulator.measure", "emulator.harness")


def _is_rm(callback: Callable[..., object]) -> bool:
    owner = getattr(callback, "__self__", None)
    module = type(owner).__module__ if owner is not None else getattr(callback, "__module__", "")
    return (module or "").startswith(_RM_MODULES)


class Clock(FakeClock):
    """A fake clock; the CPU of the RM's own timers (the sampler, the workload, passes) is summed."""

    speed = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.rm_timers_s = 0.0

    def run_until(self, t: float) -> None:
        self.advance_to(t)

    def _fire(self, timer: FakeTimer) -> None:
        if _is_rm(timer.callback):
            c0 = time.thread_time()
            timer.callback(*timer.args)
            self.rm_timers_s += time.thread_time() - c0
        else:
            timer.callback(*timer.args)


class Socket:
    """The connection's transport: what the RM writes is kept for the nodes."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def get_extra_info(self, name: str) -> Any:
        return None

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def abort(self) -> None: ...

    def close(self) -> None: ...


async def bench(nodes: int, duration_s: float, window_s: float, seed: int) -> None:
    data = tomllib.loads(Path("scenarios/e2-scale-sweep.toml").read_text(encoding="utf-8"))
    scale_cluster(data, nodes, True)
    data["heartbeat"]["mode"] = "periodic"
    data["run"].update(clock="virtual", duration_s=duration_s, warmup_s=min(20.0, duration_s / 2))
    data["transport"] = {"kind": "memory"}  # the RM side is the same; the TCP path is added here
    sc = scenario_from_dict(data, "<rm_tcp_path_bench>")
    clock = Clock()
    log = make_logger(clock, None)
    hosted: list[NodeManager] = []
    side = rmside.RMSide(sc, clock, log, Hosting(hosted), Listener(), lambda: nodes)  # type: ignore[arg-type]
    meter = RMCostMeter(side.rm)
    meter.install(side.decisions)
    server = TcpServer(side.receive, log, handshake_timeout_s=None, max_connections=10)
    server.decode_cost = meter.decode
    conn = _ServerConnection(server)
    sock = Socket()
    conn.connection_made(sock)
    up = bytearray()
    encoder, decoder = FrameEncoder(), FrameDecoder(NodeInbound)
    by_channel: dict[int, NodeManager] = {}
    group = sc.cluster.nodes[0]
    resources = Resources(group.cpu, group.ram_gib)  # type: ignore[arg-type]
    config = HeartbeatConfig(mode="periodic", interval_s=sc.heartbeat.interval_s)
    stats = NodeCounters()
    for i in range(nodes):
        channel = i + 1

        def send(msg: Any, channel: int = channel) -> None:
            encoder.append(up, channel, msg)

        node = NodeManager(f"e2-{i}", resources, config, clock, send, stats, log)
        by_channel[channel] = node
        hosted.append(node)

    def deliver(frames: list[tuple[int, Any]]) -> None:
        for channel, msg in frames:
            node = by_channel.get(channel)
            if node is not None and msg is not None:
                node.receive(msg)

    rng = random.Random(seed)
    start = duration_s - window_s
    heartbeats0 = -1
    path_s = 0.0
    with quiet_gc():
        side.start()
        for node in hosted:
            node.start(rng.uniform(0, sc.heartbeat.interval_s))
        t = 0.0
        while t < duration_s:
            t += READ_EVERY_S
            clock.run_until(t)
            if heartbeats0 < 0 and t >= start:
                heartbeats0 = side.rm.counters().heartbeats
                path_s = clock.rm_timers_s = 0.0
            if up:
                read = bytes(up)
                up.clear()
                c0 = time.thread_time()
                conn.data_received(read)
                await asyncio.sleep(0)  # the loop runs the connection's flush
                path_s += time.thread_time() - c0
                for written in sock.written:
                    clock.call_later(LATENCY_S, deliver, decoder.feed(written))
                sock.written.clear()
        side.finish()
    counters = side.rm.counters()
    heartbeats = counters.heartbeats - heartbeats0
    per_heartbeat = counters.statuses / max(1, counters.heartbeats)
    print(f"{nodes} nodes, {heartbeats} heartbeats timed ({per_heartbeat:.1f} statuses each over the "
          f"run), {side.rm.allocations} allocations")
    path_us, timers_us = path_s / heartbeats * 1e6, clock.rm_timers_s / heartbeats * 1e6
    print(f"reads and flushes: {path_us:.2f} us per heartbeat; the RM's timers: {timers_us:.2f}; "
          f"together {path_us + timers_us:.2f}")

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("::")[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=4000)
    ap.add_argument("--duration", type=float, default=300.0, help="emulated s")
    ap.add_argument("--window", type=float, default=50.0, help="the last emulated s, timed")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    asyncio.run(bench(args.nodes, args.duration, args.window, args.seed))


if __name__ == "__main__":
    main()
