"""SLS's own JSON trace (a stream of job objects) and its nodes (topology) file.

Read: each job's submit time, queue (-> pool), id, ``job.count`` copies, and per task entry
``count`` containers of ``container.memory-mb``/``container.vcores`` (SLS's defaults, 1024 MB and
1 vcore, when absent) running ``duration.ms`` (or ``container.end.ms - container.start.ms``).
Ignored (see docs/traces.md): the AM container, locality (``container.host``), priorities, the
container start offsets within a job and map/reduce ordering (every task is requested at submit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulator.traces.model import (
    DEFAULT_LIMITS,
    MIB_PER_GIB,
    Limits,
    NodeGroup,
    TaskBudget,
    Trace,
    TraceError,
    TraceJob,
    Unknown,
    Where,
    as_list,
    as_object,
    json_stream,
    number,
    text_field,
)

DEFAULT_CONTAINER_MB = 1024.0
DEFAULT_CONTAINER_VCORES = 1.0
DEFAULT_NODE_MB = 10240.0
DEFAULT_NODE_VCORES = 10.0

JOB_FIELDS = frozenset({
    "am.type", "job.start.ms", "job.end.ms", "job.queue.name", "job.id", "job.user", "job.count", "job.tasks",
})
TASK_FIELDS = frozenset({
    "count", "container.host", "container.start.ms", "container.end.ms", "duration.ms", "container.priority",
    "container.type", "container.memory-mb", "container.memory", "container.vcores",
})
HEADER_FIELDS = frozenset({"num.nodes", "num.racks"})
NODE_FIELDS = frozenset({"node", "memory-mb", "vcores", "resource"})
RACK_FIELDS = frozenset({"rack", "nodes"})


def read(path: Path, default_pool: str = "", limits: Limits = DEFAULT_LIMITS) -> Trace:
    unknown = Unknown(path)
    budget = TaskBudget(path, limits.max_tasks)
    jobs: list[TraceJob] = []
    nodes: list[NodeGroup] = []
    for where, value in json_stream(path, limits.max_bytes):
        obj = as_object(value, where, "(record)")
        if "num.nodes" in obj and not (obj.keys() & JOB_FIELDS):
            unknown.check(obj, HEADER_FIELDS, where)
            count = int(number(obj, "num.nodes", where, positive=True))
            nodes = [NodeGroup(count, DEFAULT_NODE_VCORES, DEFAULT_NODE_MB / MIB_PER_GIB)]
            continue
        unknown.check(obj, JOB_FIELDS, where)
        jobs.extend(_jobs(obj, where, unknown, len(jobs), default_pool, budget))
    if not jobs:
        raise TraceError(f"{path}: no jobs (expected a stream of SLS job objects with `job.tasks`)")
    notes = ["SLS: AM containers, locality (container.host), priorities and task start offsets ignored"]
    return Trace(jobs, nodes, unknown.warnings, notes)


def _jobs(
    obj: dict[str, Any], where: Where, unknown: Unknown, seen: int, default_pool: str, budget: TaskBudget
) -> list[TraceJob]:
    start_ms = number(obj, "job.start.ms", where)
    queue = text_field(obj, "job.queue.name", where, default_pool or "default")
    copies = int(number(obj, "job.count", where, 1, positive=True))
    job_id = text_field(obj, "job.id", where, "")
    tasks = as_list(obj.get("job.tasks"), where, "job.tasks")
    sizes: list[tuple[int, float, float, float]] = []  # (count, vcores, GiB, duration s)
    for i, t in enumerate(tasks):
        task = as_object(t, where, f"job.tasks[{i}]")
        prefix = f"job.tasks[{i}]."
        unknown.check(task, TASK_FIELDS, where, "job.tasks[].")
        n = int(number(task, "count", where, 1, prefix=prefix))
        mem = task.get("container.memory-mb", task.get("container.memory"))
        key = "container.memory-mb" if "container.memory-mb" in task else "container.memory"
        mb = number({key: mem}, key, where, DEFAULT_CONTAINER_MB, positive=True, prefix=prefix)
        vcores = number(task, "container.vcores", where, DEFAULT_CONTAINER_VCORES, positive=True,
                        prefix=prefix)
        sizes.append((n, vcores, mb / MIB_PER_GIB, _duration_s(task, where, prefix)))
    per_copy = sum(n for n, *_ in sizes)
    # Counted before anything is expanded: `job.count` and `count` multiply.
    budget.take(copies * per_copy, where, "job.count" if copies > 1 else "job.tasks[].count",
                f"{copies:,} x {per_copy:,}" if copies > 1 else "")
    out = []
    for c in range(copies):
        # SLS numbers jobs itself when there is no id or the job is copied.
        jid = job_id if job_id and copies == 1 else f"job_{seen + c}"
        job = TraceJob(jid, default_pool or queue, start_ms / 1000, [])
        for n, vcores, gib, duration_s in sizes:
            for _ in range(n):
                job.add_task(vcores, gib, duration_s)
        out.append(job)
    return out


def _duration_s(task: dict[str, Any], where: Where, prefix: str) -> float:
    if task.get("duration.ms") is not None:
        return number(task, "duration.ms", where, positive=True, prefix=prefix) / 1000
    if task.get("container.start.ms") is None or task.get("container.end.ms") is None:
        raise where.error(prefix + "duration.ms",
                          "`duration.ms`, or both `container.start.ms` and `container.end.ms`")
    start = number(task, "container.start.ms", where, prefix=prefix)
    end = number(task, "container.end.ms", where, prefix=prefix)
    if end <= start:
        raise where.error(prefix + "container.end.ms", f"a time after `container.start.ms` ({start:g})", end)
    return (end - start) / 1000


def read_nodes(path: Path, limits: Limits = DEFAULT_LIMITS) -> tuple[list[NodeGroup], list[str]]:
    """SLS's topology file: racks of named nodes, each with its own size or NodeManager defaults
    (10240 MB, 10 vcores). Nodes of one size are one group."""
    unknown = Unknown(path)
    sizes: dict[tuple[float, float], int] = {}
    for where, value in json_stream(path, limits.max_bytes):
        rack = as_object(value, where, "(record)")
        unknown.check(rack, RACK_FIELDS, where)
        for i, n in enumerate(as_list(rack.get("nodes"), where, "nodes")):
            node = as_object(n, where, f"nodes[{i}]")
            prefix = f"nodes[{i}]."
            unknown.check(node, NODE_FIELDS, where, "nodes[].")
            text_field(node, "node", where, prefix=prefix)
            res = as_object(node.get("resource", node), where, prefix + "resource")
            mb = number(res, "memory-mb", where, DEFAULT_NODE_MB, positive=True, prefix=prefix)
            vcores = number(res, "vcores", where, DEFAULT_NODE_VCORES, positive=True, prefix=prefix)
            key = (vcores, mb / MIB_PER_GIB)
            sizes[key] = sizes.get(key, 0) + 1
    if not sizes:
        raise TraceError(f"{path}: no nodes (expected objects with `rack` and `nodes`)")
    return [NodeGroup(count, cpu, ram) for (cpu, ram), count in sizes.items()], unknown.warnings
