"""Counters shared by the NodeManagers of one process (injected, not global)."""

from __future__ import annotations


class NodeStats:
    __slots__ = (
        "containers_finished",
        "containers_launched",
        "containers_rejected",
        "heartbeat_responses",
        "heartbeats_sent",
        "heartbeats_skipped",
        "lateness_max_s",
        "lateness_sum_s",
        "registrations",
        "resyncs",
        "statuses_sent",
    )

    def __init__(self) -> None:
        self.heartbeats_sent = 0
        self.heartbeat_responses = 0
        # A tick at which the previous heartbeat was still unanswered (YARN's NM blocks in RPC).
        self.heartbeats_skipped = 0
        self.statuses_sent = 0
        self.registrations = 0
        self.resyncs = 0
        self.containers_launched = 0
        self.containers_finished = 0
        self.containers_rejected = 0
        self.lateness_sum_s = 0.0
        self.lateness_max_s = 0.0

    def snapshot(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.__slots__}
