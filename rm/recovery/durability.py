"""The RM's use of its journal: records written before the change they describe, compaction once
the change is made, a write that fails stops the RM, and the run's totals across RM processes.

``rm.recovery.journal`` is the file format and its replay; this is the policy around it, kept out of the
ResourceManager shell. The journal is optional: without one every call here does nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from rm.counters import RMCounters
from rm.ports import Clock, Log
from rm.recovery.journal import AnyRecord, Journal, JournalState, JournalWriteFailed, Totals

# Compact the journal when it holds this many times more records than a snapshot would.
COMPACT_RATIO = 4
COMPACT_MIN = 100_000


class Durability:
    def __init__(
        self,
        journal: Journal | None,
        clock: Clock,
        log: Log,
        counters: RMCounters,
        snapshot: Callable[[], list[AnyRecord]],
        acting: Callable[[], bool],
        stop: Callable[[], None],
        taking_over: bool,
    ) -> None:
        """``snapshot()``: the live work as records; ``acting()``: the RM is up and not stopped;
        ``stop()``: stop the RM (a write failed); ``taking_over``: this process takes the run
        over from an earlier one (its first recovery reads what that one did)."""
        self.journal = journal
        self._clock = clock
        self._log = log
        self._counters = counters
        self._snapshot = snapshot
        self._acting = acting
        self._stop = stop
        self._compact_after = COMPACT_MIN
        self._compacting = False
        self._failed = False
        # What earlier RM processes of this run did (from the journal when this one takes over).
        self.earlier = Totals(0, 0)
        self._taking_over = taking_over

    def record(self, rec: AnyRecord) -> None:
        j = self.journal
        if j is None or not j.is_open:
            return
        try:
            j.append(rec)
        except JournalWriteFailed as err:
            self._write_failed(err)
            raise
        if j.appended > self._compact_after and not self._compacting:
            # Records are written before the change they describe: snapshot once it is made.
            self._compacting = True
            self._clock.call_later(0.0, self._compact)

    def _compact(self) -> None:
        self._compacting = False
        j = self.journal
        if self._acting() and j is not None and j.is_open and j.appended > self._compact_after:
            self.write_snapshot()

    def _write_failed(self, err: JournalWriteFailed) -> None:
        """The RM can no longer record what it does: it stops acting (the caller unwinds, the
        harness ends the run); said once."""
        if not self._failed:
            self._failed = True
            self._log.error("journal.write_failed", path=str(err.path), error=str(err))
            self._stop()

    def read(self, died_at: float | None) -> JournalState:
        """Replay the journal for a recovery (``died_at``: when the process taken over died)."""
        state = self.journal.read() if self.journal is not None else JournalState()
        now = self._clock.now()
        if self._taking_over:
            # Counted once per process: a restart within this process keeps its own counters.
            self._taking_over = False
            t = state.totals
            self.earlier = Totals(t.started, t.completed, (*t.takeovers, (died_at if died_at is not None
                                                                         else now, now)))
        if state.torn_line is not None:
            # A crash in the middle of a write: that record was never acted on.
            self._log.warning("journal.torn_line_skipped", line=state.torn_line)
        return state

    def write_snapshot(self) -> None:
        """Rewrite the journal as the live state (start, recovery, and when it grew too long)."""
        j = self.journal
        if j is None:
            return
        records = self._snapshot()
        c, e = self._counters, self.earlier
        records.append(Totals(e.started + c.allocations, e.completed + c.containers_completed, e.takeovers))
        try:
            j.rewrite(records)
        except JournalWriteFailed as err:
            self._write_failed(err)
            raise
        if not j.is_open:
            j.open()
        self._compact_after = max(COMPACT_MIN, COMPACT_RATIO * len(records))

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
