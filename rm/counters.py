"""The RM's counters: plain msgspec structs (one mutable field per count, snapshot by
``msgspec.structs.asdict``), kept by the RM shell so that they survive an RM restart."""

from __future__ import annotations

import msgspec


class RMCounters(msgspec.Struct):
    # Scheduler
    update_events: int = 0
    allocations: int = 0
    containers_completed: int = 0
    tasks_requeued: int = 0
    tasks_preempted: int = 0
    nodes_lost: int = 0
    # Launches and kills sent again because no report confirmed them.
    commands_resent: int = 0
    restarts: int = 0
    # Resource tracker
    heartbeats: int = 0
    statuses: int = 0
    registrations: int = 0
    rejected: int = 0
    resyncs: int = 0
    duplicates: int = 0
    # Registration retries of an attempt already handled, answered again (not re-registered).
    registrations_repeated: int = 0


class GroupCounters(msgspec.Struct):
    """Totals per workload entry (a looping user resubmits operations of one group)."""

    pool: str
    completed_tasks: int = 0
    operations_submitted: int = 0
    operations_finished: int = 0
    requeued: int = 0
    preempted: int = 0


class PreemptionCounters(msgspec.Struct):
    preemptions: int = 0
    # Tasks started for starving operations (with or without kills).
    starved_starts: int = 0
    # CPU-seconds of work lost to preemption since ``window_start_s`` (the measurement window).
    preempted_cpu_s: float = 0.0
    window_start_s: float = 0.0
