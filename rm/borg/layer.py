"""The policy the RM runs once the Borg lecture's layers are configured (design.md §3b): a
placement policy choosing nodes over the whole cluster, or tiers over the configured policy."""

from __future__ import annotations

from rm.borg.placement import PlacementPolicy
from rm.borg.sbp import Admission
from rm.borg.tiers import TieredPolicy
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.policy import Policy
from rm.state.cluster import Cluster
from rm.state.workload import WorkloadBook


def borg_policy(inner: Policy, config: SchedulerConfig, book: WorkloadBook, cluster: Cluster) -> Policy:
    if config.placement.policy != "default":
        admission = Admission(config.admission) if config.admission.method != "request" else None
        return PlacementPolicy(config.placement, book, cluster, admission)
    if config.tiers.enabled and not inner.chooses_nodes:
        return TieredPolicy(inner)
    return inner
