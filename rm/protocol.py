"""Messages between NodeManager and ResourceManager (design.md §2, paper 004 flows 1-2).

One tagged union per direction; the in-memory transport passes the objects, the TCP transport
encodes exactly these structs as msgpack.
"""

from __future__ import annotations

from typing import Literal

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
from rm.resources import Resources

ContainerState = Literal["running", "complete"]

EXIT_SUCCESS = 0
EXIT_KILLED = -100
EXIT_PREEMPTED = -102
EXIT_REJECTED = -1


class Message(msgspec.Struct, tag=True, frozen=True, gc=False):
    pass


class ContainerStatus(msgspec.Struct, frozen=True, array_like=True, gc=False):
    container_id: int
    state: ContainerState
    exit_code: int = EXIT_SUCCESS


class ContainerLaunch(msgspec.Struct, frozen=True, array_like=True, gc=False):
    container_id: int
    resources: Resources
    duration_s: float


class Register(Message):
    address: str
    resources: Resources
    credentials: str = ""
    healthy: bool = True
    # Containers still running on the node (a resync after the RM lost track of it).
    containers: tuple[ContainerStatus, ...] = ()


class RegisterResponse(Message):
    action: Action
    machine_id: int = -1
    ring: Ring | None = None
    reason: str = ""


class Heartbeat(Message):
    machine_id: int
    # The id of the last response the node received (YARN's lastHeartbeatResponseId).
    heartbeat_id: int
    healthy: bool
    # Periodic mode: every running container plus unacknowledged completions.
    # Delta mode: only what changed since the last acknowledged report.
    statuses: tuple[ContainerStatus, ...]
    full: bool


class HeartbeatResponse(Message):
    action: Action
    heartbeat_id: int
    launch: tuple[ContainerLaunch, ...] = ()
    kill: tuple[int, ...] = ()


class LaunchContainers(Message):
    """RM -> node push (continuous scheduling)."""

    containers: tuple[ContainerLaunch, ...]


class KillContainers(Message):
    container_ids: tuple[int, ...]
    exit_code: int = EXIT_KILLED


RMInbound = Register | Heartbeat | UnlivelinessReport | ProbeAck | RingSyncRequest
NodeInbound = (
    RegisterResponse
    | HeartbeatResponse
    | LaunchContainers
    | KillContainers
    | RingUpdate
    | UnlivelinessResponse
    | RingDelta
    | Probe
)

__all__ = [
    "EXIT_KILLED",
    "EXIT_PREEMPTED",
    "EXIT_REJECTED",
    "EXIT_SUCCESS",
    "Action",
    "ContainerLaunch",
    "ContainerState",
    "ContainerStatus",
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
    "Ring",
    "RingDelta",
    "RingSyncRequest",
    "RingUpdate",
    "UnlivelinessReport",
    "UnlivelinessResponse",
]
