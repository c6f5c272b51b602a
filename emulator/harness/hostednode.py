"""A NodeManager as a node host runs thousands of them: its common tick and answer in one call
(or none), its full reports from saved bytes, its running statuses kept as containers start and end.

Nearly every tick of a node host is the same: a running node, nothing in flight, no usage models, a
full (periodic) report. ``HostedNode._tick`` makes it in one call (``NodeManager._periodic_tick``
without the call to it), sends it through the connection's ``ReportWire`` where the link has one
(``wire_to``), and, on the node host's timer wheel (``ticks_on``), reads the time and re-arms on the
wheel itself; a delta node's tick (changes to report, or none: no next tick) is one more
(``_delta_tick``). Nearly every answer is the common one (action "normal", no kill, launches or
none; the changes it acknowledges retired as ``heartbeat_answered`` retires them): ``AnswerPass``
(emulator/harness/answerpass.py) takes those of one socket read in one pass over their nodes, with
no call per node but that walk's. A loaded cluster's churn takes one call each too: a launch
(``_launch``) and the completions due (``_complete_due``) of a node with no usage models. What a
node host spends per node and interval is as much the memory its nodes' objects take in the CPU's
caches as the Python it runs, so the common paths touch as few of a node's objects as they can.
Anything else takes ``NodeManager``'s own path, so the node's behaviour is the same message for
message (tests/unit/test_node_batches.py runs both side by side). Only TCP node hosts use it;
in-memory runs use ``NodeManager``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any, Protocol

from nodemanager.node import NodeManager, NodeState
from nodemanager.ports import TimingProbe
from nodemanager.state import EPS, DueAt, time_then_id
from rm.protocol import (
    EXIT_REJECTED,
    EXIT_SUCCESS,
    ContainerLaunch,
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    LaunchContainers,
)

_RUNNING = NodeState.RUNNING


class HostGate(Protocol):
    # ``ProcessGate``'s held callbacks (None: the process runs), read as ``NodeProcess.receive``
    # reads them: an attribute, not a property call, on every answer.
    @property
    def _held(self) -> object: ...


class HostProcess(Protocol):
    """The process a hosted node runs in (``emulator.harness.nodeproc.NodeProcess``)."""

    crashed: bool

    @property
    def gate(self) -> HostGate: ...

    def dispatch(self, msg: object) -> None:
        """What the process does with a message from the RM (``NodeProcess.receive``)."""


class ReportWire(Protocol):
    """A faster way out for a full report than ``send`` (``emulator.transport.client.ReportWire``)."""

    def send(self, hb: Heartbeat) -> None: ...


class HostWheel(Protocol):
    """The timer wheel a node host's nodes tick on (``emulator.time.wheel.WheelClock``)."""

    def now(self) -> float: ...

    def call_gated(self, gate: Any, delay: float, callback: Callable[..., Any], *args: Any) -> Any:
        """``gated(gate)(delay, callback, *args)``."""


class HostedNode(NodeManager):
    # ``_running``: the running containers' statuses in launch order, kept as containers start
    # and end, so that a changed report is two tuples joined, not a status made per container.
    # ``_periodic`` and ``_interval_s``: the config's, read once (every tick asks). ``_wire``:
    # where the common tick's report goes; ``_wheel``: the timer wheel behind the node's clock.
    __slots__ = ("_gate", "_interval_s", "_periodic", "_process", "_running", "_wheel", "_wire")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._running: dict[int, ContainerStatus] = {}  # before ``__init__``: ``_reset`` clears it
        super().__init__(*args, **kwargs)
        self._process: HostProcess | None = None
        self._gate: HostGate | None = None  # its process's, once ``hosted_by``
        self._wire: ReportWire | None = None
        self._wheel: HostWheel | None = None
        self._periodic = self._config.mode != "delta"
        self._interval_s = self._config.interval_s

    def hosted_by(self, process: HostProcess) -> Callable[[object], None]:
        """What ``process`` takes the RM's messages through instead of its own ``receive``."""
        self._process = process
        self._gate = process.gate
        return self.receive_hosted

    def wire_to(self, wire: ReportWire | None) -> None:
        """Send the common tick's report through ``wire`` (None: through ``send``)."""
        self._wire = wire
        self._send_report = wire.send if wire is not None else self._send

    def ticks_on(self, wheel: HostWheel) -> None:
        """Re-arm the common tick on ``wheel``, the one behind this node's clock, itself: as the
        clock would (``wheel.gated(gate)``), without the clock's objects of this node (its
        bound methods and partial) that each tick would touch again. Needs ``hosted_by``."""
        if self._gate is None or self._clock.now != wheel.now:
            raise ValueError("ticks_on: not the wheel of this hosted node's clock")
        self._wheel = wheel

    # ---- the running statuses, as ``_containers`` changes ----------------------------------

    def _reset(self) -> None:
        NodeManager._reset(self)
        self._running.clear()

    def stop(self) -> None:
        NodeManager.stop(self)
        self._running.clear()

    def _launch(self, launch: ContainerLaunch) -> None:
        """``ContainerRuntime._launch`` (its ``_schedule_finish`` too) in one call for a container
        with no usage model on a node with none: every launch of the E2 sweep's churn."""
        if launch.usage is not None or self._usage is not None:
            NodeManager._launch(self, launch)
            cid = launch.container_id
            if cid not in self._running and cid in self._containers:
                # The status the launch made (what the answer acknowledges by identity).
                self._running[cid] = self._changes.get(cid) or ContainerStatus(cid, "running")
            return
        cid = launch.container_id
        containers, changes = self._containers, self._changes
        if cid in containers or cid in changes:
            return  # duplicate command
        res = launch.resources
        room = self._config.overcommit
        resources = self.resources
        if (
            self._used_cpu + res.cpu > resources.cpu * room + EPS
            or self._used_ram + res.ram_gib > resources.ram_gib * room + EPS
        ):
            self._stats.containers_rejected += 1
            changes[cid] = ContainerStatus(cid, "complete", EXIT_REJECTED)
            self._statuses = None
            self._touch()
            return
        self._used_cpu += res.cpu
        self._used_ram += res.ram_gib
        status = ContainerStatus(cid, "running")
        containers[cid] = launch
        self._statuses = None
        self._schedule_finish(cid, launch.duration_s)
        changes[cid] = status
        self._running[cid] = status
        self._stats.containers_launched += 1
        self._touch()

    def _schedule_finish(self, cid: int, delay: float) -> None:
        """``ContainerRuntime._schedule_finish``, timed on the node host's wheel where it has one."""
        wheel = self._wheel
        at = (wheel.now() if wheel is not None else self._clock.now()) + delay
        entry = DueAt(at)
        entry.cid = cid
        heapq.heappush(self._due, entry)
        if at < self._due_at:
            if self._due_timer is not None:
                self._due_timer.cancel()
            self._due_at = at
            self._due_timer = (
                wheel.call_gated(self._gate, delay, self._complete_due) if wheel is not None
                else self._clock.call_later(delay, self._complete_due)
            )

    def _complete_due(self) -> None:
        """``ContainerRuntime._complete_due`` with what each completion calls (``_finish``,
        ``_release``, ``_touch``) in this one call, when no container has a usage model and no
        completion is reported at once (``on_completion``): one ``_touch`` for them all."""
        if self._usage is not None or self._config.on_completion:
            NodeManager._complete_due(self)
            return
        self._due_timer = None
        self._due_at = math.inf
        due = self._due
        wheel = self._wheel
        now = wheel.now() if wheel is not None else self._clock.now()
        containers, changes, running = self._containers, self._changes, self._running
        finished = 0
        limit = now + EPS
        ended = []
        while due and due[0] <= limit:
            ended.append(heapq.heappop(due))
        if len(ended) > 1:  # ties leave the heap in no set order: (time, id), as NodeManager ends them
            ended.sort(key=time_then_id)
        for entry in ended:
            cid = entry.cid
            launch = containers.pop(cid, None)
            if launch is None:
                continue
            res = launch.resources
            self._used_cpu -= res.cpu
            self._used_ram -= res.ram_gib
            changes[cid] = ContainerStatus(cid, "complete", EXIT_SUCCESS)
            running.pop(cid, None)
            finished += 1
        if finished:
            self._statuses = None
            self._stats.containers_finished += finished
            self._touch()
        if due and self._due_timer is None:
            at = self._due_at = float(due[0])
            self._due_timer = (
                wheel.call_gated(self._gate, at - now, self._complete_due) if wheel is not None
                else self._clock.call_later(at - now, self._complete_due)
            )

    def _release(self, cid: int, exit_code: int) -> bool:
        if NodeManager._release(self, cid, exit_code):
            self._running.pop(cid, None)
            return True
        return False

    def _full_statuses(self) -> tuple[ContainerStatus, ...]:
        # ``RMReporting._full_statuses``: running containers in launch order (as a status not
        # yet acknowledged, the same object), then completions not acknowledged.
        statuses = self._statuses
        if statuses is None:
            running, changes = self._running, self._changes
            if len(running) != len(self._containers):  # never expected: made again as the base does
                running.clear()
                for cid in self._containers:
                    running[cid] = changes.get(cid) or ContainerStatus(cid, "running")
            if changes:
                done = [s for s in changes.values() if s.state == "complete"]
                statuses = self._statuses = (*running.values(), *done)
            else:
                statuses = self._statuses = tuple(running.values())
        return statuses

    def _tick(self) -> None:
        """``NodeManager._tick``, with the common periodic tick (``_periodic_tick``: running,
        nothing in flight, no usage models) in this one call: every node, every interval."""
        self._tick_timer = None
        if self.state is not _RUNNING or self._inflight is not None or self._usage is not None:
            NodeManager._tick(self)
            return
        # What a tick touches of this node: it, its timing probe, its wire, its gate; the wheel
        # and the counters are every node's (warm in the CPU's caches).
        wheel = self._wheel
        now = wheel.now() if wheel is not None else self._clock.now()
        late = now - self._next_tick
        timing = self._timing
        if timing is not None:
            timing.tick(late if late > 0 else 0.0)
        self._next_tick += self._interval_s
        if not self._periodic:
            self._delta_tick(now, timing, wheel)
            return
        statuses = self._statuses
        if statuses is None:
            statuses = self._full_statuses()
        hb = Heartbeat(self.machine_id, self._last_response_id, self._healthy, statuses, True)
        self._inflight = hb
        self._inflight_at = now
        changes = self._changes
        self._inflight_changes = tuple(changes.items()) if changes else ()
        stats = self._stats
        stats.heartbeats_sent += 1
        stats.statuses_sent += len(statuses)
        if timing is not None:
            timing.sent(now)
        wire = self._wire
        if wire is not None:
            type(wire).send(wire, hb)  # not through a bound method of this node's
        else:
            self._send_report(hb)
        if self._tick_timer is None:  # a periodic node is never idle: its next tick
            delay = self._next_tick - now
            delay = delay if delay > 0.0 else 0.0
            if wheel is not None:
                self._tick_timer = wheel.call_gated(self._gate, delay, self._tick)
            else:
                self._tick_timer = self._clock.call_later(delay, self._tick)

    def _delta_tick(self, now: float, timing: TimingProbe | None, wheel: HostWheel | None) -> None:
        """The rest of ``_tick`` for a running delta node with nothing in flight and no usage
        models (``NodeManager._tick``, ``_heartbeat`` and ``_idle`` in one call): the changes
        since the last acknowledged report, or nothing and no next tick when there are none."""
        changes = self._changes
        healthy = self._healthy
        if not changes and healthy == self._reported_healthy:
            return  # idle: no tick is armed until something changes (``_touch``)
        statuses = tuple(changes.values())
        hb = Heartbeat(self.machine_id, self._last_response_id, healthy, statuses, False)
        self._inflight = hb
        self._inflight_at = now
        self._inflight_changes = tuple(changes.items()) if changes else ()
        stats = self._stats
        stats.heartbeats_sent += 1
        stats.statuses_sent += len(statuses)
        if timing is not None:
            timing.sent(now)
        self._send(hb)
        # In flight, so not idle: the next tick (which sends again if it goes unanswered).
        if self._tick_timer is None and (self._inflight is not None or not self._idle()):
            delay = self._next_tick - now
            delay = delay if delay > 0.0 else 0.0
            if wheel is not None:
                self._tick_timer = wheel.call_gated(self._gate, delay, self._tick)
            else:
                self._tick_timer = self._clock.call_later(delay, self._tick)

    def _touch(self) -> None:
        """``NodeManager._touch`` (a change to report at the next tick of the node's phase), armed
        on the wheel itself as ``_tick`` re-arms: a delta node's every launch and completion."""
        wheel = self._wheel
        if self._tick_timer is not None or wheel is None or self.state is not _RUNNING:
            NodeManager._touch(self)
            return
        now = wheel.now()
        behind = now - self._next_tick
        if behind > 0:
            interval = self._interval_s
            self._next_tick += math.ceil(behind / interval) * interval
        delay = self._next_tick - now
        self._tick_timer = wheel.call_gated(self._gate, delay if delay > 0.0 else 0.0, self._tick)

    def receive_hosted(self, msg: object) -> None:
        """``NodeProcess.receive``: the common answer (``heartbeat_answered``'s own fast path)
        in this one call when the process runs (no gate, no dispatch), and so a pushed launch
        (``NodeManager.receive``'s); anything else goes the process's way."""
        process = self._process
        if type(msg) is not HeartbeatResponse or process is None or process.crashed or (
            process.gate._held is not None
        ):
            if type(msg) is LaunchContainers and process is not None and not process.crashed and (
                process.gate._held is None
            ):
                if self.state is _RUNNING:  # else pushed before our re-registration: requeued
                    for launch in msg.containers:
                        self._launch(launch)
            elif process is not None:
                process.dispatch(msg)
            else:
                self.receive(msg)
            return
        sent = self._inflight
        if (
            sent is None
            or msg.action != "normal"
            or msg.kill
            or self.state is not _RUNNING
            or msg.heartbeat_id != sent.heartbeat_id + 1
        ):
            NodeManager.heartbeat_answered(self, msg)
            return
        # ``heartbeat_answered``'s common case (launches or none), inlined: one call less.
        self._stats.heartbeat_responses += 1
        timing = self._timing
        if timing is not None:
            timing.answered(self._inflight_at, self._clock.now())
        self._inflight = None
        self._last_response_id = msg.heartbeat_id
        self._reported_healthy = sent.healthy
        carried = self._inflight_changes
        if carried:  # a delta report's changes (a periodic one's, when a container came or went)
            self._retire(carried)
        launches = msg.launch
        if launches:  # the churn's answers: a freed slot's next task
            for launch in launches:
                self._launch(launch)
        if self._tick_timer is None:
            self._touch()

    def heartbeat_answered(self, msg: HeartbeatResponse) -> None:
        sent = self._inflight
        if (
            sent is None
            or msg.action != "normal"
            or msg.kill
            or self.state is not _RUNNING
            or msg.heartbeat_id != sent.heartbeat_id + 1
        ):
            NodeManager.heartbeat_answered(self, msg)
            return
        self._stats.heartbeat_responses += 1
        timing = self._timing
        if timing is not None:
            timing.answered(self._inflight_at, self._clock.now())
        self._inflight = None
        self._last_response_id = msg.heartbeat_id
        self._reported_healthy = sent.healthy
        carried = self._inflight_changes
        if carried:  # a delta report's changes (a periodic one's, when a container came or went)
            self._retire(carried)
        launches = msg.launch
        if launches:  # the churn's answers: a freed slot's next task
            for launch in launches:
                self._launch(launch)
        if self._tick_timer is None:
            self._touch()
