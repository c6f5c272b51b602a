"""Counters of the NodeManagers of one process (injected, not global)."""

from __future__ import annotations

import msgspec


class NodeCounters(msgspec.Struct):
    heartbeats_sent: int = 0
    heartbeat_responses: int = 0
    # A tick at which the previous heartbeat was still unanswered (YARN's NM blocks in RPC).
    heartbeats_skipped: int = 0
    statuses_sent: int = 0
    registrations: int = 0
    resyncs: int = 0
    containers_launched: int = 0
    containers_finished: int = 0
    containers_rejected: int = 0
