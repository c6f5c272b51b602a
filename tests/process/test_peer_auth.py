"""A worker's peer port against strangers and impostors, over real sockets on 127.0.0.1: it hands
out a challenge, never the secret; an endpoint already connected cannot be claimed again; its
connections are capped; before a proof only small frames are read."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from emulator.harness.eventlog import make_logger
from emulator.time.clock import LoopClock, run
from emulator.transport import auth
from emulator.transport.framing import HEADER, FrameDecoder, FrameEncoder
from emulator.transport.peers_tcp import PeerHello, TcpPeers, split_endpoint
from ringmon.protocol import Liveness
from tests.process.test_peer_conformance import Box, challenged
from tests.process.test_transport_conformance import eventually

SECRET = "peer-secret-0f9a"


def drive(body: Callable[[TcpPeers, TcpPeers, LoopClock], Awaitable[None]], **kw: float) -> None:
    async def main(clock: LoopClock) -> None:
        log = make_logger(clock, None)
        a = TcpPeers(clock, log, SECRET, seed=1)
        b = TcpPeers(clock, log, SECRET, seed=2, **kw)  # type: ignore[arg-type]
        await a.start()
        await b.start()
        try:
            await body(a, b, clock)
        finally:
            await a.close()
            await b.close()

    run(main, "realtime")


async def hung_up(reader: asyncio.StreamReader, timeout_s: float) -> bool:
    try:
        async with asyncio.timeout(timeout_s):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


def test_the_peer_port_answers_a_stranger_with_a_fresh_challenge_never_the_secret() -> None:
    async def body(a: TcpPeers, b: TcpPeers, clock: LoopClock) -> None:
        nonces = []
        for _ in range(2):
            reader, writer = await asyncio.open_connection(*split_endpoint(b.endpoint))
            got = b""
            try:
                async with asyncio.timeout(0.5):  # all it says to someone who says nothing
                    while chunk := await reader.read(4096):
                        got += chunk
            except TimeoutError:
                pass
            writer.close()
            assert SECRET.encode() not in got
            ((_, challenge),) = FrameDecoder(auth.Challenge).feed(got)
            assert len(challenge.nonce) == auth.NONCE_BYTES
            nonces.append(challenge.nonce)
        assert nonces[0] != nonces[1]

    drive(body)


def test_an_endpoint_already_connected_cannot_be_claimed_by_a_newcomer() -> None:
    async def body(a: TcpPeers, b: TcpPeers, clock: LoopClock) -> None:
        a_box, b_box = Box(), Box()
        a.bind(1, a_box)
        b.bind(2, b_box)
        a.send(2, Liveness(sender=1, seq=0), b.endpoint)  # the real connection a -> b
        await eventually(clock, lambda: len(b_box.got) == 1)
        # An impostor holding the secret claims to be a.
        reader, writer, nonce = await challenged(b.endpoint)
        enc = FrameEncoder()
        writer.write(enc.encode(0, auth.prove(SECRET, nonce, auth.PEER)))
        writer.write(enc.encode(0, PeerHello(endpoint=a.endpoint)))
        await writer.drain()
        assert await hung_up(reader, 5)  # refused
        writer.close()
        assert b.counters.rejected == 1 and b.connections == 1
        b.send(1, Liveness(sender=2, seq=7), a.endpoint)  # goes to the real a, not the impostor
        a.send(2, Liveness(sender=1, seq=1), b.endpoint)
        await eventually(clock, lambda: len(a_box.got) == 1 and len(b_box.got) == 2)
        assert a_box.got[0].seq == 7

    drive(body)


def test_incoming_connections_are_capped_and_silent_ones_make_room_for_a_worker() -> None:
    async def body(a: TcpPeers, b: TcpPeers, clock: LoopClock) -> None:
        silent = [await asyncio.open_connection(*split_endpoint(b.endpoint)) for _ in range(10)]
        await eventually(clock, lambda: b.stats.evicted == 6)
        assert len(b.gate.connections) == 4
        box = Box()
        b.bind(2, box)
        a.send(2, Liveness(sender=1, seq=0), b.endpoint)  # an honest worker still gets in
        await eventually(clock, lambda: len(box.got) == 1)
        for _, writer in silent:
            writer.close()
        # Once every slot has said who it is, a newcomer is refused rather than evicting one.
        b.gate.max_connections = 1
        reader, writer = await asyncio.open_connection(*split_endpoint(b.endpoint))
        assert await hung_up(reader, 5)
        writer.close()
        assert b.stats.refused >= 1 and b.connections == 1

    drive(body, max_connections=4, handshake_timeout_s=30.0)


def test_before_its_proof_a_connection_may_not_announce_a_large_frame() -> None:
    async def body(a: TcpPeers, b: TcpPeers, clock: LoopClock) -> None:
        reader, writer, _ = await challenged(b.endpoint)
        writer.write(HEADER.pack(64 << 10, 0) + bytes(1000))  # a 64 KiB frame, the start of it
        await writer.drain()
        assert await hung_up(reader, 2)  # at once, not at the 30 s handshake timeout
        writer.close()
        assert b.stats.bad_frames == 1

    drive(body, handshake_timeout_s=30.0)


def test_a_channel_close_frame_closes_the_peer_connection_not_the_worker() -> None:
    async def body(a: TcpPeers, b: TcpPeers, clock: LoopClock) -> None:
        reader, writer, nonce = await challenged(b.endpoint)
        enc = FrameEncoder()
        writer.write(enc.encode(0, auth.prove(SECRET, nonce, auth.PEER)))
        writer.write(enc.encode(0, PeerHello(endpoint="127.0.0.1:9")))
        writer.write(HEADER.pack(0, 5))  # an empty frame: "close channel 5", which peers never send
        await writer.drain()
        assert await hung_up(reader, 2)
        writer.close()
        assert b.stats.bad_frames == 1
        box = Box()
        b.bind(2, box)
        a.send(2, Liveness(sender=1, seq=0), b.endpoint)  # b still serves others
        await eventually(clock, lambda: len(box.got) == 1)

    drive(body)
