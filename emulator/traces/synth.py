"""SLS's synthetic generator (SYNTH): ``workloads`` of weighted ``job_classes``, LogNormal task
counts, durations and sizes from their avg/stddev, submit times from ``time_distribution``.

Reproducible from ``rand_seed`` (Python's generator, not Java's: the same file gives the same jobs
here every time, not the same jobs as in SLS). Per job: a workload by ``workload_weight``, a class
by ``class_weight``, a submit time (a ``time_distribution`` bucket by weight, uniform within it, in
seconds), map and reduce counts, one size per task kind (MB and vcores, rounded up to integers) and
a duration per task (seconds). Ignored: ``dur_*`` (the job's nominal duration), reservations and
deadlines.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from emulator.scenario.distributions import LogNormal
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
from emulator.traces.sls import DEFAULT_NODE_MB, DEFAULT_NODE_VCORES

TOP_FIELDS = frozenset({"description", "num_nodes", "nodes_per_rack", "num_jobs", "rand_seed", "workloads"})
WORKLOAD_FIELDS = frozenset({
    "workload_name", "workload_weight", "queue_name", "job_classes", "time_distribution",
})
CLASS_FIELDS = frozenset({
    "class_name", "class_weight", "mtasks_avg", "mtasks_stddev", "rtasks_avg", "rtasks_stddev", "dur_avg",
    "dur_stddev", "mtime_avg", "mtime_stddev", "rtime_avg", "rtime_stddev", "map_max_memory_avg",
    "map_max_memory_stddev", "reduce_max_memory_avg", "reduce_max_memory_stddev", "map_max_vcores_avg",
    "map_max_vcores_stddev", "reduce_max_vcores_avg", "reduce_max_vcores_stddev", "chance_of_reservation",
    "deadline_factor_avg", "deadline_factor_stddev",
})
TIME_FIELDS = frozenset({"time", "weight", "jobs"})
# Bounds that keep every draw finite: a mean, and a deviation relative to it.
MAX_AVG = 1e15
MAX_SPREAD = 1e6


def _lognormal(
    obj: dict[str, Any], name: str, where: Where, prefix: str, default_avg: float | None = None
) -> LogNormal:
    avg = number(obj, f"{name}_avg", where, default_avg, prefix=prefix)
    std = number(obj, f"{name}_stddev", where, 0.0, prefix=prefix)
    if avg > MAX_AVG:
        raise where.error(f"{prefix}{name}_avg", f"a number <= {MAX_AVG:g}", avg)
    if std > MAX_SPREAD * avg and avg > 0:
        raise where.error(f"{prefix}{name}_stddev", f"at most {MAX_SPREAD:g} x `{name}_avg` ({avg:g})", std)
    return LogNormal(mean=avg, stddev=std) if avg > 0 else LogNormal(mean=1e-9, stddev=0.0)


def read(
    path: Path, default_pool: str = "", seed: int | None = None, limits: Limits = DEFAULT_LIMITS
) -> Trace:
    """``seed``: instead of the file's ``rand_seed``."""
    unknown = Unknown(path)
    budget = TaskBudget(path, limits.max_tasks)
    records = list(json_stream(path, limits.max_bytes))
    if len(records) != 1:
        raise TraceError(f"{path}: expected one JSON object (a SYNTH description), found {len(records)}")
    where, value = records[0]
    top = as_object(value, where, "(record)")
    unknown.check(top, TOP_FIELDS, where)
    num_jobs = int(number(top, "num_jobs", where, positive=True))
    budget.take(num_jobs, where, "num_jobs", "a map task each at least")  # before anything is drawn
    num_nodes = int(number(top, "num_nodes", where, positive=True))
    if seed is None:
        seed = int(number(top, "rand_seed", where, 0))
    workloads = []
    for w_i, w in enumerate(as_list(top.get("workloads"), where, "workloads")):
        wp = f"workloads[{w_i}]."
        wl = as_object(w, where, wp[:-1])
        unknown.check(wl, WORKLOAD_FIELDS, where, "workloads[].")
        classes = []
        for c_i, c in enumerate(as_list(wl.get("job_classes"), where, wp + "job_classes")):
            cp = f"{wp}job_classes[{c_i}]."
            cls = as_object(c, where, cp[:-1])
            unknown.check(cls, CLASS_FIELDS, where, "workloads[].job_classes[].")
            classes.append((number(cls, "class_weight", where, 1.0, prefix=cp), cp, {
                "maps": _lognormal(cls, "mtasks", where, cp),
                "reduces": _lognormal(cls, "rtasks", where, cp, 0.0),
                "mtime": _lognormal(cls, "mtime", where, cp),
                "rtime": _lognormal(cls, "rtime", where, cp, 0.0),
                "mmem": _lognormal(cls, "map_max_memory", where, cp, 1024.0),
                "rmem": _lognormal(cls, "reduce_max_memory", where, cp, 1024.0),
                "mcpu": _lognormal(cls, "map_max_vcores", where, cp, 1.0),
                "rcpu": _lognormal(cls, "reduce_max_vcores", where, cp, 1.0),
            }))
        if not classes:
            raise where.error(wp + "job_classes", "at least one job class")
        times = []
        for t_i, t in enumerate(as_list(wl.get("time_distribution"), where, wp + "time_distribution")):
            tp = f"{wp}time_distribution[{t_i}]."
            ts = as_object(t, where, tp[:-1])
            unknown.check(ts, TIME_FIELDS, where, "workloads[].time_distribution[].")
            weight = number(ts, "weight" if "weight" in ts else "jobs", where, prefix=tp)
            times.append((number(ts, "time", where, prefix=tp), weight))
        times.sort()
        if not times or sum(w for _, w in times) <= 0:
            raise where.error(wp + "time_distribution", "buckets with a positive total weight")
        pool = default_pool or text_field(wl, "queue_name", where, "default", prefix=wp)
        workloads.append((number(wl, "workload_weight", where, 1.0, prefix=wp), pool, classes, times))
    if not workloads:
        raise where.error("workloads", "at least one workload")
    rng = random.Random(seed)
    jobs = []
    for k in range(num_jobs):
        _, pool, classes, times = _weighted(rng, workloads)
        _, cp, cls = _weighted(rng, classes)
        submit = _submit_time(rng, times)
        job = TraceJob(f"job_{k}", pool, submit, [])
        for kind, count_d, time_d, mem_d, cpu_d in (
            ("map", cls["maps"], cls["mtime"], cls["mmem"], cls["mcpu"]),
            ("reduce", cls["reduces"], cls["rtime"], cls["rmem"], cls["rcpu"]),
        ):
            n = round(count_d.draw(rng)) if kind == "reduce" else max(1, round(count_d.draw(rng)))
            # The map task each job has was counted with `num_jobs`.
            budget.take(n - (kind == "map"), where, f"{cp}{'m' if kind == 'map' else 'r'}tasks_avg",
                        f"job {k} draws {n:,} {kind} tasks")
            mb = max(1, round(mem_d.draw(rng)))
            vcores = max(1, round(cpu_d.draw(rng)))
            for _ in range(n):
                job.add_task(float(vcores), mb / MIB_PER_GIB, max(0.001, time_d.draw(rng)))
        jobs.append(job)
    nodes = [NodeGroup(num_nodes, DEFAULT_NODE_VCORES, DEFAULT_NODE_MB / MIB_PER_GIB)]
    notes = ["SYNTH: regenerated with Python's generator from rand_seed (not SLS's Java draws); "
             "dur_*, reservations and deadlines ignored"]
    return Trace(jobs, nodes, unknown.warnings, notes)


def _weighted(rng: random.Random, items: list[Any]) -> Any:
    """One of ``items`` (tuples whose first element is the weight), by weight."""
    total = sum(i[0] for i in items)
    x = rng.random() * total
    for i in items:
        x -= i[0]
        if x < 0:
            return i
    return items[-1]


def _submit_time(rng: random.Random, times: list[tuple[float, float]]) -> float:
    """A bucket by weight, then uniform within it (the last bucket: its start)."""
    total = sum(w for _, w in times)
    x = rng.random() * total
    pos = len(times) - 1
    for i, (_, w) in enumerate(times):
        x -= w
        if x < 0:
            pos = i
            break
    start = times[pos][0]
    if pos < len(times) - 1:
        return start + rng.random() * (times[pos + 1][0] - start)
    return start
