"""The scenario file's ``[workload]``: pools, operations (with the order within a job), a replayed
trace and a Fair Scheduler queues file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

import msgspec

from emulator.scenario.bounds import (
    MAX_TRACE_BYTES,
    MAX_TRACE_TASKS,
    Base,
    Count,
    NonNegative,
    Positive,
    TaskCount,
)
from emulator.scenario.distributions import Arrivals, Distribution, Empirical
from emulator.scenario.usage import OperationUsage, TierName


class PoolConfig(Base, kw_only=True, frozen=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    weight: Positive = 1.0  # DRF divides the pool's dominant share by this
    parent: str = "root"  # the pool above it in the hierarchy
    # Min share: a pool below it is served first (YARN's "needy" pools).
    min_cpu: NonNegative = 0.0
    min_ram_gib: NonNegative = 0.0
    # Max: the most the pool (its operations and pools below) may hold at once; a task that would
    # take it past either waits (YARN's maxResources). Unset: no limit.
    max_cpu: Positive | None = None
    max_ram_gib: Positive | None = None


class OperationConfig(Base, kw_only=True, frozen=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    # Pools not declared in [[workload.pools]] are created under root with weight 1.
    pool: str = "default"
    # Per task; a distribution is drawn once per submitted operation (its tasks share one size)
    # and needs a `max` (or an empirical list) so that the check that it fits a node can be made.
    cpu: Positive | Distribution
    ram_gib: Positive | Distribution
    # Tasks per operation. `job_count` is the same field under the name the thesis's table uses
    # (it counts tasks, not jobs); give one of the two (or neither with `durations_s`).
    tasks: TaskCount | None = None
    job_count: TaskCount | None = None
    # Task durations: Normal(seconds_mean, seconds_deviation), a distribution (`seconds`), or each
    # task's own (`durations_s`, as a replayed trace gives them). Give one of the three.
    seconds_mean: Positive | None = None
    seconds_deviation: NonNegative = 0.0
    seconds: Distribution | None = None
    durations_s: list[Positive] | None = None
    submit_at_s: NonNegative = 0.0
    # Resubmit the same operation as soon as it finishes (a looping user).
    loop: bool = False
    # Submit `repeat` copies, one every `repeat_every_s`; or at the times of `arrivals` (a seeded
    # Poisson process or a recorded list, from `submit_at_s`).
    repeat: Count = 1
    repeat_every_s: NonNegative = 0.0
    arrivals: Arrivals | None = None
    weight: Positive = 1.0
    # The job this operation belongs to in jobs.csv (a replayed job whose tasks differ in size is
    # several operations); empty: the operation is its own job.
    job: str = ""
    # Order within a job: submitted once every task of the `after` operations completed and each
    # `after_start` operation has a task running (a job's AM container), not before submit_at_s.
    after: list[str] = []
    after_start: list[str] = []
    # A job's AM container: its one task runs until every other operation of its `job` completed
    # (its `durations_s` is then its ideal time only).
    lasts_for_job: bool = False
    # Borg priority tier and real usage (design.md §3b; emulator/scenario/usage.py).
    tier: TierName = "batch"
    usage: OperationUsage | None = None

    def __post_init__(self) -> None:
        if self.durations_s is not None:
            n = self.tasks if self.tasks is not None else self.job_count
            if n is not None and n != len(self.durations_s):
                raise ValueError(f"`tasks` ({n}) differs from the {len(self.durations_s)} `durations_s`")
        elif (self.tasks is None) == (self.job_count is None):
            raise ValueError("give the number of tasks as `tasks` (or its old name `job_count`), once")
        given = [f for f in ("seconds_mean", "seconds", "durations_s") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError("give the task durations once: `seconds_mean`, `seconds` or `durations_s`")
        if self.loop and self.task_count == 0:
            raise ValueError("a looping operation needs `tasks` >= 1")
        if self.arrivals is not None and (self.loop or self.repeat > 1):
            raise ValueError("`arrivals` replaces `repeat`/`loop`: give one of them")
        for name in ("cpu", "ram_gib"):
            value = getattr(self, name)
            if not isinstance(value, float | int) and value.largest() is None:
                raise ValueError(f"`{name}`: a size distribution needs `max` (a task must fit a node)")

    @property
    def task_count(self) -> int:
        if self.durations_s is not None:
            return len(self.durations_s)
        return self.tasks if self.tasks is not None else (self.job_count or 0)

    @property
    def instance_count(self) -> int:
        """How many timed submissions (a looping user's follow-ups not counted)."""
        return self.arrivals.count if self.arrivals is not None else self.repeat

    @property
    def largest_cpu(self) -> float:
        return _largest_size(self.cpu)

    @property
    def largest_ram_gib(self) -> float:
        return _largest_size(self.ram_gib)

    @property
    def smallest_cpu(self) -> float:
        return _smallest_size(self.cpu)

    @property
    def smallest_ram_gib(self) -> float:
        return _smallest_size(self.ram_gib)


def _largest_size(value: float | Distribution) -> float:
    if isinstance(value, float | int):
        return float(value)
    top = value.largest()
    assert top is not None  # checked in OperationConfig
    return top


def _smallest_size(value: float | Distribution) -> float:
    """A lower bound of a draw (for memory estimates: the smaller the tasks, the more run)."""
    if isinstance(value, float | int):
        return float(value)
    if isinstance(value, Empirical):
        return max(min(value.values), value.min or 0.0)
    return value.min or _largest_size(value) / 100


def scale_tasks(op: dict[str, Any], factor: float) -> None:
    """Scale an operation table's task count (under either of its names) in place."""
    key = "tasks" if "tasks" in op else "job_count"
    op[key] = max(1, round(op[key] * factor))


class TraceConfig(Base, kw_only=True, frozen=True):
    format: Literal["sls", "rumen", "synth", "google2011", "swf", "alibaba2018", "google2019"]
    path: Annotated[str, msgspec.Meta(min_length=1)]  # relative to the scenario file
    # Files read beside `path` (relative to the scenario file; empty: none): Google 2011's
    # machine_events (the cluster), Alibaba 2018's batch_instance.csv (each instance's own run),
    # Google 2019's collection_events (jobs' submit times and priorities).
    machine_events: str = ""
    instances: str = ""
    collections: str = ""
    # Pool for jobs without one (Google: tiers map to pools unless `pool` is given).
    pool: str = ""
    # Keep every n-th job / only jobs submitted in [start_s, start_s + span_s) after the trace's
    # first job, and at most max_jobs of them; `offset_s` is added to every submit time.
    sample: Count = 1
    start_s: NonNegative = 0.0
    span_s: Positive | None = None
    max_jobs: Count | None = None
    offset_s: NonNegative = 0.0
    # true: the first kept job is submitted at `offset_s` (the default for the cluster archives:
    # Google 2011 and 2019, Alibaba 2018, SWF); false:
    # submit times as SLS reads the trace (SLS and SYNTH absolute, Rumen's from its first job).
    rebase: bool | None = None
    # An AM container per job (SLS, Rumen, SYNTH: 1 vcore / 1 GiB, as SLS runs one): it is
    # requested first, and the job's tasks once it runs.
    am: bool = True
    # SLS: the trace's own AM types (`am.type`), each run as one of SLS's simulators: "mapreduce"
    # (reduces after maps), "dag" (each container after its request delay) or "stream"; as SLS's
    # `yarn.sls.am.type.NAME` names a simulator class. A job of another type is skipped (SLS too).
    am_types: dict[str, Literal["mapreduce", "dag", "stream"]] = {}
    # Multiply trace times (submits and durations) by this (0.1: ten times faster).
    time_scale: Positive = 1.0
    # SYNTH: generate with this seed instead of the file's `rand_seed`.
    seed: int | None = None
    # Google 2011 and 2019 (and Alibaba 2018's memory): requests are normalised to the largest
    # machine; these are its size.
    machine_cpu: Positive = 32.0
    machine_ram_gib: Positive = 128.0
    # Bounds checked while the trace is read, before anything is expanded (a few bytes can ask for
    # a billion tasks): tasks (containers) in the whole trace, and the file's size.
    max_tasks: Annotated[int, msgspec.Meta(ge=1, le=100_000_000)] = MAX_TRACE_TASKS
    max_bytes: Annotated[int, msgspec.Meta(ge=1, le=1 << 40)] = MAX_TRACE_BYTES


class WorkloadConfig(Base, kw_only=True, frozen=True):
    pools: list[PoolConfig] = []
    operations: list[OperationConfig] = []
    # Task durations ~ Normal(mean, deviation), truncated below at this many seconds.
    min_task_seconds: Positive = 1.0
    # A recorded trace replayed as operations besides those above (expanded when the scenario is
    # loaded; `emulator import` writes the same operations out as a scenario to inspect and edit).
    trace: TraceConfig | None = None
    # A YARN Fair Scheduler allocation file (fair-scheduler.xml, relative to the scenario file):
    # its queues become pools besides those above (replaced by them when the scenario is loaded).
    queues_file: str | None = None

    def __post_init__(self) -> None:
        names = [p.name for p in self.pools]
        dup = {n for n in names if names.count(n) > 1}
        if dup or "root" in names:
            raise ValueError(f"pool names must be unique and not `root`: {sorted(dup | {'root'})}")
        known = {"root", *names, *(o.pool for o in self.operations)}
        for p in self.pools:
            if p.parent not in known:
                raise ValueError(f"pool `{p.name}` has unknown parent `{p.parent}`")
        ops = [o.name for o in self.operations]
        dup = {n for n in ops if ops.count(n) > 1}
        if dup:
            raise ValueError(f"operation names must be unique: {sorted(dup)}")
        check_order(self.operations)


def check_order(operations: Sequence[OperationConfig]) -> None:
    """Every name in ``after``/``after_start`` is another operation, submitted once (no `repeat`,
    `loop` or `arrivals` on either side), and the order has no cycle."""
    by_name = {o.name: o for o in operations}
    for am in operations:
        if am.lasts_for_job:
            if not am.job or am.task_count != 1:
                raise ValueError(f"operation `{am.name}`: `lasts_for_job` needs a `job` and one task")
            for o in operations:
                if o.job == am.job:
                    _once(o, f"its job `{am.job}` has an AM (`lasts_for_job`)")
    ordered = [o for o in operations if o.after or o.after_start]
    if not ordered:
        return
    for op in ordered:
        for field, names in (("after", op.after), ("after_start", op.after_start)):
            for name in names:
                other = by_name.get(name)
                if other is None or name == op.name:
                    raise ValueError(f"operation `{op.name}`: `{field}` names `{name}`; expected another "
                                     "operation of the workload")
                _once(other, f"operation `{op.name}` waits for it")
        _once(op, "it waits for other operations")
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = " -> ".join([*path[path.index(name):], name])
            raise ValueError(f"operations wait for each other in a cycle: {cycle}")
        state[name] = 1
        op = by_name[name]
        for dep in (*op.after, *op.after_start):
            visit(dep, [*path, name])
        state[name] = 2

    for op in ordered:
        visit(op.name, [])


def _once(op: OperationConfig, why: str) -> None:
    if op.loop or op.repeat > 1 or op.arrivals is not None:
        raise ValueError(f"operation `{op.name}`: {why}, so it must be submitted once (no `repeat`, "
                         "`loop` or `arrivals`)")
