"""Counters of the NodeManagers of one process (injected, not global)."""

from __future__ import annotations

import msgspec


class TierUsage(msgspec.Struct):
    """Time integrals (resource·seconds) of one tier's limits and real usage, and its OOMs."""

    cpu_limit_s: float = 0.0
    cpu_used_s: float = 0.0
    ram_limit_s: float = 0.0
    ram_used_s: float = 0.0
    task_s: float = 0.0
    ooms: int = 0

    def add(self, other: TierUsage) -> None:
        for f in self.__struct_fields__:
            setattr(self, f, getattr(self, f) + getattr(other, f))


class UsageStats(msgspec.Struct):
    """Ground truth of containers with usage models, summed over the nodes of a process."""

    tiers: dict[int, TierUsage] = msgspec.field(default_factory=dict)
    # Task OOMs: over the hard limit, or killed because the node's memory overflowed.
    ooms_limit: int = 0
    ooms_node: int = 0
    # Node-seconds sampled with usage-modelled containers, and of those with usage > capacity
    # (CPU or RAM, before the OOM killer acts).
    node_s: float = 0.0
    overflow_s: float = 0.0
    # Finished tasks: wall seconds they ran, and the seconds of work they had (throttling slows).
    finished_run_s: float = 0.0
    finished_work_s: float = 0.0
    samples: int = 0
    # Now: the summed current usage and limits of the running usage-modelled containers (what a
    # live chart shows; the integrals above advance only when a node samples).
    cpu_now: float = 0.0
    ram_now: float = 0.0
    cpu_limit_now: float = 0.0
    ram_limit_now: float = 0.0

    def tier(self, tier: int) -> TierUsage:
        t = self.tiers.get(tier)
        if t is None:
            t = self.tiers[tier] = TierUsage()
        return t

    def __add__(self, other: UsageStats) -> UsageStats:
        out = UsageStats()
        for src in (self, other):
            for k, t in src.tiers.items():
                out.tier(k).add(t)
            for f in ("ooms_limit", "ooms_node", "node_s", "overflow_s", "finished_run_s",
                      "finished_work_s", "samples", "cpu_now", "ram_now", "cpu_limit_now", "ram_limit_now"):
                setattr(out, f, getattr(out, f) + getattr(src, f))
        return out


class NodeCounters(msgspec.Struct):
    heartbeats_sent: int = 0
    heartbeat_responses: int = 0
    # A tick at which the previous heartbeat was still unanswered (YARN's NM blocks in RPC).
    heartbeats_skipped: int = 0
    statuses_sent: int = 0
    registrations: int = 0
    # Registrations the RM answered with shutdown (a wrong shared secret, a malformed node).
    registrations_refused: int = 0
    resyncs: int = 0
    containers_launched: int = 0
    containers_finished: int = 0
    containers_rejected: int = 0
    # Usage entries carried by heartbeats (containers with usage models only).
    usage_reports_sent: int = 0
    usage: UsageStats = msgspec.field(default_factory=lambda: UsageStats())
