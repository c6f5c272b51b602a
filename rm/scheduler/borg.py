"""The policy the RM runs once the Borg lecture's layers are configured (design.md §3b): a
placement policy choosing nodes over the whole cluster, or tiers over the configured policy."""

from __future__ import annotations

from rm.cluster import Cluster
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.policy import Policy
from rm.tiers import TieredPolicy
from rm.workload import WorkloadBook


def borg_policy(inner: Policy, config: SchedulerConfig, book: WorkloadBook, cluster: Cluster) -> Policy:
    if config.tiers.enabled and not inner.chooses_nodes:
        return TieredPolicy(inner)
    return inner
