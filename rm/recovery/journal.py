"""The RM's durable record of work: an append-only write-ahead journal, for work-preserving restart.

A restarted RM learns nodes, free resources and running containers from the nodes' re-registrations
(as in YARN); what no node can tell it lives here: the pools, the submitted operations, which of
their tasks completed, and which container runs which task on which node. Records are written
*before* the RM acts on them (a launch is journaled before it is sent), one msgspec JSON object per
line, each flushed to the operating system at once: a crash of the RM process loses nothing that
it acted on. ``fsync=True`` also survives a machine crash, at a disk round-trip per record.

Recovery replays the file into ``JournalState`` and then rewrites it as a compact snapshot (written
beside it, then renamed over it). A torn last line (a crash in the middle of a write) ends the
replay there; a bad line with more after it is damage, not a crash: ``JournalCorrupt``.

A write that fails (disk full, file size limit) raises ``JournalWriteFailed``, and every later
append raises it again: the RM cannot keep its promise that what it acted on is durable, so the
run must stop (the harness stops it with partial results), not go on with half-made changes.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import IO

import msgspec

from rm.protocol import Resources
from rm.state.operations import OperationSpec


class JournalWriteFailed(Exception):
    """The journal could not be written: the run cannot go on (see the module's docstring)."""

    def __init__(self, path: Path, err: OSError) -> None:
        super().__init__(f"journal {path}: write failed: {err.strerror or err}")
        self.path = path


class JournalCorrupt(Exception):
    """A line in the middle of the journal is not a record: replaying past it would silently
    drop the work it and the lines after it describe."""


class Record(msgspec.Struct, tag=True, frozen=True, array_like=True):
    pass


class Epoch(Record, tag="epoch", frozen=True):
    """Written at every recovery: how many times the RM has started on this journal."""

    n: int


class PoolAdded(Record, tag="pool", frozen=True):
    name: str
    weight: float
    min_share: Resources
    parent: str
    max_cpu: float | None = None
    max_ram: float | None = None


class Submitted(Record, tag="op", frozen=True):
    op_id: int
    spec: OperationSpec
    at: float


class Started(Record, tag="start", frozen=True):
    """Container ``cid`` runs task ``task`` of operation ``op_id`` on the node at ``address``."""

    cid: int
    op_id: int
    task: int
    address: str
    at: float


class Ended(Record, tag="end", frozen=True):
    """Container ``cid`` is over: its task completed, or (``completed`` False) it is pending again."""

    cid: int
    completed: bool


class IdMark(Record, tag="ids", frozen=True):
    """Snapshot only: the next ids to hand out, so that ids never repeat across lives even when
    no live work is left to carry them."""

    next_op_id: int
    next_container_id: int


class Progress(Record, tag="done", frozen=True):
    """Snapshot only: the tasks of ``op_id`` that have completed."""

    op_id: int
    tasks: tuple[int, ...]


class Totals(Record, tag="totals", frozen=True):
    """Snapshot only: what the run's RM did before the snapshot, over every process that wrote
    this journal (tasks started and completed), and when each takeover happened (the process
    before died, the next one took over; emulated s)."""

    started: int
    completed: int
    takeovers: tuple[tuple[float, float], ...] = ()


AnyRecord = Epoch | IdMark | PoolAdded | Submitted | Started | Ended | Progress | Totals


class RunningTask(msgspec.Struct):
    op_id: int
    task: int
    address: str
    at: float


class OpState(msgspec.Struct):
    spec: OperationSpec
    at: float
    completed: set[int] = msgspec.field(default_factory=set)
    started_at: float | None = None


class JournalState(msgspec.Struct):
    """What replaying a journal gives: the work that was live when the RM stopped."""

    epoch: int = 0
    pools: list[PoolAdded] = msgspec.field(default_factory=list)
    operations: dict[int, OpState] = msgspec.field(default_factory=dict)
    running: dict[int, RunningTask] = msgspec.field(default_factory=dict)
    next_op_id: int = 1
    next_container_id: int = 1
    records: int = 0
    torn: bool = False
    # The whole run's history: tasks started and completed in all, and the takeovers.
    totals: Totals = msgspec.field(default_factory=lambda: Totals(0, 0))
    torn_line: int | None = None  # the torn last line's number, skipped

    def apply(self, rec: AnyRecord) -> None:
        self.records += 1
        match rec:
            case Started(cid=cid, op_id=op_id):
                t = self.totals
                self.totals = Totals(t.started + 1, t.completed, t.takeovers)
                op = self.operations.get(op_id)
                if op is not None:
                    self.running[cid] = RunningTask(op_id, rec.task, rec.address, rec.at)
                    if op.started_at is None:
                        op.started_at = rec.at
                self.next_container_id = max(self.next_container_id, cid + 1)
            case Ended(cid=cid, completed=completed):
                run = self.running.pop(cid, None)
                if run is not None and completed:
                    t = self.totals
                    self.totals = Totals(t.started, t.completed + 1, t.takeovers)
                    op = self.operations[run.op_id]
                    op.completed.add(run.task)
                    if len(op.completed) == len(op.spec.durations):
                        del self.operations[run.op_id]
            case Submitted(op_id=op_id):
                if rec.spec.durations:  # an empty operation finished as it was submitted
                    self.operations[op_id] = OpState(rec.spec, rec.at)
                self.next_op_id = max(self.next_op_id, op_id + 1)
            case Progress(op_id=op_id, tasks=tasks):
                self.operations[op_id].completed.update(tasks)
            case PoolAdded():
                self.pools.append(rec)
            case Epoch(n=n):
                self.epoch = n
            case Totals():
                self.totals = rec  # as of the snapshot: its Started records were restatements
            case IdMark():
                self.next_op_id = max(self.next_op_id, rec.next_op_id)
                self.next_container_id = max(self.next_container_id, rec.next_container_id)


class Journal:
    def __init__(self, path: Path | str, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._encoder = msgspec.json.Encoder()
        self._file: IO[bytes] | None = None
        # Records appended since the file was last rewritten as a snapshot (compaction trigger),
        # records appended in all, and how many times the file was rewritten.
        self.appended = 0
        self.appended_total = 0
        self.rewrites = 0
        self.failed: JournalWriteFailed | None = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("ab", buffering=0)

    @property
    def is_open(self) -> bool:
        return self._file is not None

    def append(self, rec: AnyRecord) -> None:
        if self.failed is not None:
            raise self.failed
        f = self._file
        if f is None:
            raise RuntimeError(f"journal {self.path} is not open")
        line = self._encoder.encode(rec) + b"\n"
        try:
            view = memoryview(line)
            while view:  # unbuffered: in the operating system when this returns
                # A write cut short (at a file size limit) says why only when the rest is written.
                n = f.write(view)
                if not n:
                    raise OSError(errno.EIO, "nothing written")
                view = view[n:]
            if self.fsync:
                os.fsync(f.fileno())
        except OSError as err:
            self.failed = JournalWriteFailed(self.path, err)
            raise self.failed from err
        self.appended += 1
        self.appended_total += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def read(self) -> JournalState:
        """Replay the file (missing = empty) into the state it describes. A bad last line is torn
        (``state.torn``) and skipped; a bad line before the last raises ``JournalCorrupt``."""
        state = JournalState()
        if not self.path.exists():
            return state
        decoder = msgspec.json.Decoder(AnyRecord)
        bad: tuple[int, str] | None = None
        with self.path.open("rb") as f:
            for number, line in enumerate(f, 1):
                if bad is not None:
                    raise JournalCorrupt(
                        f"{self.path}: line {bad[0]}: expected a journal record (a JSON array such as "
                        f'["start", ...]), got {bad[1]}; lines follow it, so it is damage, not a '
                        "write torn by a crash"
                    )
                try:
                    rec = decoder.decode(line)
                except msgspec.DecodeError as err:
                    bad = (number, f"{line[:60]!r} ({err})")
                    continue
                state.apply(rec)
        if bad is not None:
            state.torn, state.torn_line = True, bad[0]
        return state

    def rewrite(self, records: list[AnyRecord]) -> None:
        """Replace the file by ``records`` (a snapshot), atomically; the journal stays open."""
        was_open = self.is_open
        self.close()
        if self.failed is not None:
            raise self.failed
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with tmp.open("wb") as f:
                for rec in records:
                    f.write(self._encoder.encode(rec) + b"\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as err:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)  # the old file is whole: rename is the commit point
            self.failed = JournalWriteFailed(self.path, err)
            raise self.failed from err
        self.appended = 0
        self.rewrites += 1
        if was_open:
            self.open()
