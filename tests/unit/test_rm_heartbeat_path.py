"""The RM's heartbeat path over TCP, without sockets: what its shortcuts must keep.

An admitted connection hands frames to the RM's end of each channel in one loop; the RM's links
send a registration's answer through the admission check and the rest straight out; an answer that
launches and kills nothing is framed on its own path; the RM handles a heartbeat before matching
other message types; the cost meter reads the live allocation counter around each event."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from emulator.harness.eventlog import make_logger
from emulator.measure.costs import RMCostMeter
from emulator.transport import auth
from emulator.transport.connection import TransportStats
from emulator.transport.framing import (
    HEADER,
    HEADER_SIZE,
    REPEAT,
    FrameDecoder,
    FrameEncoder,
    FrameTooLarge,
)
from emulator.transport.server import TcpServer, _ServerConnection
from ringmon.config import RingConfig
from ringmon.membership import decode_ids
from ringmon.protocol import RingDelta
from rm.protocol import (
    ContainerStatus,
    Disconnected,
    Heartbeat,
    HeartbeatResponse,
    NodeInbound,
    Register,
    RegisterResponse,
    Resources,
)
from rm.shell.manager import ResourceManager
from rm.state.operations import OperationSpec
from tests.helpers import FakeClock, RecordingLink


class _Transport:
    """What the connection writes, and whether it was cut off."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.aborted = False

    def get_extra_info(self, name: str) -> Any:
        return None

    def write(self, data: bytes) -> None:
        self.written += data

    def get_write_buffer_size(self) -> int:
        return 0

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def _hb(mid: int, hid: int) -> Heartbeat:
    return Heartbeat(machine_id=mid, heartbeat_id=hid, healthy=True,
                     statuses=(ContainerStatus(7, "running"),), full=True)


def _frames(*frames: tuple[int, Any]) -> bytes:
    enc, buf = FrameEncoder(), bytearray()
    for channel, msg in frames:
        if msg is None:
            FrameEncoder.append_close(buf, channel)
        else:
            enc.append(buf, channel, msg)
    return bytes(buf)


def test_an_admitted_connection_delivers_every_frame_to_its_channels_end_in_order() -> None:
    async def body() -> None:
        got: list[tuple[Any, Any]] = []
        server = TcpServer(lambda end, msg: got.append((end, msg)), make_logger(FakeClock(), None),
                           handshake_timeout_s=None)
        conn = _ServerConnection(server)
        transport = _Transport()
        conn.connection_made(transport)
        reg = Register(address="n1", resources=Resources(4, 8))
        conn.data_received(_frames((1, reg)))
        (end1, first), = got
        assert first == reg and not conn.admitted
        # A refused answer spends the admission budget; an accepted one admits the connection.
        end1.send(RegisterResponse(action="shutdown"))
        assert not conn.admitted and conn._budget == server.admission_frames - 1
        end1.send(RegisterResponse(action="normal", machine_id=1))
        assert conn.admitted and conn not in server.unadmitted
        got.clear()
        reg2 = Register(address="n2", resources=Resources(4, 8))
        # Frames of one read, admitted: a known channel, a new one, a close, the new one again.
        conn.data_received(_frames((1, _hb(1, 0)), (2, reg2), (1, None), (2, _hb(2, 0)), (1, _hb(1, 1))))
        end2 = got[1][0]
        assert [(e is end1, e is end2, m) for e, m in got] == [
            (True, False, _hb(1, 0)), (False, True, reg2), (True, False, Disconnected()),
            (False, True, _hb(2, 0)), (False, False, _hb(1, 1)),
        ]
        assert got[4][0] is not end1  # a closed channel's number starts a new end
        # The RM's answers go out framed on their channels, in order.
        got.clear()
        end2.send(HeartbeatResponse(action="normal", heartbeat_id=1))
        conn._flush()
        assert transport.written.endswith(_frames((2, HeartbeatResponse(action="normal", heartbeat_id=1))))
        # A proof after admission is unexpected: the connection is cut, the rest never delivered.
        conn.data_received(_frames((2, auth.Proof(mac=b"x")), (2, _hb(2, 1))))
        assert transport.aborted and got == []

    asyncio.run(body())


def test_an_answer_with_nothing_to_launch_repeats_and_refuses_as_any_frame() -> None:
    enc, buf = FrameEncoder(), bytearray()
    answer = HeartbeatResponse(action="normal", heartbeat_id=3)
    enc.append(buf, 5, answer)
    size = len(buf)
    assert enc.append(buf, 6, answer) == HEADER_SIZE  # the same object again: a header alone
    assert HEADER.unpack_from(buf, size) == (0, 6 | REPEAT)
    small = FrameEncoder(max_frame_bytes=4)
    out = bytearray(b"kept")
    with pytest.raises(FrameTooLarge, match="HeartbeatResponse"):
        small.append(out, 1, answer)
    assert out == b"kept"
    # Written from saved pieces, header first: the same frames, the same refusal, the same repeats.
    small.max_frame_bytes = 100
    first = HeartbeatResponse(action="normal", heartbeat_id=1)
    small.append(out, 1, first)
    frames = [(2, answer), (3, answer), (4, HeartbeatResponse(action="normal", heartbeat_id=300))]
    for channel, msg in frames:
        small.append(out, channel, msg)
    assert small.answers.hits == 3 and bytes(out[4:]) == _frames((1, first), *frames)
    assert FrameDecoder(NodeInbound).feed(bytes(out[4:]))[1:] == frames
    small.max_frame_bytes = 4
    with pytest.raises(FrameTooLarge, match="HeartbeatResponse"):
        small.append(out, 5, HeartbeatResponse(action="normal", heartbeat_id=4))
    assert FrameDecoder(NodeInbound).feed(bytes(out[4:]))[1:] == frames


def test_a_heartbeat_publishes_a_ring_batch_that_is_due() -> None:
    # The flush timer has not run (the loop is busy), but the next heartbeat the RM handles finds
    # the batch of joins older than batch_s and publishes it, as any other message would.
    clock = FakeClock()
    rm = ResourceManager(clock, make_logger(clock, None), heartbeat_mode="delta",
                         ring=RingConfig(batch_s=0.5, join_batch=0.5 / 3.0))
    links = [RecordingLink() for _ in range(3)]
    for i, link in enumerate(links):
        rm.receive(link, Register(address=f"n{i}", resources=Resources(4, 8)))
    assert not links[0].of(RingDelta)
    clock.t = 0.6
    rm.receive(links[1], Heartbeat(machine_id=2, heartbeat_id=0, healthy=True, statuses=(), full=True))
    assert [decode_ids(d.added) for d in links[0].of(RingDelta)] == [[1, 2, 3]]


def test_the_cost_meter_fits_node_updates_against_the_allocations_they_made() -> None:
    clock = FakeClock()
    rm = ResourceManager(clock, make_logger(clock, None))
    meter = RMCostMeter(rm)
    meter.install()
    link = RecordingLink()
    rm.receive(link, Register(address="n0", resources=Resources(4, 8)))
    rm.add_pool("p")
    rm.submit_operation(OperationSpec(name="op", pool="p", demand=Resources(1, 2), durations=[100.0] * 3))
    rm.receive(link, Heartbeat(machine_id=1, heartbeat_id=0, healthy=True, statuses=(), full=True))
    fit = meter.update_fit
    assert rm.allocations == 3 and fit.n >= 1 and fit.sx == 3.0


def test_a_link_may_have_max_per_link_messages_waiting_and_none_counted_when_served_at_once() -> None:
    clock = FakeClock()
    rm = ResourceManager(clock, make_logger(clock, None))
    link = RecordingLink()
    rm.receive(link, Register(address="n0", resources=Resources(4, 8)))
    bound = rm.admission.max_per_link
    for hid in range(3):  # an idle RM serves each at once: nothing waits, nothing is counted
        rm.receive(link, Heartbeat(machine_id=1, heartbeat_id=hid, healthy=True, statuses=(), full=True))
    assert rm.counters().heartbeats == 3 and rm.admission.dropped_over_link_bound == 0
    for _ in range(2):  # the bound holds, and is given back as what waited is handled
        rm.stall(1.0)
        hid = rm.counters().heartbeats
        for k in range(bound + 5):
            hb = Heartbeat(machine_id=1, heartbeat_id=hid + k, healthy=True, statuses=(), full=True)
            rm.receive(link, hb)
        rm.receive(link, Disconnected())  # always fits
        assert rm.inbound.depth == bound + 1
        clock.advance_to(clock.now() + 1.0)
        assert rm.inbound.depth == 0
    assert rm.admission.dropped_over_link_bound == 10
    assert rm.counters().heartbeats == 3 + 2 * bound


def test_transport_stats_report_every_counter_in_their_order_and_count_what_is_sent() -> None:
    assert list(TransportStats().snapshot()) == [
        "connections", "frames_in", "bytes_in", "frames_out", "bytes_out", "bad_frames", "reconnects",
        "refused", "evicted", "handshake_timeouts", "admission_closed", "slow_readers", "auth_failures",
        "proofs_refused",
    ]

    async def body() -> None:
        server = TcpServer(lambda end, msg: None, make_logger(FakeClock(), None), handshake_timeout_s=None)
        conn = _ServerConnection(server)
        conn.connection_made(_Transport())
        data = _frames((1, Register(address="n1", resources=Resources(4, 8))), (1, _hb(1, 0)))
        conn.data_received(data)
        conn.send(1, HeartbeatResponse(action="normal", heartbeat_id=1))
        sent = len(_frames((1, HeartbeatResponse(action="normal", heartbeat_id=1))))
        snap = server.stats.snapshot()
        counts = (snap["frames_in"], snap["bytes_in"], snap["frames_out"], snap["bytes_out"])
        assert counts == (2, len(data), 1, sent)
        assert snap["connections"] == 1

    asyncio.run(body())
