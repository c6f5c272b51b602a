"""Work-preserving restart: rebuilding the RM from its journal, and the wait for the nodes.

After ``ResourceManager.recover`` replays the journal, the containers it says were running are
*waiting*: their tasks count as running (so fair shares stay right) but sit on no node. A node's
re-registration carries its full container list: a waiting container it reports is placed back
on it (``claim``); one journaled on that node that it does not report is gone, and its task is
pending again. Scheduling is held while containers wait (YARN's scheduling wait), so resources
still in use on nodes not yet back are not handed out twice; it resumes when every waiting
container is accounted for, or after ``RMConfig.recovery_wait_s``, when the rest are requeued.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rm.cluster import Allocation, NodeRecord
from rm.journal import AnyRecord, Epoch, JournalState, PoolAdded, Progress, Started, Submitted
from rm.operations import Operation, Task
from rm.ports import Timer

if TYPE_CHECKING:
    from rm.manager import ResourceManager


class RecoveryStats:
    __slots__ = (
        "claimed", "finished_at", "journal_records", "operations", "requeued", "started_at", "torn",
        "waiting",
    )

    def __init__(self, started_at: float) -> None:
        self.started_at = started_at
        self.finished_at: float | None = None
        self.journal_records = 0
        self.torn = False
        self.operations = 0
        self.waiting = 0  # containers the journal said were running
        self.claimed = 0  # ... that a node reported again
        self.requeued = 0  # ... that no node had: their tasks run again


class _Waiting:
    __slots__ = ("address", "at", "op", "task")

    def __init__(self, op: Operation, task: Task, address: str, at: float) -> None:
        self.op = op
        self.task = task
        self.address = address
        self.at = at


class Recovery:
    def __init__(self, rm: ResourceManager, state: JournalState) -> None:
        self._rm = rm
        now = rm.clock.now()
        self.stats = RecoveryStats(now)
        self.stats.journal_records = state.records
        self.stats.torn = state.torn
        self.waiting: dict[int, _Waiting] = {}
        self._by_address: dict[str, set[int]] = {}
        self._timer: Timer | None = None
        self._rebuild(state)

    def _rebuild(self, state: JournalState) -> None:
        rm = self._rm
        for p in state.pools:
            rm.add_pool(p.name, p.weight, p.min_share, p.parent)
        running_by_op: dict[int, dict[int, int]] = {}
        for cid, run in state.running.items():
            running_by_op.setdefault(run.op_id, {})[run.task] = cid
        for op_id in sorted(state.operations):
            st = state.operations[op_id]
            op = rm.restore_operation(op_id, st.spec, st.at)
            running = running_by_op.get(op_id, {})
            for index, task in op.restore(st.completed, set(running), st.started_at).items():
                cid = running[index]
                run = state.running[cid]
                self.waiting[cid] = _Waiting(op, task, run.address, run.at)
                self._by_address.setdefault(run.address, set()).add(cid)
        self.stats.operations = len(state.operations)
        self.stats.waiting = len(self.waiting)

    def start(self, wait_s: float) -> None:
        if self.waiting:
            self._timer = self._rm.clock.call_later(wait_s, self.finish)
        else:
            self.finish()

    # ---- nodes coming back ---------------------------------------------------------------

    def claim(self, cid: int, node: NodeRecord) -> Allocation | None:
        """``node`` reports container ``cid``: place it back if the journal has it there."""
        w = self.waiting.get(cid)
        if w is None or w.address != node.address:
            return None
        self._forget(cid)
        rm = self._rm
        if not node.fits(w.op.demand):
            # The node came back smaller than what ran on it: the task runs again elsewhere.
            self._requeue(cid, w)
            return None
        alloc = Allocation(cid, node, w.op, w.task, w.at)
        rm.cluster.place(alloc, rm.clock.now())
        self.stats.claimed += 1
        return alloc

    def node_reported(self, node: NodeRecord) -> None:
        """``node`` re-registered with its full state: what it did not report is not running."""
        for cid in sorted(self._by_address.get(node.address, ())):
            w = self.waiting[cid]
            self._forget(cid)
            self._requeue(cid, w)
        if not self.waiting:
            self.finish()

    def _forget(self, cid: int) -> None:
        w = self.waiting.pop(cid)
        on_node = self._by_address[w.address]
        on_node.discard(cid)
        if not on_node:
            del self._by_address[w.address]

    def _requeue(self, cid: int, w: _Waiting) -> None:
        self.stats.requeued += 1
        self._rm.requeue_task(w.op, w.task, cid)

    # ---- the end of the wait ---------------------------------------------------------------

    def finish(self) -> None:
        rm = self._rm
        if rm.recovery is not self:
            return
        if self._timer is not None:
            self._timer.cancel()
        for cid in sorted(self.waiting):
            w = self.waiting[cid]
            self._forget(cid)
            self._requeue(cid, w)
        self.stats.finished_at = rm.clock.now()
        rm.recovery_finished(self)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def snapshot(rm: ResourceManager) -> list[AnyRecord]:
    """The live work of ``rm`` as journal records (what a replay of the whole journal gives)."""
    records: list[AnyRecord] = [Epoch(n=rm.epoch)]
    for pool in rm.pools.values():
        if pool.parent is not None:
            records.append(PoolAdded(
                name=pool.name, weight=pool.weight, min_share=pool.min_share, parent=pool.parent.name,
            ))
    running: dict[int, list[Started]] = {}
    for node in rm.cluster.nodes.values():
        for cid, a in node.containers.items():
            running.setdefault(a.op.id, []).append(
                Started(cid=cid, op_id=a.op.id, task=a.task.index, address=node.address, at=a.started_at)
            )
    if rm.recovery is not None:
        for cid, w in rm.recovery.waiting.items():
            running.setdefault(w.op.id, []).append(
                Started(cid=cid, op_id=w.op.id, task=w.task.index, address=w.address, at=w.at)
            )
    for op in rm.operations.values():
        records.append(Submitted(op_id=op.id, spec=op.spec, at=op.submitted_at))
        started = running.get(op.id, [])
        busy = {s.task for s in started} | {t.index for t in op.pending}
        done = tuple(i for i in range(op.total) if i not in busy)
        if done:
            records.append(Progress(op_id=op.id, tasks=done))
        records.extend(sorted(started, key=lambda s: s.cid))
    return records
