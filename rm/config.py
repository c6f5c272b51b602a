"""ResourceManager settings (embedded as-is in the scenario schema)."""

from __future__ import annotations

from typing import Annotated

import msgspec

NonNegative = Annotated[float, msgspec.Meta(ge=0, le=1e9)]
Positive = Annotated[float, msgspec.Meta(gt=0, le=1e9)]


class ServiceTimeConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Emulated RM cost per message, in microseconds of emulated time.

    Zero everywhere (the default) means the RM is infinitely fast in emulated time. Non-zero costs
    make an overloaded RM reproducible in virtual time: each queued item occupies the single worker
    for its cost, so heartbeats wait in the queue exactly as they would behind a saturated CPU.
    """

    register_us: NonNegative = 0.0
    heartbeat_us: NonNegative = 0.0
    heartbeat_per_status_us: NonNegative = 0.0
    node_update_us: NonNegative = 0.0
    allocation_us: NonNegative = 0.0
    unliveliness_us: NonNegative = 0.0

    def is_zero(self) -> bool:
        return not any(
            (
                self.register_us,
                self.heartbeat_us,
                self.heartbeat_per_status_us,
                self.node_update_us,
                self.allocation_us,
                self.unliveliness_us,
            )
        )


# Named service-time models: `[rm] service_time = "NAME"` in a scenario (docs/scalability.md).
SERVICE_TIME_PRESETS: dict[str, ServiceTimeConfig] = {
    # YARN as Mao et al. (2020) measured it, derived from their published figures (Fig. 5: stock
    # YARN's scheduler falls at ~4,000-4,500 nodes and its tracker at ~4,500; with delta heartbeats
    # the scheduler falls at ~7,500-8,000): the costs that put h1 and h2's falls there for the E2
    # workload, h2 counting each update in its heartbeat's arrival interval (docs/scalability.md
    # "A YARN-like RM"). The heartbeat's split into a fixed and a per-status part is the Python RM's
    # measured one (the paper does not give it).
    "yarn-2020": ServiceTimeConfig(
        register_us=500.0, heartbeat_us=500.0, heartbeat_per_status_us=15.0, node_update_us=660.0,
        allocation_us=200.0,
    ),
}


class RMConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    # NMLivelinessMonitor: a node with no heartbeat *processed* for this long is lost.
    expiry_s: Positive = 600.0
    # None: on in periodic heartbeat mode, off in delta mode (the ring detects failures there).
    liveliness_monitor: bool | None = None
    # How often the monitor scans; None means expiry / 3 (YARN's default ratio).
    monitor_interval_s: Positive | None = None
    # Registration is refused below this (YARN's minimum allocation).
    min_cpu: NonNegative = 1.0
    min_ram_gib: NonNegative = 1.0
    # A launch no report has mentioned, or a kill no report has confirmed, after this long is sent
    # again (commands lost on the way; nodes ignore duplicates).
    command_timeout_s: Positive = 30.0
    # Shared secret nodes must present at registration; empty disables the check.
    credentials: str = ""
    # Or read it, when the run starts, from this environment variable / this file (relative to the
    # scenario file; surrounding whitespace stripped) so it need not sit in the scenario. One only.
    credentials_env: str = ""
    credentials_file: str = ""
    # Work-preserving restart: journal the RM's work (None: only when the scenario restarts the
    # RM); after a restart, hold scheduling until every journaled container is back or this passes.
    journal: bool | None = None
    journal_fsync: bool = False
    recovery_wait_s: Positive = 10.0
    # The emulated RM's costs per message: a table, or in a scenario file the name of a model
    # (`service_time = "yarn-2020"`, docs/scalability.md), which stands for its table.
    service_time: ServiceTimeConfig = msgspec.field(default_factory=ServiceTimeConfig)
    # Continuous scheduling: nodes offered plus tasks started by one chunk of a pass before it
    # yields to the other events (a count, not wall time, so virtual runs stay deterministic).
    pass_budget: Annotated[int, msgspec.Meta(ge=1)] = 32

    def __post_init__(self) -> None:
        given = [f"`{n}`" for n in ("credentials", "credentials_env", "credentials_file") if getattr(self, n)]
        if len(given) > 1:
            raise ValueError(f"give the shared secret one way only, not {' and '.join(given)}")
