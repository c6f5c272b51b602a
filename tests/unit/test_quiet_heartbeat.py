"""An idle RM's heartbeat goes straight to the tracker (``Dispatcher.serve_now``): what that
shortcut must keep — the inbound queue's statistics, the order of what handling queues, and every
heartbeat seen by a wrapped handler (cost accounting), which turns the shortcut off. And the scheduler
queue those heartbeats feed: handled by each life's loop from the life's start."""

from __future__ import annotations

from pathlib import Path

from emulator.harness.eventlog import make_logger
from rm.protocol import Heartbeat, HeartbeatResponse, Register, Resources
from rm.queues.dispatcher import Dispatcher, Handler
from rm.queues.inbound import Inbound
from rm.recovery.journal import Journal
from rm.scheduler.loop import NodeUpdate, SchedulerItem
from rm.shell.manager import ResourceManager
from rm.state.operations import OperationSpec
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


def test_each_life_handles_the_scheduler_queue_from_its_start_wrapped_as_instrumented(tmp_path: Path) -> None:
    """The first life makes the scheduler queue with its loop as the handler (no placeholder
    before it); a restarted RM's next life takes the same queue over, wrapped as the first was."""
    clock = FakeClock()
    journal = Journal(tmp_path / "j.jsonl")
    rm = ResourceManager(clock, make_logger(clock, None), journal=journal)
    handled: list[SchedulerItem] = []

    def recording(handler: Handler[SchedulerItem]) -> Handler[SchedulerItem]:
        def record(item: SchedulerItem) -> float | None:
            handled.append(item)
            return handler(item)

        return record

    rm.instrument(lambda handler: handler, recording)
    queue = rm.events
    first = rm.live_counters().update_events
    link = RecordingLink()
    rm.receive(link, Register(address="n0", resources=Resources(4, 8)))
    assert len(handled) == 1 and rm.live_counters().update_events == first + 1
    rm.crash()
    rm.recover()
    assert rm.events is queue  # the same queue (its statistics span lives)
    rm.add_pool("p")
    rm.submit_operation(OperationSpec(name="op", pool="p", demand=Resources(1, 2), durations=[100.0] * 2))
    link2 = RecordingLink()
    rm.receive(link2, Register(address="n0", resources=Resources(4, 8)))
    rm.receive(link2, _hb(0))
    assert rm.allocations == 2  # the new life's loop placed them on the new life's node
    # The new life's loop handled its items through the wrap (the recovery's pass, then both node
    # updates), and their node is the new life's record.
    later = handled[1:]
    updates = [i for i in later if isinstance(i, NodeUpdate)]
    assert len(updates) == 2 and rm.node(1) is not None and all(u.node is rm.node(1) for u in updates)
    assert queue.processed == len(handled) == 4
    journal.close()
