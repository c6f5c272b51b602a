"""SLS's synthetic generator (SYNTH): ``workloads`` of weighted ``job_classes``, submit times from
``time_distribution``, each class's tasks in either of SLS's two forms.

Reproducible from ``rand_seed`` (Python's generator, not Java's: the same file gives the same jobs
here every time, not the same jobs as in SLS). Per job: a workload by ``workload_weight``, a class
by ``class_weight``, a submit time (a ``time_distribution`` bucket by weight, uniform within it, in
seconds, absolute as SLS keeps it), then per task type a count, one size (MB and vcores, rounded,
at least 1) and a duration per task (seconds). The legacy form gives LogNormal map and reduce
counts, durations and sizes by ``*_avg``/``*_stddev``; the generic form a ``tasks`` list whose
``count``, ``time``, ``max_memory`` and ``max_vcores`` are samples: ``{val}`` (a constant),
``{val, std, dist}`` (``LOGNORM``, the default, or ``NORM``) or ``{discrete, weights}``. A
``mapreduce`` class (the default) asks for its reduces once its maps are done; a ``stream`` class
(or any other) asks for every task at once. Each job has an AM container (1024 MB, 1 vcore).
Ignored: the job's nominal ``duration``/``dur_*``, reservations, deadlines, priorities.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from emulator.scenario.distributions import LogNormal, Normal
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
from emulator.scenario.traces.sls import AM_SIZE, DEFAULT_NODE_MB, DEFAULT_NODE_VCORES

TOP_FIELDS = frozenset({"description", "num_nodes", "nodes_per_rack", "num_jobs", "rand_seed", "workloads"})
WORKLOAD_FIELDS = frozenset({
    "workload_name", "workload_weight", "queue_name", "job_classes", "time_distribution", "description",
})
CLASS_FIELDS = frozenset({
    "class_name", "class_weight", "mtasks_avg", "mtasks_stddev", "rtasks_avg", "rtasks_stddev", "dur_avg",
    "dur_stddev", "mtime_avg", "mtime_stddev", "rtime_avg", "rtime_stddev", "map_max_memory_avg",
    "map_max_memory_stddev", "reduce_max_memory_avg", "reduce_max_memory_stddev", "map_max_vcores_avg",
    "map_max_vcores_stddev", "reduce_max_vcores_avg", "reduce_max_vcores_stddev", "chance_of_reservation",
    "deadline_factor_avg", "deadline_factor_stddev", "user_name", "type", "deadline_factor", "duration",
    "reservation", "tasks", "params", "map_execution_type", "reduce_execution_type",
})
TASK_FIELDS = frozenset({"type", "count", "time", "max_memory", "max_vcores", "priority", "execution_type"})
SAMPLE_FIELDS = frozenset({"val", "std", "dist", "discrete", "weights"})
TIME_FIELDS = frozenset({"time", "weight", "jobs"})
# Bounds that keep every draw finite: a mean, and a deviation relative to it.
MAX_AVG = 1e15
MAX_SPREAD = 1e6


class Const:
    def __init__(self, value: float) -> None:
        self.value = value

    def draw(self, rng: random.Random) -> float:
        return self.value


class Discrete:
    def __init__(self, values: list[float], weights: list[float]) -> None:
        self.items = list(zip(weights, values, strict=True))

    def draw(self, rng: random.Random) -> float:
        return float(_weighted(rng, self.items)[1])


Draw = Const | Discrete | LogNormal | Normal
# A task type of a class: (type, count, duration s, memory MB, vcores, at least this many).
TaskDef = tuple[str, Draw, Draw, Draw, Draw, int]


def _spread(avg: float, std: float, where: Where, avg_name: str, std_name: str) -> None:
    if avg > MAX_AVG:
        raise where.error(avg_name, f"a number <= {MAX_AVG:g}", avg)
    if std > MAX_SPREAD * avg and avg > 0:
        short = avg_name.rsplit(".", 1)[-1]
        raise where.error(std_name, f"at most {MAX_SPREAD:g} x `{short}` ({avg:g})", std)


def _lognormal(
    obj: dict[str, Any], name: str, where: Where, prefix: str, default_avg: float | None = None
) -> Draw:
    avg = number(obj, f"{name}_avg", where, default_avg, prefix=prefix)
    std = number(obj, f"{name}_stddev", where, 0.0, prefix=prefix)
    _spread(avg, std, where, f"{prefix}{name}_avg", f"{prefix}{name}_stddev")
    return LogNormal(mean=avg, stddev=std) if avg > 0 else LogNormal(mean=1e-9, stddev=0.0)


def _sample(obj: dict[str, Any], key: str, where: Where, prefix: str, default: float) -> Draw:
    """A generic-form sample: ``{val}``, ``{val, std, dist}`` or ``{discrete, weights}``."""
    p = f"{prefix}{key}"
    if obj.get(key) is None:
        return Const(default)
    s = as_object(obj[key], where, p)
    for k in s:
        if k not in SAMPLE_FIELDS:
            raise where.error(f"{p}.{k}", "one of `val`, `std`, `dist`, `discrete`, `weights`")
    if s.get("val") is None:
        if s.get("discrete") is None:
            raise where.error(p, "`val` (with `std` and `dist`) or `discrete`", s)
        values = [number({"discrete": v}, "discrete", where, prefix=f"{p}.")
                  for v in as_list(s["discrete"], where, f"{p}.discrete")]
        weights = [number({"weights": w}, "weights", where, prefix=f"{p}.")
                   for w in as_list(s.get("weights", [1.0] * len(values)), where, f"{p}.weights")]
        if not values or len(weights) != len(values) or sum(weights) <= 0:
            raise where.error(f"{p}.weights", f"{len(values)} weights with a positive sum (one per value)")
        return Discrete(values, weights)
    val = number(s, "val", where, prefix=f"{p}.")
    if s.get("std") is None:
        _spread(val, 0.0, where, f"{p}.val", f"{p}.std")
        return Const(val)
    std = number(s, "std", where, prefix=f"{p}.")
    _spread(val, std, where, f"{p}.val", f"{p}.std")
    dist = text_field(s, "dist", where, "LOGNORM", prefix=f"{p}.")
    if dist not in ("LOGNORM", "NORM"):
        raise where.error(f"{p}.dist", "`LOGNORM` or `NORM`", dist)
    if val <= 0:
        return Const(val)
    return LogNormal(mean=val, stddev=std) if dist == "LOGNORM" else Normal(mean=val, stddev=std)


def _task_defs(cls: dict[str, Any], where: Where, cp: str, unknown: Unknown) -> tuple[str, list[TaskDef]]:
    """The class's AM type and task types, from either form."""
    if cls.get("tasks") is None:
        return "mapreduce", [
            ("map", _lognormal(cls, "mtasks", where, cp), _lognormal(cls, "mtime", where, cp),
             _lognormal(cls, "map_max_memory", where, cp, 1024.0),
             _lognormal(cls, "map_max_vcores", where, cp, 1.0), 1),
            ("reduce", _lognormal(cls, "rtasks", where, cp, 0.0), _lognormal(cls, "rtime", where, cp, 0.0),
             _lognormal(cls, "reduce_max_memory", where, cp, 1024.0),
             _lognormal(cls, "reduce_max_vcores", where, cp, 1.0), 0),
        ]
    defs: list[TaskDef] = []
    for t_i, t in enumerate(as_list(cls["tasks"], where, cp + "tasks")):
        tp = f"{cp}tasks[{t_i}]."
        task = as_object(t, where, tp[:-1])
        unknown.check(task, TASK_FIELDS, where, "workloads[].job_classes[].tasks[].")
        defs.append((text_field(task, "type", where, "map", prefix=tp),
                     _sample(task, "count", where, tp, 1.0), _sample(task, "time", where, tp, 0.0),
                     _sample(task, "max_memory", where, tp, 1024.0),
                     _sample(task, "max_vcores", where, tp, 1.0), 0))
    return text_field(cls, "type", where, "mapreduce", prefix=cp), defs


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
    budget.take(num_jobs, where, "num_jobs", "a task each at least")  # before anything is drawn
    budget.used = 0
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
            classes.append((number(cls, "class_weight", where, 1.0, prefix=cp), cp,
                            *_task_defs(cls, where, cp, unknown)))
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
        _, cp, am_type, defs = _weighted(rng, classes)
        submit = _submit_time(rng, times)
        job = TraceJob(f"job_{k}", pool, submit, [], am=AM_SIZE)
        for kind, count_d, time_d, mem_d, cpu_d, least in defs:
            n = max(least, round(count_d.draw(rng)))
            budget.take(n, where, _count_field(cp, kind, defs), f"job {k} draws {n:,} {kind} tasks")
            mb = max(1, round(mem_d.draw(rng)))
            vcores = max(1, round(cpu_d.draw(rng)))
            for _ in range(n):
                job.add_task(float(vcores), mb / MIB_PER_GIB, max(0.001, time_d.draw(rng)), kind)
        if am_type == "mapreduce":
            job.reduces_after_maps()
        jobs.append(job)
    nodes = [NodeGroup(num_nodes, DEFAULT_NODE_VCORES, DEFAULT_NODE_MB / MIB_PER_GIB)]
    notes = ["SYNTH: regenerated with Python's generator from rand_seed (not SLS's Java draws); "
             "the job's nominal duration, reservations and deadlines ignored"]
    return Trace(jobs, nodes, unknown.warnings, notes)


def _count_field(cp: str, kind: str, defs: list[TaskDef]) -> str:
    legacy = any(least for *_, least in defs)
    if legacy:
        return f"{cp}{'m' if kind == 'map' else 'r'}tasks_avg"
    index = next(i for i, d in enumerate(defs) if d[0] == kind)
    return f"{cp}tasks[{index}].count"


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
