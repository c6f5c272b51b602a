"""Alibaba cluster-trace-v2018, its batch workload: ``batch_task.csv`` and, when given,
``batch_instance.csv`` (CSV without a header, plain or gzip).

batch_task: task_name, instance_num, job_name, task_type, status, start_time, end_time (s from
the trace's start), plan_cpu (100 = one core), plan_mem (normalised: 100 = a machine's memory).
batch_instance: instance_name, task_name, job_name, task_type, status, start_time, end_time,
machine_id, seq_no, total_seq_no, cpu_avg, cpu_max, mem_avg, mem_max.

A job is submitted when its first task starts. Each task that ran (an end after its start) is
``instance_num`` tasks of its planned size lasting end - start; with ``batch_instance.csv``, each
instance that ran is one task of its own length instead (a task with no such instance keeps the
task-level figures), and the instances' machines are the cluster.

The job's DAG is in its task names, as the trace documents them: ``M1`` is task 1, ``R2_1`` task 2
waiting for task 1, ``J5_3_4`` task 5 waiting for tasks 3 and 4 (any letters first); a task
waits for every instance of the tasks it names to complete. Names of another form
(``task_LTg0...``, ``MergeTask``) are independent tasks. A dependency on a task that did not run
(or not in the window) is dropped, and a job whose names make a cycle keeps no dependency; both
are counted in a warning.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from emulator.scenario.schema import TraceConfig
from emulator.scenario.traces.model import (
    Limits,
    NodeGroup,
    TaskBudget,
    TaskGroup,
    Trace,
    TraceError,
    TraceJob,
)
from emulator.scenario.traces.stream import Lines, Progress, Window, finish

TASK_COLUMNS = ("task_name", "instance_num", "job_name", "task_type", "status", "start_time", "end_time",
                "plan_cpu", "plan_mem")
INSTANCE_COLUMNS = ("instance_name", "task_name", "job_name", "task_type", "status", "start_time", "end_time",
                    "machine_id", "seq_no", "total_seq_no", "cpu_avg", "cpu_max", "mem_avg", "mem_max")
MAX_TIME = 1e12
# A missing or zero plan still takes this much (cores; fraction of a machine's memory).
MIN_CPU, MIN_MEM = 0.01, 0.001
# A DAG task's name: letters, its number, then the numbers of the tasks it waits for.
_DAG_NAME = re.compile(r"^[A-Za-z]+(\d{1,9})((?:_\d{1,9})*)$")


@dataclass
class _Task:
    cpu: float
    ram_gib: float
    count: int
    duration_s: float
    runs: list[float] = field(default_factory=list)


def read(
    path: Path, cfg: TraceConfig, instances: Path | None = None, progress: Progress | None = None
) -> Trace:
    limits = Limits(cfg.max_tasks, cfg.max_bytes)
    budget = TaskBudget(path, cfg.max_tasks)
    window = Window(cfg.start_s, cfg.span_s, cfg.sample, cfg.max_jobs)
    jobs: dict[str, TraceJob] = {}
    tasks: dict[tuple[str, str], _Task] = {}
    passed_over: set[str] = set()  # jobs met and not kept (grows only until the window is full)
    not_run = unplanned = 0
    with Lines(path, limits, progress) as lines:
        for row in _rows(path, lines, TASK_COLUMNS):
            where = lines.line_no
            count = _int(row, 1, path, where, TASK_COLUMNS)
            start, end = _num(row, 5, path, where, TASK_COLUMNS), _num(row, 6, path, where, TASK_COLUMNS)
            if start <= 0 or end <= start or count == 0:
                not_run += 1
                continue
            job_name = _text(row, 2, path, where, TASK_COLUMNS)
            job = jobs.get(job_name)
            if job is None:
                if job_name in passed_over or window.full:
                    continue
                if not window.keep(start):
                    passed_over.add(job_name)
                    continue
                job = jobs[job_name] = TraceJob(job_name, cfg.pool or "batch", start, [])
            job.submit_s = min(job.submit_s, start)
            budget.take(count, f"line {where}", "instance_num", "a task per instance")
            cpu_plan = _num(row, 7, path, where, TASK_COLUMNS, missing=0.0)
            mem_plan = _num(row, 8, path, where, TASK_COLUMNS, missing=0.0)
            if mem_plan > 100:
                raise _err(path, where, 8, TASK_COLUMNS,
                           "a number in [0, 100] (percent of a machine's memory)", row[8])
            if cpu_plan == 0 or mem_plan == 0:
                unplanned += 1
            task = _Task(round(max(cpu_plan / 100, MIN_CPU), 6),
                         round(max(mem_plan / 100, MIN_MEM) * cfg.machine_ram_gib, 6), count, end - start)
            tasks[(job_name, _text(row, 0, path, where, TASK_COLUMNS))] = task
    machines = _read_instances(instances, cfg, tasks, progress) if instances is not None else set()
    by_job: dict[str, list[tuple[str, _Task]]] = {}
    for (job_name, task_name), task in tasks.items():
        by_job.setdefault(job_name, []).append((task_name, task))
    dropped = cyclic = 0
    for job_name, named in by_job.items():
        lost, cycle = _task_dag(jobs[job_name], named)
        dropped += lost
        cyclic += cycle
    out = finish(list(jobs.values()))
    if not out:
        raise TraceError(f"{path}: no task that ran in the window (start {cfg.start_s:g} s, span "
                         f"{cfg.span_s} s); "
                         "expected batch_task rows with end_time after start_time")
    warnings = []
    if not_run:
        warnings.append(f"{path}: {not_run} task(s) that never ran (no start, or no end after it): dropped")
    if unplanned:
        warnings.append(f"{path}: {unplanned} task(s) without plan_cpu or plan_mem: given {MIN_CPU:g} core / "
                        f"{MIN_MEM:g} of a machine's memory")
    if dropped:
        warnings.append(f"{path}: {dropped} dependency(ies) on tasks that did not run or are outside the "
                        "window: dropped")
    if cyclic:
        warnings.append(f"{path}: {cyclic} job(s) whose task names make a dependency cycle: their tasks are "
                        "independent")
    nodes = [NodeGroup(len(machines), cfg.machine_cpu, cfg.machine_ram_gib)] if machines else []
    notes = ["Alibaba 2018: task_type, status, usage columns and machine placement ignored; "
             "all jobs in one pool"]
    return Trace(out, nodes, warnings, notes, selected=True)


def _task_dag(job: TraceJob, named: list[tuple[str, _Task]]) -> tuple[int, int]:
    """One task group per task, each waiting (``after``) for the tasks its name lists; returns
    the dependencies dropped (on tasks not here) and 1 if the names made a cycle (then none
    is kept)."""
    numbers: dict[int, list[int]] = {}  # task number -> its groups (a number may be given twice)
    waits: list[list[int]] = []
    for k, (name, task) in enumerate(named):
        job.groups.append(TaskGroup(task.cpu, task.ram_gib, task.runs or [task.duration_s] * task.count,
                                    kind=name))
        m = _DAG_NAME.match(name)
        if m:
            numbers.setdefault(int(m.group(1)), []).append(k)
        waits.append([int(x) for x in m.group(2).split("_") if x] if m else [])
    dropped = 0
    for k, parents in enumerate(waits):
        after: set[int] = set()
        for p in parents:
            if p in numbers:
                after.update(g for g in numbers[p] if g != k)
            else:
                dropped += 1
        job.groups[k].after = sorted(after)
    if _cyclic(job.groups):
        for g in job.groups:
            g.after = []
        return dropped, 1
    return dropped, 0


def _cyclic(groups: list[TaskGroup]) -> bool:
    """Whether the groups' ``after`` lists make a cycle (Kahn's algorithm)."""
    waiting = [len(g.after) for g in groups]
    children: list[list[int]] = [[] for _ in groups]
    for k, g in enumerate(groups):
        for p in g.after:
            children[p].append(k)
    ready = [k for k, n in enumerate(waiting) if n == 0]
    done = 0
    while ready:
        k = ready.pop()
        done += 1
        for c in children[k]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    return done < len(groups)


def _read_instances(path: Path, cfg: TraceConfig, tasks: dict[tuple[str, str], _Task],
                    progress: Progress | None) -> set[str]:
    """Each instance of a kept task that ran becomes one of its runs; the machines of all."""
    budget = TaskBudget(path, cfg.max_tasks)
    machines: set[str] = set()
    with Lines(path, Limits(cfg.max_tasks, cfg.max_bytes), progress) as lines:
        for row in _rows(path, lines, INSTANCE_COLUMNS):
            if row[7].strip() and len(machines) < 1_000_000:
                machines.add(row[7].strip())
            task = tasks.get((row[2].strip(), row[1].strip()))
            if task is None:
                continue
            where = lines.line_no
            start = _num(row, 5, path, where, INSTANCE_COLUMNS)
            end = _num(row, 6, path, where, INSTANCE_COLUMNS)
            if start > 0 and end > start:
                budget.take(1, f"line {where}", "instance_name", "each instance that ran is one")
                task.runs.append(end - start)
    return machines


def _rows(path: Path, lines: Lines, columns: tuple[str, ...]) -> Iterator[list[str]]:
    reader = csv.reader(lines)
    while True:
        try:
            row = next(reader, None)
        except csv.Error as err:
            raise TraceError(f"{path}: line {lines.line_no}: expected comma-separated values: {err}") \
                from None
        if row is None:
            return
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != len(columns):
            raise TraceError(f"{path}: line {lines.line_no}: expected {len(columns)} comma-separated columns "
                             f"({', '.join(columns)}), found {len(row)}")
        yield row


def _err(path: Path, line: int, col: int, columns: tuple[str, ...], expected: str, got: str) -> TraceError:
    return TraceError(f"{path}: line {line}: column {col + 1} `{columns[col]}`: expected {expected}, "
                      f"got {got[:40]!r}")


def _text(row: list[str], col: int, path: Path, line: int, columns: tuple[str, ...]) -> str:
    v = row[col].strip()
    if not v:
        raise _err(path, line, col, columns, "a name", row[col])
    return v


def _num(row: list[str], col: int, path: Path, line: int, columns: tuple[str, ...],
         missing: float | None = None) -> float:
    text = row[col].strip()
    if not text and missing is not None:
        return missing
    try:
        v = float(text)
    except ValueError:
        raise _err(path, line, col, columns, "a number", text) from None
    if not 0 <= v <= MAX_TIME:  # NaN fails too
        raise _err(path, line, col, columns, f"a number in 0..{MAX_TIME:g}", text)
    return v


def _int(row: list[str], col: int, path: Path, line: int, columns: tuple[str, ...]) -> int:
    v = _num(row, col, path, line, columns)
    if v != int(v):
        raise _err(path, line, col, columns, "a whole number", row[col])
    return int(v)
