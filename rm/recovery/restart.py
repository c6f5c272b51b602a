"""Work-preserving restart: rebuilding an RM life from its journal, and the wait for the nodes.

After a restart the journal's live work is replayed: pools and operations come back, and the
containers it says were running are *waiting*: their tasks count as running (so fair shares stay
right) but sit on no node. A node's re-registration carries its full container list: a waiting
container it reports is placed back on it (``claim``); one journaled on that node that it does
not report is gone, and its task is pending again. Scheduling is held while containers wait
(YARN's scheduling wait), so resources still in use on nodes not yet back are not handed out
twice; it resumes when every waiting container is accounted for, or after
``RMConfig.recovery_wait_s``, when the rest are requeued.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from rm.ports import Clock, Timer
from rm.recovery.journal import (
    AnyRecord,
    Epoch,
    IdMark,
    JournalState,
    PoolAdded,
    Progress,
    Started,
    Submitted,
)
from rm.state.cluster import Allocation, Cluster, NodeRecord
from rm.state.operations import Operation, OperationSpec, Task
from rm.state.workload import WorkloadBook


class RecoveryStats(msgspec.Struct):
    started_at: float
    finished_at: float | None = None
    journal_records: int = 0
    torn: bool = False
    operations: int = 0
    waiting: int = 0  # containers the journal said were running
    claimed: int = 0  # ... that a node reported again
    requeued: int = 0  # ... that no node had: their tasks run again


class _Waiting:
    __slots__ = ("address", "at", "op", "task")

    def __init__(self, op: Operation, task: Task, address: str, at: float) -> None:
        self.op = op
        self.task = task
        self.address = address
        self.at = at


class Recovery:
    def __init__(
        self, clock: Clock, cluster: Cluster, book: WorkloadBook, state: JournalState,
        *,
        add_operation: Callable[[int, OperationSpec, float], Operation],
        requeue: Callable[[Operation, Task, int], None],
        finished: Callable[[], None],
    ) -> None:
        """``add_operation(op_id, spec, at)`` restores a journaled operation; ``requeue`` makes a
        task whose container is gone pending again; ``finished`` is called when the wait ends."""
        self._clock = clock
        self._cluster = cluster
        self._requeue_task = requeue
        self._finished = finished
        self.stats = RecoveryStats(clock.now(), journal_records=state.records, torn=state.torn)
        self.waiting: dict[int, _Waiting] = {}
        self._by_address: dict[str, set[int]] = {}
        self._timer: Timer | None = None
        self.active = True
        self._rebuild(book, state, add_operation)

    def _rebuild(
        self, book: WorkloadBook, state: JournalState,
        add_operation: Callable[[int, OperationSpec, float], Operation],
    ) -> None:
        for p in state.pools:
            book.add_pool(p.name, p.weight, p.min_share, p.parent, p.max_cpu, p.max_ram)
        running_by_op: dict[int, dict[int, int]] = {}
        for cid, run in state.running.items():
            running_by_op.setdefault(run.op_id, {})[run.task] = cid
        for op_id in sorted(state.operations):
            st = state.operations[op_id]
            op = add_operation(op_id, st.spec, st.at)
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
            self._timer = self._clock.call_later(wait_s, self.finish)
        else:
            self.finish()

    # ---- nodes coming back ---------------------------------------------------------------

    def claim(self, cid: int, node: NodeRecord) -> Allocation | None:
        """``node`` reports container ``cid``: place it back if the journal has it there."""
        w = self.waiting.get(cid)
        if w is None or w.address != node.address:
            return None
        self._forget(cid)
        if not node.fits(w.op.demand):
            # The node came back smaller than what ran on it: the task runs again elsewhere.
            self._requeue(cid, w)
            return None
        alloc = Allocation(cid, node, w.op, w.task, w.at)
        self._cluster.place(alloc, self._clock.now())
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
        self._requeue_task(w.op, w.task, cid)

    # ---- the end of the wait ---------------------------------------------------------------

    def finish(self) -> None:
        if not self.active:
            return
        self.active = False
        if self._timer is not None:
            self._timer.cancel()
        for cid in sorted(self.waiting):
            w = self.waiting[cid]
            self._forget(cid)
            self._requeue(cid, w)
        self.stats.finished_at = self._clock.now()
        self._finished()

    def cancel(self) -> None:
        self.active = False
        if self._timer is not None:
            self._timer.cancel()

    def journal_records(self) -> list[Started]:
        return [
            Started(cid=cid, op_id=w.op.id, task=w.task.index, address=w.address, at=w.at)
            for cid, w in self.waiting.items()
        ]


def _cid(s: Started) -> int:
    return s.cid


def journal_snapshot(
    epoch: int, book: WorkloadBook, cluster: Cluster, recovery: Recovery | None, next_container_id: int
) -> list[AnyRecord]:
    """The live work as journal records (what a replay of the whole journal gives)."""
    records: list[AnyRecord] = [Epoch(n=epoch), IdMark(book.next_op_id, next_container_id)]
    for pool in book.pools.values():
        if pool.parent is not None:
            records.append(PoolAdded(
                name=pool.name, weight=pool.weight, min_share=pool.min_share, parent=pool.parent.name,
            ))
    running: dict[int, list[Started]] = {}
    for node in cluster.nodes.values():
        for cid, a in node.containers.items():
            running.setdefault(a.op.id, []).append(
                Started(cid=cid, op_id=a.op.id, task=a.task.index, address=node.address, at=a.started_at)
            )
    if recovery is not None and recovery.active:
        for s in recovery.journal_records():
            running.setdefault(s.op_id, []).append(s)
    for op in book.operations.values():
        records.append(Submitted(op_id=op.id, spec=op.spec, at=op.submitted_at))
        started: list[Started] = running.get(op.id, [])
        busy = {s.task for s in started} | {t.index for t in op.pending}
        done = tuple(i for i in range(op.total) if i not in busy)
        if done:
            records.append(Progress(op_id=op.id, tasks=done))
        started.sort(key=_cid)
        records.extend(started)
    return records
