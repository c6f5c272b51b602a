"""Sans-IO framing: what the TCP transport accepts and refuses, byte by byte."""

from __future__ import annotations

import msgspec
import pytest

from emulator.transport.framing import (
    HEADER,
    REPEAT,
    SAME_RING,
    FrameDecoder,
    FrameEncoder,
    FrameTooLarge,
    MalformedFrame,
)
from ringmon.protocol import Ring, RingDelta
from rm.protocol import (
    ContainerLaunch,
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    NodeInbound,
    Register,
    RegisterResponse,
    Resources,
    RMInbound,
)

HB = Heartbeat(machine_id=3, heartbeat_id=9, healthy=True,
               statuses=(ContainerStatus(1, "running"), ContainerStatus(2, "complete", 0)), full=True)
REG = Register(address="node-1", resources=Resources(20, 40))


def test_frames_split_anywhere_decode_in_order() -> None:
    enc = FrameEncoder()
    buf = bytearray()
    enc.append(buf, 1, REG)
    enc.append(buf, 2, HB)
    FrameEncoder.append_close(buf, 2)
    enc.append(buf, 1, HB)
    for chunk in (1, 3, 7, len(buf)):
        dec = FrameDecoder(RMInbound)
        got = []
        for i in range(0, len(buf), chunk):
            got += dec.feed(bytes(buf[i : i + chunk]))
        assert got == [(1, REG), (2, HB), (2, None), (1, HB)]
        assert dec.buffered == 0


def test_incomplete_frame_is_held_back() -> None:
    data = FrameEncoder().encode(5, HB)
    dec = FrameDecoder(RMInbound)
    assert dec.feed(data[:-1]) == []
    assert dec.buffered == len(data) - 1
    assert dec.feed(data[-1:]) == [(5, HB)]


def test_oversized_frame_is_refused_from_its_header() -> None:
    dec = FrameDecoder(RMInbound, max_frame_bytes=1000)
    with pytest.raises(FrameTooLarge, match="1001 bytes"):
        dec.feed(HEADER.pack(1001, 1))  # refused before any payload arrives


def test_encoder_refuses_a_frame_the_peer_would_refuse() -> None:
    enc = FrameEncoder(max_frame_bytes=64)
    buf = bytearray(b"keep")
    big = Register(address="x" * 100, resources=Resources(1, 1))
    with pytest.raises(FrameTooLarge):
        enc.append(buf, 1, big)
    assert buf == b"keep"


@pytest.mark.parametrize(
    "payload",
    [
        b"\xc1\xc1\xc1",  # not msgpack
        msgspec.msgpack.encode(HeartbeatResponse(action="normal", heartbeat_id=1)),  # wrong direction
        msgspec.msgpack.encode({"type": "Heartbeat", "machine_id": "x"}),  # wrong field type
    ],
    ids=["garbage", "wrong-type", "bad-field"],
)
def test_malformed_payload_raises(payload: bytes) -> None:
    dec = FrameDecoder(RMInbound)
    with pytest.raises(MalformedFrame):
        dec.feed(HEADER.pack(len(payload), 4) + payload)


def _ring(n: int, version: int = 7) -> Ring:
    return Ring(version=version, ids=tuple(range(1, n + 1)))


def test_a_broadcast_costs_one_encoding_per_connection() -> None:
    delta = RingDelta(version=8, base_version=7, added=tuple(range(1000, 3000)), removed=())
    enc = FrameEncoder()
    one = bytearray()
    enc.append(one, 1, delta)
    buf = bytearray(one)
    for channel in range(2, 1001):
        assert enc.append(buf, channel, delta) == HEADER.size
    assert len(buf) == len(one) + 999 * HEADER.size
    frames = FrameDecoder(NodeInbound).feed(bytes(buf))
    assert [c for c, _ in frames] == list(range(1, 1001))
    assert all(m == delta for _, m in frames)


def test_register_responses_carry_the_ring_once_per_connection() -> None:
    ring = _ring(20_000)
    enc = FrameEncoder()
    buf = bytearray()
    sizes = [enc.append(buf, c, RegisterResponse(action="normal", machine_id=c, ring=ring))
             for c in range(1, 101)]
    assert sizes[0] > 50_000 and max(sizes[1:]) < 100
    newer = _ring(20_001, version=8)
    assert enc.append(buf, 101, RegisterResponse(action="normal", machine_id=101, ring=newer)) > 50_000
    enc.append(buf, 102, RegisterResponse(action="normal", machine_id=102, ring=newer))
    frames = FrameDecoder(NodeInbound).feed(bytes(buf))
    assert [m.machine_id for _, m in frames] == list(range(1, 103))
    assert all(m.ring == ring for _, m in frames[:100])
    assert frames[100][1].ring == newer and frames[101][1].ring == newer


@pytest.mark.parametrize("word", [1 | REPEAT, 1 | REPEAT | SAME_RING])
def test_a_repeat_with_nothing_before_it_is_malformed(word: int) -> None:
    with pytest.raises(MalformedFrame):
        FrameDecoder(NodeInbound).feed(HEADER.pack(0, word))


def test_flags_that_refer_to_nothing_are_malformed() -> None:
    body = msgspec.msgpack.encode(RegisterResponse(action="normal", machine_id=1))
    with pytest.raises(MalformedFrame):
        FrameDecoder(NodeInbound).feed(HEADER.pack(len(body), 1 | SAME_RING) + body)
    hb = msgspec.msgpack.encode(HeartbeatResponse(action="normal", heartbeat_id=1))
    with pytest.raises(MalformedFrame):
        FrameDecoder(NodeInbound).feed(HEADER.pack(len(hb), 1 | SAME_RING) + hb)


def test_a_node_host_delivers_a_burst_in_batches_letting_its_timers_run_between() -> None:
    import asyncio
    from typing import Any

    from emulator.transport.framing import FrameEncoder
    from emulator.transport.tcp import FramedConnection, TransportStats
    from rm.protocol import HeartbeatResponse, NodeInbound

    class Quiet:
        def __getattr__(self, _: str) -> Any:
            return lambda *a, **k: None

    burst = 5_000

    async def main(yield_every: int | None) -> tuple[list[int], int]:
        delivered: list[int] = []
        seen_by_timer: list[int] = []

        class Conn(FramedConnection):
            def on_frame(self, channel: int, msg: Any) -> None:
                if not delivered:  # a timer falling due while the burst is delivered
                    asyncio.get_running_loop().call_later(0, lambda: seen_by_timer.append(len(delivered)))
                delivered.append(msg.heartbeat_id)

        Conn.yield_every = yield_every
        enc, buf = FrameEncoder(), bytearray()
        for i in range(burst):
            enc.append(buf, 1, HeartbeatResponse(action="normal", heartbeat_id=i))

        writers: list[asyncio.StreamWriter] = []

        async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            writer.write(bytes(buf))
            await writer.drain()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_connection(
            lambda: Conn(NodeInbound, 1 << 20, Quiet(), TransportStats()), "127.0.0.1", port)
        async with asyncio.timeout(10):
            while len(delivered) < burst:
                await asyncio.sleep(0.01)
        transport.close()
        for w in writers:
            w.close()
            await w.wait_closed()
        server.close()
        await server.wait_closed()
        return delivered, seen_by_timer[0]

    delivered, at_timer = asyncio.run(main(256))
    assert delivered == list(range(burst))  # all of it, in order
    assert at_timer <= 2 * 256  # the timer ran after a batch, not after the whole burst
    _, at_timer = asyncio.run(main(None))
    assert at_timer > 2 * 256  # without batches it waits for whatever arrived at once


def _body(frame: bytes) -> bytes:
    size, _word = HEADER.unpack_from(frame)
    assert len(frame) == HEADER.size + size
    return frame[HEADER.size :]


def test_a_periodic_report_goes_whole_every_interval() -> None:
    """Periodic mode models stock YARN: every report carries the node's full status list, encoded
    as msgspec encodes the Heartbeat, even when it is the very statuses tuple sent last time."""
    enc, dec = FrameEncoder(), FrameDecoder(RMInbound)
    statuses = tuple(ContainerStatus(c, "running") for c in range(30))
    for hid in (1, 2, 300, 70_000):
        hb = Heartbeat(machine_id=3, heartbeat_id=hid, healthy=True, statuses=statuses, full=True)
        frame = enc.encode(7, hb)
        assert _body(frame) == msgspec.msgpack.encode(hb)
        ((channel, got),) = dec.feed(frame)
        assert channel == 7 and got == hb and len(got.statuses) == 30


def test_answers_that_launch_and_kill_nothing_are_msgspecs_bytes() -> None:
    """Such answers are written from saved pieces around a new heartbeat id: the same bytes."""
    # The pieces are kept per action: an answer with no launch and no kill must have no other field
    # that could differ (a new one needs the encoder's key to include it).
    assert HeartbeatResponse.__struct_fields__ == ("action", "heartbeat_id", "launch", "kill")
    enc, dec = FrameEncoder(), FrameDecoder(NodeInbound)
    sent = [HeartbeatResponse(action=a, heartbeat_id=hid)
            for hid in (1, 200, 70_000, 2**40) for a in ("normal", "resync")]
    sent.insert(2, HeartbeatResponse(action="normal", heartbeat_id=5,
                                     launch=(ContainerLaunch(4, Resources(1, 2), 9.0),)))
    sent.insert(4, HeartbeatResponse(action="normal", heartbeat_id=6, kill=(4,)))
    buf = bytearray()
    for i, msg in enumerate(sent):
        enc.append(buf, i + 1, msg)
    assert dec.feed(bytes(buf)) == [(i + 1, m) for i, m in enumerate(sent)]
    for msg in sent:
        assert _body(enc.encode(1, msg)) == msgspec.msgpack.encode(msg)
    assert enc.answers.hits == 2 * 8 - 2  # every empty answer but the first of each action
