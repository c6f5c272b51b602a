"""The scheduling policies by name (``scheduler.policy`` in a scenario), one constructor each."""

from __future__ import annotations

from rm.cluster import Cluster
from rm.operations import Pool
from rm.ports import Clock
from rm.scheduler.config import PolicyName, SchedulerConfig
from rm.scheduler.drf import DRFPolicy
from rm.scheduler.drfh import DRFHPolicy
from rm.scheduler.fifo import FIFOPolicy
from rm.scheduler.packing import PackingPolicy
from rm.scheduler.policy import Policy, PolicyCounters
from rm.scheduler.tetris import TetrisPolicy

POLICIES: dict[PolicyName, type[Policy]] = {
    "drf": DRFPolicy,
    "fifo": FIFOPolicy,
    "packing": PackingPolicy,
    "tetris": TetrisPolicy,
    "drfh": DRFHPolicy,
}


def make_policy(
    config: SchedulerConfig, root: Pool, cluster: Cluster, clock: Clock, counters: PolicyCounters
) -> Policy:
    return POLICIES[config.policy](root, cluster, config, clock, counters)
