"""One emulated node: registers, runs containers, heartbeats (periodic or delta).

Sans-IO: everything happens in ``receive`` (a message from the RM) or in a timer callback on the
injected clock; messages leave through the injected ``send``. The heartbeat tick is a timer on
the node's own phase; an idle delta node (nothing to report, nothing in flight) arms no timer
at all until something changes. Pausing, crashing and restarting the node's process are the
harness's business (it holds the node's timers and messages while the process is stalled).
"""

from __future__ import annotations

import enum
import heapq
import math
from collections.abc import Callable

from nodemanager.config import HeartbeatConfig
from nodemanager.ports import Clock, Log, MembershipAgent, Send, Timer, TimingProbe
from nodemanager.stats import NodeCounters
from nodemanager.usage import NodeUsage
from rm.protocol import (
    EXIT_KILLED,
    EXIT_OOM,
    EXIT_REJECTED,
    EXIT_SUCCESS,
    ContainerLaunch,
    ContainerStatus,
    ContainerUsage,
    Heartbeat,
    HeartbeatResponse,
    KillContainers,
    LaunchContainers,
    Register,
    RegisterResponse,
    Resources,
    UpdateLimits,
)

# Resource comparisons tolerate float rounding of this size.
EPS = 1e-9


class NodeState(enum.Enum):
    NEW = "new"
    REGISTERING = "registering"
    RUNNING = "running"
    STOPPED = "stopped"


class NodeManager:
    __slots__ = (
        "_attempt_at",
        "_changes",
        "_clock",
        "_config",
        "_containers",
        "_due",
        "_due_at",
        "_due_timer",
        "_healthy",
        "_inflight",
        "_inflight_at",
        "_last_response_id",
        "_log",
        "_membership",
        "_next_tick",
        "_reg_carried",
        "_reg_healthy",
        "_reported_healthy",
        "_send",
        "_stats",
        "_statuses",
        "_tick_timer",
        "_timing",
        "_usage",
        "_usage_timer",
        "_used_cpu",
        "_used_ram",
        "address",
        "credentials",
        "machine_id",
        "peer_endpoint",
        "resources",
        "state",
    )

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
        self._send = send
        self._stats = stats
        self._log = log
        self._membership = membership
        self._timing = timing
        # Running containers; their completions as a heap of (finish time, container id) with one
        # timer for the earliest: no timer, no wrapper object per container.
        self._containers: dict[int, ContainerLaunch] = {}
        self._due: list[tuple[float, int]] = []
        self._due_timer: Timer | None = None
        self._due_at = math.inf
        self._tick_timer: Timer | None = None
        # Containers with usage models (made at the first such launch: most nodes never see one)
        # and their sampling timer.
        self._usage: NodeUsage | None = None
        self._usage_timer: Timer | None = None
        self._reset()

    def _reset(self) -> None:
        """A fresh process: not registered, nothing running, nothing to report."""
        self.machine_id = -1
        self.state = NodeState.NEW
        self._containers.clear()
        self._clear_due()
        # The full report (running statuses, then unacknowledged completions), kept until a
        # container starts, ends or its completion is acknowledged.
        self._statuses: tuple[ContainerStatus, ...] | None = None
        # Latest status per container not yet acknowledged by the RM.
        self._changes: dict[int, ContainerStatus] = {}
        self._used_cpu = 0.0
        self._used_ram = 0.0
        self._healthy = True
        self._reported_healthy = True
        self._inflight: Heartbeat | None = None
        self._inflight_at = 0.0
        self._last_response_id = 0
        self._next_tick = 0.0
        # The registration in flight: the statuses (by identity) and the health every Register
        # of this attempt carried (None: not registering; health None: they differed).
        self._reg_carried: dict[int, ContainerStatus] | None = None
        self._reg_healthy: bool | None = None
        self._attempt_at = -1.0  # when the current registration attempt began (``Register``)

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
        if self.state is NodeState.STOPPED:
            return
        now = self._clock.now()
        late = now - self._next_tick
        if self._timing is not None:
            self._timing.tick(late if late > 0 else 0.0)
        self._next_tick += self._config.interval_s
        if self.state is NodeState.RUNNING:
            self._heartbeat()
        elif (
            self.state is NodeState.REGISTERING
            and now - self._inflight_at >= self._config.effective_rpc_timeout()
        ):
            self._start_registration()
        if not self._idle():
            self._arm()

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

    # ---- registration --------------------------------------------------------------------

    def _start_registration(self) -> None:
        if self._membership is not None:
            self._membership.leave()
        statuses = self._full_statuses()
        carried = self._reg_carried
        if self.state is NodeState.REGISTERING and carried is not None:
            # Another Register of the same attempt (a retry, or a reconnect): the answer that
            # comes may be to any of them, so only what every one of them carried is delivered.
            now_carried = {s.container_id: s for s in statuses}
            self._reg_carried = {
                cid: st for cid, st in carried.items() if now_carried.get(cid) is st
            }
            if self._reg_healthy != self._healthy:
                self._reg_healthy = None
        else:
            self._reg_carried = {s.container_id: s for s in statuses}
            self._reg_healthy = self._healthy
            # A new attempt: distinct from every earlier one, even at the same instant.
            self._attempt_at = max(self._clock.now(), self._attempt_at + 1e-6)
        self.state = NodeState.REGISTERING
        self._inflight = None
        self._inflight_at = self._clock.now()
        self._touch()  # an idle delta node must tick to retry a lost registration
        self._send(
            Register(
                address=self.address,
                resources=self.resources,
                credentials=self.credentials,
                healthy=self._healthy,
                containers=statuses,
                peer_endpoint=self.peer_endpoint,
                attempt_at=self._attempt_at,
            )
        )

    def _on_register_response(self, msg: RegisterResponse) -> None:
        if self.state is not NodeState.REGISTERING:
            return
        if msg.action == "shutdown":
            self._stats.registrations_refused += 1
            self._log.warning("node.rejected", node=self.address, reason=msg.reason)
            self.stop()
            return
        self.machine_id = msg.machine_id
        self.state = NodeState.RUNNING
        self._last_response_id = 0
        self._inflight = None
        # The registration delivered exactly what it carried: a container that completed (or
        # was killed) after the Register left is still a change to report, not acknowledged.
        carried, self._reg_carried = self._reg_carried or {}, None
        changes = self._changes
        for cid, status in carried.items():
            if changes.get(cid) is status:
                del changes[cid]
        self._statuses = None
        healthy, self._reg_healthy = self._reg_healthy, None
        # Health the RM may not know (it changed while registering) is reported again.
        self._reported_healthy = healthy if healthy is not None else not self._healthy
        self._stats.registrations += 1
        if self._membership is not None:
            self._membership.join(self.machine_id, msg.ring)
        self._touch()  # report what is left (delta mode: an idle node arms no tick otherwise)

    # ---- heartbeats ---------------------------------------------------------------------

    def _full_statuses(self) -> tuple[ContainerStatus, ...]:
        statuses = self._statuses
        if statuses is None:
            # A running status not yet acknowledged is reported as that same object (so that
            # the answer acknowledges it); the others are made afresh.
            changes = self._changes
            running = [changes.get(cid) or ContainerStatus(cid, "running") for cid in self._containers]
            done = [s for s in changes.values() if s.state == "complete"]
            statuses = self._statuses = (*running, *done)
        return statuses

    def _heartbeat(self) -> None:
        now = self._clock.now()
        stats = self._stats
        if self._inflight is not None:
            if now - self._inflight_at < self._config.effective_rpc_timeout():
                stats.heartbeats_skipped += 1
                return
            # Lost or hopelessly late: send the same report again (the RM treats it as duplicate).
            self._inflight_at = now
            stats.heartbeats_sent += 1
            if self._timing is not None:
                self._timing.sent(now)
            self._send(self._inflight)
            return
        if self._config.mode == "delta":
            usage_moved = self._usage is not None and self._usage.dirty
            if not self._changes and not usage_moved and self._healthy == self._reported_healthy:
                return
            statuses = tuple(self._changes.values())
            full = False
        else:
            statuses = self._full_statuses()
            full = True
        usage = self._usage_report(full)
        hb = Heartbeat(
            machine_id=self.machine_id,
            heartbeat_id=self._last_response_id,
            healthy=self._healthy,
            statuses=statuses,
            full=full,
            usage=usage,
        )
        self._inflight = hb
        self._inflight_at = now
        stats.heartbeats_sent += 1
        stats.statuses_sent += len(statuses)
        if self._timing is not None:
            self._timing.sent(now)
        self._send(hb)

    def _usage_report(self, full: bool) -> tuple[ContainerUsage, ...]:
        """Periodic: every usage-modelled container's usage; delta: those that moved enough.
        A lost heartbeat is resent as it was, so what it carried is not reported again."""
        usage = self._usage
        if usage is None or not usage.containers:
            return ()
        tracked = usage.containers
        if full:
            out = tuple(t.report(cid) for cid, t in tracked.items())
        else:
            out = tuple(tracked[cid].report(cid) for cid in sorted(usage.dirty) if cid in tracked)
        usage.dirty.clear()
        self._stats.usage_reports_sent += len(out)
        return out

    def _sample_usage(self) -> None:
        """The usage timer: draw usage, OOM-kill, re-time throttled containers, mark reports."""
        self._usage_timer = None
        usage = self._usage
        if self.state is NodeState.STOPPED or usage is None or not usage.containers:
            return
        result = usage.sample(self._clock.now())
        for cid, _ in result.ooms:
            self._unschedule(cid)
            self._release(cid, EXIT_OOM)
        for cid, delay in result.retime.items():
            if cid in self._containers:
                self._unschedule(cid)
                self._schedule_finish(cid, delay)
        if result.moved and self._config.mode == "delta":
            usage.dirty.update(result.moved)
            self._touch()
        self._arm_usage()

    def _arm_usage(self) -> None:
        if self._usage_timer is None and self._usage is not None and self._usage.containers:
            self._usage_timer = self._clock.call_later(self._config.usage_sample_s, self._sample_usage)

    def _on_heartbeat_response(self, msg: HeartbeatResponse) -> None:
        sent = self._inflight
        if self.state is not NodeState.RUNNING:
            return
        # Actions count even unasked: the RM declared us lost while we had nothing to report.
        if msg.action == "shutdown":
            self._log.info("node.shutdown", node=self.address, machine_id=self.machine_id)
            self.stop()
            return
        if msg.action == "resync":
            self._stats.resyncs += 1
            self._start_registration()
            return
        if sent is None:
            return
        if msg.heartbeat_id != sent.heartbeat_id + 1:
            return  # a late answer to an earlier copy
        self._stats.heartbeat_responses += 1
        if self._timing is not None:
            self._timing.answered(self._inflight_at, self._clock.now())
        self._inflight = None
        self._last_response_id = msg.heartbeat_id
        self._reported_healthy = sent.healthy
        changes = self._changes
        if changes:  # periodic reports repeat acknowledged statuses: nothing to retire then
            for status in sent.statuses:
                if changes.get(status.container_id) is status:
                    del changes[status.container_id]
                    if status.state == "complete":
                        self._statuses = None
        for launch in msg.launch:
            self._launch(launch)
        for cid in msg.kill:
            self._kill(cid, EXIT_KILLED)
        self._touch()

    # ---- inbound ------------------------------------------------------------------------

    def receive(self, msg: object) -> None:
        """A message from the RM (ring messages go to the ring monitor, not here)."""
        if self.state is NodeState.STOPPED:
            return
        match msg:
            case HeartbeatResponse():
                self._on_heartbeat_response(msg)
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

    # ---- containers ---------------------------------------------------------------------

    def _launch(self, launch: ContainerLaunch) -> None:
        cid = launch.container_id
        if cid in self._containers or cid in self._changes:
            return  # duplicate command
        res = launch.resources
        room = self._config.overcommit
        if (
            self._used_cpu + res.cpu > self.resources.cpu * room + EPS
            or self._used_ram + res.ram_gib > self.resources.ram_gib * room + EPS
        ):
            self._stats.containers_rejected += 1
            self._changes[cid] = ContainerStatus(cid, "complete", EXIT_REJECTED)
            self._statuses = None
            self._touch()
            return
        self._used_cpu += res.cpu
        self._used_ram += res.ram_gib
        status = ContainerStatus(cid, "running")
        self._containers[cid] = launch
        self._statuses = None
        self._schedule_finish(cid, launch.duration_s)
        if launch.usage is not None:
            if self._usage is None:
                cfg = self._config
                self._usage = NodeUsage(self.resources, self._stats.usage, cfg.usage_report_threshold)
            self._usage.add(cid, res, launch.usage, launch.duration_s, self._clock.now())
            if self._config.mode == "delta":
                self._usage.dirty.add(cid)
            self._arm_usage()
        self._changes[cid] = status
        self._stats.containers_launched += 1
        self._touch()

    def _release(self, cid: int, exit_code: int) -> bool:
        launch = self._containers.pop(cid, None)
        if launch is None:
            return False
        self._statuses = None
        if launch.usage is not None and self._usage is not None:
            self._usage.dirty.discard(cid)
            self._usage.remove(
                cid, self._clock.now(), finished=exit_code == EXIT_SUCCESS, oom=exit_code == EXIT_OOM
            )
        res = launch.resources
        self._used_cpu -= res.cpu
        self._used_ram -= res.ram_gib
        self._changes[cid] = ContainerStatus(cid, "complete", exit_code)
        self._touch()
        return True

    def _schedule_finish(self, cid: int, delay: float) -> None:
        at = self._clock.now() + delay
        heapq.heappush(self._due, (at, cid))
        if at < self._due_at:
            if self._due_timer is not None:
                self._due_timer.cancel()
            self._due_at = at
            self._due_timer = self._clock.call_later(delay, self._complete_due)

    def _unschedule(self, cid: int) -> None:
        """The container ends otherwise (killed, re-timed): rare, so the heap is rebuilt. The
        timer may stay armed for it and then finds nothing due."""
        due = self._due
        due[:] = [entry for entry in due if entry[1] != cid]
        heapq.heapify(due)

    def _complete_due(self) -> None:
        """The completion timer: end every container due by now, then arm for the next one."""
        self._due_timer = None
        self._due_at = math.inf
        due = self._due
        now = self._clock.now()
        while due and due[0][0] <= now + EPS:
            self._finish(heapq.heappop(due)[1])
        if due and self._due_timer is None:
            at = self._due_at = due[0][0]
            self._due_timer = self._clock.call_later(at - now, self._complete_due)

    def _clear_due(self) -> None:
        self._due.clear()
        self._due_at = math.inf
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None

    def _finish(self, cid: int) -> None:
        if self._release(cid, EXIT_SUCCESS):
            self._stats.containers_finished += 1
            if self._config.on_completion and self.state is NodeState.RUNNING:
                self._heartbeat()

    def _kill(self, cid: int, exit_code: int) -> None:
        if cid in self._containers:
            self._unschedule(cid)
            self._release(cid, exit_code)

    def __repr__(self) -> str:
        return f"NodeManager({self.address!r}, id={self.machine_id}, {self.state.value})"
