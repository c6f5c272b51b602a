"""The node host's batched paths keep what the per-node ones did: a paused process's timers and
answers wait for it, a slot or a batch of answers reads the clock once, bucketed lateness is the
same histogram, and a node's secret never goes out on its link."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import msgspec
import pytest

from emulator.harness.answerpass import AnswerPass
from emulator.harness.eventlog import make_logger
from emulator.harness.hostednode import HostedNode
from emulator.harness.hosttiming import BatchedTiming, flush_period_s
from emulator.harness.nodeproc import NodeProcess, ProcessGate
from emulator.measure.timing import HeartbeatTiming
from emulator.time.clock import RealClock
from emulator.time.wheel import WheelClock
from emulator.transport.client import TcpClient, _ClientConnection
from emulator.transport.faulty import FaultWindow, MessageFaultPlan
from emulator.transport.framing import HEADER, HEADER_SIZE, FrameDecoder, FrameEncoder
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeManager
from nodemanager.stats import NodeCounters
from rm.protocol import (
    ContainerLaunch,
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    LaunchContainers,
    Register,
    RegisterResponse,
    Resources,
    RMInbound,
    TaskUsage,
    UsageModel,
)
from rm.queues.histogram import LogHistogram
from tests.helpers import FakeClock, RecordingLink


@pytest.mark.asyncio
async def test_a_paused_process_timers_wait_in_order_while_others_run_on_time() -> None:
    loop = asyncio.get_running_loop()
    wheel = WheelClock(RealClock(loop, speed=10.0), slot_wall_s=0.002)
    gate = ProcessGate(wheel)
    arm = wheel.gated(gate)
    ran: list[tuple[str, float]] = []
    t0 = wheel.now()
    for name, delay in (("a1", 0.1), ("a2", 0.15), ("a3", 0.2)):
        arm(delay, lambda name=name: ran.append((name, wheel.now())))
    arm(0.12, lambda: ran.append(("cancelled", wheel.now()))).cancel()
    wheel.call_later(0.15, lambda: ran.append(("outside", wheel.now())))
    gate.pause(0.5)  # the process stalls until t0 + 0.5
    await wheel.sleep(0.8)
    assert [n for n, _ in ran] == ["outside", "a1", "a2", "a3"]
    assert ran[0][1] < t0 + 0.5  # not in the process: on time
    assert all(t >= t0 + 0.5 - 1e-9 for _, t in ran[1:])  # held until the process resumed


@pytest.mark.asyncio
async def test_a_slot_reads_the_clock_once_and_never_runs_early() -> None:
    loop = asyncio.get_running_loop()
    wheel = WheelClock(RealClock(loop, speed=1.0), slot_wall_s=0.005)
    seen: list[float] = []
    due = wheel.now() + 0.01
    for _ in range(20):
        wheel.call_later(0.01, lambda: seen.append(wheel.now()))
    reruns = 0

    def again() -> None:  # re-armed for "now" from inside a slot: the next pass, not this one
        nonlocal reruns
        reruns += 1
        if reruns < 1000:
            wheel.call_later(0.0, again)

    wheel.call_later(0.0, again)
    await asyncio.sleep(0.05)
    assert len(seen) == 20 and len(set(seen)) == 1  # one reading for the slot
    assert seen[0] >= due - 1e-9
    assert reruns < 30  # ~10 passes in 50 ms: no spin
    assert wheel.now() > seen[0]  # outside a slot: the live clock


def test_bucketed_lateness_is_the_histogram_of_tick_by_tick() -> None:
    rng = random.Random(3)
    one, batched = HeartbeatTiming(3.0), BatchedTiming(3.0)
    for _ in range(10_000):  # more than a batch
        late = rng.choice((0.0, rng.expovariate(50.0)))
        held = rng.random() < 0.05
        for t in (one, batched):
            (t.held_tick if held else t.tick)(late)
        if rng.random() < 0.9:  # heartbeats sent and answered across a few intervals
            sent = rng.uniform(0.0, 30.0)
            answer = sent + rng.uniform(0.0, 4.0)
            for t in (one, batched):
                t.sent(sent)
                t.answered(sent, answer)
    assert batched.sent_in(4) == one.sent_in(4) > 0  # a read takes in what is pending
    batched.sent(9.5)
    one.sent(9.5)
    assert batched.intervals() == one.intervals()
    for a, b in ((one.summary(), batched.summary()), (one.own_summary(), batched.own_summary())):
        assert (a.count, a.p50, a.p99, a.max) == (b.count, b.p50, b.p99, b.max)
        assert a.mean == pytest.approx(b.mean)
    # Taken in about every 10,000 ticks, within [the sample interval, a minute].
    periods = [flush_period_s(nodes, 3.0, 3.0) for nodes in (4000, 50_000, 10)]
    assert periods == [7.5, 3.0, 60.0]
    batched.tick(5.0)
    batched.restart_lateness()  # the warm-up's ticks, pending or bucketed, are gone
    batched.tick(0.25)
    assert batched.summary().count == 1 and batched.summary().max == 0.25


def test_a_batch_kept_by_whoever_was_handed_it_leaves_the_host_ticking() -> None:
    """A batch handed on is the host's to reuse: something that keeps what it was given (a
    profiler holding the frame that had it: Dask's, in a Dask worker; a logged traceback while
    the collector is off) must not pin the pending arrays, or every later tick, send and flush
    raises BufferError (the Dask E2 sweep lost its node host that way)."""
    kept: list[object] = []

    class Keeping(LogHistogram):
        __slots__ = ()

        def add_values(self, values: Any) -> None:
            kept.append(values)
            super().add_values(values)

    timing = BatchedTiming(3.0)
    timing._lateness, timing._own_lateness = Keeping(), Keeping()  # what the host hands batches to
    for round_ in range(3):
        for i in range(100):
            timing.tick(0.01 * i)
            timing.held_tick(0.5)
            timing.sent(3.0 * round_ + 0.01 * i)
        timing.flush()
    assert kept and timing.summary().count == 600 and timing.own_summary().count == 300
    assert timing.sent_in(1) == timing.sent_in(2) == timing.sent_in(3) == 100


def _registered(clock: FakeClock, counters: NodeCounters,
                node_type: type[NodeManager] = NodeManager) -> tuple[NodeProcess, RecordingLink]:
    proc = NodeProcess("n", Resources(4, 8), HeartbeatConfig(interval_s=10.0), clock, counters,
                       make_logger(clock, None), phase_s=1.0, node_type=node_type)
    link = RecordingLink()
    proc.attach(link)
    proc.start()
    clock.advance_to(1.5)
    proc.receive(RegisterResponse(action="normal", machine_id=1))
    clock.advance_to(12.0)  # the tick at 11 sent heartbeat 0
    return proc, link


@pytest.mark.parametrize("node_type", [NodeManager, HostedNode])
def test_an_answer_waits_for_a_paused_process_and_a_crashed_one_drops_it(
    node_type: type[NodeManager],
) -> None:
    clock, counters = FakeClock(), NodeCounters()
    proc, link = _registered(clock, counters, node_type)
    assert [h.heartbeat_id for h in link.of(Heartbeat)] == [0]
    proc.pause(3.0)
    proc.receive(HeartbeatResponse(action="normal", heartbeat_id=1))
    assert counters.heartbeat_responses == 0  # held with the stalled loop
    clock.advance_to(15.5)
    assert counters.heartbeat_responses == 1
    clock.advance_to(22.0)  # heartbeat 1 at 21
    proc.receive(HeartbeatResponse(action="normal", heartbeat_id=2))  # the process runs: at once
    assert counters.heartbeat_responses == 2
    clock.advance_to(32.0)  # heartbeat 2 at 31
    proc.crash()
    proc.receive(HeartbeatResponse(action="normal", heartbeat_id=3))
    assert counters.heartbeat_responses == 2 and [h.heartbeat_id for h in link.of(Heartbeat)] == [0, 1, 2]


class _Transport:
    def __init__(self) -> None:
        self.out = bytearray()

    def write(self, data: bytes) -> None:
        self.out += data

    def get_extra_info(self, _: str) -> Any:
        return None

    def get_write_buffer_size(self) -> int:
        return 0


class _HeldClock:
    def __init__(self) -> None:
        self.holding = False
        self.holds = 0

    def hold(self) -> None:
        self.holds += not self.holding
        self.holding = True

    def release(self) -> None:
        self.holding = False


class _Node:
    def __init__(self, clock: _HeldClock, got: list[tuple[str, Any, bool]], name: str) -> None:
        self._clock, self._got, self._name = clock, got, name

    def receive(self, msg: Any) -> None:
        self._got.append((self._name, msg, self._clock.holding))

    def attach(self, link: Any) -> None:
        self.link = link


@pytest.mark.asyncio
async def test_a_read_answers_its_nodes_in_order_under_one_clock_reading() -> None:
    clock = _HeldClock()
    real = RealClock(asyncio.get_running_loop())
    client = TcpClient("127.0.0.1", 1, real, make_logger(real, None), delivery_clock=clock)
    conn = _ClientConnection(client)
    transport = _Transport()
    conn.connection_made(transport)
    got: list[tuple[str, Any, bool]] = []
    a, b = _Node(clock, got, "a"), _Node(clock, got, "b")
    la, lb = conn.open(a), conn.open(b)
    enc, data = FrameEncoder(), bytearray()
    answers = [HeartbeatResponse("normal", i) for i in range(1, 4)]
    assert not conn.answered
    conn.data_received(enc.encode(la.channel, answers[0]))
    assert conn.answered  # a node got an answer: the RM took our proof
    assert got == [("a", answers[0], True)]
    got.clear()
    enc.append(data, lb.channel, answers[1])
    FrameEncoder.append_close(data, lb.channel)  # b's channel closes: what follows is not b's
    enc.append(data, lb.channel, answers[2])
    enc.append(data, la.channel, answers[2])
    conn.data_received(bytes(data))
    assert [(n, m.heartbeat_id, held) for n, m, held in got] == [("b", 2, True), ("a", 3, True)]
    assert clock.holds == 2 and not clock.holding and lb.closed
    # What a node sends goes out as it is, but never its secret.
    la.send(Register(address="a", resources=Resources(4, 8), credentials="s3cret"))
    conn._flush()
    ((_, sent),) = FrameDecoder(RMInbound).feed(bytes(transport.out))
    assert type(sent) is Register and sent.credentials == "" and sent.address == "a"
    assert msgspec.structs.replace(sent, credentials="s3cret") == Register(
        address="a", resources=Resources(4, 8), credentials="s3cret"
    )


def test_a_timer_armed_for_now_by_a_slot_waits_for_the_next_pass() -> None:
    loop = asyncio.new_event_loop()
    try:
        wheel = WheelClock(RealClock(loop, speed=1.0), slot_wall_s=0.005)
        wheel._read_clock = lambda: 1.0  # exactly a slot's end: "now" falls in the slot being run
        runs = 0

        def again() -> None:
            nonlocal runs
            runs += 1
            if runs < 100:
                wheel.call_later(0.0, again)

        wheel.call_later(0.0, again)
        wheel._run()
        assert runs == 1 and wheel.pending == 1
    finally:
        loop.close()


class _Wired:
    """A node's side of a real client connection: what the node sends (through ``send`` or its
    report wire) read back from the bytes the connection writes."""

    def __init__(self, clock: FakeClock, answers: AnswerPass | None = None) -> None:
        real = RealClock(asyncio.get_running_loop())
        client = TcpClient("127.0.0.1", 1, real, make_logger(real, None), answers=answers)
        self.conn = _ClientConnection(client)
        self.transport = _Transport()
        self.conn.connection_made(self.transport)
        self.link = self.conn.open(self)
        self.decoder = FrameDecoder(RMInbound)
        self.encoder = FrameEncoder()
        self.clock = clock
        self.channels: list[int] = []

    def receive(self, msg: Any) -> None:
        raise AssertionError("answers go to the node directly here")

    def answer(self, msgs: list[Any]) -> None:
        """What the RM says to this channel's node, as one read of the connection."""
        data = bytearray()
        for msg in msgs:
            self.encoder.append(data, self.link.channel, msg)
        if data:
            self.conn.data_received(bytes(data))

    def read(self, into: list[tuple[float, int, Any]], step: int) -> None:
        """The frames written since the last read, each checked to be msgspec's own bytes."""
        self.conn._flush()
        data, self.transport.out = bytes(self.transport.out), bytearray()
        pos = 0
        while pos < len(data):
            size, word = HEADER.unpack_from(data, pos)
            frame = data[pos : pos + HEADER_SIZE + size]
            pos += len(frame)
            ((channel, msg),) = self.decoder.feed(frame)  # a REPEAT (a report sent again) too
            self.channels.append(channel)
            if word == channel:
                assert msgspec.msgpack.encode(msg) == frame[HEADER_SIZE:]
            into.append((self.clock.now(), step, msg))


class _Running:
    """A process that runs (``HostedNode.hosted_by``): it dispatches as ``NodeProcess.receive``."""

    crashed = False

    def __init__(self, node: NodeManager) -> None:
        self.node = node
        self.gate = ProcessGate(FakeClock())
        self.receive: Any = self.dispatch

    def dispatch(self, msg: object) -> None:
        if type(msg) is HeartbeatResponse:
            self.node.heartbeat_answered(msg)
        else:
            self.node.receive(msg)


class _Counting:
    """A report wire that counts the reports it carries."""

    def __init__(self, wire: Any) -> None:
        self.wire, self.sent = wire, 0

    def send(self, hb: Heartbeat) -> None:
        self.sent += 1
        self.wire.send(hb)


class _Delivering:
    """A ``FakeClock`` as a node host's delivery clock (``WheelClock.hold``): it stands still."""

    def __init__(self, clock: FakeClock) -> None:
        self.now = clock.now
        self.holding = False

    def hold(self) -> None:
        self.holding = True

    def release(self) -> None:
        self.holding = False


def _drive(node_type: type[NodeManager], mode: str, wired: bool = False, answer_pass: bool = False,
           usage_at: int | None = 100) -> tuple[list[tuple[float, int, bytes]], NodeCounters, Any]:
    """A node and a scripted RM: answers one step late, some lost, some repeated, launches, kills,
    a resync, a health change; everything the node sends, encoded, with when (and at which step;
    ``wired``: sent through a client connection, a hosted node's reports by its wire;
    ``answer_pass``: and what the RM says comes in as reads of that connection, through an
    ``AnswerPass``), and the node's heartbeat timing by interval. ``usage_at``: the step at which
    a container with a usage model comes (None: none does)."""
    clock, counters = FakeClock(), NodeCounters()
    timing = BatchedTiming(1.0)
    out: list[tuple[float, int, Any]] = []
    step = 0
    wire = _Wired(clock, AnswerPass(_Delivering(clock), timing) if answer_pass else None) if wired else None
    config = HeartbeatConfig(mode=mode, interval_s=1.0, rpc_timeout_s=3.0)
    send = (lambda m: wire.link.send(m)) if wire is not None else lambda m: out.append((clock.now(), step, m))
    node = node_type("n", Resources(16.0, 32.0), config, clock, send, counters, make_logger(clock, None),
                     timing=timing)
    deliver: Any = None
    if wire is not None:  # and what the RM says goes in as a node host's process hands it over
        assert isinstance(node, HostedNode)
        process = _Running(node)
        deliver = process.receive = node.hosted_by(process)
        if answer_pass:  # the node's channel, opened for its process as a node host opens it
            wire.link = wire.conn.open(process)
            assert wire.conn._hosted == {wire.link.channel: node}
        node.wire_to(_Counting(wire.link.report_sender()))
    rng = random.Random(11)
    cid, seen = 0, 0
    answers: list[Any] = []
    late: dict[int, list[Any]] = {}  # answers held back to a later step (after the next tick)
    node.start(0.3)
    for step in range(1, 600):
        clock.advance_to(step * 0.25)
        if wire is not None:
            wire.read(out, step)
        if answer_pass:
            assert wire is not None
            wire.answer(late.pop(step, []) + answers)
        for msg in [] if answer_pass else late.pop(step, []) + answers:  # as a node host hands them over
            if deliver is not None:
                deliver(msg)
            else:
                (node.heartbeat_answered if type(msg) is HeartbeatResponse else node.receive)(msg)
        if wire is not None:
            wire.read(out, step)
        answers = []
        if step == 300:
            node.set_healthy(False)
        if step == usage_at:  # a container with a usage model: reports carry its usage while it runs
            usage = TaskUsage(cpu=UsageModel(kind="normal", mean=0.5, cv=0.3))
            node.receive(LaunchContainers((ContainerLaunch(10_000, Resources(1, 2), 40.0, usage),)))
        if step % 40 == 0:  # pushed launches (what makes an idle delta node report)
            pushed = tuple(ContainerLaunch(cid + i, Resources(1, 2), 7.0) for i in (0, 1))
            (deliver or node.receive)(LaunchContainers(pushed))  # a hosted node's own way in
            cid += 2
        for _, _, msg in out[seen:]:
            if type(msg) is Register:
                answers.append(RegisterResponse(action="normal", machine_id=1))
            elif type(msg) is Heartbeat and rng.random() > 0.1:  # else lost
                roll = rng.random()
                launch = tuple(ContainerLaunch(cid + i, Resources(1, 2), rng.uniform(5, 60)) for i in (0, 1))
                running = [s.container_id for s in msg.statuses if s.state == "running"]
                kill = tuple(running[:1]) if rng.random() < 0.1 else ()
                answer = HeartbeatResponse(
                    action="resync" if roll < 0.02 else "normal", heartbeat_id=msg.heartbeat_id + 1,
                    launch=launch if roll > 0.9 else (), kill=kill,
                )
                cid += 2 if roll > 0.9 else 0
                fate = rng.random()
                if fate < 0.05:
                    answers += [answer, answer]
                elif fate < 0.1:  # and a copy that comes after the next heartbeat left
                    answers.append(answer)
                    late.setdefault(step + 4, []).append(answer)
                elif fate < 0.15:
                    late.setdefault(step + 4, []).append(answer)
                else:
                    answers.append(answer)
        seen = len(out)
    if wire is not None and mode == "periodic":  # the common tick's reports took the wire
        sent = node._send_report.__self__.sent  # type: ignore[attr-defined]
        assert sent > 0, (sent, counters.heartbeats_sent)
    return [(t, k, msgspec.msgpack.encode(m)) for t, k, m in out], counters, timing.intervals()


@pytest.mark.parametrize("mode", ["periodic", "delta"])
def test_a_hosted_node_says_what_a_node_manager_says(mode: str) -> None:
    mine, theirs = _drive(HostedNode, mode), _drive(NodeManager, mode)
    assert mine[1].heartbeats_sent > 30 and mine[1].heartbeat_responses > 30
    assert mine[1] == theirs[1]
    assert mine[0] == theirs[0]
    assert mine[2] == theirs[2]


@pytest.mark.asyncio
async def test_a_hosted_node_reports_from_saved_bytes_what_a_node_manager_says() -> None:
    """Reports from saved pieces: re-cut whenever a container starts or ends, an answer retires
    a completion, or health changes; the bytes are msgspec's own (``_Wired.read``)."""
    mine, theirs = _drive(HostedNode, "periodic", wired=True), _drive(NodeManager, "periodic")
    assert mine[1] == theirs[1] and mine[1].containers_finished > 10
    assert [(k, b) for _, k, b in mine[0]] == [(k, b) for _, k, b in theirs[0]]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["periodic", "delta"])
async def test_answers_taken_in_one_pass_leave_a_hosted_node_saying_what_a_node_manager_says(
    mode: str,
) -> None:
    """The RM's answers read from the connection and handed over by an ``AnswerPass`` (the common
    ones taken in the pass, launches, kills, resyncs, late and repeated ones the node's own way):
    the same messages at the same times, counters and heartbeat timing; a launch still changes
    the next report."""
    mine, theirs = _drive(HostedNode, mode, wired=True, answer_pass=True), _drive(NodeManager, mode)
    assert mine[1] == theirs[1] and mine[1].heartbeat_responses > 30 and mine[1].containers_launched > 30
    assert [(k, b) for _, k, b in mine[0]] == [(k, b) for _, k, b in theirs[0]]
    assert mine[2] == theirs[2] and sum(i.responses for i in mine[2]) > 30


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["periodic", "delta"])
async def test_launches_and_completions_in_one_call_leave_a_hosted_node_saying_what_a_node_manager_says(
    mode: str,
) -> None:
    """No usage model on the node (the E2 sweep's churn): launches, whether answered or pushed,
    and completions take the hosted node's one-call paths (``_launch``, ``_complete_due``); the
    same messages, counters and timing as a NodeManager's, over the wire and without it."""
    theirs = _drive(NodeManager, mode, usage_at=None)
    assert theirs[1].containers_launched > 30 and theirs[1].containers_finished > 25
    for mine in (_drive(HostedNode, mode, usage_at=None),
                 _drive(HostedNode, mode, wired=True, answer_pass=True, usage_at=None)):
        assert mine[1] == theirs[1]
        assert [(k, b) for _, k, b in mine[0]] == [(k, b) for _, k, b in theirs[0]]
        assert mine[2] == theirs[2]


@pytest.mark.asyncio
async def test_a_report_wire_re_encodes_what_changed_and_keeps_repeats_true() -> None:
    clock = FakeClock()
    one, two = _Wired(clock), _Wired(clock)
    other = one.conn.open(two)  # a second node on the same connection
    wire = one.link.report_sender()
    statuses = (ContainerStatus(7, "running"), ContainerStatus(9, "complete", 1))
    sent = [Heartbeat(machine_id=3, heartbeat_id=i, healthy=True, statuses=statuses, full=True)
            for i in (0, 1)]
    many = tuple(ContainerStatus(1_000_000 + i, "running") for i in range(16))  # past a fixarray
    sent += [
        Heartbeat(machine_id=3, heartbeat_id=200, healthy=False, statuses=statuses, full=True),  # health
        Heartbeat(machine_id=4, heartbeat_id=201, healthy=False, statuses=statuses, full=True),  # a new id
        Heartbeat(machine_id=4, heartbeat_id=70_000, healthy=False, statuses=statuses[:1], full=True),
        # Only the statuses change: they alone are encoded, between the saved pieces.
        Heartbeat(machine_id=4, heartbeat_id=70_001, healthy=False, statuses=many, full=True),
        Heartbeat(machine_id=4, heartbeat_id=70_002, healthy=False, statuses=(), full=True),
        Heartbeat(machine_id=4, heartbeat_id=70_003, healthy=False, statuses=statuses, full=True),
        # Health and statuses at once: encoded whole again.
        Heartbeat(machine_id=4, heartbeat_id=70_004, healthy=True, statuses=many[:3], full=True),
    ]
    for hb in sent:
        wire.send(hb)
    one.link.send(sent[0])  # a report sent the usual way, then another node's from its wire
    other.report_sender().send(sent[1])
    one.link.send(sent[0])  # the first again: no REPEAT of it, another frame went between
    wire.send(sent[2])
    one.link.send(sent[2])  # what the wire wrote last, again: a REPEAT
    got: list[tuple[float, int, Any]] = []
    one.read(got, 0)
    assert [m for _, _, m in got] == [*sent, sent[0], sent[1], sent[0], sent[2], sent[2]]
    assert one.channels == [1] * 9 + [1, 2, 1, 1, 1]
    assert wire.before is not None  # the last statuses went between saved pieces


@pytest.mark.asyncio
async def test_a_hosted_node_behind_message_faults_sends_every_report_through_them() -> None:
    clock = FakeClock()
    wired = _Wired(clock)
    plan = MessageFaultPlan(clock, seed=1)
    plan.windows.append(FaultWindow(0.0, 100.0, 1.0, 0.0, 0.0, 0.0, frozenset(), "to_rm"))  # lose all
    proc = NodeProcess("n", Resources(4.0, 8.0), HeartbeatConfig(interval_s=1.0), clock, NodeCounters(),
                       make_logger(clock, None), node_type=HostedNode)
    proc.attach(plan.wrap(wired.link, "to_rm"))
    proc.start()
    clock.advance_to(0.5)
    proc.receive(RegisterResponse(action="normal", machine_id=1))
    got: list[tuple[float, int, Any]] = []
    for k in range(1, 9):  # each tick's report lost on the way, then answered all the same
        if k == 6:
            proc.attach(wired.link)  # a plain link again (a reconnect): reports from saved bytes
        clock.advance_to(k + 0.6)
        proc.receive(HeartbeatResponse(action="normal", heartbeat_id=k))
    wired.read(got, 0)
    assert plan.counters.dropped == 1 + 5  # the Register and five reports
    assert [m.heartbeat_id for _, _, m in got] == [5, 6, 7]


def test_an_answered_health_change_is_not_reported_again() -> None:
    clock = FakeClock()
    out: list[Any] = []
    node = HostedNode("n", Resources(4, 8), HeartbeatConfig(mode="delta", interval_s=1.0), clock, out.append,
                      NodeCounters(), make_logger(clock, None))
    node.start(0.5)
    clock.advance_to(0.6)
    node.receive(RegisterResponse(action="normal", machine_id=1))
    node.set_healthy(False)
    clock.advance_to(1.6)  # the tick at 1.5 reports the health change alone
    (hb,) = [m for m in out if type(m) is Heartbeat]
    assert not hb.healthy and hb.statuses == ()
    node.heartbeat_answered(HeartbeatResponse(action="normal", heartbeat_id=hb.heartbeat_id + 1))
    clock.advance_to(5.0)
    assert [m for m in out if type(m) is Heartbeat] == [hb]  # acknowledged: an idle delta node


@pytest.mark.asyncio
async def test_an_answer_taken_in_one_pass_waits_for_a_paused_process_and_a_crashed_one_drops_it() -> None:
    clock, counters, timing = FakeClock(), NodeCounters(), BatchedTiming(10.0)
    wired = _Wired(clock, AnswerPass(_Delivering(clock), timing))
    proc = NodeProcess("n", Resources(4.0, 8.0), HeartbeatConfig(interval_s=10.0), clock, counters,
                       make_logger(clock, None), phase_s=1.0, timing=timing, node_type=HostedNode)
    wired.link = wired.conn.open(proc)  # as a node host opens its nodes' channels
    assert wired.conn._hosted == {wired.link.channel: proc.node}
    proc.attach(wired.link)
    proc.start()
    clock.advance_to(1.5)
    wired.answer([RegisterResponse(action="normal", machine_id=1)])
    clock.advance_to(12.0)  # the tick at 11 sent heartbeat 0
    proc.pause(3.0)
    wired.answer([HeartbeatResponse(action="normal", heartbeat_id=1)])
    assert counters.heartbeat_responses == 0  # held with the stalled loop
    clock.advance_to(15.5)
    assert counters.heartbeat_responses == 1 and timing.answered_in(2) == 1
    clock.advance_to(22.0)  # heartbeat 1 at 21
    wired.answer([HeartbeatResponse(action="normal", heartbeat_id=2)])  # the process runs: at once
    assert counters.heartbeat_responses == 2
    clock.advance_to(32.0)  # heartbeat 2 at 31
    wired.conn.data_received(HEADER.pack(0, wired.link.channel))  # the RM closes its channel
    wired.answer([HeartbeatResponse(action="normal", heartbeat_id=3)])  # not for the node any more
    assert counters.heartbeat_responses == 2
    proc.crash()
    wired.answer([HeartbeatResponse(action="normal", heartbeat_id=3)])
    clock.advance_to(52.0)
    got: list[tuple[float, int, Any]] = []
    wired.read(got, 0)
    assert counters.heartbeat_responses == 2
    assert [m.heartbeat_id for _, _, m in got if type(m) is Heartbeat] == [0, 1, 2]


@pytest.mark.asyncio
async def test_a_report_wire_sends_nothing_once_its_channel_closed_at_either_end() -> None:
    clock = FakeClock()
    wired = _Wired(clock)
    ours, theirs = wired.link, wired.conn.open(wired)
    wires = [ours.report_sender(), theirs.report_sender()]
    sent = [Heartbeat(machine_id=m, heartbeat_id=0, healthy=True, statuses=(), full=True) for m in (1, 2)]
    for wire, hb in zip(wires, sent, strict=True):
        wire.send(hb)
    ours.close()  # closed by the node's side; the other by the RM's
    wired.conn.data_received(HEADER.pack(0, theirs.channel))
    assert theirs.closed
    for wire, hb in zip(wires, sent, strict=True):
        wire.send(msgspec.structs.replace(hb, heartbeat_id=1))
    wired.conn._flush()
    frames = FrameDecoder(RMInbound).feed(bytes(wired.transport.out))
    assert frames == [(ours.channel, sent[0]), (theirs.channel, sent[1]), (ours.channel, None)]


class _TimedLink:
    """A link that keeps when each message left (the wheel's time)."""

    closed = False

    def __init__(self, wheel: WheelClock) -> None:
        self.wheel = wheel
        self.sent: list[tuple[float, Any]] = []

    def send(self, msg: Any) -> None:
        self.sent.append((self.wheel.now(), msg))

    def close(self) -> None:
        self.closed = True


@pytest.mark.asyncio
async def test_a_hosted_node_ticking_on_the_wheel_itself_is_held_by_a_pause_as_on_its_clock() -> None:
    loop = asyncio.get_running_loop()
    wheel = WheelClock(RealClock(loop, speed=20.0), slot_wall_s=0.002)
    counters = NodeCounters()
    proc = NodeProcess("n", Resources(4.0, 8.0), HeartbeatConfig(interval_s=1.0), wheel, counters,
                       make_logger(wheel, None), node_type=HostedNode)
    node = proc.node
    assert isinstance(node, HostedNode)
    with pytest.raises(ValueError, match="not the wheel"):
        node.ticks_on(WheelClock(RealClock(loop, speed=20.0)))
    node.ticks_on(wheel)
    link = _TimedLink(wheel)
    proc.attach(link)
    t0 = wheel.now()
    proc.start()  # registers now, then ticks every second on its phase
    answered = 0
    while wheel.now() < t0 + 6.6:
        await asyncio.sleep(0.005)  # 0.1 emulated s
        if wheel.now() >= t0 + 2.5 and not proc.paused and counters.heartbeats_sent == 2:
            proc.pause(2.0)  # the ticks due at 3 and 4 wait until 4.5
        for _, msg in link.sent[answered:]:
            proc.receive(RegisterResponse(action="normal", machine_id=1) if type(msg) is Register
                         else HeartbeatResponse(action="normal", heartbeat_id=msg.heartbeat_id + 1))
        answered = len(link.sent)
    sent = [t - t0 for t, msg in link.sent if type(msg) is Heartbeat]
    # On time (a slot late at most), none while paused, the held tick when the pause ends (and
    # maybe a catch-up one right after, as on any clock), then on time again.
    assert not [t for t in sent if 2.5 < t < 4.5], sent
    assert all(any(0 <= t - k < 0.2 for t in sent) for k in (1, 2, 4.5, 5, 6)), sent


@pytest.mark.asyncio
async def test_a_delta_hosted_node_on_the_wheel_resends_after_a_pause_and_then_falls_idle() -> None:
    """A delta node's own tick (``HostedNode._delta_tick``) re-arms on the wheel under its
    process's gate: an unanswered report is sent again only once the pause ends, and once
    answered (its changes retired) the node sends nothing more."""
    loop = asyncio.get_running_loop()
    wheel = WheelClock(RealClock(loop, speed=20.0), slot_wall_s=0.002)
    counters = NodeCounters()
    config = HeartbeatConfig(mode="delta", interval_s=1.0, rpc_timeout_s=1.5)
    proc = NodeProcess("n", Resources(4.0, 8.0), config, wheel, counters, make_logger(wheel, None),
                       node_type=HostedNode)
    node = proc.node
    assert isinstance(node, HostedNode)
    node.ticks_on(wheel)
    link = _TimedLink(wheel)
    proc.attach(link)
    t0 = wheel.now()
    proc.start()
    answered, launched = 0, False
    while wheel.now() < t0 + 7.6:
        await asyncio.sleep(0.005)
        if not launched and wheel.now() >= t0 + 2.3:  # idle since 1: reported at 3, unanswered
            launched = True
            proc.receive(LaunchContainers((ContainerLaunch(7, Resources(1, 2), 60.0),)))
        if wheel.now() >= t0 + 3.5 and not proc.paused and counters.heartbeats_sent == 1:
            proc.pause(2.0)  # the tick due at 5 (its resend) waits until 5.5
        for t, msg in link.sent[answered:]:
            if type(msg) is Register:
                proc.receive(RegisterResponse(action="normal", machine_id=1))
            elif t - t0 > 4.0:  # the resend is answered
                proc.receive(HeartbeatResponse(action="normal", heartbeat_id=msg.heartbeat_id + 1))
        answered = len(link.sent)
    sent = [(t - t0, msg) for t, msg in link.sent if type(msg) is Heartbeat]
    times = [t for t, _ in sent]
    assert len(sent) == 2 and sent[0][1] == sent[1][1], times  # the same report, sent again
    assert sent[0][1].statuses == (ContainerStatus(7, "running"),) and not sent[0][1].full
    assert 3.0 <= times[0] < 3.2 and 5.5 <= times[1] < 5.7, times
    assert counters.heartbeat_responses == 1 and not node._changes and node._tick_timer is None


def test_a_launch_pushed_before_registration_is_dropped_by_a_hosted_node_as_by_a_node_manager() -> None:
    """``receive_hosted`` takes a pushed launch itself only for a running node, as
    ``NodeManager.receive`` does (the RM requeues what it pushed before a re-registration)."""
    for node_type in (HostedNode, NodeManager):
        clock, counters = FakeClock(), NodeCounters()
        node = node_type("n", Resources(4.0, 8.0), HeartbeatConfig(mode="delta", interval_s=1.0), clock,
                         lambda m: None, counters, make_logger(clock, None))
        process = _Running(node)
        deliver = node.hosted_by(process) if isinstance(node, HostedNode) else process.dispatch
        node.start(0.0)
        clock.advance_to(1.5)  # registering
        deliver(LaunchContainers((ContainerLaunch(1, Resources(1, 2), 5.0),)))
        assert not node.running_containers() and counters.containers_launched == 0, node_type
        deliver(RegisterResponse(action="normal", machine_id=1))
        deliver(LaunchContainers((ContainerLaunch(2, Resources(1, 2), 5.0),)))
        assert list(node.running_containers()) == [2] and counters.containers_launched == 1, node_type
