"""Sans-IO framing: what the TCP transport accepts and refuses, byte by byte."""

from __future__ import annotations

import msgspec
import pytest

from emulator.transport.framing import (
    HEADER,
    FrameDecoder,
    FrameEncoder,
    FrameTooLarge,
    MalformedFrame,
)
from rm.protocol import (
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    Register,
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
