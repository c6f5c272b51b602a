"""The RM's decoder reads a node report's statuses once per change (``emulator.transport.reports``):
what it hands the RM must be the report the node sent, and invalid statuses still refused."""

from __future__ import annotations

import asyncio
from typing import Any, get_type_hints

import msgspec
import pytest

from emulator.harness.eventlog import make_logger
from emulator.transport.framing import HEADER, FrameDecoder, FrameEncoder, MalformedFrame
from emulator.transport.reports import ENTRY_BYTES, ReportStatuses, WireHeartbeat
from emulator.transport.server import TcpServer, _ServerConnection
from rm.protocol import (
    ContainerStatus,
    ContainerUsage,
    Heartbeat,
    LaunchContainers,
    NodeInbound,
    Register,
    Resources,
    RMInbound,
)
from rm.shell.manager import ResourceManager
from rm.state.operations import OperationSpec
from tests.helpers import FakeClock
from tests.unit.test_rm_heartbeat_path import _frames, _Transport


def _hb(hid: int, *statuses: ContainerStatus, mid: int = 1, **extra: Any) -> Heartbeat:
    return Heartbeat(machine_id=mid, heartbeat_id=hid, healthy=True, statuses=statuses, full=True, **extra)


RUNNING = (ContainerStatus(1, "running"), ContainerStatus(2, "running"))


def test_the_wire_form_is_the_heartbeat_with_its_statuses_undecoded() -> None:
    hb_info, wire_info = Heartbeat.__struct_config__, WireHeartbeat.__struct_config__
    assert (wire_info.tag, wire_info.tag_field) == (hb_info.tag, hb_info.tag_field)
    assert (wire_info.omit_defaults, wire_info.array_like) == (hb_info.omit_defaults, hb_info.array_like)
    assert WireHeartbeat.__struct_fields__ == Heartbeat.__struct_fields__
    assert WireHeartbeat.__struct_defaults__ == Heartbeat.__struct_defaults__
    hints, wire_hints = get_type_hints(Heartbeat), get_type_hints(WireHeartbeat)
    assert {k: v for k, v in wire_hints.items() if k != "statuses"} == {
        k: v for k, v in hints.items() if k != "statuses"
    }
    usage = (ContainerUsage(container_id=1, cpu=0.5, ram_gib=1.0),)
    for hb in (_hb(3, *RUNNING), _hb(4), _hb(5, *RUNNING, usage=usage)):
        body = msgspec.msgpack.encode(hb)
        assert msgspec.msgpack.encode(msgspec.msgpack.decode(body, type=WireHeartbeat)) == body


def test_a_report_whose_statuses_did_not_change_gets_the_tuple_its_channel_decoded_last() -> None:
    plain, dec = FrameDecoder(RMInbound), FrameDecoder(RMInbound, reports=ReportStatuses())
    done = (ContainerStatus(1, "running"), ContainerStatus(2, "complete", 3))
    reg = Register(address="n", resources=Resources(4, 8))
    sent = [(1, _hb(0, *RUNNING)), (2, _hb(0, *RUNNING, mid=2)), (1, reg), (1, _hb(1, *RUNNING)),
            (1, _hb(2, *done)), (1, _hb(3, *done)), (1, None), (1, _hb(0, *done)), (2, _hb(1, mid=2))]
    data = _frames(*sent)
    got = dec.feed(data)
    assert got == plain.feed(data) == sent  # the same reports, as the node sent them
    statuses = [msg.statuses if type(msg) is Heartbeat else None for _, msg in got]
    assert statuses[3] is statuses[0]  # the channel's last statuses, unchanged
    assert statuses[1] is not statuses[0]  # another channel's are its own
    assert statuses[4] is not statuses[3] and statuses[5] is statuses[4]  # changed, then unchanged
    assert statuses[7] is not statuses[5]  # the channel closed in between: decoded anew
    assert dec.reports is not None and dec.reports.reused == 2


def test_what_a_connection_keeps_is_bounded() -> None:
    # Room for two of these lists: a third channel's is decoded each time, not kept.
    size = len(msgspec.msgpack.encode(RUNNING)) + ENTRY_BYTES
    reports = ReportStatuses(max_bytes=2 * size + size // 2)
    dec, plain = FrameDecoder(RMInbound, reports=reports), FrameDecoder(RMInbound)

    def statuses(channel: int, hid: int, *sts: ContainerStatus) -> tuple[ContainerStatus, ...]:
        data = _frames((channel, _hb(hid, *sts, mid=channel)))
        ((_, got),) = dec.feed(data)
        assert [got] == [m for _, m in plain.feed(data)]
        result: tuple[ContainerStatus, ...] = got.statuses
        return result

    first = [statuses(c, 0, *RUNNING) for c in (1, 2, 3)]
    again = [statuses(c, 1, *RUNNING) for c in (1, 2, 3)]
    assert [a is f for a, f in zip(again, first, strict=True)] == [True, True, False]
    assert reports.kept_bytes == 2 * size
    statuses(2, 2, RUNNING[0])  # a shorter list replaces channel 2's
    assert reports.kept_bytes == size + len(msgspec.msgpack.encode(RUNNING[:1])) + ENTRY_BYTES
    dec.feed(_frames((1, None)))  # a close gives channel 1's room back: channel 3's fits now
    three = statuses(3, 2, *RUNNING)
    assert statuses(3, 3, *RUNNING) is three and reports.kept_bytes <= reports.max_bytes


@pytest.mark.parametrize("bad", [[[1, "lost"]], [[1]], 5, [["x", "running"]]],
                         ids=["state", "short", "not-a-list", "id"])
def test_invalid_statuses_are_a_malformed_frame_even_after_valid_ones(bad: Any) -> None:
    dec = FrameDecoder(RMInbound, reports=ReportStatuses())
    good = _frames((4, _hb(0, *RUNNING)))
    payload = msgspec.msgpack.encode({"type": "Heartbeat", "machine_id": 1, "heartbeat_id": 1,
                                      "healthy": True, "statuses": bad, "full": True})
    assert dec.feed(good)[0][1].statuses == RUNNING
    with pytest.raises(MalformedFrame, match=r"channel 4: Heartbeat\.statuses"):
        dec.feed(good + HEADER.pack(len(payload), 4) + payload)


def test_an_rm_over_tcp_walks_a_report_once_and_still_sees_what_changes_in_it() -> None:
    """Unchanged reports skip the tracker's walk as in memory (the same tuple: ``quiet_report``);
    a completion in the next report is still seen, and a malformed one closes that connection only."""

    async def body() -> None:
        clock = FakeClock()
        rm = ResourceManager(clock, make_logger(clock, None))
        seen: list[Any] = []

        def receive(end: Any, msg: Any) -> None:
            seen.append(msg)
            rm.receive(end, msg)

        server = TcpServer(receive, make_logger(clock, None), handshake_timeout_s=None)
        conns = [_ServerConnection(server), _ServerConnection(server)]
        transports = [_Transport(), _Transport()]
        for conn, transport in zip(conns, transports, strict=True):
            conn.connection_made(transport)
        for i, conn in enumerate(conns):
            conn.data_received(_frames((1, Register(address=f"n{i}", resources=Resources(4, 8)))))
        rm.add_pool("p")
        rm.submit_operation(OperationSpec(name="op", pool="p", demand=Resources(1, 2), durations=[100.0] * 2))
        conns[0].data_received(_frames((1, _hb(0))))
        conns[0]._flush()
        launched = [m for _, m in FrameDecoder(NodeInbound).feed(bytes(transports[0].written))
                    if type(m) is LaunchContainers]
        ids = [c.container_id for m in launched for c in m.containers]
        assert len(ids) == 2
        running = tuple(ContainerStatus(c, "running") for c in ids)
        conns[0].data_received(_frames((1, _hb(1, *running)), (1, _hb(2, *running))))
        node = rm.node(1)
        assert node is not None and node.quiet_report == running
        assert seen[-1].statuses is seen[-2].statuses is node.quiet_report  # the walk skipped
        assert len(node.containers) == 2
        finished = (ContainerStatus(ids[0], "complete", 0), running[1])
        conns[0].data_received(_frames((1, _hb(3, *finished))))
        assert list(node.containers) == [ids[1]] and rm.counters().heartbeats == 4
        payload = msgspec.msgpack.encode({"type": "Heartbeat", "machine_id": 1, "heartbeat_id": 4,
                                          "healthy": True, "statuses": [[1, "lost"]], "full": True})
        conns[0].data_received(HEADER.pack(len(payload), 1) + payload)
        assert transports[0].aborted and not transports[1].aborted
        conns[1].data_received(_frames((1, _hb(0, mid=2))))
        assert rm.counters().heartbeats == 5

    asyncio.run(body())


def test_encoded_reports_are_what_the_encoder_writes() -> None:
    # The node side encodes reports whole (periodic mode models stock YARN): the decoder's saved
    # bytes are compared with what a FrameEncoder writes for the same statuses.
    enc, dec = FrameEncoder(), FrameDecoder(RMInbound, reports=ReportStatuses())
    first = dec.feed(enc.encode(1, _hb(0, *RUNNING)))[0][1]
    again = dec.feed(enc.encode(1, _hb(1, *RUNNING)))[0][1]
    assert again.statuses is first.statuses and again.heartbeat_id == 1
