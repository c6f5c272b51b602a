"""The RM's view of the cluster: registered nodes, their allocations, totals over time."""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Iterator

from rm.ports import Link
from rm.protocol import ZERO, ContainerStatus, ContainerUsage, HeartbeatResponse, Resources
from rm.state.observed_usage import Observations
from rm.state.operations import Operation, Task
from rm.state.room_index import Demand, RoomIndex

# Resource comparisons tolerate float rounding of this size.
EPS = 1e-9


class NodeState(enum.Enum):
    RUNNING = "running"
    UNHEALTHY = "unhealthy"
    LOST = "lost"


class Allocation:
    """A container the RM placed on a node for one task."""

    __slots__ = ("container_id", "node", "observed", "op", "started_at", "task", "usage", "used_at",
                 "used_cpu_s")

    def __init__(
        self, container_id: int, node: NodeRecord, op: Operation, task: Task, now: float
    ) -> None:
        self.container_id = container_id
        self.node = node
        self.op = op
        self.task = task
        self.started_at = now
        # The latest real usage its node reported (usage-modelled containers only).
        self.usage: ContainerUsage | None = None
        self.observed: Observations | None = None
        # CPU-seconds the task used up to `used_at` (what preemption throws away if it is killed).
        self.used_cpu_s = 0.0
        self.used_at = now

    def cpu_used_s(self, now: float) -> float:
        """CPU-seconds used from the start (or the measurement window's start) to ``now``: each
        reported usage holds until the next report, the first back to the start; a task that has
        reported none (no usage model, or none reported yet) uses its request."""
        rate = self.usage.cpu if self.usage is not None else self.op.demand.cpu
        return self.used_cpu_s + rate * max(0.0, now - self.used_at)

    def report_usage(self, usage: ContainerUsage, now: float) -> None:
        """A heartbeat reported ``usage``: the time since the last report is counted at the
        previous rate (at this one if it is the first)."""
        rate = (self.usage or usage).cpu
        self.used_cpu_s += rate * max(0.0, now - self.used_at)
        self.used_at = now
        self.usage = usage

    def restart_usage_count(self, now: float) -> None:
        """The measurement window starts: used CPU counts from ``now``."""
        self.used_cpu_s = 0.0
        self.used_at = now


class NodeRecord:
    __slots__ = (
        "address",
        "attempt_at",
        "containers",
        "free_cpu",
        "free_ram",
        "last_heartbeat_at",
        "last_response",
        "last_response_id",
        "link",
        "machine_id",
        "peer_endpoint",
        "quiet_report",
        "registered_at",
        "seq",
        "state",
        "total",
    )

    def __init__(self, machine_id: int, address: str, total: Resources, link: Link, now: float) -> None:
        self.machine_id = machine_id
        self.address = address
        self.total = total
        self.free_cpu = total.cpu
        self.free_ram = total.ram_gib
        self.state = NodeState.RUNNING
        self.containers: dict[int, Allocation] = {}
        self.last_response_id = 0
        self.last_response: HeartbeatResponse | None = None
        self.last_heartbeat_at = now
        self.registered_at = now
        self.link = link
        self.peer_endpoint = ""
        self.attempt_at = -1.0  # the registration attempt that registered it (``Register``)
        self.seq = 0  # the order in which the cluster took nodes in (scheduling passes go by it)
        # The last report whose walk changed nothing: every status in it a running container of
        # ours. Until one of ours is released (``release`` forgets it), the same report object
        # again needs no walk.
        self.quiet_report: tuple[ContainerStatus, ...] | None = None

    @property
    def schedulable(self) -> bool:
        return self.state is NodeState.RUNNING

    def fits(self, demand: Resources) -> bool:
        return demand.cpu <= self.free_cpu + EPS and demand.ram_gib <= self.free_ram + EPS

    def __repr__(self) -> str:
        return f"Node({self.machine_id}, {self.address!r}, {self.state.value})"


class UsageIntegral:
    """Time integrals of allocated and schedulable capacity, for time-weighted utilisation."""

    __slots__ = ("cap_cpu_s", "cap_ram_s", "last_t", "used_cpu_s", "used_ram_s")

    def __init__(self, t: float) -> None:
        self.last_t = t
        self.used_cpu_s = self.used_ram_s = self.cap_cpu_s = self.cap_ram_s = 0.0

    def cpu_utilization(self) -> float:
        return self.used_cpu_s / self.cap_cpu_s if self.cap_cpu_s > 0 else 0.0

    def ram_utilization(self) -> float:
        return self.used_ram_s / self.cap_ram_s if self.cap_ram_s > 0 else 0.0

    def reset(self, t: float) -> None:
        """Start integrating afresh from ``t`` (the measurement window begins)."""
        self.last_t = t
        self.used_cpu_s = self.used_ram_s = self.cap_cpu_s = self.cap_ram_s = 0.0


class Cluster:
    def __init__(self, integral: UsageIntegral | None = None) -> None:
        """``integral``: the time integrals to advance (they outlive an RM restart)."""
        if integral is None:
            integral = UsageIntegral(0.0)
        self.nodes: dict[int, NodeRecord] = {}
        self.by_address: dict[str, NodeRecord] = {}
        self._by_link: dict[Link, NodeRecord] = {}
        self._free_ids: list[int] = []
        self._next_id = 1
        # Nodes with room on both resources, so a scheduling pass over a full cluster of thousands
        # of nodes visits the few with room (where some waiting task fits) instead of all of them.
        self._room: RoomIndex[NodeRecord] = RoomIndex(EPS)
        self._seq = 0
        self.cap_cpu = 0.0
        self.cap_ram = 0.0
        self.used_cpu = 0.0
        self.used_ram = 0.0
        self.integral = integral
        # Called with a node whose free resources or membership changed (a placement index).
        self._watchers: list[Callable[[NodeRecord], None]] = []
        # Bumped when a node joins, leaves or changes health: what ``registered()`` walks for.
        self._membership_changes = 0
        self._registered: tuple[int, float, float, int] = (0, 0.0, 0.0, 0)  # (version, cpu, ram, unhealthy)

    def watch(self, fn: Callable[[NodeRecord], None]) -> None:
        self._watchers.append(fn)

    # ---- capacity and usage ------------------------------------------------------------

    @property
    def capacity(self) -> Resources:
        return Resources(self.cap_cpu, self.cap_ram)

    @property
    def used(self) -> Resources:
        return Resources(self.used_cpu, self.used_ram)

    def advance(self, now: float) -> None:
        g = self.integral
        dt = now - g.last_t
        if dt > 0:
            g.used_cpu_s += self.used_cpu * dt
            g.used_ram_s += self.used_ram * dt
            g.cap_cpu_s += self.cap_cpu * dt
            g.cap_ram_s += self.cap_ram * dt
            g.last_t = now

    def registered(self) -> tuple[float, float, int]:
        """(cpu, ram, unhealthy nodes) over every registered node, healthy or not: the walk over
        the nodes (summed in their order), taken again only after membership or health changed,
        not at every snapshot."""
        version, cpu, ram, unhealthy = self._registered
        if version != self._membership_changes:
            cpu = ram = 0.0
            unhealthy = 0
            for n in self.nodes.values():
                cpu += n.total.cpu
                ram += n.total.ram_gib
                if n.state is NodeState.UNHEALTHY:
                    unhealthy += 1
            self._registered = (self._membership_changes, cpu, ram, unhealthy)
        return cpu, ram, unhealthy

    def _capacity_delta(self, node: NodeRecord, sign: float, now: float) -> None:
        # Totals cover schedulable nodes only: capacity and what is allocated on it.
        self.advance(now)
        self.cap_cpu += sign * node.total.cpu
        self.cap_ram += sign * node.total.ram_gib
        self.used_cpu += sign * (node.total.cpu - node.free_cpu)
        self.used_ram += sign * (node.total.ram_gib - node.free_ram)

    # ---- membership --------------------------------------------------------------------

    def allocate_id(self) -> int:
        if self._free_ids:
            return heapq.heappop(self._free_ids)
        mid = self._next_id
        self._next_id += 1
        return mid

    def add(self, address: str, total: Resources, link: Link, now: float) -> NodeRecord:
        node = NodeRecord(self.allocate_id(), address, total, link, now)
        self._seq += 1
        node.seq = self._seq
        self.nodes[node.machine_id] = node
        self._membership_changes += 1
        self.by_address[address] = node
        self._by_link[link] = node
        self._capacity_delta(node, 1.0, now)
        self._update_room(node)
        return node

    def remove(self, node: NodeRecord, now: float) -> None:
        """Forget a node whose containers were already released; its id becomes free again."""
        if node.state is NodeState.RUNNING:
            self._capacity_delta(node, -1.0, now)
        node.state = NodeState.LOST
        del self.nodes[node.machine_id]
        self._membership_changes += 1
        self._room.discard(node)
        if self.by_address.get(node.address) is node:
            del self.by_address[node.address]
        if self._by_link.get(node.link) is node:
            del self._by_link[node.link]
        heapq.heappush(self._free_ids, node.machine_id)
        for fn in self._watchers:
            fn(node)

    def relink(self, node: NodeRecord, link: Link) -> None:
        """``node`` re-registered on another connection."""
        if self._by_link.get(node.link) is node:
            del self._by_link[node.link]
        node.link = link
        self._by_link[link] = node

    def on_link(self, link: Link) -> NodeRecord | None:
        """The node registered on ``link`` (if any still is)."""
        return self._by_link.get(link)

    def set_healthy(self, node: NodeRecord, healthy: bool, now: float) -> bool:
        """Returns True if the state changed."""
        if healthy and node.state is NodeState.UNHEALTHY:
            node.state = NodeState.RUNNING
            self._membership_changes += 1
            self._capacity_delta(node, 1.0, now)
            return True
        if not healthy and node.state is NodeState.RUNNING:
            node.state = NodeState.UNHEALTHY
            self._membership_changes += 1
            self._capacity_delta(node, -1.0, now)
            return True
        return False

    # ---- allocations -------------------------------------------------------------------

    def place(self, alloc: Allocation, now: float) -> None:
        node = alloc.node
        d = alloc.op.demand
        self.advance(now)
        node.free_cpu -= d.cpu
        node.free_ram -= d.ram_gib
        node.containers[alloc.container_id] = alloc
        if node.state is NodeState.RUNNING:
            self.used_cpu += d.cpu
            self.used_ram += d.ram_gib
        self._update_room(node)

    def release(self, alloc: Allocation, now: float) -> None:
        node = alloc.node
        d = alloc.op.demand
        self.advance(now)
        del node.containers[alloc.container_id]
        node.quiet_report = None  # a report that named it needs walking again
        node.free_cpu += d.cpu
        node.free_ram += d.ram_gib
        if node.state is NodeState.RUNNING:
            self.used_cpu -= d.cpu
            self.used_ram -= d.ram_gib
        self._update_room(node)

    def _update_room(self, node: NodeRecord) -> None:
        for fn in self._watchers:
            fn(node)
        if self.nodes.get(node.machine_id) is not node:
            return
        if node.free_cpu > EPS and node.free_ram > EPS:
            self._room.put(node)
        else:
            self._room.discard(node)

    def with_room(self) -> list[NodeRecord]:
        """Nodes with room on both resources, in the order the cluster took them in."""
        return self._room.in_order()

    def room_for(self, start: int, demands: list[Demand]) -> Iterator[NodeRecord]:
        """The nodes with room from ``seq`` ``start`` on where one of ``demands`` (cpu, ram) fits,
        in the order the cluster took them in (a scheduling pass, resumable)."""
        return self._room.fitting(start, demands)

    def allocated_on(self, node: NodeRecord) -> Resources:
        total = ZERO
        for alloc in node.containers.values():
            total = total + alloc.op.demand
        return total
