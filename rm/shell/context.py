"""The services an RM life works with: set up once by the RM shell, they outlive a restart."""

from __future__ import annotations

from collections.abc import Callable

from rm.borg.autopilot import Autopilot
from rm.borg.tiers import TierCounters
from rm.config import RMConfig
from rm.counters import GroupCounters, PreemptionCounters, RMCounters
from rm.ports import Clock, Log
from rm.queues.logbudget import LogBudget
from rm.queues.outbox import Outbox
from rm.recovery.journal import AnyRecord
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.policy import PolicyCounters
from rm.state.cluster import UsageIntegral
from rm.tracker.services import MembershipPort
from rm.views.observer import Observers


class RMContext:
    __slots__ = (
        "autopilot", "clock", "config", "continuous", "counters", "groups", "integral", "log", "membership",
        "noisy", "observers", "outbox", "policy_counters", "preemption", "record", "scheduler", "tiers",
    )

    def __init__(
        self,
        clock: Clock,
        log: Log,
        config: RMConfig,
        scheduler: SchedulerConfig,
        continuous: bool,
        record: Callable[[AnyRecord], None],
    ) -> None:
        self.clock = clock
        self.log = log
        # For events any peer can cause at will (refused registrations, spoofed heartbeats).
        self.noisy = LogBudget(log, clock.now)
        # Every message the RM sends leaves through it.
        self.outbox = Outbox()
        self.config = config
        self.scheduler = scheduler
        # Continuous scheduling: place work as soon as it appears, not only on node updates.
        self.continuous = continuous
        # The journal (a no-op without one): written before the RM acts on what it records.
        self.record = record
        self.counters = RMCounters()
        self.groups: dict[str, GroupCounters] = {}
        self.policy_counters = PolicyCounters()
        self.preemption = PreemptionCounters() if scheduler.preemption.enabled else None
        self.tiers = TierCounters() if scheduler.tiers.enabled else None
        self.autopilot = Autopilot(scheduler.autopilot) if scheduler.autopilot.enabled else None
        self.integral = UsageIntegral(clock.now())
        self.observers = Observers()
        self.membership: MembershipPort | None = None
