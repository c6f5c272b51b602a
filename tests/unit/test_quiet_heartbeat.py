"""An idle RM's heartbeat goes straight to the tracker (``Dispatcher.serve_now``): what that
shortcut must keep — the inbound queue's statistics, the order of what handling queues, and every
heartbeat seen by a wrapped handler (cost accounting), which turns the shortcut off."""

from __future__ import annotations

from emulator.harness.eventlog import make_logger
from rm.protocol import Heartbeat, HeartbeatResponse, Register, Resources
from rm.queues.dispatcher import Dispatcher, Handler
from rm.queues.inbound import Inbound
from rm.scheduler.loop import NodeUpdate, SchedulerItem
from rm.shell.manager import ResourceManager
from tests.helpers import FakeClock, RecordingLink


def _hb(hid: int) -> Heartbeat:
    return Heartbeat(machine_id=1, heartbeat_id=hid, healthy=True, statuses=(), full=True)


def _rm() -> tuple[ResourceManager, FakeClock, RecordingLink]:
    clock = FakeClock()
    rm = ResourceManager(clock, make_logger(clock, None))
    link = RecordingLink()
    rm.receive(link, Register(address="n0", resources=Resources(4, 8)))
    return rm, clock, link


def test_a_heartbeat_served_at_once_is_counted_as_the_queue_would_count_it() -> None:
    rm, _clock, link = _rm()
    updates: list[SchedulerItem] = []

    def recording(handler: Handler[SchedulerItem]) -> Handler[SchedulerItem]:
        def record(item: SchedulerItem) -> float | None:
            updates.append(item)
            return handler(item)

        return record

    rm.instrument(lambda handler: handler, recording)
    for hid in range(4):
        rm.receive(link, _hb(hid))
    stats = rm.inbound.statistics()
    # The registration and four heartbeats: each processed, none waited.
    assert (stats.processed, stats.depth_max, stats.wait_max_s, stats.depth) == (5, 1, 0.0, 0)
    assert [m.heartbeat_id for m in link.of(HeartbeatResponse)] == [1, 2, 3, 4]
    # Each answer's node update reached the scheduler queue (after the registration's).
    assert [type(u) for u in updates] == [NodeUpdate] * 4
    assert rm.counters().heartbeats == 4 and rm.counters().update_events == 5


def test_a_wrapped_inbound_handler_sees_every_heartbeat() -> None:
    rm, _clock, link = _rm()
    seen: list[object] = []

    def wrap(handler: Handler[Inbound]) -> Handler[Inbound]:
        def timed(item: Inbound) -> float | None:
            seen.append(item[1])
            return handler(item)

        return timed

    rm.instrument(wrap, lambda handler: handler)
    hb = _hb(0)
    rm.receive(link, hb)
    assert seen == [hb] and rm.counters().heartbeats == 1


def test_serve_now_declines_while_stalled_and_drains_what_the_call_queued_in_order() -> None:
    clock = FakeClock()
    served: list[str] = []
    d: Dispatcher[str] = Dispatcher(clock, served.append)

    def handle(a: str, b: str) -> None:
        served.append(a + b)
        d.submit("queued-by-it")  # queues: the server is busy with this call

    assert d.serve_now(handle, "x", "y")
    assert served == ["xy", "queued-by-it"] and d.processed == 2
    d.stall(1.0)
    assert not d.serve_now(handle, "p", "q") and served == ["xy", "queued-by-it"]
    clock.advance_to(1.0)
    assert d.serve_now(handle, "p", "q") and served[-2:] == ["pq", "queued-by-it"]
    stats = d.statistics()
    assert (stats.processed, stats.depth_max) == (4, 1)
