"""Rumen job-history traces (a stream of LoggedJob objects), read as SLS's converter reads them.

Every task attempt is a container (failed attempts used resources too) running from its
``startTime`` to its ``finishTime``; attempts without both are skipped, and a job left with none
is skipped with a warning (SLS logs it). Submit times are relative to the first job's, as SLS
takes them. Every container has SLS's default size (1024 MB, 1 vcore: ``yarn.sls.container.*``),
as SLS gives them; ``jobMapMB``/``jobReduceMB`` are the JVM heap (``-Xmx``), not the container.
Reduces are requested once every map is done, after the job's AM container (1024 MB, 1 vcore)
runs. The cluster: the attempts' host names. Ignored: locality, counters.
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
    as_list,
    as_object,
    json_stream,
    number,
    text_field,
)
from emulator.traces.sls import (
    AM_SIZE,
    DEFAULT_CONTAINER_MB,
    DEFAULT_CONTAINER_VCORES,
    DEFAULT_NODE_MB,
    DEFAULT_NODE_VCORES,
)

# Known LoggedJob / LoggedTask / LoggedTaskAttempt fields: read, or ignored on purpose.
JOB_FIELDS = frozenset({
    "jobID", "submitTime", "launchTime", "finishTime", "queue", "user", "mapTasks", "reduceTasks",
    "otherTasks",
    "jobName", "outcome", "jobtype", "priority", "jobProperties", "jobMapMB", "jobReduceMB", "heapMegabytes",
    "clusterMapMB", "clusterReduceMB", "totalMaps", "totalReduces", "computonsPerMapInputByte",
    "computonsPerMapOutputByte", "computonsPerReduceInputByte", "computonsPerReduceOutputByte",
    "successfulMapAttemptCDFs", "failedMapAttemptCDFs", "successfulReduceAttemptCDF",
    "failedReduceAttemptCDF",
    "mapperTriesToSucceed", "failedMapperFraction", "relativeTime", "directDependantJobs",
})
TASK_FIELDS = frozenset({
    "taskID", "taskType", "startTime", "finishTime", "attempts", "inputBytes", "inputRecords", "outputBytes",
    "outputRecords", "preferredLocations", "taskStatus",
})
ATTEMPT_FIELDS = frozenset({
    "attemptID", "startTime", "finishTime", "hostName", "result", "shuffleFinished", "sortFinished",
    "hdfsBytesRead", "hdfsBytesWritten", "fileBytesRead", "fileBytesWritten", "mapInputRecords",
    "mapOutputBytes", "mapOutputRecords", "combineInputRecords", "reduceInputGroups", "reduceInputRecords",
    "reduceShuffleBytes", "reduceOutputRecords", "spilledRecords", "location", "resourceUsageMetrics",
    "vmemKbytes", "physMemKbytes", "clockSplits", "cpuUsages",
})


def read(path: Path, default_pool: str = "", limits: Limits = DEFAULT_LIMITS) -> Trace:
    unknown = Unknown(path)
    budget = TaskBudget(path, limits.max_tasks)
    jobs: list[TraceJob] = []
    hosts: set[str] = set()
    baseline: float | None = None
    for where, value in json_stream(path, limits.max_bytes):
        obj = as_object(value, where, "(record)")
        unknown.check(obj, JOB_FIELDS, where)
        job_id = text_field(obj, "jobID", where)
        submit = number(obj, "submitTime", where)
        if baseline is None:
            baseline = submit
        queue = text_field(obj, "queue", where, "default")
        job = TraceJob(job_id, default_pool or queue, max(0.0, submit - baseline) / 1000, [], am=AM_SIZE)
        as_object(obj.get("jobProperties") or {}, where, "jobProperties")
        for kind in ("map", "reduce"):
            key = f"{kind}Tasks"
            cpu, mb = DEFAULT_CONTAINER_VCORES, DEFAULT_CONTAINER_MB
            for i, t in enumerate(as_list(obj.get(key, []), where, key)):
                task = as_object(t, where, f"{key}[{i}]")
                unknown.check(task, TASK_FIELDS, where, f"{key}[].")
                for j, a in enumerate(as_list(task.get("attempts", []), where, f"{key}[{i}].attempts")):
                    prefix = f"{key}[{i}].attempts[{j}]."
                    attempt = as_object(a, where, prefix[:-1])
                    unknown.check(attempt, ATTEMPT_FIELDS, where, f"{key}[].attempts[].")
                    start, end = attempt.get("startTime"), attempt.get("finishTime")
                    if not _time(start) or not _time(end):
                        continue  # never ran, or its end was not recorded (Rumen writes -1)
                    start_ms = number(attempt, "startTime", where, prefix=prefix)
                    end_ms = number(attempt, "finishTime", where, prefix=prefix)
                    if end_ms <= start_ms:
                        raise where.error(prefix + "finishTime", f"a time after `startTime` ({start_ms:g})",
                                          end)
                    host = attempt.get("hostName")
                    if isinstance(host, str):
                        hosts.add(host)
                    budget.take(1, where, prefix[:-1], "each attempt is one")
                    job.add_task(cpu, mb / MIB_PER_GIB, (end_ms - start_ms) / 1000, kind)
        if job.tasks:
            job.reduces_after_maps()
            jobs.append(job)
        else:
            outcome = obj.get("outcome")
            unknown.warnings.append(
                f"{path}: record {where.record} (line {where.line}): job {job_id}"
                f"{f' ({outcome})' if isinstance(outcome, str) else ''} has no finished task attempt: "
                "skipped, as SLS skips it")
    if not jobs:
        raise TraceError(f"{path}: no job with a finished task attempt (expected Rumen LoggedJob objects)")
    nodes = [NodeGroup(len(hosts), DEFAULT_NODE_VCORES, DEFAULT_NODE_MB / MIB_PER_GIB)] if hosts else []
    notes = ["Rumen: each attempt is a container of SLS's default size; locality ignored"]
    return Trace(jobs, nodes, unknown.warnings, notes)


def _time(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
