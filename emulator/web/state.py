"""What the status page watches: one run in progress (or finished), plus the live-only figures.

``LiveRun.attach`` is the runner's start hook. From then on it follows the run through the
sampler's rows (a few extra per-interval columns the results files do not have), the RM's
node-lost listener (removals, detection latency of injected crashes) and the event log.
Everything here is read on the run's own event loop, so no locking is needed.
"""

from __future__ import annotations

import enum
import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import msgspec

from emulator.harness.nodeproc import NodeProcess
from emulator.harness.rmside import RMSide
from emulator.measure.sampler import COLUMNS, SampleRow
from emulator.measure.usage import USAGE_COLUMNS
from emulator.scenario.schema import Scenario
from emulator.time.clock import LoopClock
from emulator.time.pacing import PacedClock
from emulator.web.events import EventBuffer
from rm import Log, NodeEvent, PendingReasons, RMObserver

# Per-interval columns the page adds to the sampler's: RM busy fraction (emulated service time
# per emulated second) of each queue.
EXTRA_COLUMNS = ("rm_busy_fraction", "scheduler_busy_fraction")
SERIES_COLUMNS = (*COLUMNS, *EXTRA_COLUMNS)
M_I, A_I, S_I = COLUMNS.index("m_i"), COLUMNS.index("a_i"), COLUMNS.index("s_i")

# Upper bounds of the detection-latency histogram, emulated seconds.
LATENCY_BUCKETS_S = (1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0, 600.0)


class Phase(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"


@dataclass
class Injected:
    """A fault on one node: injected from the page, or a crash fault of the scenario."""

    kind: str  # "crashed" | "paused"
    at_s: float
    until_s: float | None = None
    source: str = "page"  # "page" | "scenario"


@dataclass
class Removal:
    machine_id: int
    address: str
    reason: str
    t_s: float
    injected: str | None  # what we did to it, None for a removal of a node nobody touched


@dataclass
class LatencyHistogram:
    buckets: tuple[float, ...] = LATENCY_BUCKETS_S
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    sum: float = 0.0
    count: int = 0
    values: deque[float] = field(default_factory=lambda: deque(maxlen=1000))

    def observe(self, v: float) -> None:
        self.count += 1
        self.sum += v
        self.values.append(v)
        for i, edge in enumerate(self.buckets):
            if v <= edge:
                self.counts[i] += 1
                return
        self.counts[-1] += 1


@dataclass
class Attached:
    """The run being watched: its RM side, clock and log, and its nodes when they are in this
    process (None when they live elsewhere, e.g. an RM serving remote nodes)."""

    side: RMSide
    clock: LoopClock
    log: Log
    processes: list[NodeProcess] | None


class LiveRun(RMObserver):
    def __init__(self, scenario: Scenario, allow_control: bool = False) -> None:
        self.scenario = scenario
        self.allow_control = allow_control
        # Control requests must carry it (``web.guard``); printed on the terminal, fetched by the page.
        self.control_token = secrets.token_urlsafe(24) if allow_control else ""
        self.events = EventBuffer()
        self.run: Attached | None = None
        self.clock: PacedClock | None = None
        self.finished = False
        self.summary: dict[str, Any] | None = None
        self.series: list[tuple[float, ...]] = []
        self.injected: dict[str, Injected] = {}
        self.removals: deque[Removal] = deque(maxlen=2000)
        self.removals_total = 0
        # Nodes removed and not registered again since (the ring's "lost", /metrics' lost now).
        self.gone: set[str] = set()
        self.false_removals = 0
        # Nodes the scenario's own faults hit, by kind (the page's are in ``injected``).
        self.scenario_faults: dict[str, int] = {"crashed": 0, "paused": 0}
        self.detection = LatencyHistogram()
        self.results_dir: str | None = None
        self.columns: tuple[str, ...] = SERIES_COLUMNS
        self._prev: tuple[float, float, float] = (0.0, 0.0, 0.0)
        # (emulated time, pending reasons by operation id): the last answer (web.views).
        self.pending_memo: tuple[float, dict[int, PendingReasons]] | None = None

    # ---- wiring -------------------------------------------------------------------------

    def attach(self, side: RMSide, clock: LoopClock, log: Log, processes: list[NodeProcess] | None) -> None:
        """Follow a run from its start (the runner's start hook)."""
        self.run = Attached(side, clock, log, processes)
        # The run's per-pool and per-entry share columns follow (its sampler listener runs first).
        usage = tuple(f"usage:{c}" for c in USAGE_COLUMNS[1:]) if side.usage is not None else ()
        self.columns = (*SERIES_COLUMNS, *side.shares.columns, *usage)
        self.clock = clock if isinstance(clock, PacedClock) else None
        side.on_sample(self._on_row)
        side.rm.observe(self)
        self.events.listeners.append(self._on_event)

    def finish(self, summary: dict[str, Any] | None = None) -> None:
        """The run is over; ``summary``: its summary.json document, whose whole-run figures the
        page then shows (its running h1/h2 are computed apart: without the intervals a real-time
        run lagged in set aside and, over TCP, without the workers' per-interval reports)."""
        self.summary = summary
        self.finished = True

    @property
    def phase(self) -> Phase:
        if self.finished:
            return Phase.FINISHED
        if self.run is None:
            return Phase.STARTING
        if self.clock is not None and self.clock.paused:
            return Phase.PAUSED
        return Phase.RUNNING

    def now(self) -> float:
        if self.run is None:
            return 0.0
        if self.finished:
            return self.scenario.run.duration_s
        return float(self.run.clock.now())

    def log(self, event: str, **fields: Any) -> None:
        """Record a control action in the run's event log (and so in events.jsonl)."""
        if self.run is not None:
            self.run.log.info(event, **fields)
        else:
            self.events.add({"t": self.now(), "event": event, "level": "info", **fields})

    # ---- listeners ----------------------------------------------------------------------

    def _on_row(self, row: SampleRow) -> None:
        assert self.run is not None
        self._settle_previous()
        snap = self.run.side.rm.snapshot()
        busy_in, busy_ev = snap.inbound.busy_s, snap.scheduler.busy_s
        prev_t, prev_in, prev_ev = self._prev
        dt = row.t_s - prev_t
        self._prev = (row.t_s, busy_in, busy_ev)
        extra = ((busy_in - prev_in) / dt if dt > 0 else 0.0, (busy_ev - prev_ev) / dt if dt > 0 else 0.0)
        shares = self.run.side.shares.rows[-1] if self.run.side.shares.rows else ()
        usage = self.run.side.usage
        real = msgspec.structs.astuple(usage.rows[-1])[1:] if usage is not None and usage.rows else ()
        self.series.append((*_values(row), *extra, *shares, *real))

    def _settle_previous(self) -> None:
        """The previous point's m_i, a_i and s_i as the sampler settled them when it took this row
        (the answers and updates to that interval's heartbeats that came since); the stream sends
        that point again."""
        assert self.run is not None
        rows = self.run.side.sampler.rows
        if len(rows) < 2 or not self.series or self.series[-1][0] != rows[-2].t_s:
            return
        point = list(self.series[-1])
        settled = rows[-2]
        point[M_I], point[A_I], point[S_I] = settled.m_i, settled.a_i, settled.s_i
        self.series[-1] = tuple(point)

    def node_registered(self, ev: NodeEvent) -> None:
        self.gone.discard(ev.address)

    def node_lost(self, ev: NodeEvent) -> None:
        # The run's removal log (an earlier observer) has judged this removal already: the page
        # takes its verdict and latency, so page and summary.json count each removal once alike.
        assert self.run is not None
        now = self.now()
        hit = self.injected.get(ev.address)
        self.removals_total += 1
        self.gone.add(ev.address)
        log = self.run.side.removals
        record = log.removals[-1] if log.removals and log.removals[-1].address == ev.address else None
        if record is not None:
            self.false_removals += log.is_false(record)
            if record.latency_s is not None:
                self.detection.observe(record.latency_s)
        elif hit is None:
            self.false_removals += 1
        self.removals.append(Removal(ev.machine_id, ev.address, ev.reason, now, hit.kind if hit else None))

    def _on_event(self, event: dict[str, Any]) -> None:
        # The scenario's own crashes show on the ring and in the node table like the page's.
        if event.get("event") != "fault.injected":
            return
        kind = str(event.get("kind", "")).lower()
        nodes = event.get("nodes", ())
        at = float(event.get("at_s", event.get("t", 0.0)))
        if "crash" in kind:
            for address in nodes:
                if address not in self.injected:
                    self.injected[address] = Injected("crashed", at, source="scenario")
            self.scenario_faults["crashed"] += len(nodes)
        elif "pause" in kind:
            self.scenario_faults["paused"] += len(nodes)

    def fault_counts(self) -> dict[str, dict[str, int]]:
        """Nodes crashed / paused now by the page, and in total by the scenario's faults."""
        page = {"crashed": 0, "paused": 0}
        for hit in self.injected.values():
            if hit.source == "page":
                page[hit.kind] = page.get(hit.kind, 0) + 1
        return {"page": page, "scenario": dict(self.scenario_faults)}

    # ---- series ---------------------------------------------------------------------------

    def series_since(self, t: float) -> dict[str, list[float | None]]:
        rows = [r for r in self.series if r[0] > t] if t >= 0 else self.series
        return {name: [r[i] if i < len(r) else None for r in rows] for i, name in enumerate(self.columns)}


def _values(row: SampleRow) -> tuple[float, ...]:
    values: tuple[float, ...] = msgspec.structs.astuple(row)
    return values
