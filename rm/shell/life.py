"""One life of the RM: everything a crash of the RM process loses, and the transitions that keep
its parts consistent (a task starts, a container ends, a node is lost).

The parts: the cluster view, the workload book, the container ledger, the scheduling policy and
loop, the resource tracker, the preemptor and, after a restart, the recovery wait. Each gets
what it needs through its constructor; the long-lived services (clock, log, counters, journal,
observers, membership) come from the ``RMContext`` the RM shell keeps across lives.
"""

from __future__ import annotations

from collections.abc import Callable

from rm.borg.layer import borg_policy
from rm.borg.task_usage import apply_limits, launch_for
from rm.borg.tiers import TierPreemptor
from rm.counters import GroupCounters
from rm.protocol import (
    EXIT_KILLED,
    EXIT_SUCCESS,
    ContainerLaunch,
    KillContainers,
    LaunchContainers,
)
from rm.queues.dispatcher import Dispatcher
from rm.recovery.journal import AnyRecord, Ended, JournalState, Started
from rm.recovery.restart import Recovery, journal_snapshot
from rm.scheduler.loop import NodeUpdate, SchedulePass, SchedulerItem, SchedulingLoop
from rm.scheduler.preemption import Preemptor
from rm.scheduler.registry import make_policy
from rm.shell.context import RMContext
from rm.state.cluster import Allocation, Cluster, NodeRecord
from rm.state.operations import Operation, OperationSpec, Task
from rm.state.workload import WorkloadBook
from rm.tracker.container_ledger import ContainerLedger
from rm.tracker.resource_tracker import ResourceTracker
from rm.views.observer import NodeEvent, OperationEvent, TaskCompleted, TaskStarted


class RMLife:
    def __init__(
        self,
        ctx: RMContext,
        events: Dispatcher[SchedulerItem] | None,
        epoch: int = 0,
        next_op_id: int = 1,
        next_container_id: int = 1,
    ) -> None:
        """``events``: the RM's scheduler queue, which the life before handled (None: the first
        life makes it, handled by its loop from the start); ``epoch``: how many times the RM has
        restarted from its journal."""
        self._ctx = ctx
        self.epoch = epoch
        self.cluster = Cluster(ctx.integral)
        self.book = WorkloadBook(next_op_id)
        self.ledger = ContainerLedger(next_container_id)
        self.policy = borg_policy(
            make_policy(ctx.scheduler, self.book.root, self.cluster, ctx.clock, ctx.policy_counters),
            ctx.scheduler, self.book, self.cluster,
        )
        self.scheduling = SchedulingLoop(
            self.policy, self.cluster, self.book, self, ctx.counters, ctx.config.service_time,
            ctx.clock, self._submit_chunk, ctx.config.pass_budget, ctx.outbox,
            preempts=ctx.preemption is not None,  # ``self.preemptor``, made below
        )
        # The queue's items go to this life's loop from now on (bound once, not looked up per item).
        if events is None:
            events = Dispatcher(ctx.clock, self.scheduling.handle)
        else:
            events.rebind(self.scheduling.handle)
        self.events = events
        self.submit_event: Callable[[SchedulerItem], None] = events.submit  # queues an item
        self.tracker = ResourceTracker(ctx, self.cluster, self.ledger, self)
        self.preemptor: Preemptor | None = None
        if ctx.preemption is not None:
            self.preemptor = Preemptor(
                ctx.scheduler.preemption, ctx.clock, ctx.log, ctx.groups, ctx.preemption,
                self.cluster, self.book, self,
            )
        self.tier_preemptor: TierPreemptor | None = None
        if ctx.tiers is not None:
            self.tier_preemptor = TierPreemptor(
                ctx.scheduler.tiers, ctx.tiers, self.cluster, self.book, self, ctx.clock
            )
        self.recovery: Recovery | None = None

    # ---- scheduling ------------------------------------------------------------------------

    def node_update(self, node: NodeRecord) -> None:
        self.submit_event(NodeUpdate(node))

    def _submit_chunk(self, item: SchedulerItem) -> None:
        """A pass's next chunk, queued (the loop is made before the queue it submits to)."""
        self.submit_event(item)

    def request_pass(self) -> None:
        if self.scheduling.want_pass():
            self.submit_event(SchedulePass())

    def holding(self) -> bool:
        return self.recovery is not None and self.recovery.active

    def start_task(self, op: Operation, node: NodeRecord) -> ContainerLaunch:
        ctx = self._ctx
        now = ctx.clock.now()
        if not node.fits(op.demand) and ctx.scheduler.placement.overcommit <= 1.0:
            raise AssertionError(f"policy chose {op} that does not fit {node}")
        first = op.started_at is None
        cid = self.ledger.new_id()
        # Journaled before anything changes: a write that fails leaves the books whole.
        ctx.record(Started(cid=cid, op_id=op.id, task=op.pending[0].index, address=node.address, at=now))
        task = op.take_task(now)
        alloc = Allocation(cid, node, op, task, now)
        self.cluster.place(alloc, now)
        self.ledger.launched(alloc, now)
        ctx.counters.allocations += 1
        if first:
            ctx.log.info("operation.started", operation=op.name, pool=op.pool.name)
        if ctx.observers:
            ctx.observers.task_started(
                TaskStarted(op.id, op.group, task.index, task.attempts, cid, node.machine_id)
            )
        return launch_for(cid, op, task, ctx.autopilot)

    def preempt_on(self, node: NodeRecord) -> int:
        return self.preemptor.on_node(node) if self.preemptor is not None else 0

    def start_on(self, op: Operation, node: NodeRecord) -> None:
        """Start one task of ``op`` on ``node`` outside a node update (preemption)."""
        self._ctx.outbox.send(node.link, LaunchContainers(containers=(self.start_task(op, node),)))

    def autopilot_tick(self) -> None:
        """An Autopilot window ends: recommend, and send changed limits to running containers."""
        autopilot = self._ctx.autopilot
        if autopilot is not None:
            changed = autopilot.tick(self._ctx.clock.now())
            if changed:
                apply_limits(self.cluster.nodes.values(), autopilot, changed, self._ctx.outbox)

    # ---- operations ------------------------------------------------------------------------

    def add_operation(self, spec: OperationSpec, at: float, op_id: int | None = None) -> Operation:
        op = self.book.add_operation(spec, at, op_id)
        if op.group not in self._ctx.groups:
            self._ctx.groups[op.group] = GroupCounters(op.pool.name)
        self.policy.on_submitted(op)
        return op

    def restore_operation(self, op_id: int, spec: OperationSpec, at: float) -> Operation:
        """Recovery: an operation the journal says is live, submitted at ``at``."""
        if spec.pool not in self.book.pools:
            self.book.add_pool(spec.pool)
        return self.add_operation(spec, at, op_id)

    def finish_operation(self, op: Operation) -> None:
        ctx = self._ctx
        self.book.remove_operation(op)
        self.policy.on_finished(op)
        ctx.groups[op.group].operations_finished += 1
        ctx.log.info(
            "operation.finished", operation=op.name, pool=op.pool.name,
            duration_s=round(ctx.clock.now() - op.submitted_at, 6),
        )
        if ctx.observers:
            ctx.observers.operation_finished(operation_event(op))

    # ---- container and node outcomes ---------------------------------------------------

    def container_finished(self, alloc: Allocation, exit_code: int) -> None:
        ctx = self._ctx
        now = ctx.clock.now()
        completed = exit_code == EXIT_SUCCESS
        ctx.record(Ended(cid=alloc.container_id, completed=completed))  # before anything changes
        self.cluster.release(alloc, now)
        self.ledger.confirmed(alloc.container_id)
        op = alloc.op
        if completed:
            ctx.counters.containers_completed += 1
            ctx.groups[op.group].completed_tasks += 1
            if ctx.observers:
                ctx.observers.task_completed(
                    TaskCompleted(op.id, op.name, op.group, alloc.task.index, alloc.container_id)
                )
            if op.task_completed(now):
                self.finish_operation(op)
        else:
            self.requeue_task(op, alloc.task, alloc.container_id, journaled=True)

    def requeue_task(self, op: Operation, task: Task, container_id: int, journaled: bool = False) -> None:
        """The task of a container that is gone runs again from scratch (``journaled``: the
        caller has written its end already)."""
        ctx = self._ctx
        if not journaled:
            ctx.record(Ended(cid=container_id, completed=False))
        op.requeue(task)
        ctx.counters.tasks_requeued += 1
        ctx.groups[op.group].requeued += 1
        if ctx.continuous:
            self.request_pass()

    def end_container(self, machine_id: int, cid: int) -> bool:
        """A client ends a running container early (a job's AM once the job is done): its task
        completes now and the node is told to stop it. False: no such running container."""
        node = self.cluster.nodes.get(machine_id)
        alloc = node.containers.get(cid) if node is not None else None
        if node is None or alloc is None:
            return False
        self.container_finished(alloc, EXIT_SUCCESS)
        self.send_kill(node, [cid])
        return True

    def kill_container(self, alloc: Allocation, exit_code: int) -> None:
        """Take a running task back (preemption): the node kills it, the task is pending again."""
        self._ctx.record(Ended(cid=alloc.container_id, completed=False))
        self.send_kill(alloc.node, [alloc.container_id], exit_code)
        self.cluster.release(alloc, self._ctx.clock.now())
        self.ledger.confirmed(alloc.container_id)
        alloc.op.requeue(alloc.task)
        self._ctx.counters.tasks_preempted += 1

    def lose_node(self, node: NodeRecord, reason: str) -> None:
        """Mark ``node`` lost: return its resources, requeue its tasks, forget it."""
        if self.cluster.nodes.get(node.machine_id) is not node:
            return
        ctx = self._ctx
        now = ctx.clock.now()
        allocs = list(node.containers.values())
        for alloc in allocs:
            ctx.record(Ended(cid=alloc.container_id, completed=False))
        for alloc in allocs:
            self.cluster.release(alloc, now)
        self.ledger.forget_node(node, [a.container_id for a in allocs])
        # Forget the node before requeueing: a requeue may run a scheduling pass at once, which
        # must not place the tasks back on this node.
        self.cluster.remove(node, now)
        for alloc in allocs:
            self.requeue_task(alloc.op, alloc.task, alloc.container_id, journaled=True)
        ctx.counters.nodes_lost += 1
        ctx.log.warning(
            "node.lost", machine_id=node.machine_id, address=node.address, reason=reason,
            requeued=len(allocs),
        )
        if ctx.membership is not None:
            ctx.membership.node_left(node)
        if ctx.observers:
            ctx.observers.node_lost(NodeEvent(node.machine_id, node.address, reason))

    def set_node_health(self, node: NodeRecord, healthy: bool) -> None:
        if self.cluster.set_healthy(node, healthy, self._ctx.clock.now()):
            self._ctx.log.info("node.healthy" if healthy else "node.unhealthy", machine_id=node.machine_id)

    def send_kill(self, node: NodeRecord, container_ids: list[int], exit_code: int = EXIT_KILLED) -> None:
        """Tell ``node`` to kill containers the RM no longer accounts for; resent until confirmed."""
        if container_ids:
            self._ctx.outbox.send(
                node.link, KillContainers(container_ids=tuple(container_ids), exit_code=exit_code),
            )
            self.ledger.expect_kills(node, container_ids, self._ctx.clock.now())

    def resend_overdue(self) -> None:
        """Repair lost launch and kill commands: a node's reports never mentioned them."""
        ctx = self._ctx
        now = ctx.clock.now()
        deadline = now - ctx.config.command_timeout_s
        for node, allocs in self.ledger.overdue_launches(deadline, now).items():
            ctx.counters.commands_resent += len(allocs)
            self._ctx.outbox.send(node.link, LaunchContainers(containers=tuple(
                launch_for(a.container_id, a.op, a.task, ctx.autopilot) for a in allocs
            )))
        for node, cids in self.ledger.overdue_kills(deadline).items():
            ctx.counters.commands_resent += len(cids)
            self.send_kill(node, cids)

    # ---- recovery (a life started from the journal) ------------------------------------------

    def recover(self, state: JournalState) -> Recovery:
        self.recovery = Recovery(
            self._ctx.clock, self.cluster, self.book, state,
            add_operation=self.restore_operation, requeue=self.requeue_task, finished=self._recovered,
        )
        return self.recovery

    def claim(self, cid: int, node: NodeRecord) -> Allocation | None:
        return self.recovery.claim(cid, node) if self.holding() and self.recovery is not None else None

    def node_reported(self, node: NodeRecord) -> None:
        if self.recovery is not None and self.recovery.active:
            self.recovery.node_reported(node)

    def _recovered(self) -> None:
        """The wait is over: every journaled container is back or requeued; scheduling resumes."""
        assert self.recovery is not None
        st = self.recovery.stats
        self._ctx.log.info(
            "rm.recovery_finished", epoch=self.epoch, claimed=st.claimed, requeued=st.requeued,
            nodes=len(self.cluster.nodes), wait_s=round(self._ctx.clock.now() - st.started_at, 6),
        )
        self.request_pass()

    def journal_snapshot(self) -> list[AnyRecord]:
        return journal_snapshot(
            self.epoch, self.book, self.cluster, self.recovery, self.ledger.next_container_id
        )

    def end(self) -> None:
        """The process died: stop what would still fire."""
        self.scheduling.cancel()
        if self.recovery is not None:
            self.recovery.cancel()


def operation_event(op: Operation) -> OperationEvent:
    return OperationEvent(op.id, op.name, op.group, op.pool.name, op.total, op.submitted_at)
