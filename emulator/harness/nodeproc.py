"""One emulated node host process: a NodeManager, its ring monitor, its connection to the RM,
and what can happen to a process: it pauses (its event loop stalls), crashes, or starts again.

The process's event loop is modelled by a ``ProcessGate``: every timer callback and message of
the node (and of the paper's in-loop ``ring`` detector) runs through it, at once while the
process runs, held in order while it is paused and replayed when it resumes. The ``kring``
monitor is a watchdog beside the loop: it keeps its own timers and answers probes while the node
is stalled, reporting how long the loop has been stalled. Pause, crash and rejoin exist here
once, for every transport: the in-memory run and the TCP worker processes both host nodes as
``NodeProcess`` objects.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from emulator.measure.timing import HeartbeatTiming
from emulator.time.clock import Scheduler, VirtualClock
from emulator.time.wheel import WheelClock
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeManager, NodeState
from nodemanager.ports import Log, Timer
from nodemanager.stats import NodeCounters
from ringmon.config import RingConfig
from ringmon.membership import RingView, ViewCache
from ringmon.monitor import RingMonitor
from ringmon.ports import PeerChannel, PeerReceiver, RingCounters
from ringmon.protocol import RingMessage
from ringmon.sleepers import SleepLedger
from rm import Link
from rm.protocol import ContainerLaunch, HeartbeatResponse, Resources

_NEVER = float("-inf")


class ProcessGate:
    """A process's event loop: runs callbacks now, or holds them while the process is paused."""

    __slots__ = ("_clock", "_held", "_since", "_until", "resumed_at")

    def __init__(self, clock: Scheduler) -> None:
        self._clock = clock
        self._held: list[tuple[Callable[..., object], tuple[Any, ...]]] | None = None
        self._until = -1.0
        self._since = 0.0
        self.resumed_at = _NEVER  # the end of the last pause

    def run(self, fn: Callable[..., object], *args: Any) -> None:
        held = self._held
        if held is None:
            fn(*args)
        else:
            held.append((fn, args))

    @property
    def paused(self) -> bool:
        return self._held is not None

    def now(self) -> float:
        return self._clock.now()

    def stalled_for(self) -> float:
        """How long the loop has been stalled (0 while it runs)."""
        return self._clock.now() - self._since if self._held is not None else 0.0

    def pause(self, seconds: float) -> None:
        now = self._clock.now()
        if self._held is None:
            self._held = []
            self._since = now
        if now + seconds > self._until:
            self._until = now + seconds
            self._clock.call_later(seconds, self._resume, self._until)

    def _resume(self, until: float) -> None:
        held = self._held
        if held is None or until != self._until:
            return  # resumed already, or a longer pause came meanwhile (its own timer resumes)
        left = until - self._clock.now()
        if left > 1e-9:  # real time: the timer fired a little early
            self._clock.call_later(left, self._resume, until)
            return
        self._held = None
        self.resumed_at = self._clock.now()
        for k, (fn, args) in enumerate(held):
            if self._held is not None:  # paused again by what just ran: the rest waits
                self._held[:0] = held[k:]
                return
            fn(*args)

    def clear(self) -> None:
        """The process died: what it had not run yet is gone."""
        self._held = None
        self._until = -1.0


class _PauseAwareTiming:
    """Heartbeat timing that tells the ticks an injected pause held back (late on purpose: the
    emulated system's fault) from those the emulator itself ran late."""

    __slots__ = ("_gate", "_inner", "answered", "sent", "tick")

    def __init__(self, inner: HeartbeatTiming, gate: ProcessGate) -> None:
        self._inner = inner
        self._gate = gate
        # A pause changes nothing about these: the inner's own methods (no forwarding call).
        self.sent: Callable[[float], None] = inner.sent
        self.answered: Callable[[float, float], None] = inner.answered
        # Nor about a tick of a process never paused (most of them): the inner's own ``tick``
        # (a node host's is a list's append) until ``pausing``.
        self.tick: Callable[[float], None] = inner.tick

    def pausing(self) -> None:
        """The process is about to pause: from now on a tick may be one the pause held back."""
        self.tick = self._checked_tick

    def _checked_tick(self, late_s: float) -> None:
        resumed = self._gate.resumed_at
        # No pause ended since it was due (no clock read then).
        if resumed == _NEVER or resumed < self._gate.now() - late_s:
            if late_s == 0.0:  # ``HeartbeatTiming.tick(0.0)``, without its call
                self._inner.on_time += 1
            else:
                self._inner.tick(late_s)
        else:
            self._inner.held_tick(late_s)


class GatedClock:
    """The clock as code inside the process sees it: timers fire through the gate."""

    __slots__ = ("call_later", "now")

    def __init__(self, clock: Scheduler, gate: ProcessGate) -> None:
        # Bound once: a node arms a timer or two every interval. The discrete-event core and a
        # node host's wheel keep the gate in the timer itself (no call through the gate when the
        # process runs).
        self.call_later: Callable[..., Timer] = (
            clock.gated(gate) if isinstance(clock, (WheelClock, VirtualClock))
            else partial(_through_gate, clock.call_later, gate.run)
        )
        self.now: Callable[[], float] = clock.now  # the time is the clock's own (no extra call)


def _through_gate(call_later: Callable[..., Timer], run: Callable[..., None], delay: float,
                  callback: Callable[..., object], *args: Any) -> Timer:
    return call_later(delay, run, callback, *args)


class _GatedReceiver:
    __slots__ = ("_gate", "_inner")

    def __init__(self, inner: PeerReceiver, gate: ProcessGate) -> None:
        self._inner = inner
        self._gate = gate

    def from_peer(self, msg: Any) -> None:
        self._gate.run(self._inner.from_peer, msg)

    def heard_from(self, sender: int, ring_version: int) -> bool:
        # A paused process holds its messages: a liveness to it must wait as a message.
        return not self._gate.paused and self._inner.heard_from(sender, ring_version)

    def sender_stopped(self, sender: int, last_s: float) -> None:
        self._gate.run(self._inner.sender_stopped, sender, last_s)

    def liveness_lossy(self) -> None:
        self._gate.run(self._inner.liveness_lossy)


class GatedPeers:
    """The peer channel as code inside the process sees it: deliveries go through the gate."""

    def __init__(self, inner: PeerChannel, gate: ProcessGate) -> None:
        self._inner = inner
        self._gate = gate
        self._bound: dict[tuple[int, int], _GatedReceiver] = {}

    def bind(self, machine_id: int, receiver: PeerReceiver) -> None:
        wrapped = _GatedReceiver(receiver, self._gate)
        self._bound[(machine_id, id(receiver))] = wrapped
        self._inner.bind(machine_id, wrapped)

    def unbind(self, machine_id: int, receiver: PeerReceiver) -> None:
        wrapped = self._bound.pop((machine_id, id(receiver)), None)
        if wrapped is not None:
            self._inner.unbind(machine_id, wrapped)

    def send(self, dst: int, msg: Any, endpoint: str = "") -> None:
        self._inner.send(dst, msg, endpoint)

    def touch(self, dst: int, sender: int, ring_version: int) -> bool:
        return self._inner.touch(dst, sender, ring_version)

    def stopped(self, dst: int, sender: int, last_s: float) -> None:
        self._inner.stopped(dst, sender, last_s)


class RingParts:
    """What the ring monitors of one process share: the config, the peer channel, the ring
    views (one per version) and the counters."""

    def __init__(self, config: RingConfig, peers: PeerChannel) -> None:
        self.config = config
        self.peers = peers
        self.views = ViewCache()
        self.counters = RingCounters()
        self.monitors: list[RingMonitor] = []
        self.sleepers = SleepLedger()  # every monitor's

    def settled(self) -> RingCounters:
        """The counters up to now, sleeping monitors' skipped ticks counted."""
        self.sleepers.settle()
        return self.counters

    def peer_messages(self) -> int:
        return self.settled().peer_messages


class NodeProcess:
    """A transport endpoint (``attach`` / ``receive`` / ``resync``) around one node process."""

    def __init__(
        self,
        address: str,
        resources: Resources,
        heartbeat: HeartbeatConfig,
        clock: Scheduler,
        counters: NodeCounters,
        log: Log,
        phase_s: float = 0.0,
        credentials: str = "",
        ring: RingParts | None = None,
        timing: HeartbeatTiming | None = None,
        peer_endpoint: str = "",
        node_type: type[NodeManager] = NodeManager,
    ) -> None:
        """``peer_endpoint``: where this process's peer channel listens (TCP workers);
        ``node_type``: the NodeManager class (a node host's ``HostedNode``)."""
        self.address = address
        self.phase_s = phase_s
        self.gate = ProcessGate(clock)
        self._link: Link | None = None
        self.crashed = False
        inner = GatedClock(clock, self.gate)
        self.monitor: RingMonitor | None = None
        self._monitor_in_loop = False
        if ring is not None:
            self._monitor_in_loop = ring.config.detector == "ring"
            self.monitor = RingMonitor(
                ring.config,
                inner if self._monitor_in_loop else clock,
                GatedPeers(ring.peers, self.gate) if self._monitor_in_loop else ring.peers,
                self.send_to_rm, ring.views, ring.counters, log,
                stall_age=self.gate.stalled_for, on_removed=self._ring_removed, phase_s=phase_s,
                can_sleep=True,  # ``pause`` tells it
                sleepers=ring.sleepers,
            )
            ring.monitors.append(self.monitor)
        probe = self._probe = _PauseAwareTiming(timing, self.gate) if timing is not None else None
        self.node = node_type(
            address, resources, heartbeat, inner, self.send_to_rm, counters, log, credentials,
            membership=self.monitor, timing=probe, peer_endpoint=peer_endpoint,
        )
        self._node_receive = self.node.receive  # bound once: every answer from the RM comes here
        self._answered = self.node.heartbeat_answered
        hosted_by = getattr(self.node, "hosted_by", None)
        if hosted_by is not None:  # a hosted node takes the common answer itself: one call less
            self.receive = hosted_by(self)  # type: ignore[method-assign]

    # ---- the transport's side ---------------------------------------------------------------

    def attach(self, link: Link) -> None:
        """The current connection to the RM (a new one after a reconnect)."""
        self._link = link
        wire_to = getattr(self.node, "wire_to", None)
        if wire_to is not None:  # a hosted node: its reports from saved bytes where the link can
            sender = getattr(link, "report_sender", None)
            wire_to(sender() if sender is not None else None)
        else:
            # A metered in-memory link takes the common report itself (as ``send_to_rm`` would:
            # it drops it once closed): two calls less per heartbeat.
            self.node.report_through(getattr(link, "send_report", None))

    def receive(self, msg: object) -> None:
        """A message from the RM."""
        if self.crashed:
            return
        if type(msg) is HeartbeatResponse:  # most messages: straight to the node's handler
            gate = self.gate
            if gate._held is None:
                self._answered(msg)
            else:
                gate.run(self._node_receive, msg)
            return
        if isinstance(msg, RingMessage):
            if self.monitor is None:
                return
            if self._monitor_in_loop:
                self.gate.run(self.monitor.from_rm, msg)
            else:
                self.monitor.from_rm(msg)  # the watchdog answers even while the loop is stalled
            return
        gate = self.gate
        if gate._held is None:  # the process runs: at once, as ``gate.run`` would
            self._node_receive(msg)
        else:
            gate.run(self._node_receive, msg)

    dispatch = receive  # what ``receive`` does, for a node that takes the common answer first

    def resync(self) -> None:
        """The transport reconnected: register again with the full state."""
        if not self.crashed:
            self.gate.run(self.node.resync)

    def send_to_rm(self, msg: object) -> None:
        link = self._link
        if link is not None and not link.closed:
            link.send(msg)

    def _ring_removed(self) -> None:
        self.gate.run(self.node.ring_removed)

    # ---- the process ---------------------------------------------------------------------------

    def start(self) -> None:
        self.node.start(self.phase_s)

    def stop(self) -> None:
        self.gate.clear()
        self.node.stop()

    def crash(self) -> None:
        """The process dies: no heartbeats, no liveness, no answers; ``rejoin`` restarts it."""
        self.gate.clear()
        self.node.stop()
        self.crashed = True

    def rejoin(self) -> None:
        """A fresh process after a crash: it registers as a new node, with no containers."""
        if self.crashed:
            self.crashed = False
            self.node.start(0.0)

    def pause(self, seconds: float) -> None:
        """The event loop stalls for ``seconds``: nothing the node receives or that completes is
        handled until then (containers, being processes, do finish)."""
        if self.node.state is not NodeState.STOPPED and seconds > 0:
            if self._probe is not None:
                self._probe.pausing()
            self.gate.pause(seconds)
            if self.monitor is not None:
                self.monitor.loop_stalled()

    def set_healthy(self, healthy: bool) -> None:
        self.gate.run(self.node.set_healthy, healthy)

    # ---- what the process is -------------------------------------------------------------------

    @property
    def machine_id(self) -> int:
        return self.node.machine_id

    @property
    def state(self) -> NodeState:
        return self.node.state

    @property
    def resources(self) -> Resources:
        return self.node.resources

    @property
    def paused(self) -> bool:
        return self.gate.paused

    def stalled_for(self) -> float:
        return self.gate.stalled_for()

    def running_containers(self) -> dict[int, ContainerLaunch]:
        return self.node.running_containers()

    def unreported_completions(self) -> set[int]:
        return self.node.unreported_completions()

    def used(self) -> Resources:
        return self.node.used()

    def ring_view(self) -> RingView | None:
        """The ring this node's monitor holds (None without a ring, or while it is not active)."""
        mon = self.monitor
        return mon.view if mon is not None and mon.active else None
