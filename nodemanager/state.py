"""Where a node is in its life (``NodeState``), and the fields the node's parts share.

``NodeManager`` (nodemanager/node.py: lifecycle, the tick, inbound messages) is built of two more
parts: ``RMReporting`` (nodemanager/reporting.py: registration and heartbeats) and
``ContainerRuntime`` (nodemanager/containers.py: running containers). ``NodeFields`` declares for
the type checker what they read and write on the one node object, and what they call on each
other; its ``__slots__`` are the node's.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from nodemanager.config import HeartbeatConfig
from nodemanager.ports import Clock, Log, MembershipAgent, Send, Timer, TimingProbe
from nodemanager.stats import NodeCounters
from nodemanager.usage import NodeUsage
from rm.protocol import ContainerLaunch, ContainerStatus, Heartbeat, Resources

# Resource comparisons tolerate float rounding of this size.
EPS = 1e-9


class DueAt(float):
    """A completion heap entry: the container's finish time, carrying its id. One object of 48
    bytes where a ``(time, id)`` tuple and its float took 80, per running container; compared
    as the float it is (ties: ``ContainerRuntime._complete_due`` orders them by id)."""

    __slots__ = ("cid",)
    cid: int


def time_then_id(entry: DueAt) -> tuple[float, int]:
    """The order completions due at one instant end in: (time, container id)."""
    return (float(entry), entry.cid)


class NodeState(enum.Enum):
    NEW = "new"
    REGISTERING = "registering"
    RUNNING = "running"
    STOPPED = "stopped"


class NodeFields:
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
        "_inflight_changes",
        "_last_response_id",
        "_log",
        "_membership",
        "_next_tick",
        "_reg_carried",
        "_reg_healthy",
        "_reported_healthy",
        "_send",
        "_send_report",
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

    address: str
    resources: Resources
    credentials: str
    peer_endpoint: str
    machine_id: int
    state: NodeState
    _config: HeartbeatConfig
    _clock: Clock
    _send: Send
    # Where the common periodic tick's full report goes: ``_send`` unless the node's host has a
    # cheaper way out for it (a node host's saved report bytes).
    _send_report: Send
    _stats: NodeCounters
    _log: Log
    _membership: MembershipAgent | None
    _timing: TimingProbe | None
    # Running containers; their completions as a heap of finish times carrying their ids, with one
    # timer for the earliest: no timer, no wrapper object per container.
    _containers: dict[int, ContainerLaunch]
    _due: list[DueAt]
    _due_timer: Timer | None
    _due_at: float
    _tick_timer: Timer | None
    # Containers with usage models (made at the first such launch: most nodes never see one)
    # and their sampling timer.
    _usage: NodeUsage | None
    _usage_timer: Timer | None
    # The full report (running statuses, then unacknowledged completions), kept until a
    # container starts, ends or its completion is acknowledged.
    _statuses: tuple[ContainerStatus, ...] | None
    # Latest status per container not yet acknowledged by the RM.
    _changes: dict[int, ContainerStatus]
    _used_cpu: float
    _used_ram: float
    _healthy: bool
    _reported_healthy: bool
    _inflight: Heartbeat | None
    _inflight_at: float
    # The changes (container id, status) not yet acknowledged when the report in flight left:
    # every one is in it, so its answer retires those still current, without a walk over a
    # periodic report's every status.
    _inflight_changes: tuple[tuple[int, ContainerStatus], ...]
    _last_response_id: int
    _next_tick: float
    # The registration in flight: the statuses (by identity) and the health every Register
    # of this attempt carried (None: not registering; health None: they differed).
    _reg_carried: dict[int, ContainerStatus] | None
    _reg_healthy: bool | None
    _attempt_at: float  # when the current registration attempt began (``Register.attempt_at``)

    if TYPE_CHECKING:  # what the parts call on each other (defined in NodeManager and its parts)

        def stop(self) -> None: ...

        def _touch(self) -> None: ...

        def _heartbeat(self) -> None: ...

        def _start_registration(self) -> None: ...

        def _full_statuses(self) -> tuple[ContainerStatus, ...]:
            raise NotImplementedError

        def _launch(self, launch: ContainerLaunch) -> None: ...

        def _kill(self, cid: int, exit_code: int) -> None: ...

        def _clear_due(self) -> None: ...
