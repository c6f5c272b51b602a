"""One conformance suite for the node<->node channel (ring liveness), in memory and over TCP
between two node-hosting processes' channels on 127.0.0.1: delivery by machine id, FIFO, never
inside ``send``, unbinding, loss injection; over TCP also the hello, the secret, and a malformed
frame closing only its own connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from emulator.harness.eventlog import make_logger
from emulator.time.clock import LoopClock, run
from emulator.transport import auth
from emulator.transport.framing import HEADER, FrameDecoder, FrameEncoder
from emulator.transport.peers import MemoryPeers
from emulator.transport.peers_tcp import PeerHello, TcpPeers, split_endpoint
from ringmon.protocol import Liveness, LivenessPing
from tests.process.test_transport_conformance import eventually


async def challenged(endpoint: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """Connect to a peer port and read its challenge (its first frame, and all it sends)."""
    reader, writer = await asyncio.open_connection(*split_endpoint(endpoint))
    dec = FrameDecoder(auth.Challenge)
    async with asyncio.timeout(5):
        while not (frames := dec.feed(chunk := await reader.read(4096))):
            assert chunk, "closed before its challenge"
    ((_, challenge),) = frames
    return reader, writer, challenge.nonce


class Box:
    def __init__(self) -> None:
        self.got: list[Any] = []

    def from_peer(self, msg: Any) -> None:
        self.got.append(msg)

    def heard_from(self, sender: int, ring_version: int) -> bool:
        return False  # every liveness as a message, to see it

    def sender_stopped(self, sender: int, last_s: float) -> None:
        pass

    def liveness_lossy(self) -> None:
        pass


class Pair:
    """Two "processes": channel ``a`` hosts some machine ids, channel ``b`` others. In memory both
    are one channel; over TCP each is a TcpPeers with its own listening endpoint."""

    def __init__(self, kind: str, clock: LoopClock, secret: str = "s3cret") -> None:
        self.kind = kind
        self.clock = clock
        self.secret = secret
        self.a: Any = None
        self.b: Any = None

    async def start(self) -> None:
        if self.kind == "memory":
            self.a = self.b = MemoryPeers(self.clock, seed=1)
            return
        log = make_logger(self.clock, None)
        self.a = TcpPeers(self.clock, log, self.secret, seed=1, handshake_timeout_s=1.0)
        self.b = TcpPeers(self.clock, log, self.secret, seed=2, handshake_timeout_s=1.0)
        await self.a.start()
        await self.b.start()

    def where(self, side: Any) -> str:
        return "" if self.kind == "memory" else side.endpoint

    async def close(self) -> None:
        if self.kind == "tcp":
            await self.a.close()
            await self.b.close()


def drive(kind: str, body: Callable[[Pair, LoopClock], Awaitable[None]]) -> None:
    async def main(clock: LoopClock) -> None:
        pair = Pair(kind, clock)
        await pair.start()
        try:
            await body(pair, clock)
        finally:
            await pair.close()

    run(main, "realtime")


KINDS = ["memory", "tcp"]


@pytest.mark.parametrize("kind", KINDS)
def test_messages_reach_the_bound_receiver_in_order(kind: str) -> None:
    async def body(p: Pair, clock: LoopClock) -> None:
        five, seven = Box(), Box()
        p.a.bind(5, five)
        p.b.bind(7, seven)
        sent = [Liveness(sender=5, seq=i, ring_version=3) for i in range(200)]
        for msg in sent:
            p.a.send(7, msg, p.where(p.b))
        p.b.send(5, LivenessPing(sender=7), p.where(p.a))
        await eventually(clock, lambda: len(seven.got) == 200 and len(five.got) == 1)
        assert seven.got == sent
        assert five.got == [LivenessPing(sender=7)]

    drive(kind, body)


@pytest.mark.parametrize("kind", KINDS)
def test_send_never_runs_the_receiver_inside_it(kind: str) -> None:
    async def body(p: Pair, clock: LoopClock) -> None:
        local, remote = Box(), Box()
        p.a.bind(1, local)
        p.b.bind(2, remote)
        p.a.send(1, Liveness(sender=9, seq=1), p.where(p.a))  # same process
        p.a.send(2, Liveness(sender=1, seq=1), p.where(p.b))  # the other one
        assert local.got == [] and remote.got == []
        await eventually(clock, lambda: len(local.got) == 1 and len(remote.got) == 1)

    drive(kind, body)


@pytest.mark.parametrize("kind", KINDS)
def test_an_unbound_id_gets_nothing_and_a_rebinding_takes_over(kind: str) -> None:
    async def body(p: Pair, clock: LoopClock) -> None:
        old, new = Box(), Box()
        p.b.bind(4, old)
        p.b.bind(4, new)  # the id was reused: the latest binder gets its messages
        p.b.unbind(4, old)  # a stale claimant leaving does not cut off the new owner
        p.a.send(4, Liveness(sender=1, seq=1), p.where(p.b))
        await eventually(clock, lambda: len(new.got) == 1)
        p.b.unbind(4, new)
        before = p.b.counters.undeliverable
        p.a.send(4, Liveness(sender=1, seq=2), p.where(p.b))
        await eventually(clock, lambda: p.b.counters.undeliverable == before + 1)
        assert old.got == [] and len(new.got) == 1

    drive(kind, body)


@pytest.mark.parametrize("kind", KINDS)
def test_loss_drops_that_fraction_at_the_sender(kind: str) -> None:
    async def body(p: Pair, clock: LoopClock) -> None:
        box = Box()
        p.b.bind(3, box)
        p.a.set_loss(0.5)
        for i in range(400):
            p.a.send(3, Liveness(sender=1, seq=i), p.where(p.b))
        await eventually(clock, lambda: len(box.got) + p.a.counters.lost == 400)
        assert 140 <= p.a.counters.lost <= 260
        p.a.set_loss(0.0)

    drive(kind, body)


class Watcher(Box):
    """Takes a liveness as a timestamp unless told to refuse it (a stalled in-loop watcher)."""

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[int] = []
        self.refuse = False

    def heard_from(self, sender: int, ring_version: int) -> bool:
        if self.refuse:
            return False
        self.heard.append(sender)
        return True


@pytest.mark.parametrize("kind", KINDS)
def test_liveness_within_a_process_is_a_timestamp_unless_a_fault_could_touch_it(kind: str) -> None:
    async def body(p: Pair, clock: LoopClock) -> None:
        w = Watcher()
        p.a.bind(2, w)
        assert p.a.touch(2, 1, 0) and w.heard == [1]  # bound here: written on the watcher
        w.refuse = True
        assert not p.a.touch(2, 1, 0)  # the watcher wants the message (a stalled in-loop one)
        w.refuse = False
        p.a.set_loss(0.5)
        assert not p.a.touch(2, 1, 0)  # loss injected: every liveness is a message that may drop
        p.a.set_loss(0.0)
        p.a.unbind(2, w)  # crashed: whatever the sender does, nothing reaches the watcher
        if kind == "tcp":
            assert not p.a.touch(2, 1, 0)  # not ours (any more): a message, sent or undeliverable
            p.b.bind(3, w)
            assert not p.a.touch(3, 1, 0)  # another process's node: always a message
        assert w.heard == [1] and w.got == []

    drive(kind, body)


def test_tcp_answers_a_sender_its_ring_does_not_know_where_it_came_from() -> None:
    async def body(p: Pair, clock: LoopClock) -> None:
        a_box, b_box = Box(), Box()
        p.a.bind(1, a_box)
        p.b.bind(2, b_box)
        p.a.send(2, LivenessPing(sender=1), p.b.endpoint)
        await eventually(clock, lambda: len(b_box.got) == 1)
        p.b.send(1, Liveness(sender=2, seq=1))  # no endpoint given: learned from the ping
        await eventually(clock, lambda: len(a_box.got) == 1)
        assert p.a.connections == p.b.connections == 1  # one connection for the pair

    drive("tcp", body)


def test_tcp_simultaneous_connects_settle_on_one_connection() -> None:
    async def body(p: Pair, clock: LoopClock) -> None:
        a_box, b_box = Box(), Box()
        p.a.bind(1, a_box)
        p.b.bind(2, b_box)
        for i in range(50):  # both open a connection to the other at once
            p.a.send(2, Liveness(sender=1, seq=i), p.b.endpoint)
            p.b.send(1, Liveness(sender=2, seq=i), p.a.endpoint)
        await eventually(clock, lambda: p.a.connections == p.b.connections == 1)
        for i in range(50, 60):
            p.a.send(2, Liveness(sender=1, seq=i), p.b.endpoint)
            p.b.send(1, Liveness(sender=2, seq=i), p.a.endpoint)
        await eventually(clock, lambda: [m.seq for m in b_box.got][-10:] == list(range(50, 60)))
        await eventually(clock, lambda: [m.seq for m in a_box.got][-10:] == list(range(50, 60)))

    drive("tcp", body)


@pytest.mark.parametrize("bad", ["garbage", "wrong_secret", "no_hello", "malformed_after_hello"])
def test_tcp_a_bad_peer_connection_is_closed_alone(bad: str) -> None:
    async def body(p: Pair, clock: LoopClock) -> None:
        box = Box()
        p.b.bind(2, box)
        p.a.send(2, Liveness(sender=1, seq=0), p.b.endpoint)  # an honest connection a -> b
        await eventually(clock, lambda: len(box.got) == 1)
        reader, writer, nonce = await challenged(p.b.endpoint)
        enc = FrameEncoder()
        if bad == "garbage":
            writer.write(b"\x00\x00\x00\x05\x00\x00\x00\x00hello")
        elif bad == "wrong_secret":
            writer.write(enc.encode(0, auth.prove("guess", nonce, auth.PEER)))
            writer.write(enc.encode(0, PeerHello(endpoint="x:1")))
        elif bad == "malformed_after_hello":
            writer.write(enc.encode(0, auth.prove(p.secret, nonce, auth.PEER)))
            writer.write(enc.encode(0, PeerHello(endpoint="x:1")))
            writer.write(HEADER.pack(3, 2) + b"\xc1\xc1\xc1")
        await writer.drain()
        async with asyncio.timeout(5):  # closed by b (no_hello: after its handshake timeout)
            while await reader.read(65536):
                pass
        writer.close()
        p.a.send(2, Liveness(sender=1, seq=1), p.b.endpoint)  # the honest one still works
        await eventually(clock, lambda: len(box.got) == 2)
        if bad in ("wrong_secret", "no_hello", "garbage"):
            assert p.b.counters.rejected + p.b.stats.bad_frames >= 1

    drive("tcp", body)
