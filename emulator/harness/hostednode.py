"""A NodeManager as a node host runs thousands of them: the periodic tick and its answer in one
method each.

Nearly every tick of a node host is the same: a running node, nothing in flight, no usage models,
a full (periodic) report. ``NodeManager._tick`` gets there through ``_heartbeat``,
``_full_statuses``, ``_usage_report``, ``_idle`` and ``_arm``, reading the clock three times;
``HostedNode`` does that case in one method with one reading, and so the common answer (action
"normal", no launch or kill, no change carried). Anything else takes ``NodeManager``'s own path,
so the node's behaviour is the same message for message (tests/unit/test_node_batches.py runs
both side by side). Only TCP node hosts use it; in-memory runs use ``NodeManager``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from nodemanager.node import NodeManager, NodeState
from rm.protocol import ContainerLaunch, ContainerStatus, Heartbeat, HeartbeatResponse

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


class HostedNode(NodeManager):
    # ``_wire``: how the common tick's report goes out when the host has a faster way than
    # ``send`` (``TcpLink.report_sender``: from saved bytes while the report is unchanged);
    # ``_running``: the running containers' statuses in launch order, kept as containers start
    # and end, so that a changed report is two tuples joined, not a status made per container.
    __slots__ = ("_process", "_running", "_wire")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._running: dict[int, ContainerStatus] = {}  # before ``__init__``: ``_reset`` clears it
        super().__init__(*args, **kwargs)
        self._wire: ReportWire | None = None
        self._process: HostProcess | None = None

    def hosted_by(self, process: HostProcess) -> Callable[[object], None]:
        """What ``process`` takes the RM's messages through instead of its own ``receive``."""
        self._process = process
        return self.receive_hosted

    def wire_to(self, wire: ReportWire | None) -> None:
        """Send the common tick's report through ``wire`` (None: through ``send``)."""
        self._wire = wire

    # ---- the running statuses, as ``_containers`` changes ----------------------------------

    def _reset(self) -> None:
        NodeManager._reset(self)
        self._running.clear()

    def stop(self) -> None:
        NodeManager.stop(self)
        self._running.clear()

    def _launch(self, launch: ContainerLaunch) -> None:
        NodeManager._launch(self, launch)
        cid = launch.container_id
        if cid not in self._running and cid in self._containers:
            # The status the launch made (what the answer acknowledges by identity).
            self._running[cid] = self._changes.get(cid) or ContainerStatus(cid, "running")

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
        if (
            self.state is not _RUNNING
            or self._inflight is not None
            or self._usage is not None
            or self._config.mode == "delta"
        ):
            NodeManager._tick(self)
            return
        self._tick_timer = None
        clock = self._clock
        now = clock.now()
        late = now - self._next_tick
        timing = self._timing
        if timing is not None:
            timing.tick(late if late > 0 else 0.0)
        self._next_tick += self._config.interval_s
        statuses = self._statuses
        if statuses is None:
            statuses = self._full_statuses()
        hb = Heartbeat(
            machine_id=self.machine_id,
            heartbeat_id=self._last_response_id,
            healthy=self._healthy,
            statuses=statuses,
            full=True,
        )
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
            wire.send(hb)
        else:
            self._send(hb)
        if self._tick_timer is None:  # a periodic node is never idle: the next tick
            delay = self._next_tick - now
            self._tick_timer = clock.call_later(delay if delay > 0.0 else 0.0, self._tick)

    def receive_hosted(self, msg: object) -> None:
        """``NodeProcess.receive`` with the common answer (``heartbeat_answered``'s) in the same
        call, when the process runs; anything else goes the process's way."""
        process = self._process
        if type(msg) is not HeartbeatResponse or process is None or process.crashed or (
            process.gate._held is not None
        ):
            if process is not None:
                process.dispatch(msg)
            else:
                self.receive(msg)
            return
        sent = self._inflight
        if (
            sent is None
            or msg.action != "normal"
            or msg.launch
            or msg.kill
            or self._inflight_changes
            or self.state is not _RUNNING
            or msg.heartbeat_id != sent.heartbeat_id + 1
        ):
            NodeManager.heartbeat_answered(self, msg)  # what ``heartbeat_answered`` would call
            return
        self._stats.heartbeat_responses += 1
        timing = self._timing
        if timing is not None:
            timing.answered(self._inflight_at, self._clock.now())
        self._inflight = None
        self._last_response_id = msg.heartbeat_id
        self._reported_healthy = sent.healthy
        if self._tick_timer is None:
            self._touch()

    def heartbeat_answered(self, msg: HeartbeatResponse) -> None:
        sent = self._inflight
        if (
            sent is None
            or msg.action != "normal"
            or msg.launch
            or msg.kill
            or self._inflight_changes
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
        if self._tick_timer is None:
            self._touch()
