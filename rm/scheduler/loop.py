"""The scheduling loop: node updates and continuous-scheduling passes, as the scheduler queue's
handler. A node update offers one node's free resources to the policy until it stops; a pass
offers every node with free resources where some waiting task fits, in registration order
(coalesced: one pass queued at a time). Node-choosing policies (DRFH) place over the whole
cluster on either.

A pass is cut into chunks of at most ``pass_budget`` nodes offered plus tasks started (a node's
fill is never split: a policy's per-fill state stays whole). Each chunk ends by arming a timer
for the next, due when the chunk's emulated service time is over, so what arrived meanwhile
(heartbeats, node updates) is handled first and, in real time, the event loop runs in between.
The next chunk resumes at the node where this one stopped. A pass requested while one is under
way sweeps again from the first node once it ends (demand changed behind its cursor).
Skipping a node where no waiting task fits changes no decision: every fill-one-node policy's
candidates are the pending operations whose demand fits, and offering a node with none has no
effect on a policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import msgspec

from rm.config import ServiceTimeConfig
from rm.counters import RMCounters
from rm.ports import Clock, Timer
from rm.protocol import ContainerLaunch, LaunchContainers
from rm.queues.outbox import Outbox
from rm.scheduler.policy import Policy
from rm.state.cluster import Cluster, NodeRecord, NodeState
from rm.state.operations import Operation
from rm.state.room_index import Demand
from rm.state.workload import WorkloadBook

_US = 1e-6
_RUNNING = NodeState.RUNNING


class NodeUpdate(msgspec.Struct, gc=False):
    """A processed heartbeat's node-update event (YARN's NODE_UPDATE). A Struct: made in C, one
    per heartbeat (never encoded; untracked by the collector: no cycle runs through it)."""

    node: NodeRecord


class SchedulePass:
    """Continuous scheduling: offer every node with free resources."""

    __slots__ = ()


SchedulerItem = NodeUpdate | SchedulePass


class TaskStarter(Protocol):
    def start_task(self, op: Operation, node: NodeRecord) -> ContainerLaunch:
        """Account for one task of ``op`` starting on ``node``; returns the launch to send."""
        ...

    def holding(self) -> bool:
        """Scheduling is held (an RM restart waits for its nodes to come back)."""
        ...

    def preempt_on(self, node: NodeRecord) -> int:
        """Preemptive scheduling on ``node`` inside its update (YT's rule); returns tasks preempted."""
        ...


class SchedulingLoop:
    def __init__(
        self,
        policy: Policy,
        cluster: Cluster,
        book: WorkloadBook,
        starter: TaskStarter,
        counters: RMCounters,
        cost: ServiceTimeConfig,
        clock: Clock,
        submit: Callable[[SchedulerItem], None],
        pass_budget: int,
        outbox: Outbox,
        preempts: bool = True,
    ) -> None:
        """``submit``: queues an item on the scheduler queue (a pass's next chunk);
        ``pass_budget``: nodes offered plus tasks started per chunk of a pass; ``preempts``: the
        starter's ``preempt_on`` may preempt (False: it always returns 0, and is not asked)."""
        self._policy = policy
        self._cluster = cluster
        self._book = book
        self._starter = starter
        self._counters = counters
        self._cost = cost
        self._clock = clock
        self._submit = submit
        self._budget = pass_budget
        self._outbox = outbox
        self._preempts = preempts
        self._pass_pending = False  # a pass is queued, or its next chunk is due
        self._cursor: int | None = None  # a pass under way resumes at this node seq
        self._again = False  # a pass was requested while one was under way
        self._next: Timer | None = None

    def want_pass(self) -> bool:
        """A pass is needed unless one is queued already; marks it queued."""
        if self._cursor is not None:
            self._again = True  # the pass under way may have gone past what changed
        if self._pass_pending:
            return False
        self._pass_pending = True
        return True

    def cancel(self) -> None:
        """Stop a pass under way (the RM stops or dies)."""
        if self._next is not None:
            self._next.cancel()
            self._next = None
        self._cursor = None
        self._again = False

    def handle(self, item: SchedulerItem) -> float:
        """Handle one scheduler event; returns its emulated service time."""
        st = self._cost
        if self._policy.chooses_nodes:
            if isinstance(item, NodeUpdate):
                self._counters.update_events += 1
            else:
                self._pass_pending = False
            n = self._place()
            return (st.node_update_us + st.allocation_us * n) * _US
        if isinstance(item, NodeUpdate):
            self._counters.update_events += 1
            node = item.node
            n = 0
            if self._cluster.nodes.get(node.machine_id) is node:
                # ``_fill`` then preemption, both unless scheduling is held. Every heartbeat comes
                # this way, and most have neither to do: no task pending (nothing is offered, no
                # fill is begun) and no preemption configured; then the hold is not asked either
                # (it is asked once otherwise: a fill does not end a hold).
                offer = node.state is _RUNNING and self._book.root.pending_tasks > 0  # schedulable
                if offer or self._preempts:
                    starter = self._starter
                    if not starter.holding():
                        if offer:
                            n = self._offer(node)
                        if self._preempts:
                            n += starter.preempt_on(node)
            return (st.node_update_us + st.allocation_us * n) * _US
        self._pass_pending = False
        self._next = None
        visited, n = self._pass_chunk()
        cost = (st.node_update_us * visited + st.allocation_us * n) * _US
        if self._cursor is not None:
            # Due once this chunk's service is over: what arrived meanwhile goes first.
            self._pass_pending = True
            self._next = self._clock.call_later(cost, self._submit, SchedulePass())
        return cost

    def _pass_chunk(self) -> tuple[int, int]:
        """Offer nodes from the cursor on until the budget is spent; returns (offered, started)
        and leaves the cursor where the next chunk resumes (None: the pass is over)."""
        book = self._book
        if self._starter.holding():
            self._cursor = None
            self._again = False
            return 0, 0
        start = self._cursor or 0
        budget = self._budget
        visited = n = 0
        while True:
            for node in self._cluster.room_for(start, self._demands()):
                if book.pending_tasks == 0:
                    break
                if visited + n >= budget:
                    self._cursor = node.seq
                    return visited, n
                if node.schedulable:
                    visited += 1
                    n += self._fill(node)
            if self._again and book.pending_tasks > 0:
                self._again = False
                start = 0
                continue
            self._cursor = None
            self._again = False
            return visited, n

    def _demands(self) -> list[Demand]:
        """The distinct demands of the operations with a pending task."""
        ops = self._book.operations.values()
        return list({(op.demand.cpu, op.demand.ram_gib) for op in ops if op.pending})

    def _fill(self, node: NodeRecord) -> int:
        """Start tasks on ``node`` until the policy stops; push the launches in one message."""
        if not node.schedulable or self._starter.holding():
            return 0
        return self._offer(node)

    def _offer(self, node: NodeRecord) -> int:
        """``_fill`` of a schedulable node while scheduling is not held."""
        launches: list[ContainerLaunch] = []
        policy = self._policy
        policy.begin_fill(node)
        assign = policy.assign
        start = self._starter.start_task
        root = self._book.root  # ``book.pending_tasks``, without its call per task
        while root.pending_tasks > 0:
            op = assign(node)
            if op is None:
                break
            launches.append(start(op, node))
        if launches:
            self._outbox.send(node.link, LaunchContainers(containers=tuple(launches)))
        return len(launches)

    def _place(self) -> int:
        """Node-choosing policies: the policy picks operation and node together."""
        if self._starter.holding():
            return 0
        place = self._policy.place
        start = self._starter.start_task
        nodes = self._cluster.nodes
        launches: dict[int, list[ContainerLaunch]] = {}
        while self._book.pending_tasks > 0:
            pick = place(nodes.values())
            if pick is None:
                break
            op, node = pick
            launches.setdefault(node.machine_id, []).append(start(op, node))
        for mid, batch in launches.items():
            self._outbox.send(nodes[mid].link, LaunchContainers(containers=tuple(batch)))
        return sum(len(b) for b in launches.values())
