"""The harness's control port against strangers and impostors, over real sockets on 127.0.0.1: a
worker proves the secret without sending it; a worker id that has joined cannot be claimed again
(a forged worker death); silent connections time out, are capped, and may not send big frames."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from emulator.harness.control import ControlClient, ControlServer, WorkerHello, WorkerLink
from emulator.harness.eventlog import make_logger
from emulator.time.clock import LoopClock, run
from emulator.transport import auth
from emulator.transport.framing import HEADER, FrameDecoder, FrameEncoder
from tests.process.test_peer_auth import hung_up
from tests.process.test_transport_conformance import eventually

SECRET = "control-secret-77c1"


class Harness:
    def __init__(self, clock: LoopClock, **kw: Any) -> None:
        self.joined: list[WorkerLink] = []
        self.died: list[WorkerLink] = []
        self.server = ControlServer(make_logger(clock, None), SECRET, self.joined.append,
                                    self.died.append, **kw)
        self.clock = clock
        # Closed whatever the test's outcome: a socket left open fails the run (ResourceWarning).
        self.writers: list[asyncio.StreamWriter] = []
        self.clients: list[ControlClient] = []

    def client(self) -> ControlClient:
        c = ControlClient(make_logger(self.clock, None), lambda msg: None)
        self.clients.append(c)
        return c

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(*self.server.address)
        self.writers.append(writer)
        return reader, writer

    def close(self) -> None:
        for w in self.writers:
            w.close()
        for c in self.clients:
            c.close()


def drive(body: Callable[[Harness, LoopClock], Awaitable[None]], **kw: Any) -> None:
    async def main(clock: LoopClock) -> None:
        h = Harness(clock, **kw)
        await h.server.start()
        try:
            await body(h, clock)
        finally:
            h.close()
            await clock.sleep(0.05)
            await h.server.close()

    run(main, "realtime")


def hello(worker: int) -> WorkerHello:
    return WorkerHello(worker=worker, pid=100 + worker, nodes=[f"n{worker}"], peer_endpoint="")


async def raw(h: Harness) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await h.open()
    dec = FrameDecoder(auth.Challenge)
    async with asyncio.timeout(5):
        while not (frames := dec.feed(chunk := await reader.read(4096))):
            assert chunk, "closed before its challenge"
    ((_, challenge),) = frames
    return reader, writer, challenge.nonce


def test_a_worker_proves_the_secret_without_sending_it() -> None:
    async def main(clock: LoopClock) -> None:
        got = bytearray()
        nonce = auth.new_challenge()

        async def fake_harness(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(FrameEncoder().encode(0, nonce))
            try:
                async with asyncio.timeout(1):
                    while chunk := await reader.read(4096):
                        got.extend(chunk)
            except TimeoutError:
                pass
            writer.close()

        server = await asyncio.start_server(fake_harness, "127.0.0.1", 0)
        client = ControlClient(make_logger(clock, None), lambda msg: None)
        try:
            host, port = server.sockets[0].getsockname()[:2]
            await client.connect(host, port, hello(1), SECRET)
            await clock.sleep(1.2)
        finally:
            client.close()
            server.close()
        assert SECRET.encode() not in got
        frames = FrameDecoder(auth.Proof | WorkerHello).feed(bytes(got))
        assert [type(m) for _, m in frames] == [auth.Proof, WorkerHello]
        assert auth.verify(SECRET, nonce, auth.CONTROL, frames[0][1])
        assert not auth.verify(SECRET, nonce, auth.PEER, frames[0][1])  # good for this port only

    run(main, "realtime")


def test_an_honest_worker_joins_and_a_wrong_proof_is_refused() -> None:
    async def body(h: Harness, clock: LoopClock) -> None:
        client = h.client()
        big = WorkerHello(worker=1, pid=1, nodes=[f"node-{i:05}" for i in range(2000)])
        await client.connect(*h.server.address, big, SECRET)  # sent with its proof, > 4 KiB
        await eventually(clock, lambda: len(h.joined) == 1)
        assert len(h.joined[0].nodes) == 2000
        intruder = h.client()
        await intruder.connect(*h.server.address, hello(2), "guess")
        assert intruder.lost is not None
        async with asyncio.timeout(5):
            await intruder.lost
        assert [w.worker for w in h.joined] == [1] and h.server.gate.rejected == 1
        client.close()

    drive(body)


def test_a_worker_id_that_joined_cannot_be_claimed_again() -> None:
    async def body(h: Harness, clock: LoopClock) -> None:
        real = h.client()
        await real.connect(*h.server.address, hello(1), SECRET)
        await eventually(clock, lambda: len(h.joined) == 1)
        # An impostor holding the secret claims worker 1, then goes: a forged death, were it let in.
        reader, writer, nonce = await raw(h)
        enc = FrameEncoder()
        writer.write(enc.encode(0, auth.prove(SECRET, nonce, auth.CONTROL)))
        writer.write(enc.encode(0, WorkerHello(worker=1, pid=666, nodes=["n1"])))
        await writer.drain()
        assert await hung_up(reader, 5)
        writer.close()
        await clock.sleep(0.2)
        assert h.died == [] and len(h.joined) == 1
        link = h.server.workers[1]
        assert link.pid == 101 and link.alive
        real.close()

    drive(body)


def test_silent_connections_time_out_and_are_capped() -> None:
    async def body(h: Harness, clock: LoopClock) -> None:
        silent = [await h.open() for _ in range(8)]
        await eventually(clock, lambda: h.server.stats.evicted == 5)
        assert len(h.server.gate.connections) == 3
        client = h.client()
        await client.connect(*h.server.address, hello(1), SECRET)  # still gets in
        await eventually(clock, lambda: len(h.joined) == 1)
        # the others say nothing: closed at the handshake timeout
        await eventually(clock, lambda: len(h.server.gate.connections) == 1, timeout_s=5)
        assert h.server.stats.handshake_timeouts >= 1
        for _, writer in silent:
            writer.close()
        client.close()

    drive(body, max_connections=3, handshake_timeout_s=1.0)


def test_before_its_proof_a_connection_may_not_announce_a_large_frame() -> None:
    async def body(h: Harness, clock: LoopClock) -> None:
        reader, writer, _ = await raw(h)
        writer.write(HEADER.pack(1 << 20, 0) + bytes(1000))  # a 1 MiB frame, the start of it
        await writer.drain()
        assert await hung_up(reader, 2)  # at once, not at the 30 s handshake timeout
        writer.close()
        assert h.server.stats.bad_frames == 1

    drive(body, handshake_timeout_s=30.0)
