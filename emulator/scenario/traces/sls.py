"""SLS's own JSON trace (a stream of job objects) and its nodes (topology) file, read as SLS reads
them.

Read: each job's submit time (``job.start.ms``, absolute as SLS keeps it), queue (-> pool), id,
``job.count`` copies, its AM type, and per task entry ``count`` containers of
``container.memory-mb``/``container.vcores`` (SLS's defaults, 1024 MB and 1 vcore, when absent)
running ``container.duration.ms``, else ``duration.ms``, else ``container.end.ms -
container.start.ms``. A ``mapreduce`` job (the default) asks for its reduces once its maps are
done; a ``dag`` job asks for each container ``container.request.delay`` ms after its start. Each
job has an AM container (1024 MB, 1 vcore). Without a nodes file the cluster is the distinct
``container.host`` values (and the ``num.nodes`` header), NodeManagers of SLS's default size.
Ignored (see docs/traces.md): locality, priorities, execution types, ``job.end.ms``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from emulator.scenario.traces.model import (
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
    "am.type", "yarn.sls.am.type", "job.start.ms", "job.end.ms", "job.queue.name", "job.id", "job.user",
    "job.count", "job.tasks", "am.memory-mb", "am.vcores",
})
TASK_FIELDS = frozenset({
    "count", "container.host", "container.start.ms", "container.end.ms", "duration.ms", "container.priority",
    "container.type", "container.memory-mb", "container.memory", "container.vcores", "container.duration.ms",
    "container.request.delay", "container.execution.type", "container.allocation.id",
})
# SLS's own AM simulators (`yarn.sls.am.type.NAME` in sls-runner.xml names the class of each); a
# trace's other types are mapped onto these with `am_types` (--am-type NAME=KIND).
AM_TYPES = ("mapreduce", "dag", "stream")
# SLS's AM container (yarn.sls.am.container.memory / .vcores defaults): vcores, GiB; an SLS job
# may give its own (`am.memory-mb`, `am.vcores`: SLS's `am.` + resource name).
AM_SIZE = (1.0, 1.0)
HEADER_FIELDS = frozenset({"num.nodes", "num.racks"})
NODE_FIELDS = frozenset({"node", "memory-mb", "vcores", "resource"})
RACK_FIELDS = frozenset({"rack", "nodes"})


def read(path: Path, default_pool: str = "", limits: Limits = DEFAULT_LIMITS,
         am_types: Mapping[str, str] | None = None) -> Trace:
    """``am_types``: the trace's own AM types, each read as one of SLS's (``AM_TYPES``). A job of
    a type neither names is skipped with a warning, as SLS skips a job whose ``am.type`` has no
    simulator class (``Failed to create an AM``)."""
    kinds = {**{t: t for t in AM_TYPES}, **(am_types or {})}
    unknown = Unknown(path)
    budget = TaskBudget(path, limits.max_tasks)
    jobs: list[TraceJob] = []
    generated: list[TraceJob] = []  # jobs SLS numbers itself (no id, or copied by `job.count`)
    header_nodes = 0
    skipped = 0  # jobs of an AM type without a behaviour
    hosts: set[str] = set()
    for where, value in json_stream(path, limits.max_bytes):
        obj = as_object(value, where, "(record)")
        if "num.nodes" in obj and not (obj.keys() & JOB_FIELDS):
            unknown.check(obj, HEADER_FIELDS, where)
            header_nodes += int(number(obj, "num.nodes", where, positive=True))
            continue
        unknown.check(obj, JOB_FIELDS, where)
        made, named = _jobs(obj, where, unknown, default_pool, budget, hosts, kinds)
        if not made:
            skipped += 1
        jobs.extend(made)
        if not named:
            generated.extend(made)
    if not jobs and skipped:
        raise TraceError(f"{path}: no jobs left: the AM type of all {skipped} has no behaviour (known: "
                         f"{', '.join(sorted(kinds))}); map the trace's types with --am-type "
                         "TYPE=mapreduce|dag|stream ([workload.trace] am_types)")
    if not jobs:
        raise TraceError(f"{path}: no jobs (expected a stream of SLS job objects with `job.tasks`)")
    _number(jobs, generated)
    count = header_nodes + len(hosts)
    nodes = [NodeGroup(count, DEFAULT_NODE_VCORES, DEFAULT_NODE_MB / MIB_PER_GIB)] if count else []
    notes = ["SLS: locality (container.host), priorities and execution types ignored"]
    return Trace(jobs, nodes, unknown.warnings, notes)


def _number(jobs: list[TraceJob], generated: list[TraceJob]) -> None:
    """Jobs without their own id are ``job_N`` in file order, skipping every id the trace gives
    itself (a copy never takes the name of another job)."""
    taken = {j.job_id for j in jobs if j.job_id}
    n = 0
    for job in generated:
        while f"job_{n}" in taken:
            n += 1
        job.job_id = f"job_{n}"
        taken.add(job.job_id)


def _jobs(
    obj: dict[str, Any], where: Where, unknown: Unknown, default_pool: str, budget: TaskBudget,
    hosts: set[str], kinds: Mapping[str, str],
) -> tuple[list[TraceJob], bool]:
    """The job's copies (none: an AM type without a behaviour), and whether they keep the
    trace's own id."""
    start_ms = number(obj, "job.start.ms", where)
    queue = text_field(obj, "job.queue.name", where, default_pool or "default")
    copies = int(number(obj, "job.count", where, 1, positive=True))
    job_id = text_field(obj, "job.id", where, "")
    am_key = "am.type" if "am.type" in obj else "yarn.sls.am.type"
    am_type = kinds.get(text_field(obj, am_key, where, "mapreduce"), "")
    if not am_type:
        unknown.warnings.append(
            f"{where.path}: record {where.record} (line {where.line}): job {job_id or '(no job.id)'}: "
            f"`{am_key}` {json.dumps(obj[am_key])[:60]} has no AM behaviour (known: "
            f"{', '.join(sorted(kinds))}): skipped, as SLS skips a job whose AM type names no simulator; "
            "map it with --am-type TYPE=mapreduce|dag|stream ([workload.trace] am_types)")
        return [], False
    am = (number(obj, "am.vcores", where, AM_SIZE[0], positive=True),
          number(obj, "am.memory-mb", where, AM_SIZE[1] * MIB_PER_GIB, positive=True) / MIB_PER_GIB)
    tasks = as_list(obj.get("job.tasks"), where, "job.tasks")
    if not tasks:
        raise where.error("job.tasks", "at least one task (SLS: no task for the job)")
    sizes: list[tuple[int, float, float, float, str, float]] = []  # count, vcores, GiB, s, kind, delay s
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
        kind = text_field(task, "container.type", where, "map", prefix=prefix)
        delay = number(task, "container.request.delay", where, 0.0, prefix=prefix) / 1000
        host = task.get("container.host")
        if host is not None:
            hosts.add(text_field(task, "container.host", where, prefix=prefix))
        sizes.append((n, vcores, mb / MIB_PER_GIB, _duration_s(task, where, prefix), kind,
                      delay if am_type == "dag" else 0.0))
    per_copy = sum(n for n, *_ in sizes)
    # Counted before anything is expanded: `job.count` and `count` multiply.
    budget.take(copies * per_copy, where, "job.count" if copies > 1 else "job.tasks[].count",
                f"{copies:,} x {per_copy:,}" if copies > 1 else "")
    named = bool(job_id) and copies == 1
    out = []
    for _ in range(copies):
        job = TraceJob(job_id if named else "", default_pool or queue, start_ms / 1000, [], am=am)
        for n, vcores, gib, duration_s, kind, delay in sizes:
            for _ in range(n):
                job.add_task(vcores, gib, duration_s, kind, delay)
        if am_type == "mapreduce":
            job.reduces_after_maps()
        out.append(job)
    return out, named


def _duration_s(task: dict[str, Any], where: Where, prefix: str) -> float:
    """SLS's order: ``container.duration.ms``, the older ``duration.ms``, then end - start."""
    for key in ("container.duration.ms", "duration.ms"):
        if task.get(key) is not None:
            return number(task, key, where, positive=True, prefix=prefix) / 1000
    if task.get("container.start.ms") is None or task.get("container.end.ms") is None:
        raise where.error(prefix + "container.duration.ms", "`container.duration.ms` (or `duration.ms`), "
                          "or both `container.start.ms` and `container.end.ms`")
    start = number(task, "container.start.ms", where, prefix=prefix)
    end = number(task, "container.end.ms", where, prefix=prefix)
    if end <= start:
        raise where.error(prefix + "container.end.ms", f"a time after `container.start.ms` ({start:g})", end)
    return (end - start) / 1000


def read_nodes(path: Path, limits: Limits = DEFAULT_LIMITS) -> tuple[list[NodeGroup], list[str]]:
    """SLS's topology file: racks of named nodes, each with its own size or NodeManager defaults
    (10240 MB, 10 vcores). Named as SLS names them, ``/RACK/NODE``: a node without a name is
    ``/RACK/null`` (SLS's own sample ends with one), and a name given twice is one node (its last
    size). Nodes of one size are one group."""
    unknown = Unknown(path)
    named: dict[str, tuple[float, float]] = {}
    for where, value in json_stream(path, limits.max_bytes):
        rack = as_object(value, where, "(record)")
        unknown.check(rack, RACK_FIELDS, where)
        rack_name = text_field(rack, "rack", where, "null")
        for i, n in enumerate(as_list(rack.get("nodes"), where, "nodes")):
            node = as_object(n, where, f"nodes[{i}]")
            prefix = f"nodes[{i}]."
            unknown.check(node, NODE_FIELDS, where, "nodes[].")
            name = text_field(node, "node", where, "null", prefix=prefix)
            if node.get("node") is None:
                unknown.warnings.append(f"{path}: record {where.record} (line {where.line}): `{prefix}node` "
                                        f"missing: named /{rack_name}/null as SLS names it")
            res = as_object(node.get("resource", node), where, prefix + "resource")
            mb = number(res, "memory-mb", where, DEFAULT_NODE_MB, positive=True, prefix=prefix)
            vcores = number(res, "vcores", where, DEFAULT_NODE_VCORES, positive=True, prefix=prefix)
            named[f"/{rack_name}/{name}"] = (vcores, mb / MIB_PER_GIB)
    if not named:
        raise TraceError(f"{path}: no nodes (expected objects with `rack` and `nodes`)")
    sizes: dict[tuple[float, float], int] = {}
    for key in named.values():
        sizes[key] = sizes.get(key, 0) + 1
    return [NodeGroup(count, cpu, ram) for (cpu, ram), count in sizes.items()], unknown.warnings
