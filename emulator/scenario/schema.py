"""The scenario file schema: TOML decoded by msgspec into typed, validated config."""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

import msgspec

from emulator.scenario.distributions import Arrivals, Distribution, Empirical
from emulator.scenario.order import check_order
from emulator.scenario.usage import OperationUsage, TierName
from nodemanager.config import HeartbeatConfig
from ringmon.config import RingConfig
from rm.config import RMConfig
from rm.protocol import MAX_NODE_RESOURCE
from rm.scheduler.config import SchedulerConfig

# Upper bounds keep infinities (and absurd values) out at the edge; NaN fails every bound.
LIMIT = 1e9
Positive = Annotated[float, msgspec.Meta(gt=0, le=LIMIT)]
NonNegative = Annotated[float, msgspec.Meta(ge=0, le=LIMIT)]
Count = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]
# [workload.trace]'s default bounds (the trace readers' too): tasks a trace may expand into, bytes
# its file may hold.
MAX_TRACE_TASKS = 2_000_000
MAX_TRACE_BYTES = 1 << 30
Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]
TaskCount = Annotated[int, msgspec.Meta(ge=0, le=10_000_000)]
# What a node may declare: the RM refuses a registration outside these bounds.
NodeResource = Annotated[float, msgspec.Meta(gt=0, le=MAX_NODE_RESOURCE)]
NodeResourceInt = Annotated[int, msgspec.Meta(ge=1, le=int(MAX_NODE_RESOURCE))]


class Base(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    pass


class Dist(Base, kw_only=True, frozen=True):
    """A seeded random value; give exactly one of the fields."""

    uniform: tuple[NodeResource, NodeResource] | None = None
    uniform_int: tuple[NodeResourceInt, NodeResourceInt] | None = None
    choice: Annotated[list[NodeResource], msgspec.Meta(min_length=1)] | None = None

    def __post_init__(self) -> None:
        given = [f for f in ("uniform", "uniform_int", "choice") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of `uniform`, `uniform_int`, `choice`")
        for name in ("uniform", "uniform_int"):
            rng = getattr(self, name)
            if rng is not None and not (0 < rng[0] <= rng[1]):
                raise ValueError(f"`{name}` needs 0 < low <= high, got {list(rng)}")

    def largest(self) -> float:
        """The largest value a draw can give."""
        if self.uniform is not None:
            return self.uniform[1]
        if self.uniform_int is not None:
            return float(self.uniform_int[1])
        assert self.choice is not None
        return max(self.choice)


ResourceValue = NodeResource | Dist


def largest(value: float | Dist) -> float:
    return value.largest() if isinstance(value, Dist) else value


class NodeGroup(Base, kw_only=True, frozen=True):
    """``count`` nodes; a fixed value per resource or a seeded distribution."""

    count: Count = 1  # nodes in the group
    cpu: ResourceValue  # cores per node
    ram_gib: ResourceValue  # memory per node, GiB
    # Node addresses are NAME-GROUP-NUMBER.
    name: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]+$")] = "node"


class ClusterConfig(Base, kw_only=True, frozen=True):
    nodes: Annotated[list[NodeGroup], msgspec.Meta(min_length=1)]  # groups of identical nodes
    # Nodes register at random times over this many seconds (a cluster coming up; kwok's node
    # creation rate) instead of within the first heartbeat interval; each then beats on its own phase.
    join_over_s: Annotated[float, msgspec.Meta(ge=0, le=86400)] = 0.0


class PoolConfig(Base, kw_only=True, frozen=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    weight: Positive = 1.0  # DRF divides the pool's dominant share by this
    parent: str = "root"  # the pool above it in the hierarchy
    # Min share: a pool below it is served first (YARN's "needy" pools).
    min_cpu: NonNegative = 0.0
    min_ram_gib: NonNegative = 0.0


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


class NodeSelector(Base, kw_only=True, frozen=True):
    """Which nodes a fault hits: explicit addresses, a seeded random fraction, or a count."""

    nodes: list[str] = []  # node addresses, e.g. "node-0-00003"
    fraction: Fraction | None = None  # a seeded random fraction of the nodes
    count: Count | None = None  # this many seeded random nodes

    def __post_init__(self) -> None:
        if sum(x is not None and x != [] for x in (self.nodes, self.fraction, self.count)) != 1:
            raise ValueError("give exactly one of `nodes`, `fraction`, `count`")


class HealthFault(NodeSelector, kw_only=True, tag_field="kind", tag="health", frozen=True):
    """Flip the health flag of the selected nodes at ``at_s``."""

    at_s: NonNegative  # when, in emulated seconds from the start
    healthy: bool = False


class MessageFault(Base, kw_only=True, tag_field="kind", tag="messages", frozen=True):
    """Between ``at_s`` and ``at_s + duration_s``, disturb messages (of ``types``, or all)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    duration_s: Positive
    loss: Fraction = 0.0
    duplicate: Fraction = 0.0
    reorder: Fraction = 0.0
    # Each affected message is delayed by a uniform draw in [0, delay_s] (which also reorders).
    delay_s: NonNegative = 0.0
    # Message type names, e.g. ["LaunchContainers", "HeartbeatResponse"]; empty means all.
    types: list[str] = []
    direction: Literal["to_rm", "to_node", "both"] = "both"




class CrashFault(NodeSelector, kw_only=True, tag_field="kind", tag="crash", frozen=True):
    """The selected nodes die silently at ``at_s`` (no heartbeats, no liveness, no answers).
    ``consecutive``: ``count`` nodes with consecutive machine ids (a rack), from ``first_id`` or a
    seeded start. ``rejoin_after_s``: each restarts as a fresh process that long afterwards."""

    at_s: NonNegative  # when, in emulated seconds from the start
    consecutive: bool = False
    first_id: Annotated[int, msgspec.Meta(ge=1)] | None = None
    rejoin_after_s: Positive | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.consecutive and self.count is None:
            raise ValueError("`consecutive` needs `count`")
        if self.first_id is not None and not self.consecutive:
            raise ValueError("`first_id` needs `consecutive = true`")


class PauseFault(NodeSelector, kw_only=True, tag_field="kind", tag="pause", frozen=True):
    """The selected nodes' event loops stall at ``at_s`` for ``duration_s`` (or a seeded uniform
    duration in [duration_s, duration_max_s] per node)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    duration_s: Positive
    duration_max_s: Positive | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.duration_max_s is not None and self.duration_max_s < self.duration_s:
            raise ValueError("`duration_max_s` must be >= `duration_s`")


class LivenessLossFault(Base, kw_only=True, tag_field="kind", tag="liveness_loss", frozen=True):
    """From ``at_s`` (for ``duration_s``, or to the end) drop this fraction of ring liveness
    messages between nodes (seeded)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    fraction: Fraction
    duration_s: Positive | None = None


class RMStallFault(Base, kw_only=True, tag_field="kind", tag="rm_stall", frozen=True):
    """The RM handles no node message for ``duration_s`` (they queue)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    duration_s: Positive


class RMOverloadFault(Base, kw_only=True, tag_field="kind", tag="rm_overload", frozen=True):
    """Multiply the RM's ``[rm.service_time]`` costs by ``factor`` from ``at_s`` (for
    ``duration_s``, or to the end). Needs non-zero service-time costs."""

    at_s: NonNegative  # when, in emulated seconds from the start
    factor: Positive
    duration_s: Positive | None = None


class RMRestartFault(Base, kw_only=True, tag_field="kind", tag="rm_restart", frozen=True):
    """The RM process dies at ``at_s`` and a new one starts ``downtime_s`` later from the journal;
    nodes keep their containers, reconnect and resync (work-preserving restart)."""

    at_s: NonNegative  # when, in emulated seconds from the start
    downtime_s: NonNegative = 5.0


class WorkerKillFault(Base, kw_only=True, tag_field="kind", tag="worker_kill", frozen=True):
    """TCP: the node-hosting process ``worker`` (0-based) is killed with SIGKILL at ``at_s``, all
    its nodes with it (a correlated crash, as when a machine fails); the ring must find them."""

    at_s: NonNegative  # when, in emulated seconds from the start
    worker: Annotated[int, msgspec.Meta(ge=0)] = 0


Fault = (
    HealthFault | MessageFault | CrashFault | PauseFault | LivenessLossFault | RMStallFault | RMOverloadFault
    | RMRestartFault | WorkerKillFault
)


class TransportConfig(Base, kw_only=True, frozen=True):
    kind: Literal["memory", "tcp"] = "memory"
    # One-way delay added to every message, in emulated seconds.
    latency_s: NonNegative = 0.0
    # tcp: the RM listens on host:port (0 = any free port); nodes run in `workers` processes
    # ("auto": one per core this process may use, less the RM's own).
    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 0
    workers: Count | Literal["auto"] = 1
    max_frame_bytes: Annotated[int, msgspec.Meta(ge=64)] = 1 << 20
    # tcp: wall seconds a connection may stay open without a node registering on it (slowloris),
    # and connections the RM holds at once (a newcomer evicts the longest-idle unregistered one;
    # refused only when all are registered). See docs/security.md.
    handshake_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 10.0
    max_connections: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 1024
    # memory: ring liveness that no fault touches (no loss, latency or pause) is a timestamp the
    # watcher reads ("timestamps", the same decisions at a fraction of the cost) or a message.
    ring_liveness: Literal["timestamps", "messages"] = "timestamps"

    def __post_init__(self) -> None:
        if self.kind == "tcp" and self.latency_s > 0:
            raise ValueError("`latency_s` applies to the memory transport only")

    def worker_processes(self) -> int:
        """How many node-hosting processes a TCP run starts (``workers``, "auto" resolved here)."""
        return self.workers if self.workers != "auto" else auto_workers()


def auto_workers() -> int:
    """Cores this process may run on, less one for the RM (at least one worker)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


class RunConfig(Base, kw_only=True, frozen=True):
    duration_s: Positive  # emulated seconds the run lasts
    # virtual: deterministic, as fast as the CPU allows; realtime: paced by the wall clock (uvloop).
    clock: Literal["virtual", "realtime"] = "virtual"
    # Emulated seconds per wall second, realtime clock only.
    speed: Positive = 1.0
    seed: int = 0  # every random draw of the run follows from it
    # Averages (utilisation, h1/h2, shares) exclude [0, warmup_s).
    warmup_s: NonNegative = 0.0
    # Time-series row period; None means the heartbeat interval.
    sample_interval_s: Positive | None = None
    # Real time: a run whose processes fall behind by more than this fraction of the heartbeat
    # interval (99th percentile) is marked overloaded, its results not valid; intervals in which a
    # process fell that far behind are set aside from h1/h2.
    lag_threshold: Annotated[float, msgspec.Meta(gt=0, le=10)] = 0.1

    def __post_init__(self) -> None:
        if self.warmup_s >= self.duration_s:
            raise ValueError("`warmup_s` must be smaller than `duration_s`")


class SweepConfig(Base, kw_only=True, frozen=True):
    """`emulator sweep`: the scenario over these node counts and heartbeat modes (ignored by run)."""

    nodes: Annotated[list[Count], msgspec.Meta(min_length=1)]
    modes: Annotated[list[Literal["periodic", "delta"]], msgspec.Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: ["periodic", "delta"]
    )
    # Scale every operation's `tasks` with the node count (E2: t = n·c·l/a tasks per job).
    scale_workload: bool = True
    threshold: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.99


class Scenario(Base, kw_only=True, frozen=True):
    name: str = ""  # shown in the summary, the report and the status page
    description: str = ""  # what the scenario shows, for its readers
    cluster: ClusterConfig
    heartbeat: HeartbeatConfig = msgspec.field(default_factory=HeartbeatConfig)
    scheduler: SchedulerConfig = msgspec.field(default_factory=SchedulerConfig)
    rm: RMConfig = msgspec.field(default_factory=RMConfig)
    transport: TransportConfig = msgspec.field(default_factory=TransportConfig)
    workload: WorkloadConfig = msgspec.field(default_factory=WorkloadConfig)
    faults: list[Fault] = []
    ring: RingConfig = msgspec.field(default_factory=RingConfig)
    run: RunConfig
    sweep: SweepConfig | None = None

    def __post_init__(self) -> None:
        if self.transport.kind == "tcp" and self.run.clock != "realtime":
            raise ValueError('`transport.kind = "tcp"` needs `run.clock = "realtime"`')
        packing = self.scheduler.packing
        pools = {"root", *(p.name for p in self.workload.pools), *(o.pool for o in self.workload.operations)}
        unknown = sorted(set(packing.disabled_pools) - pools)
        if unknown:
            raise ValueError(f"`scheduler.packing.disabled_pools` names unknown pools: {unknown}")
        ops = {o.name for o in self.workload.operations}
        unknown = sorted(set(packing.disabled_operations) - ops)
        if unknown:
            raise ValueError(f"`scheduler.packing.disabled_operations` names unknown operations: {unknown}")
        if self.scheduler.placement.overcommit > self.heartbeat.overcommit:
            raise ValueError(
                f"`scheduler.placement.overcommit` = {self.scheduler.placement.overcommit:g} needs nodes "
                f"that admit it: set `heartbeat.overcommit` >= it (now {self.heartbeat.overcommit:g})"
            )
        if self.scheduler.placement.overcommit > 1 and self.scheduler.placement.policy == "default":
            raise ValueError("`scheduler.placement.overcommit` needs a placement policy other than "
                             "`default` (`scheduler.placement.policy`)")
        if self.scheduler.admission.method != "request" and self.scheduler.placement.policy == "default":
            raise ValueError("`scheduler.admission.method` needs a placement policy other than "
                             "`default` (`scheduler.placement.policy`)")
        if self.rm.service_time.is_zero() and any(isinstance(f, RMOverloadFault) for f in self.faults):
            raise ValueError("an `rm_overload` fault needs non-zero `[rm.service_time]` costs")
        if self.rm.journal is False and any(isinstance(f, RMRestartFault) for f in self.faults):
            raise ValueError("an `rm_restart` fault needs the journal: remove `rm.journal = false`")
        for f in self.faults:
            if isinstance(f, WorkerKillFault):
                if self.transport.kind != "tcp":
                    raise ValueError('a `worker_kill` fault needs worker processes: `transport.kind = "tcp"`')
                procs = self.transport.worker_processes()
                if f.worker >= procs:
                    raise ValueError(f"`worker_kill`: worker {f.worker} of {procs} "
                                     "(`transport.workers`; workers count from 0)")

    @property
    def journaled(self) -> bool:
        """Whether the RM keeps a journal (asked for, or needed by an ``rm_restart`` fault)."""
        if self.rm.journal is not None:
            return self.rm.journal
        return any(isinstance(f, RMRestartFault) for f in self.faults)

    @property
    def ring_enabled(self) -> bool:
        return self.ring.is_enabled(self.heartbeat.mode)

    @property
    def node_count(self) -> int:
        return sum(g.count for g in self.cluster.nodes)

    @property
    def sample_interval_s(self) -> float:
        return self.run.sample_interval_s or self.heartbeat.interval_s
