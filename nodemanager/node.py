"""One emulated node: registers, runs containers, heartbeats (periodic or delta).

This module holds its lifecycle, its tick and the dispatch of what the RM sends; the RM protocol
(registration, heartbeats) is nodemanager/reporting.py, the containers nodemanager/containers.py,
``NodeState`` and the fields they share nodemanager/state.py.

Sans-IO: everything happens in ``receive`` (a message from the RM) or in a timer callback on the
injected clock; messages leave through the injected ``send``. The heartbeat tick is a timer on
the node's own phase; an idle delta node (nothing to report, nothing in flight) arms no timer
at all until something changes. Pausing, crashing and restarting the node's process are the
harness's business (it holds the node's timers and messages while the process is stalled).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from nodemanager.config import HeartbeatConfig
from nodemanager.containers import ContainerRuntime
from nodemanager.ports import Clock, Log, MembershipAgent, Send, TimingProbe
from nodemanager.reporting import RMReporting
from nodemanager.state import NodeState as NodeState
from nodemanager.stats import NodeCounters
from rm.protocol import (
    ContainerLaunch,
    Heartbeat,
    HeartbeatResponse,
    KillContainers,
    LaunchContainers,
    RegisterResponse,
    Resources,
    UpdateLimits,
)

_RUNNING = NodeState.RUNNING


class NodeManager(RMReporting, ContainerRuntime):
    __slots__ = ()  # the fields: NodeFields (nodemanager/state.py)

    def __init__(
        self,
        address: str,
        resources: Resources,
        config: HeartbeatConfig,
        clock: Clock,
        send: Send,
        stats: NodeCounters,
        log: Log,
        credentials: str = "",
        membership: MembershipAgent | None = None,
        timing: TimingProbe | None = None,
        peer_endpoint: str = "",
    ) -> None:
        """``peer_endpoint``: where this node's process listens for ring liveness (announced at
        registration); empty when every node shares one process."""
        self.address = address
        self.peer_endpoint = peer_endpoint
        self.resources = resources
        self.credentials = credentials
        self._config = config
        self._clock = clock
        self._send = self._send_report = send
        self._stats = stats
        self._log = log
        self._membership = membership
        self._timing = timing
        self._containers = {}
        self._due = []
        self._due_timer = None
        self._due_at = math.inf
        self._tick_timer = None
        self._usage = None
        self._usage_timer = None
        self._attempt_at = -1.0  # not reset: a restarted node's attempts stay distinct
        self._reset()

    def _reset(self) -> None:
        """A fresh process: not registered, nothing running, nothing to report."""
        self.machine_id = -1
        self.state = NodeState.NEW
        self._containers.clear()
        self._clear_due()
        self._statuses = None
        self._changes = {}
        self._used_cpu = 0.0
        self._used_ram = 0.0
        self._healthy = True
        self._reported_healthy = True
        self._inflight = None
        self._inflight_at = 0.0
        self._inflight_changes = ()
        self._last_response_id = 0
        self._next_tick = 0.0
        self._reg_carried = None
        self._reg_healthy = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self, phase_s: float = 0.0) -> None:
        """Register ``phase_s`` from now, then tick every interval on that phase."""
        if self.state is NodeState.STOPPED:
            self._reset()
        self._next_tick = self._clock.now() + phase_s
        self._arm(self._first_tick)

    def stop(self) -> None:
        """Shut down: kill every container, arm nothing more. Sends nothing."""
        self._containers.clear()
        self._clear_due()
        self._changes.clear()
        self._statuses = None
        if self._usage is not None:
            self._usage.clear(self._clock.now())
        if self._usage_timer is not None:
            self._usage_timer.cancel()
            self._usage_timer = None
        self._reg_carried = None
        self._used_cpu = self._used_ram = 0.0
        self.state = NodeState.STOPPED
        if self._tick_timer is not None:
            self._tick_timer.cancel()
            self._tick_timer = None
        if self._membership is not None:
            self._membership.leave()

    def report_through(self, send: Send | None) -> None:
        """Send the common periodic tick's full report through ``send`` (None: the node's own
        ``send``): a host's cheaper way out for it, such as its current connection's own."""
        self._send_report = send if send is not None else self._send

    def resync(self) -> None:
        """The connection to the RM was re-established: register again with the full state."""
        if self.state in (NodeState.RUNNING, NodeState.REGISTERING):
            self._stats.resyncs += 1
            self._start_registration()

    def ring_removed(self) -> None:
        """The ring monitor saw us removed from the ring while alive: register again."""
        if self.state is NodeState.RUNNING:
            self._stats.resyncs += 1
            self._start_registration()

    # ---- what the node knows -------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        return self._healthy

    def set_healthy(self, healthy: bool) -> None:
        self._healthy = healthy
        self._touch()

    def running_containers(self) -> dict[int, ContainerLaunch]:
        return dict(self._containers)

    def unreported_completions(self) -> set[int]:
        """Containers that ended but whose completion the RM has not acknowledged yet."""
        return {cid for cid, st in self._changes.items() if st.state == "complete"}

    def used(self) -> Resources:
        return Resources(self._used_cpu, self._used_ram)

    # ---- the tick ------------------------------------------------------------------------

    def _arm(self, fn: Callable[[], None] | None = None) -> None:
        """Arm the next tick at ``_next_tick`` (if none is armed)."""
        if self._tick_timer is None:
            delay = max(0.0, self._next_tick - self._clock.now())
            self._tick_timer = self._clock.call_later(delay, self._tick if fn is None else fn)

    def _first_tick(self) -> None:
        self._tick_timer = None
        if self.state is NodeState.STOPPED:
            return
        self._next_tick += self._config.interval_s
        self._start_registration()
        self._arm()

    def _tick(self) -> None:
        self._tick_timer = None
        state = self.state
        if (
            state is _RUNNING and self._inflight is None and self._usage is None
            and self._config.mode != "delta"
        ):
            self._periodic_tick()  # a periodic node's first common tick (it arms the next)
            return
        if state is NodeState.STOPPED:
            return
        now = self._clock.now()
        late = now - self._next_tick
        if self._timing is not None:
            self._timing.tick(late if late > 0 else 0.0)
        config = self._config
        self._next_tick += config.interval_s
        if self.state is NodeState.RUNNING:
            self._heartbeat()
        elif (
            self.state is NodeState.REGISTERING
            and now - self._inflight_at >= config.effective_rpc_timeout()
        ):
            self._start_registration()
        # ``if not self._idle(): self._arm()``, inlined: every tick of every node re-arms here.
        if self._tick_timer is None and (config.mode != "delta" or not self._idle()):
            clock = self._clock
            delay = self._next_tick - clock.now()
            self._tick_timer = clock.call_later(delay if delay > 0.0 else 0.0, self._tick)

    def _periodic_tick(self) -> None:
        """``_tick`` of a running periodic node with nothing in flight and no usage models: the
        full report (made once until it changes) and the next tick, under one clock reading
        (``_heartbeat``, ``_full_statuses`` and the re-arm, without their calls and checks).
        It arms itself, so that the common tick is one call: any other case goes to ``_tick``."""
        if self.state is not _RUNNING or self._inflight is not None or self._usage is not None:
            self._tick()
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
        self._send_report(hb)
        if self._tick_timer is None:  # a periodic node is never idle: its next tick
            delay = self._next_tick - now
            self._tick_timer = clock.call_later(delay if delay > 0.0 else 0.0, self._periodic_tick)

    def _idle(self) -> bool:
        """Delta mode with nothing to say: no tick is armed until something changes."""
        return (
            self._config.mode == "delta"
            and self.state is NodeState.RUNNING
            and self._inflight is None
            and not self._changes
            and not (self._usage is not None and self._usage.dirty)
            and self._healthy == self._reported_healthy
        )

    def _touch(self) -> None:
        """Something changed that a delta heartbeat must carry: report at the next tick of our
        own phase (an idle node has none armed)."""
        if self._tick_timer is not None or self.state is NodeState.STOPPED or self.state is NodeState.NEW:
            return
        interval = self._config.interval_s
        behind = self._clock.now() - self._next_tick
        if behind > 0:
            self._next_tick += math.ceil(behind / interval) * interval
        self._arm()

    # ---- inbound ------------------------------------------------------------------------

    def receive(self, msg: object) -> None:
        """A message from the RM (ring messages go to the ring monitor, not here)."""
        if self.state is NodeState.STOPPED:
            return
        match msg:
            case HeartbeatResponse():
                self.heartbeat_answered(msg)
            case LaunchContainers(containers=containers):
                if self.state is not NodeState.RUNNING:
                    return  # pushed before our re-registration; the RM has requeued it
                for launch in containers:
                    self._launch(launch)
            case UpdateLimits(limits=limits):
                now = self._clock.now()
                for lim in limits:
                    if self._usage is not None:
                        self._usage.set_limits(lim.container_id, lim.cpu, lim.ram_gib, now)
            case KillContainers(container_ids=ids, exit_code=code):
                for cid in ids:
                    self._kill(cid, code)
            case RegisterResponse():
                self._on_register_response(msg)
            case _:
                self._log.warning("node.unexpected_message", node=self.address, type=type(msg).__name__)

    def __repr__(self) -> str:
        return f"NodeManager({self.address!r}, id={self.machine_id}, {self.state.value})"
