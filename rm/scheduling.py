"""The scheduling loop: node updates and continuous-scheduling passes, as the scheduler queue's
handler. A node update offers one node's free resources to the policy until it stops; a pass
offers every node with free resources (coalesced: one pass queued at a time). Node-choosing
policies (DRFH) place over the whole cluster on either."""

from __future__ import annotations

from typing import Protocol

from rm.cluster import EPS, Cluster, NodeRecord
from rm.config import ServiceTimeConfig
from rm.counters import RMCounters
from rm.operations import Operation
from rm.protocol import ContainerLaunch, LaunchContainers
from rm.scheduler.policy import Policy
from rm.workload import WorkloadBook

_US = 1e-6


class NodeUpdate:
    """A processed heartbeat's node-update event (YARN's NODE_UPDATE)."""

    __slots__ = ("node",)

    def __init__(self, node: NodeRecord) -> None:
        self.node = node


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
    ) -> None:
        self._policy = policy
        self._cluster = cluster
        self._book = book
        self._starter = starter
        self._counters = counters
        self._cost = cost
        self._pass_pending = False

    def want_pass(self) -> bool:
        """A pass is needed unless one is queued already; marks it queued."""
        if self._pass_pending:
            return False
        self._pass_pending = True
        return True

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
                n = self._fill(node)
                if not self._starter.holding():
                    n += self._starter.preempt_on(node)
            return (st.node_update_us + st.allocation_us * n) * _US
        self._pass_pending = False
        visited = n = 0
        book = self._book
        for node in self._cluster.with_room():
            if book.pending_tasks == 0:
                break
            if node.free_cpu > EPS and node.free_ram > EPS:  # a node filled earlier in this pass
                visited += 1
                n += self._fill(node)
        return (st.node_update_us * visited + st.allocation_us * n) * _US

    def _fill(self, node: NodeRecord) -> int:
        """Start tasks on ``node`` until the policy stops; push the launches in one message."""
        if not node.schedulable or self._starter.holding():
            return 0
        launches: list[ContainerLaunch] = []
        policy = self._policy
        policy.begin_fill(node)
        assign = policy.assign
        start = self._starter.start_task
        book = self._book
        while book.pending_tasks > 0:
            op = assign(node)
            if op is None:
                break
            launches.append(start(op, node))
        if launches:
            node.link.send(LaunchContainers(containers=tuple(launches)))
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
            nodes[mid].link.send(LaunchContainers(containers=tuple(batch)))
        return sum(len(b) for b in launches.values())
