"""Rumen job-history traces (a stream of LoggedJob objects), read as SLS replays them.

Each task is one container, its last attempt's (SLS's ``AMDefinitionRumen``: the attempt that
ended the task), running from its ``startTime`` to its ``finishTime``; when that attempt never ran
(a killed speculative attempt: Rumen writes -1, which SLS turns into a container of no time), the
last one that did. A task without attempts makes SLS refuse the whole job (``Invalid map task,
no attempt``): it is skipped with a warning; a task none of whose attempts ran is left out,
counted in a warning. Submit times are relative to the first job's, as SLS takes them. Every container has
SLS's default size (1024 MB, 1 vcore: ``yarn.sls.container.*``), as SLS gives them;
``jobMapMB``/``jobReduceMB`` are the JVM heap (``-Xmx``), not the container.
Reduces are requested once every map is done, after the job's AM container (1024 MB, 1 vcore)
runs. The cluster: every task's last host name (SLS's ``parseNodesFromRumenTrace``). Ignored:
locality, counters, the other attempts.
"""

from __future__ import annotations

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
from emulator.scenario.traces.sls import (
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
        unrecorded = 0  # tasks none of whose attempts has a start and an end
        refused = ""  # a task without attempts: SLS creates no AM for the job
        for kind in ("map", "reduce"):
            key = f"{kind}Tasks"
            for i, t in enumerate(as_list(obj.get(key, []), where, key)):
                task = as_object(t, where, f"{key}[{i}]")
                unknown.check(task, TASK_FIELDS, where, f"{key}[].")
                attempts = as_list(task.get("attempts", []), where, f"{key}[{i}].attempts")
                for a in attempts:
                    unknown.check(as_object(a, where, f"{key}[{i}].attempts[]"), ATTEMPT_FIELDS, where,
                                  f"{key}[].attempts[].")
                if not attempts:
                    refused = refused or f"{key}[{i}] ({text_field(task, 'taskID', where, '?')})"
                    continue
                last = as_object(attempts[-1], where, f"{key}[{i}].attempts[{len(attempts) - 1}]")
                host = last.get("hostName")
                if isinstance(host, str):
                    hosts.add(host)  # SLS's cluster: every task's last host, in every job
                duration_s = None
                for j in range(len(attempts) - 1, -1, -1):  # the last attempt that ran
                    a = as_object(attempts[j], where, f"{key}[{i}].attempts[{j}]")
                    duration_s = _duration_s(a, where, f"{key}[{i}].attempts[{j}].")
                    if duration_s is not None:
                        break
                if duration_s is None:
                    unrecorded += 1
                    continue
                budget.take(1, where, f"{key}[{i}]", "each task is one")
                job.add_task(DEFAULT_CONTAINER_VCORES, DEFAULT_CONTAINER_MB / MIB_PER_GIB, duration_s, kind)
        outcome = obj.get("outcome")
        label = f"job {job_id}{f' ({outcome})' if isinstance(outcome, str) else ''}"
        at = f"{path}: record {where.record} (line {where.line}): {label}"
        if refused:
            unknown.warnings.append(f"{at}: task {refused} has no attempt: skipped, as SLS refuses the job "
                                    "(`Invalid map task, no attempt`)")
        elif not job.tasks:
            unknown.warnings.append(f"{at} has no finished task attempt: skipped, as SLS skips it")
        else:
            if unrecorded:
                unknown.warnings.append(f"{at}: {unrecorded} task(s) of no attempt with a start and a finish "
                                        "time: left out")
            job.reduces_after_maps()
            jobs.append(job)
    if not jobs:
        raise TraceError(f"{path}: no job with a finished task attempt (expected Rumen LoggedJob objects)")
    nodes = [NodeGroup(len(hosts), DEFAULT_NODE_VCORES, DEFAULT_NODE_MB / MIB_PER_GIB)] if hosts else []
    notes = ["Rumen: each task's last attempt is a container of SLS's default size; locality ignored"]
    return Trace(jobs, nodes, unknown.warnings, notes)


def _duration_s(attempt: dict[str, Any], where: Where, prefix: str) -> float | None:
    """The container SLS makes of a task's last attempt lasts from its start to its finish; None
    when either was not recorded."""
    if not _time(attempt.get("startTime")) or not _time(attempt.get("finishTime")):
        return None  # never ran, or its end was not recorded (Rumen writes -1)
    start_ms = number(attempt, "startTime", where, prefix=prefix)
    end_ms = number(attempt, "finishTime", where, prefix=prefix)
    if end_ms <= start_ms:
        raise where.error(prefix + "finishTime", f"a time after `startTime` ({start_ms:g})", end_ms)
    return (end_ms - start_ms) / 1000


def _time(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
