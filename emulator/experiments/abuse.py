"""Hostile clients against the RM over TCP, and what honest nodes see: ``emulator abuse SCENARIO``.

The scenario runs over TCP once alone, then once per attack, each attack from its own process
(``python -m emulator.experiments.abuse HOST PORT SECONDS DELAY ATTACK``) started when the honest
nodes are in and lasting to the end of the run, sending as fast as its core allows:

- ``spoof``: well-formed ``Heartbeat`` frames claiming honest machine ids, on connection after
  connection that registered nothing (64 at a time, each opening with 2,000 frames);
- ``fake_containers``: 4 nodes registered with the run's secret (an insider), each reporting
  20,000 container ids per heartbeat that the RM never launched (and a sliding window of small
  ids, some of which it did), as fast as the RM answers;
- ``mixed``: the byte-level cases (random bytes, truncated frames, oversized length prefixes,
  valid frames of a type the RM never receives, spoofed heartbeats and liveness reports), silent
  connections (slowloris) and a flood of connections held open.

For each run it reports honest h1/h2, honest nodes lost, the RM's transport and queue counters,
the RM process's RSS (this process: start of the run, max, end) and how fast the RM's
``events.jsonl`` grew.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from emulator.harness.tcprun import run_tcp_scenario
from emulator.scenario.credentials import with_run_secret
from emulator.scenario.schema import Scenario
from emulator.time.clock import LoopClock, run, wall_time
from emulator.transport import auth
from emulator.transport.framing import HEADER, FrameDecoder, FrameEncoder
from rm.protocol import (
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    NodeInbound,
    Register,
    RegisterResponse,
    Resources,
    UnlivelinessReport,
)

CASES = ("garbage", "truncated", "oversized", "wrong_type", "spoof", "slowloris", "flood")
ATTACKS = ("spoof", "fake_containers", "mixed")
# The insider attacker reads the run's secret from here (never from its command line).
SECRET_ENV = "HBEMU_ABUSE_SECRET"
LIARS = 4
FAKE_IDS_PER_HEARTBEAT = 20_000


@dataclass
class AttackCounts:
    connections: int = 0
    refused: int = 0  # connect failed or hung up before we wrote anything
    bytes_sent: int = 0
    frames_sent: int = 0
    fake_ids_reported: int = 0
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


# ---- the mixed attack ------------------------------------------------------------------------


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


# ---- the spoofed-heartbeat flood ---------------------------------------------------------------


def spoof_burst(frames: int, machine_ids: int, seed: int = 0) -> bytes:
    """``frames`` well-formed heartbeats claiming machine ids 1..``machine_ids``."""
    rng = random.Random(seed)
    enc = FrameEncoder()
    return b"".join(
        enc.encode(1, Heartbeat(machine_id=rng.randint(1, machine_ids), heartbeat_id=rng.randint(0, 50),
                                healthy=False, statuses=(), full=True))
        for _ in range(frames)
    )


async def spoof_flood(host: str, port: int, seconds: float, conns: int = 64, frames: int = 2000,
                      machine_ids: int = 1000) -> AttackCounts:
    """``conns`` loops, each opening a connection, writing ``frames`` spoofed heartbeats and
    reading until the server hangs up, then again, for ``seconds``."""
    counts = AttackCounts()
    burst = spoof_burst(frames, machine_ids)
    until = time.monotonic() + seconds

    async def loop() -> None:
        while time.monotonic() < until:
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError:
                counts.refused += 1
                await asyncio.sleep(0.001)
                continue
            counts.connections += 1
            try:
                writer.write(burst)
                await writer.drain()
                counts.bytes_sent += len(burst)
                counts.frames_sent += frames
                async with asyncio.timeout(max(0.01, min(2.0, until - time.monotonic()))):
                    while await reader.read(65536):
                        pass
            except (OSError, TimeoutError):
                pass
            finally:
                writer.close()

    async with asyncio.TaskGroup() as tg:
        for _ in range(conns):
            tg.create_task(loop())
    return counts


# ---- the fake-container flood (an insider: it holds the secret) --------------------------------


async def _liar(host: str, port: int, secret: str, name: str, until: float, counts: AttackCounts,
                per_heartbeat: int, next_fake: list[int]) -> None:
    enc = FrameEncoder()
    dec = FrameDecoder(NodeInbound | auth.Challenge)
    reader, writer = await asyncio.open_connection(host, port)
    counts.connections += 1

    async def answer(kind: type) -> Any:
        while True:
            data = await reader.read(1 << 20)
            if not data:
                raise ConnectionError("closed by the RM")
            for _, msg in dec.feed(data):
                if isinstance(msg, kind):
                    return msg

    async def register() -> int:
        writer.write(enc.encode(1, Register(address=name, resources=Resources(16, 64), credentials=secret)))
        reg = await answer(RegisterResponse)
        if reg.action != "normal":
            raise RuntimeError(f"{name}: registration refused: {reg.reason}")
        return int(reg.machine_id)

    try:
        # An insider proves the secret as an honest worker does (it is never sent in clear).
        challenge = await answer(auth.Challenge)
        writer.write(enc.encode(0, auth.prove(secret, challenge.nonce, auth.RM)))
        machine_id = await register()
    except ConnectionError:
        writer.close()
        return
    try:
        hb_id = 0
        low = 1
        while time.monotonic() < until:
            # Mostly ids never handed out, plus a window of small ones (some the RM did launch).
            start = next_fake[0]
            next_fake[0] += per_heartbeat
            ids = [*range(start, start + per_heartbeat - 1000), *range(low, low + 1000)]
            low = low + 1000 if low < 200_000 else 1
            frame = enc.encode(1, Heartbeat(machine_id=machine_id, heartbeat_id=hb_id, healthy=True,
                                            statuses=tuple(ContainerStatus(c, "running") for c in ids),
                                            full=True))
            writer.write(frame)
            counts.frames_sent += 1
            counts.bytes_sent += len(frame)
            counts.fake_ids_reported += len(ids)
            response = await answer(HeartbeatResponse)
            if response.action == "resync":
                machine_id, hb_id = await register(), 0
            else:
                hb_id = response.heartbeat_id
    except ConnectionError:
        pass  # the run is over (or the RM cut us off): stop here
    finally:
        writer.close()


async def fake_container_flood(host: str, port: int, seconds: float, secret: str, liars: int = LIARS,
                               per_heartbeat: int = FAKE_IDS_PER_HEARTBEAT) -> AttackCounts:
    counts = AttackCounts()
    until = time.monotonic() + seconds
    next_fake = [10**9]
    async with asyncio.TaskGroup() as tg:
        for i in range(liars):
            tg.create_task(_liar(host, port, secret, f"liar-{i}", until, counts, per_heartbeat, next_fake))
    return counts


# ---- the figure ------------------------------------------------------------------------------


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def rss_mib() -> float:
    """This process's resident set now (Linux), MiB."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Watch:
    """Samples the RM process's (this process's) RSS twice a second."""

    def __init__(self) -> None:
        self.rss: list[float] = []
        self.t0 = wall_time()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            self.rss.append(rss_mib())
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.rss.append(rss_mib())


def _honest_lost(events: Path) -> int:
    lost = 0
    with events.open(encoding="utf-8") as f:
        for line in f:
            if '"node.lost"' in line and not json.loads(line).get("address", "").startswith("liar-"):
                lost += 1
    return lost


async def _phase(
    scenario: Scenario, attack_name: str | None, start_after_s: float, work: Path
) -> dict[str, Any]:
    sc = msgspec.structs.replace(
        with_run_secret(scenario),
        transport=msgspec.structs.replace(scenario.transport, port=_free_port(scenario.transport.host)),
    )
    run_dir = work / (attack_name or "alone")
    run_dir.mkdir(parents=True, exist_ok=True)
    events = run_dir / "events.jsonl"
    attacker: asyncio.subprocess.Process | None = None
    margin_s = 2.0 + sc.node_count / 5_000  # set-up before the epoch (run_tcp_scenario's margin)
    # To a second before the run's end, so the last figures are not the shutdown's.
    attack_s = margin_s + sc.run.duration_s / sc.run.speed - start_after_s - 1.0
    if attack_name is not None:
        env = {**os.environ, SECRET_ENV: sc.rm.credentials}
        attacker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "emulator.experiments.abuse", sc.transport.host, str(sc.transport.port),
            f"{attack_s:.3f}", f"{start_after_s:.3f}", attack_name, stdout=asyncio.subprocess.PIPE, env=env,
        )
    watch = _Watch()
    watch.start()
    try:
        with events.open("w", encoding="utf-8") as sink:
            outcome = await run_tcp_scenario(sc, sink, run_dir, None)
    finally:
        await watch.stop()
        counts: dict[str, Any] = {}
        if attacker is not None:
            async with asyncio.timeout(120):
                out, _ = await attacker.communicate()
            lines = out.decode().strip().splitlines()
            counts = json.loads(lines[-1]) if lines else {}
    assert outcome.costs is not None
    transport = outcome.costs["transport"]
    size = events.stat().st_size
    rm = outcome.rm
    return {
        "h1": outcome.h1,
        "h2": outcome.h2,
        "honest_nodes_lost": _honest_lost(events),
        "nodes_registered_end": rm.nodes,
        "rm_resyncs_sent": rm.counters.resyncs,
        "rm_registrations_refused": rm.counters.rejected,
        "worker_reconnects": sum(w.reconnects for w in outcome.workers),
        "rm_queue_depth_max": rm.inbound.depth_max,
        "rm_queue_dropped": rm.inbound.dropped,
        "server": {k: transport[k] for k in ("frames_in", "bad_frames", "refused", "evicted",
                                             "handshake_timeouts", "admission_closed", "slow_readers")},
        "rm_rss_mib": {"start": round(watch.rss[0], 1), "max": round(max(watch.rss), 1),
                       "end": round(watch.rss[-1], 1)},
        "events_jsonl_bytes": size,
        "events_jsonl_bytes_per_s": round(size / max(wall_time() - watch.t0, 1e-9)),
        "attack_s": round(attack_s, 1) if attacker is not None else 0.0,
        "attacker": counts,
    }


def compare(scenario: Scenario, start_after_s: float = 3.0,
            attacks: tuple[str, ...] = ATTACKS) -> dict[str, Any]:
    """Run ``scenario`` (TCP) alone, then under each attack; honest h1 of each and their ratio."""

    async def main(_: LoopClock) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="hbemu-abuse-") as tmp:
            work = Path(tmp)
            before = await _phase(scenario, None, start_after_s, work)
            during = {name: await _phase(scenario, name, start_after_s, work) for name in attacks}
        h1a = before["h1"]
        ratios = {
            name: (d["h1"] / h1a if h1a and d["h1"] is not None else None) for name, d in during.items()
        }
        return {"nodes": scenario.node_count, "before": before, "during": during, "h1_ratio": ratios}

    result: dict[str, Any] = run(main, "realtime", scenario.run.speed)
    return result


def _attacker_main(argv: list[str]) -> int:
    host, port, seconds = argv[0], int(argv[1]), float(argv[2])
    delay = float(argv[3]) if len(argv) > 3 else 0.0
    name = argv[4] if len(argv) > 4 else "mixed"

    async def go() -> AttackCounts:
        await asyncio.sleep(delay)
        if name == "spoof":
            return await spoof_flood(host, port, seconds)
        if name == "fake_containers":
            return await fake_container_flood(host, port, seconds, os.environ[SECRET_ENV])
        return await attack(host, port, seconds)

    t0 = time.process_time()
    counts = asyncio.run(go())
    out = asdict(counts)
    # CPU seconds the attacker burnt over its wall seconds: ~1.0 means it saturated its core.
    out["cpu_s"] = round(time.process_time() - t0, 2)
    out["seconds"] = seconds
    print(json.dumps(out), flush=True)
    return 0


def write_figures(result: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_attacker_main(sys.argv[1:]))


def markdown_table(result: dict[str, Any]) -> str:
    """docs/security.md's table, from the JSON ``--out`` wrote."""
    lines = [
        "| run | honest h1 | honest h2 | honest nodes lost | RM RSS MiB start → max | events.jsonl "
        "| queue depth max / dropped | attacker |",
        "|---|---|---|---|---|---|---|---|",
    ]
    n = result["nodes"]
    runs = [("alone", result["before"]), *result["during"].items()]
    for name, r in runs:
        a = r.get("attacker") or {}
        if not a:
            who = "—"
        elif a.get("fake_ids_reported"):
            who = (f"{a['fake_ids_reported'] / 1e6:,.1f} M fake ids, {a['cpu_s'] / a['seconds']:.2f} core")
        else:
            sent = f", {a['bytes_sent'] / 1e9:,.0f} GB sent" if a["bytes_sent"] >= 1e9 else ""
            who = f"{a['connections']:,} connections{sent}, {a['cpu_s'] / a['seconds']:.2f} core"
        rss = r["rm_rss_mib"]
        lines.append(
            f"| {name} | {r['h1']:.3f} | {r['h2']:.3f} | {r['honest_nodes_lost']} of {n} | "
            f"{rss['start']:.1f} → {rss['max']:.1f} | {r['events_jsonl_bytes'] / 1e3:,.0f} KB | "
            f"{r['rm_queue_depth_max']:,} / {r['rm_queue_dropped']:,} | {who} |"
        )
    return "\n".join(lines)
