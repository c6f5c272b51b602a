"""What the RM tells the outside world (the harness: workload clients, metrics, checkers).

Observers get small immutable event records, never the RM's own objects. ``RMObserver`` does
nothing by default; override what you need and register with ``ResourceManager.observe``.
"""

from __future__ import annotations

import msgspec


class OperationEvent(msgspec.Struct, frozen=True, gc=False):
    op_id: int
    name: str
    group: str
    pool: str
    tasks: int
    submitted_at: float


class TaskCompleted(msgspec.Struct, frozen=True, gc=False):
    op_id: int
    operation: str
    group: str
    task: int
    container_id: int


class TaskStarted(msgspec.Struct, frozen=True, gc=False):
    op_id: int
    group: str
    task: int
    attempt: int  # 1 for its first container; more after a lost or preempted one
    container_id: int = 0
    machine_id: int = 0  # the node it runs on


class NodeEvent(msgspec.Struct, frozen=True, gc=False):
    machine_id: int
    address: str
    reason: str = ""


class RMObserver:
    def operation_submitted(self, ev: OperationEvent) -> None:
        """An operation was accepted."""

    def operation_finished(self, ev: OperationEvent) -> None:
        """Every task of an operation completed."""

    def task_started(self, ev: TaskStarted) -> None:
        """A container was allocated for a task (its launch is on its way to the node)."""

    def task_completed(self, ev: TaskCompleted) -> None:
        """A task completed successfully (once per task, or the RM is wrong)."""

    def node_registered(self, ev: NodeEvent) -> None:
        """A node registered (or re-registered after a resync)."""

    def node_lost(self, ev: NodeEvent) -> None:
        """The RM removed a node (``reason`` says why)."""

    def rm_crashed(self) -> None:
        """The RM process died; its soft state is gone."""

    def rm_recovered(self) -> None:
        """A new RM life started from the journal and accepts work again."""


class Observers(RMObserver):
    """The RM's fan-out to every registered observer."""

    def __init__(self) -> None:
        self._all: list[RMObserver] = []

    def add(self, observer: RMObserver) -> None:
        self._all.append(observer)

    def __bool__(self) -> bool:
        return bool(self._all)

    def operation_submitted(self, ev: OperationEvent) -> None:
        for o in self._all:
            o.operation_submitted(ev)

    def operation_finished(self, ev: OperationEvent) -> None:
        for o in self._all:
            o.operation_finished(ev)

    def task_started(self, ev: TaskStarted) -> None:
        for o in self._all:
            o.task_started(ev)

    def task_completed(self, ev: TaskCompleted) -> None:
        for o in self._all:
            o.task_completed(ev)

    def node_registered(self, ev: NodeEvent) -> None:
        for o in self._all:
            o.node_registered(ev)

    def node_lost(self, ev: NodeEvent) -> None:
        for o in self._all:
            o.node_lost(ev)

    def rm_crashed(self) -> None:
        for o in self._all:
            o.rm_crashed()

    def rm_recovered(self) -> None:
        for o in self._all:
            o.rm_recovered()
