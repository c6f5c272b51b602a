"""Hostile TCP clients against the RM, and the figure: honest nodes' h1 without vs with them.

``attack(host, port, seconds)`` runs every abuse case at once against one RM: random bytes,
truncated frames, oversized length prefixes, valid frames of a type the RM never receives,
heartbeats and liveness reports claiming other nodes' machine ids, silent connections
(slowloris) and a flood of connections held open. ``emulator abuse SCENARIO`` runs the scenario
over TCP twice in one invocation — once alone, once with an attacker process started when the
honest nodes are in — and prints h1 (and the RM's transport counters) for both and their ratio.
The attacker runs in its own process (``python -m emulator.experiments.abuse HOST PORT SECONDS``), so it
competes for the CPU like a real one on the same machine would.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from emulator.harness.tcprun import run_tcp_scenario
from emulator.scenario.schema import Scenario
from emulator.time.clock import LoopClock, run
from emulator.transport.framing import HEADER, FrameEncoder
from rm.protocol import Heartbeat, HeartbeatResponse, Register, Resources, UnlivelinessReport

CASES = ("garbage", "truncated", "oversized", "wrong_type", "spoof", "slowloris", "flood")


@dataclass
class AttackCounts:
    connections: int = 0
    refused: int = 0  # connect failed or hung up before we wrote anything
    bytes_sent: int = 0
    by_case: dict[str, int] = field(default_factory=dict)


def hostile_payload(case: str, rng: random.Random) -> bytes:
    """One connection's worth of abuse for ``case`` (the silent cases send nothing)."""
    enc = FrameEncoder()
    if case == "garbage":
        return rng.randbytes(rng.randint(1, 4096))
    if case == "truncated":
        whole = enc.encode(1, Register(address="x", resources=Resources(8, 16)))
        return whole[: rng.randint(1, len(whole) - 1)]
    if case == "oversized":
        return HEADER.pack(rng.randint(1 << 21, 0xFFFFFFFF), 1) + rng.randbytes(64)
    if case == "wrong_type":
        return enc.encode(1, HeartbeatResponse(action="normal", heartbeat_id=rng.randint(0, 9)))
    if case == "spoof":
        # Valid messages for other nodes' machine ids, on a connection that registered nobody.
        frames = b"".join(
            enc.encode(1, Heartbeat(machine_id=mid, heartbeat_id=rng.randint(0, 50), healthy=False,
                                    statuses=(), full=True))
            + enc.encode(2, UnlivelinessReport(reporter=mid, suspect=mid + 1, ring_version=1))
            for mid in range(1, 51)
        )
        return frames
    return b""


async def _one(host: str, port: int, case: str, rng: random.Random, hold_s: float,
               counts: AttackCounts) -> None:
    try:
        async with asyncio.timeout(max(hold_s, 1.0) + 5):
            reader, writer = await asyncio.open_connection(host, port)
            counts.connections += 1
            counts.by_case[case] = counts.by_case.get(case, 0) + 1
            data = hostile_payload(case, rng)
            try:
                if data:
                    writer.write(data)
                    await writer.drain()
                    counts.bytes_sent += len(data)
                if case == "truncated":
                    return  # hang up in the middle of the frame
                # Keep the connection until the server drops it (or we have held it long enough).
                async with asyncio.timeout(hold_s):
                    while await reader.read(65536):
                        pass
            except TimeoutError:
                pass
            finally:
                writer.close()
    except (OSError, TimeoutError):
        counts.refused += 1


async def _loop(host: str, port: int, case: str, seed: int, until: float, hold_s: float,
                counts: AttackCounts) -> None:
    rng = random.Random(f"{seed}:{case}")
    while time.monotonic() < until:
        await _one(host, port, case, rng, min(hold_s, max(until - time.monotonic(), 0.01)), counts)
        await asyncio.sleep(0)  # yield even when the server refuses at once


async def attack(host: str, port: int, seconds: float, seed: int = 0, flood: int = 1500,
                 slowloris: int = 200, parallel: int = 4) -> AttackCounts:
    """Every case at once for ``seconds``: ``parallel`` loops per bad-frame case, ``slowloris``
    silent connections and ``flood`` more held open (each reopened when the server drops it)."""
    counts = AttackCounts()
    until = time.monotonic() + seconds
    async with asyncio.TaskGroup() as tg:
        for case in ("garbage", "truncated", "oversized", "wrong_type", "spoof"):
            for i in range(parallel):
                tg.create_task(_loop(host, port, case, seed + i, until, 1.0, counts))
        for i in range(slowloris):
            tg.create_task(_loop(host, port, "slowloris", seed + i, until, seconds, counts))
        for i in range(flood):
            tg.create_task(_loop(host, port, "flood", seed + i, until, seconds, counts))
    return counts


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


async def _phase(scenario: Scenario, abuse: bool, start_after_s: float) -> dict[str, Any]:
    sc = msgspec.structs.replace(
        scenario,
        transport=msgspec.structs.replace(scenario.transport, port=_free_port(scenario.transport.host)),
    )
    attacker: asyncio.subprocess.Process | None = None
    if abuse:
        # Set-up (workers start and register) takes ~2 s of wall time before the epoch; the
        # attacker starts once honest nodes are in and lasts the whole run.
        margin_s = 2.0 + sc.node_count / 10_000
        seconds = margin_s + sc.run.duration_s / sc.run.speed - start_after_s
        attacker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "emulator.experiments.abuse", sc.transport.host, str(sc.transport.port),
            f"{seconds:.3f}", f"{start_after_s:.3f}", stdout=asyncio.subprocess.PIPE,
        )
    try:
        outcome = await run_tcp_scenario(sc, None, None, None)
    finally:
        counts: dict[str, Any] = {}
        if attacker is not None:
            async with asyncio.timeout(60):
                out, _ = await attacker.communicate()
            lines = out.decode().strip().splitlines()
            counts = json.loads(lines[-1]) if lines else {}
    assert outcome.costs is not None
    transport = outcome.costs["transport"]
    return {
        "h1": outcome.h1,
        "h2": outcome.h2,
        "nodes_alive_end": outcome.rm.nodes,
        "registrations": outcome.rm.counters.registrations,
        "rm_resyncs_sent": outcome.rm.counters.resyncs,
        "reconnects": sum(w.reconnects for w in outcome.workers),
        "server": {k: transport[k] for k in ("bad_frames", "refused", "evicted", "handshake_timeouts")},
        "attacker": counts,
    }


def compare(scenario: Scenario, start_after_s: float = 3.0) -> dict[str, Any]:
    """Run ``scenario`` (TCP) without, then with, the attacker; h1 of both and their ratio."""

    async def main(_: LoopClock) -> dict[str, Any]:
        before = await _phase(scenario, False, start_after_s)
        during = await _phase(scenario, True, start_after_s)
        h1a, h1b = before["h1"], during["h1"]
        ratio = h1b / h1a if h1a and h1b is not None else None
        return {"nodes": scenario.node_count, "before": before, "during": during, "h1_ratio": ratio}

    result: dict[str, Any] = run(main, "realtime", scenario.run.speed)
    return result


def _attacker_main(argv: list[str]) -> int:
    host, port, seconds = argv[0], int(argv[1]), float(argv[2])
    delay = float(argv[3]) if len(argv) > 3 else 0.0

    async def go() -> AttackCounts:
        await asyncio.sleep(delay)
        return await attack(host, port, seconds)

    counts = asyncio.run(go())
    print(json.dumps({"connections": counts.connections, "refused": counts.refused,
                      "bytes_sent": counts.bytes_sent, "by_case": counts.by_case}), flush=True)
    return 0


def write_figures(result: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_attacker_main(sys.argv[1:]))
