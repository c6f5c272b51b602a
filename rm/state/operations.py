"""Operations (YARN applications), their tasks, and the pool tree they live in."""

from __future__ import annotations

import math
from collections import deque
from typing import Annotated

import msgspec

from rm.protocol import ZERO, Resources, TaskUsage


class OperationSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a client submits: ``len(durations)`` tasks of one demand vector."""

    name: str
    pool: str
    demand: Resources
    durations: list[float]
    weight: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    # Which workload entry this instance belongs to (a looping user resubmits the same group).
    group: str = ""
    # Borg priority tier (index into rm.protocol.TIER_NAMES; design.md §3b).
    tier: Annotated[int, msgspec.Meta(ge=0, le=4)] = 1
    # How its tasks really use resources (None: exactly their request).
    usage: TaskUsage | None = None


class Task(msgspec.Struct, gc=False):
    # Untracked by the garbage collector (it holds only numbers): a job's thousands of tasks,
    # created at once, would otherwise be scanned by every young collection while they are new
    # (tens of ms of a real-time RM's loop at E2's sizes).
    index: int
    duration_s: float
    attempts: int = 0


class Pool:
    """A node of the fair-share tree: root -> pools -> operations."""

    __slots__ = (
        "capped",
        "children",
        "max_cpu",
        "max_ram",
        "min_share",
        "name",
        "operations",
        "parent",
        "pending_children",
        "pending_tasks",
        "rank",
        "usage_cpu",
        "usage_ram",
        "weight",
    )

    def __init__(
        self, name: str, weight: float = 1.0, min_share: Resources = ZERO, parent: Pool | None = None,
        max_cpu: float | None = None, max_ram: float | None = None,
    ) -> None:
        """``max_cpu`` / ``max_ram``: the most the pool may hold (YARN's maxResources; None: no limit)."""
        self.name = name
        self.weight = weight
        self.min_share = min_share
        self.max_cpu = math.inf if max_cpu is None else max_cpu
        self.max_ram = math.inf if max_ram is None else max_ram
        # This pool or one above it has a maximum: scheduling checks the room left under them.
        self.capped: bool = (self.max_cpu < math.inf or self.max_ram < math.inf
                       or (parent is not None and parent.capped))
        self.parent = parent
        self.children: list[Pool] = []
        self.operations: list[Operation] = []
        self.usage_cpu = 0.0
        self.usage_ram = 0.0
        self.pending_tasks = 0
        # The child pools with pending tasks (in the order they came to have some), so a
        # scheduling decision looks at those rather than at every child; ``rank``: the place in
        # the parent's children, their order.
        self.pending_children: dict[Pool, None] = {}
        self.rank = 0
        if parent is not None:
            self.rank = len(parent.children)
            parent.children.append(self)

    def pending_moved(self, delta: int) -> None:
        """``delta`` pending tasks more (fewer) under this pool and every pool above it."""
        p: Pool | None = self
        while p is not None:
            before = p.pending_tasks
            after = p.pending_tasks = before + delta
            parent = p.parent
            if parent is not None and (before > 0) != (after > 0):
                if after > 0:
                    parent.pending_children[p] = None
                else:
                    del parent.pending_children[p]
            p = parent

    def room(self) -> tuple[float, float]:
        """CPU and memory this pool may still take: the least left under its maximum and every
        maximum above it (infinite with none)."""
        cpu = ram = math.inf
        p: Pool | None = self
        while p is not None and p.capped:
            cpu = min(cpu, p.max_cpu - p.usage_cpu)
            ram = min(ram, p.max_ram - p.usage_ram)
            p = p.parent
        return cpu, ram

    def takes(self, demand: Resources) -> bool:
        """A task of ``demand`` fits under this pool's maximum and every maximum above it."""
        if not self.capped:
            return True
        cpu, ram = self.room()
        return demand.cpu <= cpu + 1e-9 and demand.ram_gib <= ram + 1e-9

    def ancestors(self) -> list[Pool]:
        chain: list[Pool] = []
        p: Pool | None = self
        while p is not None:
            chain.append(p)
            p = p.parent
        return chain

    def __repr__(self) -> str:
        return f"Pool({self.name!r})"


class Operation:
    __slots__ = (
        "completed",
        "demand",
        "finished_at",
        "group",
        "id",
        "min_share",
        "name",
        "pending",
        "pool",
        "pools_up",
        "running",
        "spec",
        "started_at",
        "submitted_at",
        "total",
        "usage_cpu",
        "usage_ram",
        "weight",
    )

    def __init__(self, op_id: int, spec: OperationSpec, pool: Pool, now: float) -> None:
        self.id = op_id
        self.spec = spec
        self.name = spec.name
        self.group = spec.group or spec.name
        self.pool = pool
        self.pools_up = pool.ancestors()
        self.demand = spec.demand
        self.weight = spec.weight
        self.min_share = ZERO
        self.submitted_at = now
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.pending: deque[Task] = deque(Task(i, d) for i, d in enumerate(spec.durations))
        self.total = len(spec.durations)
        self.running = 0
        self.completed = 0
        self.usage_cpu = 0.0
        self.usage_ram = 0.0
        pool.pending_moved(self.total)

    def _add_usage(self, sign: float) -> None:
        dc = sign * self.demand.cpu
        dr = sign * self.demand.ram_gib
        self.usage_cpu += dc
        self.usage_ram += dr
        for p in self.pools_up:
            p.usage_cpu += dc
            p.usage_ram += dr

    def take_task(self, now: float) -> Task:
        task = self.pending.popleft()
        task.attempts += 1
        self.pool.pending_moved(-1)
        self.running += 1
        self._add_usage(1.0)
        if self.started_at is None:
            self.started_at = now
        return task

    def task_ended(self) -> None:
        self.running -= 1
        self._add_usage(-1.0)

    def task_completed(self, now: float) -> bool:
        """Returns True when this completion finishes the operation."""
        self.task_ended()
        self.completed += 1
        if self.completed == self.total:
            self.finished_at = now
            return True
        return False

    def restore(self, completed: set[int], running: set[int], started_at: float | None) -> dict[int, Task]:
        """Recovery: the journal says these tasks completed and these run; returns the running ones."""
        taken: dict[int, Task] = {}
        keep: deque[Task] = deque()
        for task in self.pending:
            if task.index in completed:
                self.completed += 1
            elif task.index in running:
                task.attempts = 1
                taken[task.index] = task
            else:
                keep.append(task)
        gone = self.total - len(keep)
        self.pending = keep
        self.pool.pending_moved(-gone)
        for _ in taken:
            self.running += 1
            self._add_usage(1.0)
        if started_at is not None:
            self.started_at = started_at
        return taken

    def requeue(self, task: Task) -> None:
        """A running task was lost (node lost, preempted): it runs again from scratch."""
        self.task_ended()
        self.pending.appendleft(task)
        self.pool.pending_moved(1)

    @property
    def state(self) -> str:
        if self.finished_at is not None:
            return "finished"
        return "pending" if self.started_at is None else "running"

    def dominant_share(self, capacity: Resources) -> float:
        return Resources(self.usage_cpu, self.usage_ram).dominant_share(capacity)

    def __repr__(self) -> str:
        return f"Operation({self.name!r}, run={self.running}, pend={len(self.pending)})"
