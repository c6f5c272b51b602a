"""The scenario file's ``[[faults]]``: what fails, when and where (one struct per ``kind``)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from emulator.scenario.bounds import Base, Count, Fraction, NonNegative, Positive


class NodeSelector(Base, kw_only=True, frozen=True):
    """Which nodes a fault hits: explicit addresses, a seeded random fraction, or a count."""

    nodes: list[str] = []  # node addresses, e.g. "node-0-00003"
    fraction: Fraction | None = None  # a seeded random fraction of the nodes
    count: Count | None = None  # this many seeded random nodes

    def __post_init__(self) -> None:
        if sum(x is not None and x != [] for x in (self.nodes, self.fraction, self.count)) != 1:
            raise ValueError("give exactly one of `nodes`, `fraction`, `count`")


class HealthFault(NodeSelector, kw_only=True, tag_field="kind", tag="health", frozen=True):
    """Flip the health flag of the selected nodes at ``at_s``."""

    at_s: NonNegative  # when, in emulated seconds from the start
    healthy: bool = False


class MessageFault(Base, kw_only=True, tag_field="kind", tag="messages", frozen=True):
    """Between ``at_s`` and ``at_s + duration_s``, disturb messages (of ``types``, or all)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    duration_s: Positive
    loss: Fraction = 0.0
    duplicate: Fraction = 0.0
    reorder: Fraction = 0.0
    # Each affected message is delayed by a uniform draw in [0, delay_s] (which also reorders).
    delay_s: NonNegative = 0.0
    # Message type names, e.g. ["LaunchContainers", "HeartbeatResponse"]; empty means all.
    types: list[str] = []
    direction: Literal["to_rm", "to_node", "both"] = "both"




class CrashFault(NodeSelector, kw_only=True, tag_field="kind", tag="crash", frozen=True):
    """The selected nodes die silently at ``at_s`` (no heartbeats, no liveness, no answers).
    ``consecutive``: ``count`` nodes with consecutive machine ids (a rack), from ``first_id`` or a
    seeded start. ``rejoin_after_s``: each restarts as a fresh process that long afterwards."""

    at_s: NonNegative  # when, in emulated seconds from the start
    consecutive: bool = False
    first_id: Annotated[int, msgspec.Meta(ge=1)] | None = None
    rejoin_after_s: Positive | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.consecutive and self.count is None:
            raise ValueError("`consecutive` needs `count`")
        if self.first_id is not None and not self.consecutive:
            raise ValueError("`first_id` needs `consecutive = true`")


class PauseFault(NodeSelector, kw_only=True, tag_field="kind", tag="pause", frozen=True):
    """The selected nodes' event loops stall at ``at_s`` for ``duration_s`` (or a seeded uniform
    duration in [duration_s, duration_max_s] per node)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    duration_s: Positive
    duration_max_s: Positive | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.duration_max_s is not None and self.duration_max_s < self.duration_s:
            raise ValueError("`duration_max_s` must be >= `duration_s`")


class LivenessLossFault(Base, kw_only=True, tag_field="kind", tag="liveness_loss", frozen=True):
    """From ``at_s`` (for ``duration_s``, or to the end) drop this fraction of ring liveness
    messages between nodes (seeded)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    fraction: Fraction
    duration_s: Positive | None = None


class RMStallFault(Base, kw_only=True, tag_field="kind", tag="rm_stall", frozen=True):
    """The RM handles no node message for ``duration_s`` (they queue)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    duration_s: Positive


class RMOverloadFault(Base, kw_only=True, tag_field="kind", tag="rm_overload", frozen=True):
    """Multiply the RM's ``[rm.service_time]`` costs by ``factor`` from ``at_s`` (for
    ``duration_s``, or to the end). Needs non-zero service-time costs."""

    at_s: NonNegative  # when, in emulated seconds from the start
    factor: Positive
    duration_s: Positive | None = None


class RMRestartFault(Base, kw_only=True, tag_field="kind", tag="rm_restart", frozen=True):
    """The RM process dies at ``at_s`` and a new one starts ``downtime_s`` later from the journal;
    nodes keep their containers, reconnect and resync (work-preserving restart)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    downtime_s: NonNegative = 5.0


class WorkerKillFault(Base, kw_only=True, tag_field="kind", tag="worker_kill", frozen=True):
    """TCP: the node-hosting process ``worker`` (0-based) is killed with SIGKILL at ``at_s``, all
    its nodes with it (a correlated crash, as when a machine fails); the ring must find them."""

    at_s: NonNegative  # when, in emulated seconds from the start
    worker: Annotated[int, msgspec.Meta(ge=0)] = 0


Fault = (
    HealthFault | MessageFault | CrashFault | PauseFault | LivenessLossFault | RMStallFault | RMOverloadFault
    | RMRestartFault | WorkerKillFault
)
