"""Scenario sections of the Borg lecture's systems (design.md §3b): an operation's tier and its
usage table. Kept apart from schema.py so that the sections stay together."""

from __future__ import annotations

from typing import Literal

import msgspec

from rm import TierName
from rm.protocol import TIER_NAMES, TaskUsage, UsageModel

__all__ = ["OperationUsage", "TierName", "tier_number"]


class OperationUsage(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """``[workload.operations.usage]``: how the operation's tasks really use what they request.
    A resource without a model uses exactly its request. ``ram_limit``: hard (memory above the
    request kills the task) or soft (only a node whose memory overflows kills, lowest tier first)."""

    cpu: UsageModel | None = None
    ram: UsageModel | None = None
    ram_limit: Literal["hard", "soft"] = "hard"
    # Under `[scheduler.autopilot] enabled = true`: Autopilot sets this group's limits, by its
    # class (batch CPU: S_avg; serving: S_p95) and OOM tolerance (RAM: low S_p98, minimal S_max,
    # medium max(S_p60, 0.5·S_max)).
    autopilot: bool = False
    job_class: Literal["batch", "serving"] = "batch"
    oom_tolerance: Literal["low", "minimal", "medium"] = "low"

    def task_usage(self, seed: int, tier: TierName) -> TaskUsage:
        return TaskUsage(
            cpu=self.cpu, ram=self.ram, seed=seed, tier=tier_number(tier), ram_hard=self.ram_limit == "hard",
            autopilot=self.autopilot, job_class=self.job_class, oom_tolerance=self.oom_tolerance,
        )


def tier_number(name: TierName) -> int:
    return TIER_NAMES.index(name)
