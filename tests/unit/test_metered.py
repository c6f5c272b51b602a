"""The RM-side meter counts exactly the bytes the TCP transport would send, also where it sizes a
heartbeat arithmetically instead of encoding it (``send`` and a node's ``send_report`` alike)."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.time.clock import LoopClock, run
from emulator.transport.memory import MemoryLink
from emulator.transport.metered import Meter, MeteredLink, msgpack_int_size
from rm.protocol import ContainerStatus, ContainerUsage, Heartbeat, HeartbeatResponse
from tests.helpers import RecordingLink

ENCODER = msgspec.msgpack.Encoder()
INTS = st.one_of(st.integers(-40, 300), st.integers(-(2**63), 2**63 - 1), st.sampled_from(
    [0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, -32, -33, -128, -129, -32768, -32769]))
STATUSES = st.lists(
    st.builds(ContainerStatus, st.integers(0, 2**40), st.sampled_from(["running", "complete"]),
              st.integers(-200, 200)),
    max_size=40,
).map(tuple)


def test_int_sizes_match_msgpack() -> None:
    for v in [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1,
              -1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)]:
        assert msgpack_int_size(v) == len(ENCODER.encode(v)), v


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(INTS, INTS, st.booleans(), st.booleans(), st.integers(0, 2), st.booleans()),
                min_size=1, max_size=8), STATUSES, STATUSES)
def test_every_counted_size_is_the_encoded_size(
    beats: list[tuple[int, int, bool, bool, int, bool]], first: tuple[ContainerStatus, ...],
    second: tuple[ContainerStatus, ...],
) -> None:
    meter = Meter()
    link = MeteredLink(RecordingLink(), meter)
    usage = (ContainerUsage(3, 0.5, 1.25),)
    expected = 0
    for machine_id, hb_id, healthy, full, which, with_usage in beats:
        # The same tuple again (what a periodic node sends), another one, or an equal copy.
        statuses = (first, second, tuple(first))[which]
        hb = Heartbeat(machine_id=machine_id, heartbeat_id=hb_id, healthy=healthy, statuses=statuses,
                       full=full, usage=usage if with_usage else ())
        assert link.wire_size(hb) == len(ENCODER.encode(hb))
        if full and not with_usage:  # a node process's common report: through ``send_report``
            link.send_report(hb)
        else:
            link.send(hb)
        expected += len(ENCODER.encode(hb))
    response = HeartbeatResponse(action="normal", heartbeat_id=7)
    link.send(response)
    assert meter.bytes == expected + len(ENCODER.encode(response))
    assert meter.messages == len(beats) + 1


def test_a_report_on_a_closed_link_is_neither_counted_nor_sent() -> None:
    meter = Meter()
    inner = RecordingLink()
    link = MeteredLink(inner, meter)
    hb = Heartbeat(machine_id=1, heartbeat_id=0, healthy=True, statuses=(), full=True)
    link.send_report(hb)
    inner.close()
    link.send_report(hb)
    assert meter.messages == 1 and meter.bytes == len(ENCODER.encode(hb))
    assert inner.sent == [hb]


def test_a_report_posted_past_an_in_memory_link_keeps_its_order_and_is_dropped_once_closed() -> None:
    """A metered report over an in-memory link without latency skips the link's ``send``: it is
    delivered in send order with the link's other messages, from the loop, never inside the send,
    and not at all when the link closes before the loop delivers it."""
    got: list[Any] = []

    async def main(clock: LoopClock) -> None:
        inner = MemoryLink(clock, got.append, None, 0.0)
        link = MeteredLink(inner, Meter())
        hbs = [Heartbeat(machine_id=1, heartbeat_id=i, healthy=True, statuses=(), full=True)
               for i in range(3)]
        link.send_report(hbs[0])
        link.send("between")
        link.send_report(hbs[1])
        assert got == []  # from the loop, not inside the send
        await clock.sleep(0.0)
        assert got == [hbs[0], "between", hbs[1]]
        link.send_report(hbs[2])
        inner.close()
        await clock.sleep(0.0)
        assert got == [hbs[0], "between", hbs[1]]

    run(main, "virtual")
