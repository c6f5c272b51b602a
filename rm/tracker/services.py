"""What the resource tracker uses of the RM's services: a narrow view of ``rm.shell.context``'s
``RMContext`` (which satisfies it), so that the tracker depends on no more than it reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from rm.borg.autopilot import Autopilot
from rm.config import RMConfig
from rm.counters import RMCounters
from rm.ports import Clock, Log
from rm.queues.logbudget import LogBudget
from rm.queues.outbox import Outbox
from rm.scheduler.config import SchedulerConfig
from rm.state.cluster import NodeRecord
from rm.views.observer import Observers

if TYPE_CHECKING:
    from ringmon.protocol import Ring


class MembershipPort(Protocol):
    """The ring membership service as the tracker and the node outcomes see it."""

    def node_joined(self, node: NodeRecord) -> None: ...

    def node_left(self, node: NodeRecord) -> None: ...

    def current_ring(self) -> Ring: ...


class TrackerServices(Protocol):
    """Read-only: the tracker never replaces a service, it uses one."""

    @property
    def clock(self) -> Clock: ...

    @property
    def log(self) -> Log: ...

    @property
    def noisy(self) -> LogBudget:
        """For events any peer can cause at will (refused registrations, spoofed heartbeats)."""
        ...

    @property
    def outbox(self) -> Outbox: ...

    @property
    def config(self) -> RMConfig: ...

    @property
    def scheduler(self) -> SchedulerConfig: ...

    @property
    def counters(self) -> RMCounters: ...

    @property
    def autopilot(self) -> Autopilot | None: ...

    @property
    def membership(self) -> MembershipPort | None: ...

    @property
    def observers(self) -> Observers: ...
