"""The ResourceManager: tracker service, scheduler and liveliness monitor around one cluster view.

Two single-worker dispatchers, as in YARN: ``inbound`` takes node messages (the resource tracker:
validate, apply statuses, answer) and turns heartbeats into node-update events; ``events`` is the
scheduler's queue (node updates and continuous-scheduling passes). Each counts its queue depth and
waiting times and may charge an emulated service time per item.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ringmon.protocol import Ring, RingMessage, UnlivelinessReport
from rm.cluster import Allocation, Cluster, NodeRecord
from rm.config import RMConfig
from rm.dispatcher import Dispatcher
from rm.journal import Ended, Journal, PoolAdded, Started, Submitted
from rm.lifecycle import COMPACT_MIN, Lives
from rm.operations import Operation, OperationSpec, Pool, Task
from rm.ports import Clock
from rm.preemption import Preemptor
from rm.protocol import (
    EXIT_KILLED,
    EXIT_SUCCESS,
    ContainerLaunch,
    Heartbeat,
    KillContainers,
    LaunchContainers,
    Register,
)
from rm.recovery import Recovery
from rm.resources import EPS, ZERO, Resources
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.drf import DRFPolicy
from rm.scheduler.drfh import DRFHPolicy
from rm.scheduler.fifo import FIFOPolicy
from rm.scheduler.packing import PackingPolicy
from rm.scheduler.policy import Policy
from rm.scheduler.tetris import TetrisPolicy
from rm.tracker import ResourceTracker

PolicyFactory = Callable[[Pool, Cluster, SchedulerConfig, Clock], Policy]
POLICIES: dict[str, PolicyFactory] = {
    "drf": lambda root, cluster, _config, _clock: DRFPolicy(root, cluster),
    "fifo": lambda root, cluster, _config, _clock: FIFOPolicy(root, cluster),
    "packing": PackingPolicy,
    "tetris": TetrisPolicy,
    "drfh": DRFHPolicy,
}

_US = 1e-6

class RMUnavailable(Exception):
    """The RM is down (between a crash and its recovery): clients retry later."""


class _NodeUpdate:
    __slots__ = ("node",)

    def __init__(self, node: NodeRecord) -> None:
        self.node = node


class _SchedulePass:
    """Continuous scheduling: offer every node with free resources (coalesced)."""


class GroupStats:
    """Totals per workload entry (a looping user resubmits operations of one group)."""

    __slots__ = ("completed_tasks", "operations_finished", "operations_submitted", "pool", "requeued")

    def __init__(self, pool: str) -> None:
        self.pool = pool
        self.completed_tasks = 0
        self.operations_submitted = 0
        self.operations_finished = 0
        self.requeued = 0


class RMStats:
    __slots__ = (
        "allocations", "commands_resent", "containers_completed", "nodes_lost", "restarts", "tasks_preempted",
        "tasks_requeued", "update_events",
    )

    def __init__(self) -> None:
        self.update_events = 0
        self.allocations = 0
        self.containers_completed = 0
        self.tasks_requeued = 0
        self.nodes_lost = 0
        self.tasks_preempted = 0
        # Launches and kills sent again because no report confirmed them.
        self.commands_resent = 0
        self.restarts = 0


class ResourceManager(Lives):
    def __init__(
        self,
        clock: Clock,
        log: Any,
        config: RMConfig | None = None,
        scheduler: SchedulerConfig | None = None,
        heartbeat_mode: str = "periodic",
        queueing: bool = True,
        journal: Journal | None = None,
    ) -> None:
        """``queueing=False`` lets a zero-cost RM handle messages as they arrive instead of through
        worker tasks: identical order and results in virtual time, fewer task switches."""
        self.clock = clock
        self.log = log
        self.config = config or RMConfig()
        self.scheduler_config = scheduler or SchedulerConfig()
        sc = self.scheduler_config
        self.continuous = sc.continuous if sc.continuous is not None else heartbeat_mode == "delta"
        monitor = self.config.liveliness_monitor
        self.monitor_enabled = monitor if monitor is not None else heartbeat_mode == "periodic"
        self.groups: dict[str, GroupStats] = {}
        self._init_state(clock.now())
        self.preemptor = Preemptor(self, sc.preemption) if sc.preemption.enabled else None
        self.tracker = ResourceTracker(self)
        self.stats = RMStats()
        timed = not self.config.service_time.is_zero()
        inline = not (queueing or timed)
        self.inbound = Dispatcher(
            clock, self._handle_inbound, self._inbound_cost if timed else None, inline=inline
        )
        self.events = Dispatcher(clock, self._handle_event, inline=inline)
        # Work-preserving restart (rm.recovery): the durable record, the RM's life count, and the
        # containers waiting for their node after a restart (None when not recovering).
        self.journal = journal
        self.up = True
        self.epoch = 0
        self.recovery: Recovery | None = None
        self._compact_after = COMPACT_MIN
        self.operation_submitted: list[Callable[[Operation], None]] = []
        self.operation_finished: list[Callable[[Operation], None]] = []
        self.task_completed: list[Callable[[Allocation], None]] = []
        self.node_lost: list[Callable[[NodeRecord, str], None]] = []
        self.unliveliness_handler: Callable[[Any, UnlivelinessReport], None] | None = None
        # Ring membership (rm.membership): told about new nodes; supplies the ring for
        # RegisterResponse.
        self.node_registered: list[Callable[[NodeRecord], None]] = []
        self.ring_provider: Callable[[], Ring] | None = None
        # Restart: ``restarted`` after the state is dropped, ``recovered`` once a new life began.
        self.restarted: list[Callable[[], None]] = []
        self.recovered: list[Callable[[], None]] = []
        if journal is not None:
            self._write_snapshot()

    def _init_state(self, now: float) -> None:
        """Everything a restart loses: set here, and only here, by ``__init__`` and ``crash``."""
        sc = self.scheduler_config
        self.cluster = Cluster(now)
        self.root = Pool("root")
        self.pools: dict[str, Pool] = {"root": self.root}
        self.operations: dict[int, Operation] = {}
        self.policy: Policy = POLICIES[sc.policy](self.root, self.cluster, sc, self.clock)
        # DRFH-style policies pick the node too: every scheduling event becomes a cluster pass.
        self._chooses_nodes = bool(getattr(self.policy, "chooses_nodes", False))
        self._pass_pending = False
        # Commands whose effect no report has shown yet: container id -> launch, or kill target.
        self.unconfirmed: dict[int, tuple[Allocation, float]] = {}
        self.pending_kills: dict[int, tuple[NodeRecord, float]] = {}
        self._next_container_id = 1
        self._next_op_id = 1

    # ---- lifecycle ---------------------------------------------------------------------

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.inbound.run(), name="rm.inbound")
            tg.create_task(self.events.run(), name="rm.events")
            if self.monitor_enabled:
                tg.create_task(self._liveliness_monitor(), name="rm.liveliness")
            tg.create_task(self._command_monitor(), name="rm.commands")
            if self.preemptor is not None:
                tg.create_task(self._preemption_loop(self.preemptor), name="rm.preemption")

    # ---- inbound messages --------------------------------------------------------------

    def receive(self, link: Any, msg: Any) -> None:
        """Called by a transport for every message from a node connection."""
        if self.up:
            self.inbound.submit((link, msg))

    def _inbound_cost(self, item: tuple[Any, Any]) -> float:
        st = self.config.service_time
        msg = item[1]
        if isinstance(msg, Heartbeat):
            return (st.heartbeat_us + st.heartbeat_per_status_us * len(msg.statuses)) * _US
        if isinstance(msg, Register):
            return st.register_us * _US
        return st.unliveliness_us * _US

    def _handle_inbound(self, item: tuple[Any, Any]) -> None:
        link, msg = item
        match msg:
            case Heartbeat():
                self.tracker.on_heartbeat(link, msg)
            case Register():
                self.tracker.on_register(link, msg)
            case RingMessage() if self.unliveliness_handler is not None:
                # Reports, probe answers, ring sync requests: the membership service's.
                self.unliveliness_handler(link, msg)
            case _:
                self.log.warning("rm.unexpected_message", type=type(msg).__name__)

    # ---- scheduler events --------------------------------------------------------------

    def node_update(self, node: NodeRecord) -> None:
        self.events.submit(_NodeUpdate(node))

    def request_pass(self) -> None:
        if not self._pass_pending:
            self._pass_pending = True
            self.events.submit(_SchedulePass())

    def _handle_event(self, item: Any) -> float:
        st = self.config.service_time
        if self._chooses_nodes:
            if isinstance(item, _NodeUpdate):
                self.stats.update_events += 1
            else:
                self._pass_pending = False
            n = self._place()
            return (st.node_update_us + st.allocation_us * n) * _US
        if isinstance(item, _NodeUpdate):
            self.stats.update_events += 1
            node = item.node
            n = self._fill(node) if self.cluster.nodes.get(node.machine_id) is node else 0
            return (st.node_update_us + st.allocation_us * n) * _US
        self._pass_pending = False
        visited = n = 0
        for node in list(self.cluster.nodes.values()):
            if self.root.pending_tasks == 0:
                break
            if node.free_cpu > EPS and node.free_ram > EPS:
                visited += 1
                n += self._fill(node)
        return (st.node_update_us * visited + st.allocation_us * n) * _US

    def _fill(self, node: NodeRecord) -> int:
        """Start tasks on ``node`` until the policy stops; push the launches in one message."""
        if not node.schedulable or self.recovery is not None:
            return 0
        launches: list[ContainerLaunch] = []
        self.policy.begin_fill(node)
        assign = self.policy.assign
        while self.root.pending_tasks > 0:
            op = assign(node)
            if op is None:
                break
            launches.append(self._start(op, node))
        if launches:
            node.link.send(LaunchContainers(containers=tuple(launches)))
        return len(launches)

    def _place(self) -> int:
        """Node-choosing policies (DRFH): the policy picks operation and node together."""
        if self.recovery is not None:
            return 0
        place = self.policy.place  # type: ignore[attr-defined]
        launches: dict[int, list[ContainerLaunch]] = {}
        while self.root.pending_tasks > 0:
            pick = place(self.cluster.nodes.values())
            if pick is None:
                break
            op, node = pick
            launches.setdefault(node.machine_id, []).append(self._start(op, node))
        for mid, batch in launches.items():
            self.cluster.nodes[mid].link.send(LaunchContainers(containers=tuple(batch)))
        return sum(len(b) for b in launches.values())

    def start_on(self, op: Operation, node: NodeRecord) -> None:
        """Start one task of ``op`` on ``node`` outside a node update (preemption)."""
        node.link.send(LaunchContainers(containers=(self._start(op, node),)))

    def kill_container(self, alloc: Allocation, exit_code: int) -> None:
        """Take a running task back (preemption): the node kills it, the task is pending again."""
        self.send_kill(alloc.node, [alloc.container_id], exit_code)
        self.cluster.release(alloc, self.clock.now())
        self.unconfirmed.pop(alloc.container_id, None)
        alloc.op.requeue(alloc.task)
        self._journal(Ended(cid=alloc.container_id, completed=False))
        self.stats.tasks_preempted += 1

    def _start(self, op: Operation, node: NodeRecord) -> ContainerLaunch:
        now = self.clock.now()
        if not node.fits(op.demand):
            raise AssertionError(f"policy chose {op} that does not fit {node}")
        first = op.started_at is None
        task = op.take_task(now)
        cid = self._next_container_id
        self._next_container_id += 1
        alloc = Allocation(cid, node, op, task, now)
        self.cluster.place(alloc, now)
        self.unconfirmed[cid] = (alloc, now)
        self._journal(Started(cid=cid, op_id=op.id, task=task.index, address=node.address, at=now))
        self.stats.allocations += 1
        if first:
            self.log.info("operation.started", operation=op.name, pool=op.pool.name)
        return ContainerLaunch(cid, op.demand, task.duration_s)

    # ---- container and node outcomes ---------------------------------------------------

    def container_finished(self, alloc: Allocation, exit_code: int) -> None:
        now = self.clock.now()
        self.cluster.release(alloc, now)
        self.unconfirmed.pop(alloc.container_id, None)
        op = alloc.op
        if exit_code == EXIT_SUCCESS:
            self._journal(Ended(cid=alloc.container_id, completed=True))
            self.stats.containers_completed += 1
            self.groups[op.group].completed_tasks += 1
            for listener in self.task_completed:
                listener(alloc)
            if op.task_completed(now):
                self._finish_operation(op)
        else:
            self._requeue(alloc)

    def _requeue(self, alloc: Allocation) -> None:
        self.requeue_task(alloc.op, alloc.task, alloc.container_id)

    def requeue_task(self, op: Operation, task: Task, container_id: int) -> None:
        """The task of a container that is gone runs again from scratch."""
        op.requeue(task)
        self._journal(Ended(cid=container_id, completed=False))
        self.stats.tasks_requeued += 1
        self.groups[op.group].requeued += 1
        if self.continuous:
            self.request_pass()

    def lose_node(self, node: NodeRecord, reason: str) -> None:
        """Mark ``node`` lost: return its resources, requeue its tasks, forget it."""
        if self.cluster.nodes.get(node.machine_id) is not node:
            return
        now = self.clock.now()
        allocs = list(node.containers.values())
        for alloc in allocs:
            self.cluster.release(alloc, now)
            self.unconfirmed.pop(alloc.container_id, None)
        for cid in [c for c, (n, _) in self.pending_kills.items() if n is node]:
            del self.pending_kills[cid]
        # Forget the node before requeueing: a requeue may run a scheduling pass at once (inline
        # dispatch), which must not place the tasks back on this node.
        self.cluster.remove(node, now)
        for alloc in allocs:
            self._requeue(alloc)
        self.stats.nodes_lost += 1
        self.log.warning(
            "node.lost", machine_id=node.machine_id, address=node.address, reason=reason,
            requeued=len(allocs),
        )
        for listener in self.node_lost:
            listener(node, reason)

    def set_node_health(self, node: NodeRecord, healthy: bool) -> None:
        if self.cluster.set_healthy(node, healthy, self.clock.now()):
            self.log.info(
                "node.healthy" if healthy else "node.unhealthy", machine_id=node.machine_id
            )

    def send_kill(self, node: NodeRecord, container_ids: list[int], exit_code: int = EXIT_KILLED) -> None:
        """Tell ``node`` to kill containers the RM no longer accounts for; resent until confirmed."""
        if container_ids:
            node.link.send(KillContainers(container_ids=tuple(container_ids), exit_code=exit_code))
            self.expect_kills(node, container_ids)

    def expect_kills(self, node: NodeRecord, container_ids: list[int] | tuple[int, ...]) -> None:
        now = self.clock.now()
        for cid in container_ids:
            self.pending_kills[cid] = (node, now)

    async def _command_monitor(self) -> None:
        """Repair lost launch and kill commands: a node's reports never mentioned them."""
        timeout = self.config.command_timeout_s
        while True:
            await self.clock.sleep(timeout)
            deadline = self.clock.now() - timeout
            now = self.clock.now()
            relaunch: dict[int, list[Allocation]] = {}
            for alloc, sent_at in self.unconfirmed.values():
                if sent_at < deadline:
                    relaunch.setdefault(alloc.node.machine_id, []).append(alloc)
            for allocs in relaunch.values():
                node = allocs[0].node
                self.stats.commands_resent += len(allocs)
                for a in allocs:
                    self.unconfirmed[a.container_id] = (a, now)
                node.link.send(LaunchContainers(containers=tuple(
                    ContainerLaunch(a.container_id, a.op.demand, a.task.duration_s) for a in allocs
                )))
            stale = [(cid, node) for cid, (node, t) in self.pending_kills.items() if t < deadline]
            for cid, node in stale:
                self.stats.commands_resent += 1
                self.send_kill(node, [cid])

    async def _liveliness_monitor(self) -> None:
        expiry = self.config.expiry_s
        period = self.config.monitor_interval_s or expiry / 3
        while True:
            await self.clock.sleep(period)
            deadline = self.clock.now() - expiry
            for node in [n for n in self.cluster.nodes.values() if n.last_heartbeat_at < deadline]:
                self.lose_node(node, reason="expired")

    async def _preemption_loop(self, preemptor: Preemptor) -> None:
        while True:
            await self.clock.sleep(preemptor.config.check_interval_s)
            if self.up and self.recovery is None:
                preemptor.check()

    # ---- client side: pools and operations ---------------------------------------------

    def add_pool(
        self, name: str, weight: float = 1.0, min_share: Resources = ZERO, parent: str = "root"
    ) -> Pool:
        if name in self.pools:
            raise ValueError(f"pool {name!r} already exists")
        if parent not in self.pools:
            raise ValueError(f"pool {name!r}: unknown parent pool {parent!r}")
        pool = Pool(name, weight, min_share, self.pools[parent])
        self.pools[name] = pool
        self._journal(PoolAdded(name=name, weight=weight, min_share=min_share, parent=parent))
        return pool

    def submit_operation(self, spec: OperationSpec) -> Operation:
        if not self.up:
            raise RMUnavailable(f"operation {spec.name!r}: the RM is down")
        pool = self.pools.get(spec.pool)
        if pool is None:
            raise ValueError(f"operation {spec.name!r}: unknown pool {spec.pool!r}")
        op = self._add_operation(self._next_op_id, spec, pool, self.clock.now())
        self._next_op_id += 1
        self._journal(Submitted(op_id=op.id, spec=spec, at=op.submitted_at))
        self.groups[op.group].operations_submitted += 1
        self.log.info("operation.submitted", operation=op.name, pool=pool.name, tasks=op.total)
        for listener in self.operation_submitted:
            listener(op)
        if op.total == 0:
            self._finish_operation(op)
        elif self.continuous:
            self.request_pass()
        return op

    def _add_operation(self, op_id: int, spec: OperationSpec, pool: Pool, at: float) -> Operation:
        op = Operation(op_id, spec, pool, at)
        pool.operations.append(op)
        self.operations[op.id] = op
        if op.group not in self.groups:
            self.groups[op.group] = GroupStats(pool.name)
        self.policy.on_submitted(op)
        return op

    def restore_operation(self, op_id: int, spec: OperationSpec, at: float) -> Operation:
        """Recovery: an operation the journal says is live, submitted at ``at``."""
        pool = self.pools.get(spec.pool) or self.add_pool(spec.pool)
        return self._add_operation(op_id, spec, pool, at)

    def _finish_operation(self, op: Operation) -> None:
        op.pool.operations.remove(op)
        del self.operations[op.id]
        self.policy.on_finished(op)
        self.groups[op.group].operations_finished += 1
        self.log.info(
            "operation.finished", operation=op.name, pool=op.pool.name,
            duration_s=round(self.clock.now() - op.submitted_at, 6),
        )
        for listener in self.operation_finished:
            listener(op)
