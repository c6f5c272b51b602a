"""Scheduler settings (embedded as-is in the scenario schema)."""

from __future__ import annotations

from typing import Literal

import msgspec

PolicyName = Literal["drf", "fifo"]


class SchedulerConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    policy: PolicyName = "drf"
    # Continuous scheduling: when demand appears (submission, requeue) the RM places tasks on every
    # node with free resources and pushes launches, instead of waiting for each node's heartbeat.
    # None: on in delta heartbeat mode (idle nodes are silent there), off in periodic mode.
    continuous: bool | None = None
