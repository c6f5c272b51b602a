"""Job-level results: per job its submit, first container, finish, completion time, queueing delay
and slowdown; per task the wait from its job's submission to its first container.

A job is one submitted operation, or, for a replayed trace job whose tasks differ in size, the
operations sharing its ``job`` label. Ideal completion time: as on an empty cluster where every
task starts once it is requested: the longest task, or, for a job whose operations wait for others
(reduces for maps, tasks for the AM), the end of its critical path (slowdown = completion time /
ideal); such a job is not finished while one of its operations waits to be submitted. Task waits
count a task's first container only (a rerun after a lost node is not a wait); tasks that never
started by the end are not in the waits (``tasks_never_started`` counts them). A job's AM container
(``lasts_for_job``) is not one of its tasks: it is counted apart (``am_containers``); it waits for
a place as they do (its wait is among the task waits, ``tasks_never_started`` counts it) and, the
job's first container, it ends the job's queueing delay.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from rm import OperationEvent, RMObserver, TaskStarted

QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


class Stats(msgspec.Struct, frozen=True):
    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None


def stats(values: list[float] | array[float]) -> Stats:
    """Percentiles by linear interpolation between order statistics (numpy's default), and the
    mean; all None for no values."""
    if not values:
        return Stats(None, None, None, None)
    xs = sorted(values)
    n = len(xs)

    def q(p: float) -> float:
        pos = (n - 1) * p
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        return round(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo), 6)

    p50, p90, p99 = (q(p) for _, p in QUANTILES)
    return Stats(p50, p90, p99, round(sum(xs) / n, 6))


class JobRow(msgspec.Struct, frozen=True):
    job_id: str
    pool: str
    submit_s: float
    first_start_s: float | None
    finish_s: float | None
    ideal_s: float
    tasks: int  # the job's tasks, its AM container not among them
    am_containers: int = 0

    @property
    def jct_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.submit_s

    @property
    def queue_delay_s(self) -> float | None:
        return None if self.first_start_s is None else self.first_start_s - self.submit_s

    @property
    def slowdown(self) -> float | None:
        jct = self.jct_s
        if jct is None:
            return None
        return jct / self.ideal_s if self.ideal_s > 0 else 1.0


class JobsReport(msgspec.Struct, frozen=True):
    rows: list[JobRow]
    task_wait_s: Stats
    task_wait_s_by_pool: dict[str, Stats]
    tasks_never_started: int


@dataclass
class _Op:
    job: str
    pool: str
    submitted_at: float
    tasks: int
    ideal_s: float
    am: bool = False  # the job's AM container, not one of its tasks
    first_start: float | None = None
    finished_at: float | None = None


class JobRecorder(RMObserver):
    """Registered with the RM; the workload's clients tell it each operation's job and ideal time
    (``expect``) before they submit it."""

    def __init__(self, now: Callable[[], float]) -> None:
        """``now``: emulated time (the run's clock)."""
        self._now = now
        self._expected: dict[str, tuple[str, float, bool]] = {}
        self._ops: dict[int, _Op] = {}
        self._order: list[int] = []
        self._waits: dict[str, array[float]] = {}
        self._started: dict[int, int] = {}  # op id -> tasks that got a first container
        self._held: dict[str, int] = {}  # job -> its operations the clients hold back (waiting)

    def expect(self, operation: str, job: str, ideal_s: float, am: bool = False) -> None:
        """``am``: the operation is its job's AM container, not one of its tasks."""
        self._expected[operation] = (job, ideal_s, am)

    def hold(self, job: str, n: int = 1) -> None:
        """``n`` more (or, negative, fewer) of ``job``'s operations wait to be submitted: until
        they are, the job is not finished."""
        self._held[job] = self._held.get(job, 0) + n

    def operation_submitted(self, ev: OperationEvent) -> None:
        job, ideal, am = self._expected.pop(ev.name, (ev.name, 0.0, False))
        self._ops[ev.op_id] = _Op(job, ev.pool, ev.submitted_at, ev.tasks, ideal, am)
        self._order.append(ev.op_id)

    def task_started(self, ev: TaskStarted) -> None:
        op = self._ops.get(ev.op_id)
        if op is None or ev.attempt != 1:
            return
        now = self._now()
        if op.first_start is None:
            op.first_start = now
        self._started[ev.op_id] = self._started.get(ev.op_id, 0) + 1
        waits = self._waits.get(op.pool)
        if waits is None:
            waits = self._waits[op.pool] = array("d")
        waits.append(now - op.submitted_at)

    def operation_finished(self, ev: OperationEvent) -> None:
        op = self._ops.get(ev.op_id)
        if op is not None:
            op.finished_at = self._now()

    def report(self) -> JobsReport:
        by_job: dict[str, list[_Op]] = {}
        for op_id in self._order:
            op = self._ops[op_id]
            by_job.setdefault(op.job, []).append(op)
        rows = []
        for job, ops in by_job.items():
            starts = [o.first_start for o in ops if o.first_start is not None]
            finishes = [o.finished_at for o in ops]
            done = all(f is not None for f in finishes) and not self._held.get(job)
            rows.append(JobRow(
                job_id=job, pool=ops[0].pool, submit_s=min(o.submitted_at for o in ops),
                first_start_s=min(starts) if starts else None,
                finish_s=max(f for f in finishes if f is not None) if done else None,
                ideal_s=max(o.ideal_s for o in ops), tasks=sum(o.tasks for o in ops if not o.am),
                am_containers=sum(o.tasks for o in ops if o.am),
            ))
        everything: array[float] = array("d")
        for w in self._waits.values():
            everything.extend(w)
        never = sum(o.tasks - self._started.get(i, 0) for i, o in self._ops.items())
        return JobsReport(
            rows=rows, task_wait_s=stats(everything),
            task_wait_s_by_pool={p: stats(w) for p, w in sorted(self._waits.items())},
            tasks_never_started=never,
        )
