"""The RM's public API: the messages NodeManagers and the RM exchange (design.md §2, paper 004
flows 1-2), and the resource vector they carry.

One tagged union per direction; the in-memory transport passes the objects, the TCP transport
encodes exactly these structs as msgpack. Ring messages travel on the same connection and are
defined by the ring (``ringmon.protocol``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ringmon.protocol import (
    Action,
    Probe,
    ProbeAck,
    Ring,
    RingDelta,
    RingSyncRequest,
    RingUpdate,
    UnlivelinessReport,
    UnlivelinessResponse,
)


class Resources(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Cores and GiB of RAM."""

    cpu: float
    ram_gib: float

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.ram_gib + other.ram_gib)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.ram_gib - other.ram_gib)

    def dominant_share(self, capacity: Resources) -> float:
        return max(
            self.cpu / capacity.cpu if capacity.cpu > 0 else 0.0,
            self.ram_gib / capacity.ram_gib if capacity.ram_gib > 0 else 0.0,
        )


ZERO = Resources(0.0, 0.0)

# Per resource, what a node may declare at registration. Beyond it (or NaN, inf) capacity sums and
# their time integrals overflow or lose all precision, and utilisation is NaN for the whole run.
MAX_NODE_RESOURCE = 1e6


def resources_problem(res: Resources) -> str:
    """Why a node cannot register with ``res`` ("" if it can): each resource must be a finite
    number in (0, MAX_NODE_RESOURCE]."""
    for name, value in (("cpu", res.cpu), ("ram_gib", res.ram_gib)):
        if not (0 < value <= MAX_NODE_RESOURCE):  # false for NaN too
            return f"resources: {name} = {value!r}, expected a number in (0, {MAX_NODE_RESOURCE:g}]"
    return ""

ContainerState = Literal["running", "complete"]

EXIT_SUCCESS = 0
EXIT_KILLED = -100
EXIT_PREEMPTED = -102
EXIT_REJECTED = -1
# Memory usage above the container's hard limit, or the node's memory overflowed (design.md §3b).
EXIT_OOM = -104

# Borg priority tiers (design.md §3b), lowest first; a container carries its tier's number.
TIER_NAMES = ("free", "batch", "mid", "production", "monitoring")

UsageKind = Literal["constant", "normal", "lognormal", "bursty"]


class UsageModel(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """How one resource's usage of a task varies, as a fraction of its request (seeded per task).

    constant: ``mean``; normal: N(mean, (cv·mean)²) clipped at 0; lognormal: mean ``mean`` and
    coefficient of variation ``cv``; bursty: ``mean`` while off, ``peak`` while on, exponential
    on/off periods of means ``on_s`` / ``off_s``. ``task_cv``: each task attempt also draws its
    own level once (lognormal, mean 1, this coefficient of variation) that scales all its samples:
    tasks of one group differ, and a task's usage is correlated over time."""

    kind: UsageKind = "constant"
    mean: Annotated[float, msgspec.Meta(gt=0, le=100)] = 1.0
    cv: Annotated[float, msgspec.Meta(ge=0, le=100)] = 0.0
    peak: Annotated[float, msgspec.Meta(gt=0, le=100)] = 1.5
    on_s: Annotated[float, msgspec.Meta(gt=0, le=1e7)] = 60.0
    off_s: Annotated[float, msgspec.Meta(gt=0, le=1e7)] = 300.0
    task_cv: Annotated[float, msgspec.Meta(ge=0, le=100)] = 0.0


class TaskUsage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a launched container's usage process needs: the models (None: uses its request
    exactly), the seed of this attempt, its tier, and its limits (None: the request)."""

    cpu: UsageModel | None = None
    ram: UsageModel | None = None
    seed: int = 0
    tier: int = 1
    # Hard: memory above the limit kills the task (OOM). Soft: only a full node's memory does.
    ram_hard: bool = True
    ram_limit_gib: float | None = None
    cpu_limit: float | None = None
    # Autopilot sets this task group's limits (rm/borg/autopilot.py): its class and OOM tolerance.
    autopilot: bool = False
    job_class: Literal["batch", "serving"] = "batch"
    oom_tolerance: Literal["low", "minimal", "medium"] = "low"


class ContainerUsage(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A running container's measured usage (cores, GiB), as a heartbeat reports it."""

    container_id: int
    cpu: float
    ram_gib: float


class Message(msgspec.Struct, tag=True, frozen=True, gc=False):
    pass


class ContainerStatus(msgspec.Struct, frozen=True, array_like=True, gc=False):
    container_id: int
    state: ContainerState
    exit_code: int = EXIT_SUCCESS


class ContainerLaunch(msgspec.Struct, frozen=True, array_like=True, gc=False, omit_defaults=True):
    container_id: int
    resources: Resources
    duration_s: float
    # Scenarios with usage models: the task's usage process (None: it uses its request exactly).
    usage: TaskUsage | None = None


class Register(Message, frozen=True, omit_defaults=True):
    address: str
    resources: Resources
    credentials: str = ""
    healthy: bool = True
    # Containers still running on the node (a resync after the RM lost track of it).
    containers: tuple[ContainerStatus, ...] = ()
    # Where the node's process listens for ring liveness from other processes ("host:port"; empty
    # when every node shares one process). The RM puts it in the ring it publishes.
    peer_endpoint: str = ""
    # When this registration attempt began, on the node's clock: a retry of one attempt (no answer
    # within the RPC timeout) carries the same value, a new attempt or a restarted node another.
    # The RM answers a retry it already handled again instead of registering the node anew (-1:
    # unknown, always handled).
    attempt_at: float = -1.0


class RegisterResponse(Message, frozen=True):
    action: Action
    machine_id: int = -1
    ring: Ring | None = None
    reason: str = ""


class Heartbeat(Message, frozen=True, omit_defaults=True):
    machine_id: int
    # The id of the last response the node received (YARN's lastHeartbeatResponseId).
    heartbeat_id: int
    healthy: bool
    # Periodic mode: every running container plus unacknowledged completions.
    # Delta mode: only what changed since the last acknowledged report.
    statuses: tuple[ContainerStatus, ...]
    full: bool
    # Measured usage of containers with usage models: all of them (periodic), or those whose
    # usage moved by more than the configured threshold since last reported (delta).
    usage: tuple[ContainerUsage, ...] = ()


class HeartbeatResponse(Message, frozen=True):
    action: Action
    heartbeat_id: int
    launch: tuple[ContainerLaunch, ...] = ()
    kill: tuple[int, ...] = ()


class LaunchContainers(Message, frozen=True):
    """RM -> node push (continuous scheduling)."""

    containers: tuple[ContainerLaunch, ...]


class Disconnected(Message, frozen=True):
    """The transport's notice that a node's connection to the RM is gone (closed by the node's
    host, or lost). No node sends it: it is not part of ``RMInbound`` and never decoded."""


class ContainerLimits(msgspec.Struct, frozen=True, array_like=True, gc=False):
    container_id: int
    cpu: float
    ram_gib: float


class UpdateLimits(Message, frozen=True):
    """RM -> node: new limits for running containers (Autopilot, design.md §3b)."""

    limits: tuple[ContainerLimits, ...]


class KillContainers(Message, frozen=True):
    container_ids: tuple[int, ...]
    exit_code: int = EXIT_KILLED


RMInbound = Register | Heartbeat | UnlivelinessReport | ProbeAck | RingSyncRequest
NodeInbound = (
    RegisterResponse
    | HeartbeatResponse
    | LaunchContainers
    | KillContainers
    | UpdateLimits
    | RingUpdate
    | UnlivelinessResponse
    | RingDelta
    | Probe
)

__all__ = [
    "EXIT_KILLED",
    "EXIT_OOM",
    "EXIT_PREEMPTED",
    "EXIT_REJECTED",
    "EXIT_SUCCESS",
    "MAX_NODE_RESOURCE",
    "TIER_NAMES",
    "ZERO",
    "Action",
    "ContainerLaunch",
    "ContainerLimits",
    "ContainerState",
    "ContainerStatus",
    "ContainerUsage",
    "Disconnected",
    "Heartbeat",
    "HeartbeatResponse",
    "KillContainers",
    "LaunchContainers",
    "Message",
    "NodeInbound",
    "Probe",
    "ProbeAck",
    "RMInbound",
    "Register",
    "RegisterResponse",
    "Resources",
    "Ring",
    "RingDelta",
    "RingSyncRequest",
    "RingUpdate",
    "TaskUsage",
    "UnlivelinessReport",
    "UnlivelinessResponse",
    "UpdateLimits",
    "UsageKind",
    "UsageModel",
    "resources_problem",
]
