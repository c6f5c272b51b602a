"""The scenario file schema: TOML decoded by msgspec into typed, validated config."""

from __future__ import annotations

import os
from typing import Annotated, Literal

import msgspec

# The sections kept in their own modules; their names are importable from here too (the schema's
# one public face).
from emulator.scenario.bounds import MAX_TRACE_BYTES as MAX_TRACE_BYTES
from emulator.scenario.bounds import MAX_TRACE_TASKS as MAX_TRACE_TASKS
from emulator.scenario.bounds import Base, Count, NonNegative, Positive, ResourceValue
from emulator.scenario.bounds import Dist as Dist
from emulator.scenario.bounds import largest as largest
from emulator.scenario.fault_schema import Fault, RMOverloadFault, WorkerKillFault
from emulator.scenario.fault_schema import MessageFault as MessageFault
from emulator.scenario.fault_schema import RMRestartFault as RMRestartFault
from emulator.scenario.workload_schema import OperationConfig as OperationConfig
from emulator.scenario.workload_schema import TraceConfig as TraceConfig
from emulator.scenario.workload_schema import WorkloadConfig
from emulator.scenario.workload_schema import scale_tasks as scale_tasks
from nodemanager.config import HeartbeatConfig
from ringmon.config import RingConfig
from rm import RMConfig, SchedulerConfig


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
    """`emulator recovery`: the scenario over these node counts and heartbeat modes (ignored by run;
    a study's `nodes` and `heartbeat.mode` axes do this for every other experiment)."""

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
