"""The RM port proves the secret instead of carrying it, over real sockets on 127.0.0.1: nodes
register after their client answered the RM's challenge and their registrations carry no secret;
the secret sent in clear no longer registers anybody; a wrong proof closes that connection only."""

from __future__ import annotations

import asyncio
from typing import Any

from emulator.time.clock import LoopClock, run
from emulator.transport import auth
from emulator.transport.framing import FrameDecoder, FrameEncoder
from rm.protocol import Register, Resources, RMInbound
from tests.process.test_tcp_abuse import events, honest_cluster, hung_up
from tests.process.test_transport_conformance import eventually

SECRET = "rm-secret-4be2d0"


class Tap:
    """A transport that keeps a copy of what is written to it."""

    def __init__(self, inner: Any, copy: bytearray) -> None:
        self._inner = inner
        self._copy = copy

    def write(self, data: bytes) -> None:
        self._copy.extend(data)
        self._inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def challenged(address: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection(*address)
    dec = FrameDecoder(auth.Challenge)
    async with asyncio.timeout(5):
        while not (frames := dec.feed(chunk := await reader.read(4096))):
            assert chunk, "closed before its challenge"
    ((_, challenge),) = frames
    return reader, writer, challenge.nonce


def test_nodes_register_by_proof_and_no_frame_carries_the_secret() -> None:
    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock, credentials=SECRET) as h:
            await h.still_served()
            assert len(h.rm.nodes_view()) == 3
            conn = next(iter(h.server.connections))
            assert conn.authenticated
            wire = bytearray()
            conn_out = h.client._conn
            assert conn_out is not None
            conn_out._transport = Tap(conn_out._transport, wire)
            for node in h.nodes:
                node.resync()  # re-registers: the node's Register has the secret, the wire not
            await eventually(clock, lambda: h.stats.registrations == 6)
            regs = [m for _, m in FrameDecoder(RMInbound).feed(bytes(wire)) if isinstance(m, Register)]
            assert len(regs) == 3 and SECRET.encode() not in wire

    run(main, "realtime", speed=10)


def test_the_secret_in_clear_no_longer_registers_a_node() -> None:
    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock, credentials=SECRET) as h:
            reader, writer, _ = await challenged(h.address)
            writer.write(FrameEncoder().encode(
                1, Register(address="clear", resources=Resources(8, 16), credentials=SECRET)))
            await writer.drain()
            assert await hung_up(reader, 5)  # refused; closed at the handshake timeout
            writer.close()
            assert "clear" not in {n.address for n in h.rm.nodes_view()}
            assert any(e["event"] == "node.rejected" and e["address"] == "clear" for e in events(h.sink))

    run(main, "realtime", speed=10)


def test_a_wrong_proof_closes_that_connection_at_once_and_only_it() -> None:
    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock, credentials=SECRET, handshake_s=30.0) as h:
            for label, secret in ((auth.RM, "guess"), (auth.PEER, SECRET)):  # another port's proof
                reader, writer, nonce = await challenged(h.address)
                writer.write(FrameEncoder().encode(0, auth.prove(secret, nonce, label)))
                await writer.drain()
                assert await hung_up(reader, 2)  # not at the 30 s handshake timeout
                writer.close()
            assert h.server.stats.auth_failures == 2
            assert any(e["event"] == "transport.auth_failed" for e in events(h.sink))
            await h.still_served()
            assert SECRET not in h.sink.getvalue()

    run(main, "realtime", speed=10)


def test_the_abuse_insider_registers_by_proof() -> None:
    """``emulator abuse``'s fake-container attacker holds the secret: it must prove it, as workers
    do, or its attack measures nothing."""
    from emulator.experiments.abuse import fake_container_flood

    async def main(clock: LoopClock) -> None:
        async with honest_cluster(clock, credentials=SECRET) as h:
            counts = await fake_container_flood(*h.address, 1.0, SECRET, liars=1, per_heartbeat=1100)
            assert counts.frames_sent >= 1

    run(main, "realtime", speed=10)
