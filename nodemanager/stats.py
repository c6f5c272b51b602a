"""Counters shared by the NodeManagers of one process (injected, not global)."""

from __future__ import annotations

from rm.histogram import LogHistogram


class NodeStats:
    __slots__ = (
        "answered_by_interval",
        "containers_finished",
        "containers_launched",
        "containers_rejected",
        "heartbeat_responses",
        "heartbeats_sent",
        "heartbeats_skipped",
        "interval_s",
        "lateness",
        "lateness_max_s",
        "lateness_sum_s",
        "registrations",
        "resyncs",
        "sent_by_interval",
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
        # Scheduled vs actual heartbeat tick, emulated seconds (tells a saturated host from a slow RM).
        self.lateness = LogHistogram()
        # Per-interval attribution (TCP runs): heartbeats by the interval they were sent in, and
        # those answered before the node's next heartbeat was due. Off while interval_s is 0.
        self.interval_s = 0.0
        self.sent_by_interval: dict[int, int] = {}
        self.answered_by_interval: dict[int, int] = {}

    def mark_sent(self, t: float) -> None:
        if self.interval_s:
            k = int(t // self.interval_s) + 1
            self.sent_by_interval[k] = self.sent_by_interval.get(k, 0) + 1

    def mark_answered(self, sent_at: float, t: float) -> None:
        if self.interval_s and t - sent_at <= self.interval_s:
            k = int(sent_at // self.interval_s) + 1
            self.answered_by_interval[k] = self.answered_by_interval.get(k, 0) + 1

    def snapshot(self) -> dict[str, float]:
        return {
            name: getattr(self, name) for name in self.__slots__
            if not isinstance(getattr(self, name), (LogHistogram, dict))
        }
