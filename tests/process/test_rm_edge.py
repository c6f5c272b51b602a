"""The RM's network edge against a real RM on 127.0.0.1: the admission budget of connections
that registered nothing, spoofed-heartbeat floods against honest nodes, fake container ids, slow
readers, and secure-by-default start-up. Every test is bounded by timeouts."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from emulator.time.clock import LoopClock, run
from emulator.transport import auth
from emulator.transport.framing import FrameDecoder, FrameEncoder
from rm.config import RMConfig, ServiceTimeConfig
from rm.protocol import (
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    KillContainers,
    NodeInbound,
    Register,
    RegisterResponse,
    Resources,
)
from rm.state.cluster import NodeRecord
from rm.tracker.container_ledger import ContainerLedger
from tests.process.test_tcp_abuse import events, honest_cluster, hung_up
from tests.process.test_transport_conformance import eventually

SECRET = "edge-secret-7Qp"


class RawPeer:
    """A hand-written client: frames out, frames in, no NodeManager behind it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.enc = FrameEncoder()
        self.dec = FrameDecoder(NodeInbound | auth.Challenge)
        self.nonce = b""

    @classmethod
    async def open(cls, address: tuple[str, int], rcvbuf: int | None = None, secret: str = "") -> RawPeer:
        """``secret``: answer the RM's challenge with a proof of it first (an RM with a secret
        challenges every connection)."""
        if rcvbuf is None:
            peer = cls(*await asyncio.open_connection(*address))
        else:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # before connect: a small window
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, address)
            peer = cls(*await asyncio.open_connection(sock=sock))
        if secret:
            await peer.receive()
            await peer.send(0, auth.prove(secret, peer.nonce, auth.RM))
        return peer

    async def send(self, channel: int, *msgs: Any) -> None:
        self.writer.write(b"".join(self.enc.encode(channel, m) for m in msgs))
        await self.writer.drain()

    async def receive(self, within_s: float = 5.0) -> list[Any]:
        async with asyncio.timeout(within_s):
            while True:
                frames = self.dec.feed(await self.reader.read(65536))
                for _, m in frames:
                    if isinstance(m, auth.Challenge):
                        self.nonce = m.nonce
                if frames:
                    return [m for _, m in frames if not isinstance(m, auth.Challenge)]

    def close(self) -> None:
        self.writer.close()


def spoofed(mid: int) -> Heartbeat:
    return Heartbeat(machine_id=mid, heartbeat_id=0, healthy=False, statuses=(), full=True)


def test_an_unregistered_connection_is_closed_after_its_budget() -> None:
    async def main(clock: LoopClock) -> None:
        # A handshake timeout far beyond the test: only the budget can close it.
        async with honest_cluster(clock, credentials=SECRET, handshake_s=60.0) as h:
            budget = h.server.admission_frames
            peer = await RawPeer.open(h.address)
            await peer.send(1, *(spoofed(1 + i % 3) for i in range(budget)))
            answers: list[Any] = []
            while len(answers) < budget:
                answers += await peer.receive()
            assert all(isinstance(a, HeartbeatResponse) and a.action == "resync" for a in answers)
            assert not await hung_up(peer.reader, 0.3)  # within its budget: still open
            await peer.send(1, spoofed(1))
            assert await hung_up(peer.reader, 2)
            peer.close()
            assert h.server.stats.admission_closed == 1 and h.server.stats.handshake_timeouts == 0
            assert h.rm.counters().resyncs == budget  # the frame past the budget never reached the RM

            # Registrations with a wrong secret spend the budget too.
            peer = await RawPeer.open(h.address)
            await peer.send(1, *(Register(address=f"x{i}", resources=Resources(8, 16), credentials="guess")
                                 for i in range(budget + 5)))
            assert await hung_up(peer.reader, 2)
            peer.close()
            assert h.server.stats.admission_closed == 2
            assert h.rm.counters().rejected == budget + 1
            await h.still_served()

    run(main, "realtime", speed=10)


async def _spoof_forever(address: tuple[str, int], frames: bytes, sent: list[int]) -> None:
    """Connection after connection, each opening with a burst of spoofed heartbeats."""
    while True:
        try:
            reader, writer = await asyncio.open_connection(*address)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        try:
            writer.write(frames)
            await writer.drain()
            sent[0] += 1
            async with asyncio.timeout(1):
                while await reader.read(65536):
                    pass
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()


def test_a_spoofed_heartbeat_flood_does_not_delay_honest_nodes() -> None:
    """The RM costs 2 ms per message (500 a second); spoofers on connections that registered
    nothing send several times that. Honest heartbeats are served first: every one is answered
    within its interval, nobody is lost, and what the spoofers queue stays bounded."""
    st = ServiceTimeConfig(heartbeat_us=2000, register_us=2000, unliveliness_us=2000)
    config = RMConfig(credentials=SECRET, expiry_s=5.0, service_time=st)

    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock, n=5, credentials=SECRET, rm_config=config, handshake_s=60.0,
                                  admission_frames=40) as h:
            low_limit = 2000
            assert h.rm.inbound.low_limit is not None
            h.rm.inbound.low_limit = low_limit
            enc = FrameEncoder()
            # One past the budget: the server closes the connection at once, the spoofer reconnects.
            burst = b"".join(enc.encode(1, spoofed(1 + i % 5)) for i in range(41))
            sent = [0]
            tasks = [asyncio.get_running_loop().create_task(_spoof_forever(h.address, burst, sent))
                     for _ in range(8)]
            try:
                await clock.sleep(1.0)  # the flood is on
                before = h.stats.heartbeats_sent
                responses = h.stats.heartbeat_responses
                frames_in = h.server.stats.frames_in
                await clock.sleep(4.0)
                arrived = h.server.stats.frames_in - frames_in
                assert arrived > 2 * 500 * 4, arrived  # well above what the RM can serve
                beats = h.stats.heartbeats_sent - before
                assert beats >= 4 * len(h.nodes) - 1
                # Each honest heartbeat was answered before the node's next tick.
                assert h.stats.heartbeats_skipped == 0
                assert h.stats.heartbeat_responses - responses >= beats - len(h.nodes)
                snap = h.rm.snapshot()
                assert snap.inbound.depth_max <= low_limit + 2 * len(h.nodes)
                assert snap.inbound.dropped > 0
                assert snap.nodes == len(h.nodes) and snap.counters.nodes_lost == 0
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            await h.still_served()
            # The flood is in the event log only as a budget's worth of lines per event name.
            lines = events(h.sink)
            assert sum(e["event"] == "node.resync" for e in lines) <= h.rm._ctx.noisy.burst
            assert sum(e["event"] == "transport.connected" for e in lines) <= h.server.noisy.burst

    run(main, "realtime", speed=1)


def test_fake_container_ids_are_answered_once_and_not_stored() -> None:
    config = RMConfig(credentials=SECRET, command_timeout_s=1.0)

    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock, credentials=SECRET, rm_config=config) as h:
            liar = await RawPeer.open(h.address, secret=SECRET)
            await liar.send(1, Register(address="liar", resources=Resources(8, 16), credentials=SECRET))
            [reg] = await liar.receive()
            assert isinstance(reg, RegisterResponse) and reg.action == "normal"
            fake = tuple(10**9 + i for i in range(5000))  # ids the RM never handed out
            got: list[Any] = []
            for hb_id in range(5):
                statuses = tuple(ContainerStatus(cid, "running") for cid in fake)
                await liar.send(1, Heartbeat(machine_id=reg.machine_id, heartbeat_id=hb_id, healthy=True,
                                             statuses=statuses, full=True))
                answer = await liar.receive()
                assert isinstance(answer[0], HeartbeatResponse) and answer[0].kill == fake  # answered
                got += answer[1:]
                assert h.rm._life.ledger.pending_kills == 0  # ... and not stored
            # Several command timeouts later: nothing was kept to be sent again.
            await clock.sleep(5 * config.command_timeout_s)
            with pytest.raises(TimeoutError):
                got += await liar.receive(within_s=0.3)
            assert not [m for m in got if isinstance(m, KillContainers)]
            assert h.rm._life.ledger.kills_not_kept == 5 * len(fake)
            liar.close()
            await h.still_served(others=1)

    run(main, "realtime", speed=10)


def test_kills_kept_for_resending_are_bounded_per_node() -> None:
    ledger = ContainerLedger(next_container_id=100_000, max_kills_per_node=64)
    node = NodeRecord(1, "n", Resources(8, 16), None, 0.0)  # type: ignore[arg-type]
    ledger.expect_kills(node, list(range(1, 50_000)), 0.0)
    assert ledger.pending_kills == 64
    ledger.expect_kills(node, [10**9, 0, -5], 1.0)  # never issued
    assert ledger.pending_kills == 64
    assert sum(len(c) for c in ledger.overdue_kills(10.0).values()) == 64
    ledger.forget_node(node, [])
    assert ledger.pending_kills == 0


def test_a_slow_reader_is_disconnected_not_buffered() -> None:
    limit = 256 * 1024

    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock, credentials=SECRET, max_write_buffer_bytes=limit) as h:
            peer = await RawPeer.open(h.address, rcvbuf=4096, secret=SECRET)
            await peer.send(1, Register(address="sloth", resources=Resources(8, 16), credentials=SECRET))
            [reg] = await peer.receive()
            # Each heartbeat's answer lists 20,000 ids to kill (~100 KB); the peer never reads them.
            statuses = tuple(ContainerStatus(10**9 + i, "running") for i in range(20_000))
            for hb_id in range(400):
                if h.server.stats.slow_readers:
                    break
                try:
                    await peer.send(1, Heartbeat(machine_id=reg.machine_id, heartbeat_id=hb_id, healthy=True,
                                                 statuses=statuses, full=True))
                except (ConnectionError, OSError):
                    break
            await eventually(clock, lambda: h.server.stats.slow_readers == 1, timeout_s=10)
            assert await hung_up(peer.reader, 10)
            peer.close()
            assert len(h.server.connections) == 1  # only the honest one
            await h.still_served(others=1)

    run(main, "realtime", speed=10)


SCENARIO = """
name = "edge"
[cluster]
nodes = [{ count = 2, cpu = 8, ram_gib = 16 }]
[transport]
kind = "tcp"
[run]
duration_s = 30
clock = "realtime"
speed = 1
"""


def emulator(*args: str) -> list[str]:
    return [sys.executable, "-m", "emulator", *args]


def test_rm_on_a_reachable_address_without_a_secret_refuses_to_start(tmp_path: Path) -> None:
    sc = tmp_path / "edge.toml"
    sc.write_text(SCENARIO)
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(
        emulator("rm", str(sc), "--listen", f"0.0.0.0:{port}", "--out", str(tmp_path / "o")),
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "without a shared secret" in proc.stderr and "rm.credentials_file" in proc.stderr
    assert "listening" not in proc.stderr and not (tmp_path / "o").exists()


def test_a_loopback_rm_without_a_secret_makes_one(tmp_path: Path) -> None:
    sc = tmp_path / "edge.toml"
    sc.write_text(SCENARIO)
    out = tmp_path / "o"
    rm = subprocess.Popen(emulator("rm", str(sc), "--listen", "127.0.0.1:0", "--out", str(out), "--quiet"),
                          stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert rm.stderr is not None
        said = ""
        address = None
        deadline = time.monotonic() + 30
        while address is None and time.monotonic() < deadline:
            said += rm.stderr.readline()
            m = re.search(r"listening on (\S+):(\d+)", said)
            address = (m[1], int(m[2])) if m else None
        assert address is not None, said
        secret_file = out / "rm-secret"
        assert str(secret_file) in said and secret_file.stat().st_mode & 0o077 == 0
        secret = secret_file.read_text().strip()
        assert len(secret) >= 32 and secret not in said

        async def register(credentials: str) -> RegisterResponse:
            peer = await RawPeer.open(address, secret=credentials)
            try:
                await peer.send(1, Register(address="n", resources=Resources(8, 16), credentials=credentials))
                [answer] = await peer.receive(within_s=15)
                assert isinstance(answer, RegisterResponse)
                return answer
            finally:
                peer.close()

        async def main(_: LoopClock) -> tuple[RegisterResponse, RegisterResponse]:
            return await register(""), await register(secret)

        without, with_it = run(main, "realtime", 1.0)
        assert without.action == "shutdown" and without.reason == "bad credentials"
        assert with_it.action == "normal"
    finally:
        rm.kill()
        rm.communicate(timeout=30)


def test_a_fired_real_time_timer_does_not_keep_what_it_carried() -> None:
    """The RM's queue hands each message to a timer when it charges a service time; a fired timer
    sits in a reference cycle with its loop handle until the (rarely run, in real time) garbage
    collector frees it. It must not keep the message — a registered node's heartbeats with
    thousands of statuses made the RM's memory grow by a GB in seconds."""
    import gc
    import weakref

    class Payload:
        pass

    async def main(clock: LoopClock) -> None:
        payload = Payload()
        ref = weakref.ref(payload)
        fired: list[bool] = []
        clock.call_later(0.0, lambda _p: fired.append(True), payload)  # due at once, as 100 µs is
        del payload
        await eventually(clock, lambda: bool(fired))
        await asyncio.sleep(0)
        assert ref() is None

    gc.disable()
    try:
        run(main, "realtime", speed=1)
    finally:
        gc.enable()
