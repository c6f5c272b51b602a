"""`emulator efficiency` (emulator/cli/experiments.py): what one heartbeat costs the RM, next to
the floor (decode + queue hop).

Sans-IO and in one process, so the figures are the RM's own work and not the machine's noise:
N nodes registered with 20 running containers each (E2's c = 20); a periodic heartbeat carries
all 20 statuses and changes nothing; a delta heartbeat carries one completed container, which the
RM frees and refills (a LaunchContainers push). Each heartbeat is fed as a TCP frame: decode, the
tracker, the node-update event, the response encoded into the outgoing buffer. Both modes run in
the same invocation, so their ratio is measured under the same machine conditions.
"""

from __future__ import annotations

import gc
from typing import Any

from rich.console import Console
from rich.table import Table

from emulator.harness.eventlog import make_logger
from emulator.time.clock import LoopClock, run, wall_time
from emulator.transport.framing import FrameDecoder, FrameEncoder
from rm import Dispatcher, OperationSpec, ResourceManager
from rm.protocol import ContainerStatus, Heartbeat, Register, Resources, RMInbound

SLOTS = 20


class _EncodingLink:
    """The RM side of a connection: encodes what the RM sends, as the TCP transport does."""

    closed = False

    def __init__(self, encoder: FrameEncoder, out: bytearray) -> None:
        self._encoder = encoder
        self._out = out

    def send(self, msg: Any) -> None:
        self._encoder.append(self._out, 1, msg)

    def close(self) -> None:
        pass


def _cluster(clock: LoopClock, nodes: int, mode: str) -> tuple[ResourceManager, list[Any], bytearray]:
    rm = ResourceManager(clock, make_logger(clock, None), heartbeat_mode=mode)
    rm.add_pool("p")
    out = bytearray()
    enc = FrameEncoder()
    links = [_EncodingLink(enc, out) for _ in range(nodes)]
    # Twice what fits: refills always find pending work.
    rm.submit_operation(OperationSpec(name="e2", pool="p", demand=Resources(1, 2),
                                      durations=[1e6] * (2 * SLOTS * nodes), group="e2"))
    for i, link in enumerate(links):
        rm.receive(link, Register(address=f"n{i}", resources=Resources(SLOTS, 2 * SLOTS)))
    if rm.continuous:
        rm.request_pass()
    return rm, links, out


def _frames(rm: ResourceManager, mode: str, rounds: int) -> list[list[bytes]]:
    """Per round, one encoded heartbeat per node."""
    enc = FrameEncoder()
    out: list[list[bytes]] = []
    views = rm.nodes_view()
    for r in range(rounds):
        batch = []
        for node in views:
            cids = sorted(c.container_id for c in node.containers)
            if mode == "periodic":
                statuses = tuple(ContainerStatus(c, "running") for c in cids)
            else:
                statuses = (ContainerStatus(cids[r], "complete", 0),)
            batch.append(enc.encode(1, Heartbeat(machine_id=node.machine_id, heartbeat_id=r,
                                                 healthy=True, statuses=statuses, full=mode == "periodic")))
        out.append(batch)
    return out


def cost_per_heartbeat(mode: str, nodes: int = 1000, rounds: int = 5) -> dict[str, Any]:
    async def main(clock: LoopClock) -> dict[str, Any]:
        rm, links, out = _cluster(clock, nodes, mode)
        views = rm.nodes_view()
        assert all(len(n.containers) == SLOTS for n in views)
        frames = _frames(rm, mode, rounds)
        decoder = FrameDecoder(RMInbound)
        by_id = {n.machine_id: links[i] for i, n in enumerate(views)}
        receive = rm.receive
        gc.collect()
        gc.disable()
        try:
            t0 = wall_time()
            count = 0
            for batch in frames:
                for data in batch:
                    for _, msg in decoder.feed(data):
                        receive(by_id[msg.machine_id], msg)
                        count += 1
                out.clear()
            elapsed = wall_time() - t0
        finally:
            gc.enable()
        return {"mode": mode, "heartbeats": count, "us_per_heartbeat": elapsed / count * 1e6,
                "frame_bytes": sum(len(d) for d in frames[0]) / len(frames[0]),
                "allocations": rm.allocations}

    result: dict[str, Any] = run(main, "virtual")
    return result


def decode_floor(mode: str, n: int = 20000) -> float:
    """µs to decode one heartbeat frame of ``mode`` (the msgpack part of the floor)."""
    enc = FrameEncoder()
    statuses = tuple(ContainerStatus(c, "running") for c in range(SLOTS)) if mode == "periodic" else (
        ContainerStatus(1, "complete", 0),)
    data = enc.encode(1, Heartbeat(machine_id=1, heartbeat_id=1, healthy=True, statuses=statuses,
                                   full=mode == "periodic"))
    decoder = FrameDecoder(RMInbound)
    t0 = wall_time()
    for _ in range(n):
        decoder.feed(data)
    return (wall_time() - t0) / n * 1e6


def queue_hop(n: int = 50000) -> float:
    """µs per item through the RM's Dispatcher (submit, queue, handle) with no service time."""

    async def main(clock: LoopClock) -> float:
        seen = 0

        def handler(_: int) -> None:
            nonlocal seen
            seen += 1

        d: Dispatcher[int] = Dispatcher(clock, handler)
        t0 = wall_time()
        for i in range(n):
            d.submit(i)
        elapsed = wall_time() - t0
        assert seen == n
        return elapsed / n * 1e6

    return float(run(main, "realtime"))


def run_efficiency(nodes: int = 1000) -> dict[str, Any]:
    console = Console(width=120)
    periodic = cost_per_heartbeat("periodic", nodes)
    delta = cost_per_heartbeat("delta", nodes)
    hop = queue_hop()
    t = Table(title=f"RM cost per heartbeat ({nodes:,} nodes x {SLOTS} running containers)")
    for col in ("mode", "statuses", "frame bytes", "µs / heartbeat", "decode floor µs", "floor µs",
                "x floor"):
        t.add_column(col, justify="right")
    rows = []
    for r, statuses in ((periodic, SLOTS), (delta, 1)):
        dec = decode_floor(r["mode"])
        floor = dec + hop
        r.update(decode_floor_us=dec, queue_hop_us=hop, floor_us=floor,
                 over_floor=r["us_per_heartbeat"] / floor)
        rows.append(r)
        t.add_row(r["mode"], str(statuses), f"{r['frame_bytes']:.0f}", f"{r['us_per_heartbeat']:.2f}",
                  f"{dec:.2f}", f"{floor:.2f}", f"{r['over_floor']:.1f}")
    console.print(t)
    ratio = periodic["us_per_heartbeat"] / delta["us_per_heartbeat"]
    console.print(f"queue hop (Dispatcher submit -> handler, no service time): {hop:.2f} µs")
    console.print(f"periodic / delta cost per heartbeat: {ratio:.2f}x (delta heartbeats also free and "
                  f"refill a container)")
    return {"periodic": periodic, "delta": delta, "periodic_over_delta": ratio}
