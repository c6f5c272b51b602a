"""A NodeManager as a node host runs thousands of them: its common answer in one call, its full
reports from saved bytes, its running statuses kept as containers start and end.

Nearly every tick of a node host is the same: a running node, nothing in flight, no usage models,
a full (periodic) report, which ``NodeManager._periodic_tick`` makes under one clock reading and
sends through ``_send_report``: here the connection's ``ReportWire`` where the link has one
(``wire_to``). ``HostedNode`` adds the common answer (action "normal", no launch or kill, no change
carried) in the call its process passes it on in. Anything else takes ``NodeManager``'s own path,
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
    # ``_running``: the running containers' statuses in launch order, kept as containers start
    # and end, so that a changed report is two tuples joined, not a status made per container.
    __slots__ = ("_process", "_running")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._running: dict[int, ContainerStatus] = {}  # before ``__init__``: ``_reset`` clears it
        super().__init__(*args, **kwargs)
        self._process: HostProcess | None = None

    def hosted_by(self, process: HostProcess) -> Callable[[object], None]:
        """What ``process`` takes the RM's messages through instead of its own ``receive``."""
        self._process = process
        return self.receive_hosted

    def wire_to(self, wire: ReportWire | None) -> None:
        """Send the common tick's report through ``wire`` (None: through ``send``)."""
        self._send_report = wire.send if wire is not None else self._send

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

    def receive_hosted(self, msg: object) -> None:
        """``NodeProcess.receive`` that hands an answer straight to ``heartbeat_answered`` when the
        process runs (no gate, no dispatch); anything else goes the process's way."""
        process = self._process
        if type(msg) is not HeartbeatResponse or process is None or process.crashed or (
            process.gate._held is not None
        ):
            if process is not None:
                process.dispatch(msg)
            else:
                self.receive(msg)
            return
        self.heartbeat_answered(msg)

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
