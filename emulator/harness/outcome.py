"""What a finished run leaves behind, typed: the results files are written from this alone."""

from __future__ import annotations

from typing import Any

import msgspec

from emulator.harness.invariants import InvariantSummary
from emulator.harness.restarts import RestartSummary
from emulator.harness.workers import DeadWorker
from emulator.measure.jobs import JobsReport
from emulator.measure.lag import LagReport
from emulator.measure.removals import RemovalSummary
from emulator.measure.sampler import SampleRow
from emulator.measure.timing import LatenessSummary
from emulator.measure.usage import UsageRow
from emulator.scenario.schema import Scenario
from emulator.transport.faulty import MessageFaultCounters
from nodemanager.stats import NodeCounters
from ringmon.ports import RingCounters
from rm import OperationView, RMSnapshot, Totals


class ShareMean(msgspec.Struct, frozen=True):
    """Mean dominant share and mean fair share over the measurement window's samples."""

    dominant: float
    fair: float
    samples: int


class RemovalRecord(msgspec.Struct, frozen=True, array_like=True):
    t_s: float
    false: bool  # removed although neither crashed nor stalled past the grace
    machine_id: int = 0
    latency_s: float | None = None  # since the crash, for crashed nodes


class Traffic(msgspec.Struct, frozen=True):
    messages: int
    bytes: int


class WorkerSummary(msgspec.Struct, frozen=True):
    """One node-hosting worker process of a TCP run (wall-clock figures)."""

    nodes: int
    cpu_s: float
    wall_s: float
    max_rss_kib: int
    lateness_s: LatenessSummary
    reconnects: int


class RunOutcome(msgspec.Struct):
    scenario: Scenario
    wall_s: float
    rm: RMSnapshot  # at the end
    operations: list[OperationView]  # live at the end
    rows: list[SampleRow]
    groups: dict[str, ShareMean]
    pools: dict[str, ShareMean]
    h1: float | None
    h2: float | None
    nodes: NodeCounters
    lateness: LatenessSummary
    removals: RemovalSummary
    removal_log: list[RemovalRecord]
    restarts: list[RestartSummary]
    to_rm: Traffic
    invariants: InvariantSummary | None = None
    message_faults: MessageFaultCounters | None = None
    ring: RingCounters | None = None
    liveness_lost: int = 0
    # Real-time runs: the RM's measured costs, and how far the emulator fell behind real time;
    # TCP runs: the node worker processes, and those that died.
    costs: dict[str, Any] | None = None
    lag: LagReport | None = None
    workers: list[WorkerSummary] = msgspec.field(default_factory=list)
    # Wall seconds each RM restart's journal replay took (timing.json).
    restart_replay_wall_s: list[float] = msgspec.field(default_factory=list)
    dead_workers: list[DeadWorker] = msgspec.field(default_factory=list)
    # Per job: submit, first container, finish; task waits. Scheduler decision latency (wall µs).
    jobs: JobsReport | None = None
    scheduler_decision_us: dict[str, float] | None = None
    # Stopped before its end (Ctrl-C / SIGTERM): the results cover [0, ended_at_s].
    partial: bool = False
    ended_at_s: float | None = None
    # A run taken over from its journal: what the earlier RM processes did, and when each died
    # and the next took over (None: this process ran the run from its start).
    earlier: Totals | None = None
    # Stopped early by an error (a journal write that failed): what it was; ``partial`` is set.
    failure: str | None = None
    # Per-pool and per-entry shares over time, one row per row of ``rows`` (emulator.measure.shares).
    share_columns: tuple[str, ...] = ()
    share_rows: list[tuple[float, ...]] = msgspec.field(default_factory=list)
    # Scenarios with usage models (in-memory runs): real usage beside allocation per interval.
    usage_rows: list[UsageRow] | None = None
    # Runs with a placement policy: nodes holding a container, mean and max over the window.
    machines_used: dict[str, float] | None = None

    def window_rows(self) -> list[SampleRow]:
        return [r for r in self.rows if r.t_s > self.scenario.run.warmup_s]
