"""Work-preserving RM restarts, as the harness does and measures them: it kills the RM (every
connection drops), starts a new one from the journal after the downtime, and records when every
live node was back and scheduling resumed, what the journal replay cost, and how many containers
were kept or run again."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import msgspec

from emulator.scenario.schema import Scenario
from emulator.time.clock import LoopClock, wall_time
from rm import Journal, NodeEvent, Recovery, ResourceManager, RMObserver


class JournalInUse(Exception):
    """Another run is writing the journal in this directory."""


def scenario_journal(
    scenario: Scenario, directory: Path | None, stack: contextlib.ExitStack[Any]
) -> Journal | None:
    """The RM's journal for ``scenario`` (None when it keeps none): ``rm-journal.jsonl`` in
    ``directory``, or in a temporary directory removed when ``stack`` closes; closed with it."""
    if not scenario.journaled:
        return None
    if directory is None:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hbemu-journal-")))
    journal = Journal(directory / "rm-journal.jsonl", fsync=scenario.rm.journal_fsync)
    stack.callback(journal.close)
    return journal


class Listener(Protocol):
    """The transport's RM side: stop serving when the RM dies, serve again when it is back."""

    def drop_all(self) -> None: ...

    def listen(self) -> None: ...


class RestartSummary(msgspec.Struct, frozen=True):
    crashed_at_s: float
    up_at_s: float | None
    nodes_expected: int
    nodes_back: int
    # From the new RM's start: every live node re-registered, and scheduling resumed.
    all_nodes_back_s: float | None
    scheduling_resumed_s: float | None
    recovery_s: float | None
    journal_records: int
    journal_bytes: int
    journal_torn: bool
    operations_recovered: int
    containers_waiting: int
    containers_kept: int
    containers_rerun: int


class RestartRecord:
    __slots__ = (
        "back", "crashed_at", "expected_nodes", "journal_bytes", "nodes_back_at", "recovery", "replay_wall_s",
        "up_at",
    )

    def __init__(self, crashed_at: float) -> None:
        self.crashed_at = crashed_at
        self.up_at: float | None = None
        self.expected_nodes = 0
        self.back: set[str] = set()
        self.nodes_back_at: float | None = None
        self.recovery: Recovery | None = None
        self.replay_wall_s = 0.0
        self.journal_bytes = 0

    def summary(self) -> RestartSummary:
        rec = self.recovery.stats if self.recovery is not None else None
        resumed = rec.finished_at if rec is not None else None
        done = None
        if self.up_at is not None and self.nodes_back_at is not None and resumed is not None:
            done = max(self.nodes_back_at, resumed) - self.up_at
        return RestartSummary(
            crashed_at_s=round(self.crashed_at, 6),
            up_at_s=_r(self.up_at),
            nodes_expected=self.expected_nodes,
            nodes_back=len(self.back),
            all_nodes_back_s=_r(_minus(self.nodes_back_at, self.up_at)),
            scheduling_resumed_s=_r(_minus(resumed, self.up_at)),
            recovery_s=_r(done),
            journal_records=rec.journal_records if rec else 0,
            journal_bytes=self.journal_bytes,
            journal_torn=rec.torn if rec else False,
            operations_recovered=rec.operations if rec else 0,
            containers_waiting=rec.waiting if rec else 0,
            containers_kept=rec.claimed if rec else 0,
            containers_rerun=rec.requeued if rec else 0,
        )


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


class RestartLog(RMObserver):
    """Watches one RM across its lives; ``restart(downtime_s)`` is the ``rm_restart`` fault."""

    def __init__(
        self, rm: ResourceManager, clock: LoopClock, live_nodes: Callable[[], int], listener: Listener
    ) -> None:
        """``live_nodes()``: how many nodes should come back."""
        self._rm = rm
        self._clock = clock
        self._live_nodes = live_nodes
        self._listener = listener
        self.records: list[RestartRecord] = []
        rm.observe(self)

    def restart(self, downtime_s: float) -> None:
        rm = self._rm
        if not rm.up:
            return
        rm.crash()
        self._listener.drop_all()
        self.records.append(RestartRecord(self._clock.now()))
        self._clock.call_later(downtime_s, self._up)

    def resume(self, died_at_s: float) -> None:
        """This process takes over from an earlier RM process that died at ``died_at_s``:
        recover from the journal now."""
        self.records.append(RestartRecord(died_at_s))
        self._up(listen=False, died_at=died_at_s)

    def _up(self, listen: bool = True, died_at: float | None = None) -> None:
        rm = self._rm
        rec = self.records[-1]
        rec.up_at = self._clock.now()
        rec.expected_nodes = self._live_nodes()
        if rm.journal is not None and rm.journal.path.exists():
            rec.journal_bytes = rm.journal.path.stat().st_size
        started = wall_time()
        rec.recovery = rm.recover(died_at)
        rec.replay_wall_s = wall_time() - started
        if listen:
            self._listener.listen()

    def node_registered(self, ev: NodeEvent) -> None:
        if not self.records:
            return
        rec = self.records[-1]
        if rec.up_at is None or rec.nodes_back_at is not None:
            return
        rec.back.add(ev.address)
        if rec.expected_nodes and len(rec.back) >= rec.expected_nodes:  # 0: not known (an RM alone)
            rec.nodes_back_at = self._clock.now()

    def summary(self) -> list[RestartSummary]:
        return [r.summary() for r in self.records]

    def replay_walls(self) -> list[float]:
        """Wall seconds each restart's journal replay took (timing, not part of the summary)."""
        return [round(r.replay_wall_s, 6) for r in self.records]
