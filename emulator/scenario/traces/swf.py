"""The Standard Workload Format (SWF) of the Parallel Workloads Archive, as Batsim, CloudSim Plus
and Alea read it: one job per line, 18 whitespace-separated numbers (-1: not known), in submit
order; header comments start with ``;`` (``; MaxNodes: 128``).

Fields: 1 job number, 2 submit time (s), 3 wait time, 4 run time, 5 allocated processors,
6 average CPU time, 7 used memory (KB per processor), 8 requested processors, 9 requested time,
10 requested memory (KB per processor), 11 status, 12 user, 13 group, 14 executable, 15 queue,
16 partition, 17 preceding job, 18 think time.

A job is its processors as tasks of one CPU each, all lasting its run time, with the memory used
per processor (else the memory requested; else 1 GiB). Its queue number is its pool
(``queue3``). The ``MaxNodes``/``MaxProcs`` header sizes the cluster.
"""

from __future__ import annotations

import math
import re
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

FIELDS = (
    "job_number", "submit_time", "wait_time", "run_time", "allocated_processors", "average_cpu_time",
    "used_memory", "requested_processors", "requested_time", "requested_memory", "status", "user_id",
    "group_id", "executable", "queue", "partition", "preceding_job", "think_time",
)
SUBMIT, RUN, PROCS, USED_MEM, REQ_PROCS, REQ_MEM, QUEUE = 1, 3, 4, 6, 7, 9, 14
DEFAULT_RAM_GIB = 1.0
MIN_RAM_GIB = 1 / 1024  # a task's memory is at least 1 MiB
KB_PER_GIB = 1024.0 * 1024.0
_HEADER = re.compile(r";\s*([A-Za-z]+)\s*:\s*(.*)")
_LEADING_INT = re.compile(r"\d+")


def read(path: Path, cfg: TraceConfig, progress: Progress | None = None) -> Trace:
    budget = TaskBudget(path, cfg.max_tasks)
    window = Window(cfg.start_s, cfg.span_s, cfg.sample, cfg.max_jobs)
    header: dict[str, int] = {}
    jobs: list[TraceJob] = []
    dropped = 0
    with Lines(path, Limits(cfg.max_tasks, cfg.max_bytes), progress) as lines:
        for text in lines:
            line = text.strip()
            if not line:
                continue
            if line.startswith(";"):
                m = _HEADER.match(line)
                if m and m.group(1) in ("MaxNodes", "MaxProcs"):
                    n = _LEADING_INT.match(m.group(2).strip())
                    if n is None or int(n.group()) == 0 or len(n.group()) > 9:
                        raise TraceError(f"{path}: line {lines.line_no}: header `{m.group(1)}`: expected a "
                                         f"whole number of at least 1, got {m.group(2).strip()[:40]!r}")
                    header[m.group(1)] = int(n.group())
                continue
            values = line.split()
            if len(values) != len(FIELDS):
                raise TraceError(f"{path}: line {lines.line_no}: expected {len(FIELDS)} whitespace-separated "
                                 f"fields (job_number, submit_time, ... think_time), found {len(values)}")
            row = [_number(values, i, path, lines.line_no) for i in range(len(FIELDS))]
            submit, run = row[SUBMIT], row[RUN]
            procs = row[PROCS] if row[PROCS] > 0 else row[REQ_PROCS]
            if submit < 0:
                raise _err(path, lines.line_no, SUBMIT, "a time >= 0 (seconds)", values[SUBMIT])
            if procs != int(procs):
                raise _err(path, lines.line_no, PROCS, "a whole number of processors", values[PROCS])
            if run <= 0 or procs <= 0:
                dropped += 1  # cancelled before it ran, or not recorded
                continue
            if window.full or window.past(submit):
                break  # the file is in submit order: no later job is kept
            if not window.keep(submit):
                continue
            budget.take(int(procs), f"line {lines.line_no}", FIELDS[PROCS], "a task per processor")
            kb = row[USED_MEM] if row[USED_MEM] > 0 else row[REQ_MEM]
            ram = round(max(kb / KB_PER_GIB, MIN_RAM_GIB), 6) if kb > 0 else DEFAULT_RAM_GIB
            queue = int(row[QUEUE])
            pool = cfg.pool or (f"queue{queue}" if queue >= 0 else "default")
            job = TraceJob(values[0], pool, submit, [])
            job.groups.append(TaskGroup(1.0, ram, [run] * int(procs)))
            jobs.append(job)
    if window.t0 is None and not dropped:
        raise TraceError(f"{path}: no job lines (expected the Standard Workload Format: 18 numbers a line)")
    out = finish(jobs)
    if not out:
        raise TraceError(f"{path}: no job in the window (start {cfg.start_s:g} s, span {cfg.span_s} s) "
                         "with a run time and processors")
    warnings = []
    if dropped:
        warnings.append(f"{path}: {dropped} job(s) without a run time or processors (cancelled before "
                        "they ran, or not recorded): dropped")
    notes = ["SWF: one task per processor; wait time, CPU time, requested time, status, users, groups, "
             "executables, partitions, preceding jobs and think times ignored"]
    return Trace(out, _cluster(header, out), warnings, notes, selected=True)


def _cluster(header: dict[str, int], jobs: list[TraceJob]) -> list[NodeGroup]:
    """``MaxNodes`` nodes sharing ``MaxProcs`` processors (one of the two: nodes of one
    processor), with memory for a node full of the trace's largest tasks (SWF gives none)."""
    nodes, procs = header.get("MaxNodes"), header.get("MaxProcs")
    if nodes is None and procs is None:
        return []
    count = nodes if nodes is not None else procs
    assert count is not None
    cpu = max(1.0, (procs or count) / count)
    ram_per_cpu = max((g.ram_gib for j in jobs for g in j.groups), default=DEFAULT_RAM_GIB)
    return [NodeGroup(count, cpu, math.ceil(cpu * ram_per_cpu))]


def _number(values: list[str], i: int, path: Path, line: int) -> float:
    try:
        v = float(values[i])
    except ValueError:
        raise _err(path, line, i, "a number (-1: not known)", values[i]) from None
    if not math.isfinite(v) or abs(v) > 1e15:
        raise _err(path, line, i, "a finite number of at most 1e15", values[i])
    return v


def _err(path: Path, line: int, i: int, expected: str, got: str) -> TraceError:
    return TraceError(f"{path}: line {line}: field {i + 1} `{FIELDS[i]}`: expected {expected}, "
                      f"got {got[:40]!r}")
