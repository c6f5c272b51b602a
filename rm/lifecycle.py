"""The RM's lives: the journal it keeps, dying (``crash``) and starting again from it (``recover``).

A mixin of ``ResourceManager`` (kept apart so the manager stays about scheduling); see
``rm.journal`` for the record and ``rm.recovery`` for the wait for the nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rm.journal import JournalState
from rm.recovery import Recovery, snapshot

if TYPE_CHECKING:
    from rm.manager import ResourceManager

# Compact the journal when it holds this many times more records than a snapshot would.
COMPACT_RATIO = 4
COMPACT_MIN = 100_000


class Lives:
    def crash(self: ResourceManager) -> None:
        """The RM process dies: every bit of soft state is gone, queued messages with it. Only the
        journal (if any) survives; ``recover`` starts the next life from it."""
        if not self.up:
            return
        now = self.clock.now()
        self.up = False
        if self.recovery is not None:
            self.recovery.cancel()
            self.recovery = None
        # The harness's time integrals and counters go on across lives; the state does not.
        self.cluster.advance(now)
        integral, policy_stats = self.cluster.integral, self.policy.stats
        self._init_state(now)
        self.cluster.integral, self.policy.stats = integral, policy_stats
        self.inbound.clear()
        self.events.clear()
        if self.journal is not None:
            self.journal.close()
        self.stats.restarts += 1
        self.log.warning("rm.crashed", epoch=self.epoch)
        for listener in self.restarted:
            listener()

    def recover(self: ResourceManager) -> Recovery:
        """Start a new life: rebuild pools and operations from the journal, then wait for the
        nodes to re-register with their containers (``rm.recovery``)."""
        if self.up:
            raise RuntimeError("recover() is for an RM that crashed")
        state = self.journal.read() if self.journal is not None else JournalState()
        self.epoch = state.epoch + 1
        recovery = Recovery(self, state)
        self._next_op_id = state.next_op_id
        self._next_container_id = state.next_container_id
        self.recovery = recovery
        if self.journal is not None:
            self._write_snapshot()
        self.up = True
        self.log.info(
            "rm.recovered", epoch=self.epoch, operations=recovery.stats.operations,
            waiting_containers=recovery.stats.waiting, journal_records=state.records, torn=state.torn,
        )
        for listener in self.recovered:
            listener()
        recovery.start(self.config.recovery_wait_s)
        return recovery

    def recovery_finished(self: ResourceManager, recovery: Recovery) -> None:
        """The wait is over: every journaled container is back or requeued; scheduling resumes."""
        self.recovery = None
        st = recovery.stats
        self.log.info(
            "rm.recovery_finished", epoch=self.epoch, claimed=st.claimed, requeued=st.requeued,
            nodes=len(self.cluster.nodes), wait_s=round(self.clock.now() - st.started_at, 6),
        )
        self.request_pass()

    def _journal(self: ResourceManager, rec: Any) -> None:
        j = self.journal
        if j is not None and j.is_open:
            j.append(rec)
            if j.appended > self._compact_after:
                self._write_snapshot()

    def _write_snapshot(self: ResourceManager) -> None:
        """Rewrite the journal as the live state (start, recovery, and when it grew too long)."""
        assert self.journal is not None
        records = snapshot(self)
        self.journal.rewrite(records)
        if not self.journal.is_open:
            self.journal.open()
        self._compact_after = max(COMPACT_MIN, COMPACT_RATIO * len(records))
