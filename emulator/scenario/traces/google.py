"""Google cluster-usage trace 2011 (clusterdata-2011), its ``task_events`` table: CSV without a
header, one event per line (a file, or several parts concatenated).

Columns: timestamp (µs), missing info, job ID, task index, machine ID, event type (0 SUBMIT,
1 SCHEDULE, 2 EVICT, 3 FAIL, 4 FINISH, 5 KILL, 6 LOST, 7/8 UPDATE), user, scheduling class,
priority, CPU request, memory request, disk request, different-machines restriction.

A job's submit time is its first task SUBMIT; each run of a task (SCHEDULE to the next EVICT, FAIL,
FINISH, KILL or LOST) is a task of that length and of the request its SCHEDULE event carried (an
UPDATE while it runs does not resize it), so evicted and failed runs occupy what they did; a run
still going at the end of the file lasts until the file's last timestamp. Requests are
normalised to the largest machine: ``machine_cpu``/``machine_ram_gib`` are its size. Priority
tiers become pools: 0-1 ``free``, 2-8 ``batch``, 9-11 ``production``. Ignored: disk, the
different-machines restriction, scheduling class, users, machine placement. Lines starting with
``#`` and a header row (first column ``timestamp``) are skipped.

``machine_events`` (timestamp, machine ID, event type 0 ADD / 1 REMOVE / 2 UPDATE, platform ID,
CPUs, memory; capacities normalised the same way), when given, is the cluster: each machine at its
last recorded capacity.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from emulator.scenario.traces.model import (
    DEFAULT_LIMITS,
    Limits,
    NodeGroup,
    TaskBudget,
    Trace,
    TraceError,
    TraceJob,
    read_text,
)

SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING = range(9)
ENDS = {EVICT, FAIL, FINISH, KILL, LOST}
COLUMNS = (
    "timestamp", "missing_info", "job_id", "task_index", "machine_id", "event_type", "user",
    "scheduling_class", "priority", "cpu_request", "memory_request", "disk_request", "different_machines",
)
# Events before the trace window have timestamp 0; after it, 2^63 - 1.
AFTER_END = 2**63 - 1
# A zero request (the trace has them) still takes this fraction of the largest machine.
MIN_REQUEST = 0.001


def tier(priority: int) -> str:
    return "free" if priority <= 1 else ("production" if priority >= 9 else "batch")


@dataclass
class _Task:
    cpu: float = 0.0
    mem: float = 0.0
    priority: int = 0
    running_since: float | None = None
    size_at_start: tuple[float, float] = (0.0, 0.0)
    runs: list[tuple[float, float, float]] = field(default_factory=list)  # (duration, cpu, mem)


@dataclass
class _Job:
    submit_s: float
    priority: int = 0
    tasks: dict[int, _Task] = field(default_factory=dict)


def read(
    path: Path, default_pool: str = "", machine_cpu: float = 32.0, machine_ram_gib: float = 128.0,
    limits: Limits = DEFAULT_LIMITS, machine_events: Path | None = None,
) -> Trace:
    text = read_text(path, limits.max_bytes)
    budget = TaskBudget(path, limits.max_tasks)
    jobs: dict[str, _Job] = {}
    machines: set[str] = set()
    last_s = 0.0
    zero_requests = 0
    reader = csv.reader(io.StringIO(text))
    while True:
        try:
            row = next(reader, None)
        except csv.Error as err:  # a NUL byte, an unclosed quote, a field over csv's limit
            raise TraceError(f"{path}: line {reader.line_num}: expected comma-separated values: {err}") \
                from None
        if row is None:
            break
        line_no = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()) or row[0].lstrip().startswith("#"):
            continue
        if not jobs and row[0].strip().lower() == "timestamp":
            continue  # a header row
        if len(row) != len(COLUMNS):
            raise TraceError(f"{path}: line {line_no}: expected {len(COLUMNS)} comma-separated columns "
                             f"({', '.join(COLUMNS)}), found {len(row)}")
        ts = _int(row, 0, path, line_no)
        if ts == AFTER_END:
            continue
        t = ts / 1e6
        job_id = _required(row, 2, path, line_no)
        index = _int(row, 3, path, line_no)
        event = _int(row, 5, path, line_no)
        if not 0 <= event <= 8:
            raise _err(path, line_no, 5, "an event type 0..8", row[5])
        if row[4]:
            machines.add(row[4])
        last_s = max(last_s, t)
        job = jobs.get(job_id)
        if job is None:
            job = jobs[job_id] = _Job(submit_s=t)
        task = job.tasks.get(index)
        if task is None:
            task = job.tasks[index] = _Task()
        if event in (SUBMIT, UPDATE_PENDING, UPDATE_RUNNING, SCHEDULE):
            if row[8]:
                task.priority = _int(row, 8, path, line_no)
                if not 0 <= task.priority <= 11:
                    raise _err(path, line_no, 8, "a priority 0..11", row[8])
                job.priority = max(job.priority, task.priority)
            if row[9]:
                task.cpu = _fraction(row, 9, path, line_no)
            if row[10]:
                task.mem = _fraction(row, 10, path, line_no)
        if event == SUBMIT:
            job.submit_s = min(job.submit_s, t)
        elif event == SCHEDULE:
            task.running_since = t
            task.size_at_start = (task.cpu, task.mem)
        elif event in ENDS and task.running_since is not None:
            budget.take(1, f"line {line_no}", "event_type", "each run of a task is one")
            task.runs.append((t - task.running_since, *task.size_at_start))
            task.running_since = None
    if not jobs:
        raise TraceError(f"{path}: no task events (expected the clusterdata-2011 task_events CSV)")
    out = []
    for job_id, job in jobs.items():
        tj = TraceJob(job_id, default_pool or tier(job.priority), job.submit_s, [])
        for task in job.tasks.values():
            if task.running_since is not None:
                budget.take(1, "the end of the file", "event_type", "a task still running is one more")
                task.runs.append((last_s - task.running_since, *task.size_at_start))
            for run, cpu, mem in task.runs:
                if run > 0:
                    zero_requests += cpu == 0 or mem == 0
                    tj.add_task(round(max(cpu, MIN_REQUEST) * machine_cpu, 6),
                                round(max(mem, MIN_REQUEST) * machine_ram_gib, 6), run)
        if tj.tasks:
            out.append(tj)
    if not out:
        raise TraceError(f"{path}: no task ran (no SCHEDULE event followed by an end or the end of the file)")
    warnings = []
    if zero_requests:
        warnings.append(f"{path}: {zero_requests} task run(s) with a zero CPU or memory request: given "
                        f"{MIN_REQUEST:g} of the largest machine")
    nodes = [NodeGroup(len(machines), machine_cpu, machine_ram_gib)] if machines else []
    if machine_events is not None:
        nodes = read_machines(machine_events, machine_cpu, machine_ram_gib, limits, warnings)
    notes = ["Google 2011: disk, different-machines restriction, scheduling class, users and placement "
             "ignored"]
    return Trace(out, nodes, warnings, notes)


MACHINE_COLUMNS = ("timestamp", "machine_id", "event_type", "platform_id", "cpus", "memory")
MACHINE_ADD, MACHINE_REMOVE, MACHINE_UPDATE = 0, 1, 2


def read_machines(
    path: Path, machine_cpu: float, machine_ram_gib: float, limits: Limits, warnings: list[str]
) -> list[NodeGroup]:
    """The cluster of a ``machine_events`` table: every machine added, at its last recorded
    capacity, in groups of one size (the most common first)."""
    text = read_text(path, limits.max_bytes)
    size: dict[str, tuple[float, float]] = {}
    unknown: set[str] = set()
    reader = csv.reader(io.StringIO(text))
    while True:
        try:
            row = next(reader, None)
        except csv.Error as err:
            raise TraceError(f"{path}: line {reader.line_num}: expected comma-separated values: {err}") \
                from None
        if row is None:
            break
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()) or row[0].lstrip().startswith("#"):
            continue
        if not size and not unknown and row[0].strip().lower() == "timestamp":
            continue
        if len(row) != len(MACHINE_COLUMNS):
            raise TraceError(f"{path}: line {line}: expected {len(MACHINE_COLUMNS)} comma-separated columns "
                             f"({', '.join(MACHINE_COLUMNS)}), found {len(row)}")
        machine = row[1].strip()
        if not machine:
            raise TraceError(f"{path}: line {line}: column 2 `machine_id`: expected a value, got ''")
        try:
            event = int(row[2])
        except ValueError:
            event = -1
        if event not in (MACHINE_ADD, MACHINE_REMOVE, MACHINE_UPDATE):
            raise TraceError(f"{path}: line {line}: column 3 `event_type`: expected 0 (ADD), 1 (REMOVE) or "
                             f"2 (UPDATE), got {row[2][:40]!r}")
        if event == MACHINE_REMOVE:
            continue
        if not row[4].strip() or not row[5].strip():
            if machine not in size:
                unknown.add(machine)
            continue
        cap = []
        for col in (4, 5):
            try:
                v = float(row[col])
            except ValueError:
                v = -1.0
            if not 0 < v <= 1:
                raise TraceError(f"{path}: line {line}: column {col + 1} `{MACHINE_COLUMNS[col]}`: expected "
                                 "a number in (0, 1] (normalised to the largest machine), got "
                                 f"{row[col][:40]!r}")
            cap.append(v)
        if machine not in size and len(size) >= 10_000_000:
            raise TraceError(f"{path}: line {line}: expected at most 10,000,000 machines")
        size[machine] = (round(cap[0] * machine_cpu, 6), round(cap[1] * machine_ram_gib, 6))
        unknown.discard(machine)
    if not size:
        raise TraceError(f"{path}: no machine with a capacity (expected clusterdata-2011 machine_events)")
    if unknown:
        warnings.append(f"{path}: {len(unknown)} machine(s) without a recorded capacity: left out")
    counts: dict[tuple[float, float], int] = {}
    for cap_ in size.values():
        counts[cap_] = counts.get(cap_, 0) + 1
    groups = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [NodeGroup(n, cpu, ram) for (cpu, ram), n in groups]


def _err(path: Path, line: int, col: int, expected: str, got: str) -> TraceError:
    return TraceError(
        f"{path}: line {line}: column {col + 1} `{COLUMNS[col]}`: expected {expected}, got {got!r}"
    )


def _required(row: list[str], col: int, path: Path, line: int) -> str:
    if not row[col].strip():
        raise _err(path, line, col, "a value", row[col])
    return row[col].strip()


def _int(row: list[str], col: int, path: Path, line: int) -> int:
    try:
        v = int(row[col])
    except ValueError:  # not an integer, or more digits than Python converts
        raise _err(path, line, col, "an integer", row[col][:40]) from None
    if not 0 <= v <= AFTER_END:  # the trace's integers are 64-bit (and times / 1e6 must fit a float)
        raise _err(path, line, col, f"an integer in 0..{AFTER_END}", row[col][:40])
    return v


def _fraction(row: list[str], col: int, path: Path, line: int) -> float:
    try:
        v = float(row[col])
    except ValueError:
        raise _err(path, line, col, "a number in [0, 1]", row[col][:40]) from None
    if not 0 <= v <= 1:
        raise _err(path, line, col, "a number in [0, 1] (normalised to the largest machine)", row[col])
    return v
