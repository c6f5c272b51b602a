"""NodeManager settings (embedded as-is in the scenario schema)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Literal

import msgspec

HeartbeatMode = Literal["periodic", "delta"]
# The heartbeat modes by name, for the `hbemu.heartbeats` entry-point group (docs/extending.md):
# both are branches of the NodeManager (and of the RM's tracker), so a plug-in can register a
# name but not yet an implementation; validation says so.
BUILTIN_HEARTBEATS: Mapping[str, str] = MappingProxyType({
    "periodic": "nodemanager.node:NodeManager",
    "delta": "nodemanager.node:NodeManager",
})


class HeartbeatConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    # A registered heartbeat mode (docs/extending.md). periodic: full report every interval (stock
    # YARN); delta: only changes, nothing if none.
    mode: str = "periodic"
    interval_s: Annotated[float, msgspec.Meta(gt=0, le=86400)] = 3.0
    # Also heartbeat as soon as a container completes (the YT scheduler's behaviour).
    on_completion: bool = False
    # Spread first heartbeats uniformly over one interval instead of all at t=0.
    spread: bool = True
    # A heartbeat unanswered this long is sent again; None means 10 intervals.
    rpc_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86400)] | None = None
    # Containers with usage models (design.md §3b): their usage is sampled this often (a node
    # timer armed only while such containers run), and a delta heartbeat reports a container's
    # usage only when it moved by more than this fraction of its request since last reported.
    usage_sample_s: Annotated[float, msgspec.Meta(gt=0, le=86400)] = 10.0
    usage_report_threshold: Annotated[float, msgspec.Meta(ge=0, le=10)] = 0.1
    # The node admits containers whose requests sum to at most this × its capacity (Borg
    # allocates machines beyond 100%; the scheduler's `scheduler.placement.overcommit`).
    overcommit: Annotated[float, msgspec.Meta(ge=1, le=100)] = 1.0

    def effective_rpc_timeout(self) -> float:
        return self.rpc_timeout_s if self.rpc_timeout_s is not None else 10 * self.interval_s
