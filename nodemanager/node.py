"""One emulated node: registers, runs containers, heartbeats (periodic or delta)."""

from __future__ import annotations

import asyncio
import enum
import math
from typing import Any

from nodemanager.config import HeartbeatConfig
from nodemanager.stats import NodeStats
from ringmon.protocol import Ring, RingMessage, RingUpdate, UnlivelinessResponse
from rm.ports import Clock, Link, Timer
from rm.protocol import (
    EXIT_KILLED,
    EXIT_REJECTED,
    EXIT_SUCCESS,
    ContainerLaunch,
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    KillContainers,
    LaunchContainers,
    Register,
    RegisterResponse,
)
from rm.resources import EPS, Resources


class NodeState(enum.Enum):
    NEW = "new"
    REGISTERING = "registering"
    RUNNING = "running"
    STOPPED = "stopped"


class _Container:
    __slots__ = ("launch", "status", "timer")

    def __init__(self, launch: ContainerLaunch, status: ContainerStatus, timer: Timer) -> None:
        self.launch = launch
        self.status = status
        self.timer = timer


class NodeManager:
    __slots__ = (
        "_backlog",
        "_changes",
        "_clock",
        "_config",
        "_containers",
        "_healthy",
        "_inflight",
        "_inflight_at",
        "_last_response_id",
        "_link",
        "_log",
        "_paused_until",
        "_phase",
        "_reboot",
        "_reported_healthy",
        "_stalled_since",
        "_stats",
        "_used_cpu",
        "_used_ram",
        "_wake",
        "address",
        "crashed",
        "credentials",
        "machine_id",
        "monitor",
        "resources",
        "ring",
        "state",
    )

    def __init__(
        self,
        address: str,
        resources: Resources,
        config: HeartbeatConfig,
        clock: Clock,
        stats: NodeStats,
        log: Any,
        phase_s: float = 0.0,
        credentials: str = "",
    ) -> None:
        self.address = address
        self.resources = resources
        self.credentials = credentials
        self.machine_id = -1
        self.state = NodeState.NEW
        self.ring: Ring | None = None
        self._config = config
        self._clock = clock
        self._stats = stats
        self._log = log
        self._phase = phase_s
        self._link: Link | None = None
        self._containers: dict[int, _Container] = {}
        # Latest status per container not yet acknowledged by the RM.
        self._changes: dict[int, ContainerStatus] = {}
        self._used_cpu = 0.0
        self._used_ram = 0.0
        self._healthy = True
        self._reported_healthy = True
        self._inflight: Heartbeat | None = None
        self._inflight_at = 0.0
        self._last_response_id = 0
        self._wake: asyncio.Future[None] | None = None
        # Ring monitor (ringmon.monitor.RingMonitor) when the ring is on; faults: crash, pause.
        self.monitor: Any = None
        self.crashed = False
        self._reboot: asyncio.Future[None] | None = None
        self._paused_until = -1.0
        self._stalled_since = 0.0
        self._backlog: list[tuple[Any, ...]] = []

    # ---- wiring -------------------------------------------------------------------------

    def attach(self, link: Link) -> None:
        self._link = link

    @property
    def healthy(self) -> bool:
        return self._healthy

    def set_healthy(self, healthy: bool) -> None:
        self._healthy = healthy
        self._touch()

    def running_containers(self) -> dict[int, ContainerLaunch]:
        return {cid: c.launch for cid, c in self._containers.items()}

    def unreported_completions(self) -> set[int]:
        """Containers that ended but whose completion the RM has not acknowledged yet."""
        return {cid for cid, st in self._changes.items() if st.state == "complete"}

    def used(self) -> Resources:
        return Resources(self._used_cpu, self._used_ram)

    # ---- main loop ----------------------------------------------------------------------

    async def run(self) -> None:
        """One life (see ``_life``); after a crash, another one each time ``rejoin`` is called."""
        await self._life(self._phase)
        while self._reboot is not None:
            await self._reboot
            self._reboot = None
            await self._life(0.0)

    async def _life(self, phase_s: float) -> None:
        """Register, then heartbeat every interval until stopped or told to shut down.

        Registration is message-driven: a tick while still registering resends ``Register``
        once the previous attempt is older than the RPC timeout.
        """
        interval = self._config.interval_s
        clock = self._clock
        next_tick = clock.now() + phase_s
        await clock.sleep_until(next_tick)
        self._start_registration()
        next_tick += interval
        while self.state is not NodeState.STOPPED:
            if self._idle():
                # Delta mode with nothing to say: sleep until something changes, then report at
                # the next tick of our own phase (no wake-ups of idle nodes at all).
                self._wake = asyncio.get_running_loop().create_future()
                await self._wake
                self._wake = None
                behind = clock.now() - next_tick
                if behind > 0:
                    next_tick += math.ceil(behind / interval) * interval
                continue
            await clock.sleep_until(next_tick)
            while self._paused_until > clock.now():
                await clock.sleep_until(self._paused_until)  # the stalled loop runs nothing
            if self.state is NodeState.STOPPED:
                break
            late = clock.now() - next_tick
            self._stats.lateness.add(late if late > 0 else 0.0)
            if late > 0:
                self._stats.lateness_sum_s += late
                if late > self._stats.lateness_max_s:
                    self._stats.lateness_max_s = late
            next_tick += interval
            if self.state is NodeState.RUNNING:
                self._heartbeat()
            elif (
                self.state is NodeState.REGISTERING
                and self._clock.now() - self._inflight_at >= self._config.effective_rpc_timeout()
            ):
                self._start_registration()

    def _idle(self) -> bool:
        return (
            self._config.mode == "delta"
            and self.state is NodeState.RUNNING
            and self._inflight is None
            and not self._changes
            and self._healthy == self._reported_healthy
        )

    def _touch(self) -> None:
        """Something changed that a delta heartbeat must carry."""
        w = self._wake
        if w is not None and not w.done():
            w.set_result(None)

    def _start_registration(self) -> None:
        if self.monitor is not None:
            self.monitor.leave()
        self.state = NodeState.REGISTERING
        self._inflight = None
        self._inflight_at = self._clock.now()
        self._touch()  # an idle delta node's loop must run to retry a lost registration
        self._send(
            Register(
                address=self.address,
                resources=self.resources,
                credentials=self.credentials,
                healthy=self._healthy,
                containers=self._full_statuses(),
            )
        )

    def resync(self) -> None:
        """The transport reconnected: register again with the full container state."""
        if self.state in (NodeState.RUNNING, NodeState.REGISTERING):
            self._stats.resyncs += 1
            self._start_registration()

    def stop(self) -> None:
        """Shut down: kill every container and leave the loop. Sends nothing."""
        for container in self._containers.values():
            container.timer.cancel()
        self._containers.clear()
        self._changes.clear()
        self._used_cpu = self._used_ram = 0.0
        self.state = NodeState.STOPPED
        if self.monitor is not None:
            self.monitor.leave()
        self._touch()

    # ---- faults --------------------------------------------------------------------------

    def crash(self) -> None:
        """The process dies: no heartbeats, no liveness, no answers; ``rejoin`` restarts it."""
        self._paused_until = -1.0
        self._backlog.clear()
        self.stop()
        self.crashed = True
        if self._reboot is None:
            self._reboot = asyncio.get_running_loop().create_future()

    def rejoin(self) -> None:
        """Start a fresh process after a crash: it registers as a new node, with no containers."""
        if not self.crashed or self._reboot is None:
            return
        self.crashed = False
        self.state = NodeState.NEW
        self._inflight = None
        self._last_response_id = 0
        self._reported_healthy = self._healthy = True
        if not self._reboot.done():
            self._reboot.set_result(None)

    def pause(self, seconds: float) -> None:
        """The node's event loop stalls for ``seconds``: nothing it receives or that completes is
        handled until then (containers, being processes, do finish)."""
        if self.state is NodeState.STOPPED or seconds <= 0:
            return
        now = self._clock.now()
        if self._paused_until <= now:
            self._stalled_since = now
            self._clock.call_later(seconds, self._resume)
        elif now + seconds > self._paused_until:
            self._clock.call_later(now + seconds - self._paused_until, self._resume)
        self._paused_until = max(self._paused_until, now + seconds)
        if self.monitor is not None:
            self.monitor.pause()

    @property
    def paused(self) -> bool:
        return self._paused_until > self._clock.now()

    def stalled_for(self) -> float:
        """How long the event loop has been stalled (0 while it runs)."""
        now = self._clock.now()
        return now - self._stalled_since if self._paused_until > now else 0.0

    def _resume(self) -> None:
        if self._paused_until > self._clock.now() or self.state is NodeState.STOPPED:
            return
        self._paused_until = -1.0
        backlog, self._backlog = self._backlog, []
        for fn, *args in backlog:
            if self.state is not NodeState.STOPPED:
                fn(*args)
        if self.monitor is not None:
            self.monitor.resume()
        self._touch()

    def ring_removed(self) -> None:
        """The ring monitor saw us removed from the ring while alive: register again."""
        if self.paused:
            self._backlog.append((self.ring_removed,))
        elif self.state is NodeState.RUNNING:
            self._stats.resyncs += 1
            self._start_registration()

    # ---- heartbeats ---------------------------------------------------------------------

    def _full_statuses(self) -> tuple[ContainerStatus, ...]:
        running = [c.status for c in self._containers.values()]
        done = [s for s in self._changes.values() if s.state == "complete"]
        return (*running, *done)

    def _heartbeat(self) -> None:
        now = self._clock.now()
        if self._inflight is not None:
            if now - self._inflight_at < self._config.effective_rpc_timeout():
                self._stats.heartbeats_skipped += 1
                return
            # Lost or hopelessly late: send the same report again (the RM treats it as duplicate).
            self._inflight_at = now
            self._stats.heartbeats_sent += 1
            self._stats.mark_sent(now)
            self._send(self._inflight)
            return
        if self._config.mode == "delta":
            if not self._changes and self._healthy == self._reported_healthy:
                return
            statuses = tuple(self._changes.values())
            full = False
        else:
            statuses = self._full_statuses()
            full = True
        hb = Heartbeat(
            machine_id=self.machine_id,
            heartbeat_id=self._last_response_id,
            healthy=self._healthy,
            statuses=statuses,
            full=full,
        )
        self._inflight = hb
        self._inflight_at = now
        self._stats.heartbeats_sent += 1
        self._stats.mark_sent(now)
        self._stats.statuses_sent += len(statuses)
        self._send(hb)

    def send_to_rm(self, msg: Any) -> None:
        """For the ring monitor: reports and probe answers go on the node's RM connection."""
        self._send(msg)

    def _send(self, msg: Any) -> None:
        if self._link is not None and not self._link.closed:
            self._link.send(msg)

    # ---- inbound ------------------------------------------------------------------------

    def receive(self, msg: Any) -> None:
        if self.state is NodeState.STOPPED:
            return
        if self.monitor is not None and isinstance(msg, RingMessage):
            self.monitor.from_rm(msg)  # the monitor decides whether our stall delays it
            return
        if self._paused_until > self._clock.now():
            self._backlog.append((self.receive, msg))
            return
        match msg:
            case HeartbeatResponse():
                self._on_heartbeat_response(msg)
            case LaunchContainers(containers=containers):
                if self.state is not NodeState.RUNNING:
                    return  # pushed before our re-registration; the RM has requeued it
                for launch in containers:
                    self._launch(launch)
            case KillContainers(container_ids=ids, exit_code=code):
                for cid in ids:
                    self._kill(cid, code)
            case RegisterResponse():
                self._on_register_response(msg)
            case RingUpdate(ring=ring):
                if self.ring is None or ring.version > self.ring.version:
                    self.ring = ring
            case UnlivelinessResponse(ring=ring):
                if ring is not None and (self.ring is None or ring.version > self.ring.version):
                    self.ring = ring
            case _:
                self._log.warning("node.unexpected_message", node=self.address, type=type(msg).__name__)

    def _on_register_response(self, msg: RegisterResponse) -> None:
        if self.state is not NodeState.REGISTERING:
            return
        if msg.action == "shutdown":
            self._log.warning("node.rejected", node=self.address, reason=msg.reason)
            self.stop()
            return
        self.machine_id = msg.machine_id
        if msg.ring is not None:
            self.ring = msg.ring
        self.state = NodeState.RUNNING
        self._last_response_id = 0
        self._inflight = None
        # Registration carried our full state, including completions.
        self._changes.clear()
        self._reported_healthy = self._healthy
        self._stats.registrations += 1
        if self.monitor is not None:
            self.monitor.join(self.machine_id, msg.ring)

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
        self._stats.mark_answered(self._inflight_at, self._clock.now())
        self._inflight = None
        self._last_response_id = msg.heartbeat_id
        self._reported_healthy = sent.healthy
        changes = self._changes
        for status in sent.statuses:
            if changes.get(status.container_id) is status:
                del changes[status.container_id]
        for launch in msg.launch:
            self._launch(launch)
        for cid in msg.kill:
            self._kill(cid, EXIT_KILLED)
        self._touch()

    # ---- containers ---------------------------------------------------------------------

    def _launch(self, launch: ContainerLaunch) -> None:
        cid = launch.container_id
        if cid in self._containers or cid in self._changes:
            return  # duplicate command
        res = launch.resources
        if (
            self._used_cpu + res.cpu > self.resources.cpu + EPS
            or self._used_ram + res.ram_gib > self.resources.ram_gib + EPS
        ):
            self._stats.containers_rejected += 1
            self._changes[cid] = ContainerStatus(cid, "complete", EXIT_REJECTED)
            self._touch()
            return
        self._used_cpu += res.cpu
        self._used_ram += res.ram_gib
        status = ContainerStatus(cid, "running")
        timer = self._clock.call_later(launch.duration_s, self._finish, cid)
        self._containers[cid] = _Container(launch, status, timer)
        self._changes[cid] = status
        self._stats.containers_launched += 1
        self._touch()

    def _release(self, cid: int, exit_code: int) -> bool:
        container = self._containers.pop(cid, None)
        if container is None:
            return False
        container.timer.cancel()
        res = container.launch.resources
        self._used_cpu -= res.cpu
        self._used_ram -= res.ram_gib
        self._changes[cid] = ContainerStatus(cid, "complete", exit_code)
        self._touch()
        return True

    def _finish(self, cid: int) -> None:
        if self._paused_until > self._clock.now():
            self._backlog.append((self._finish, cid))
            return
        if self._release(cid, EXIT_SUCCESS):
            self._stats.containers_finished += 1
            if self._config.on_completion and self.state is NodeState.RUNNING:
                self._heartbeat()

    def _kill(self, cid: int, exit_code: int) -> None:
        self._release(cid, exit_code)

    def __repr__(self) -> str:
        return f"NodeManager({self.address!r}, id={self.machine_id}, {self.state.value})"

