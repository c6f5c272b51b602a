"""Fair-share preemption (design.md §3; seed 000 §4.1, YT's fair-share preemption).

Every ``check_interval_s`` the fair shares are recomputed (progressive filling on the pooled
cluster). An operation with pending tasks whose dominant share stays below ``tolerance`` x its
fair share for ``starvation_timeout_s`` is *starving*. Starving operations, most starved first,
then get tasks started until they reach their fair share: on free space where a task fits, else
by preempting tasks of operations above their fair share, most recently started first, on one
node at a time. A victim is never taken below its own fair share. Preempted tasks go back to
pending and the CPU-seconds they had run are counted as lost work.
"""

from __future__ import annotations

from typing import Protocol

from rm.cluster import EPS, Allocation, Cluster, NodeRecord
from rm.context import RMContext
from rm.counters import PreemptionCounters
from rm.operations import Operation
from rm.protocol import EXIT_PREEMPTED
from rm.scheduler.config import PreemptionConfig
from rm.scheduler.fair_share import progressive_filling
from rm.workload import WorkloadBook


class PreemptionHost(Protocol):
    def start_on(self, op: Operation, node: NodeRecord) -> None:
        """Start one task of ``op`` on ``node`` now."""
        ...

    def kill_container(self, alloc: Allocation, exit_code: int) -> None:
        """Take a running task back: the node kills it, the task is pending again."""
        ...


class Preemptor:
    def __init__(
        self, ctx: RMContext, counters: PreemptionCounters, cluster: Cluster, book: WorkloadBook,
        host: PreemptionHost,
    ) -> None:
        self._ctx = ctx
        self.config: PreemptionConfig = ctx.scheduler.preemption
        self._counters = counters
        self._cluster = cluster
        self._book = book
        self._host = host
        self._starving_since: dict[int, float] = {}

    # ---- the pass ------------------------------------------------------------------------

    def check(self) -> int:
        """One preemption pass; returns the number of tasks preempted."""
        now = self._ctx.clock.now()
        cap = self._cluster.capacity
        ops = list(self._book.operations.values())
        if cap.cpu <= 0 or cap.ram_gib <= 0 or not ops:
            self._starving_since.clear()
            return 0
        fair = progressive_filling(self._book.root, ops, cap).operations
        starving: list[Operation] = []
        for op in ops:
            f = fair.get(op.id, 0.0)
            if op.pending and op.dominant_share(cap) < self.config.tolerance * f - EPS:
                since = self._starving_since.setdefault(op.id, now)
                if now - since >= self.config.starvation_timeout_s:
                    starving.append(op)
            else:
                self._starving_since.pop(op.id, None)
        for gone in set(self._starving_since) - {op.id for op in ops}:
            del self._starving_since[gone]
        starving.sort(key=lambda op: op.dominant_share(cap) / fair[op.id])
        before = self._counters.preemptions
        for op in starving:
            self._satisfy(op, fair)
        return self._counters.preemptions - before

    def _satisfy(self, op: Operation, fair: dict[int, float]) -> None:
        cap = self._cluster.capacity
        tried: set[int] = set()
        while op.pending and op.dominant_share(cap) < fair[op.id] - EPS:
            node = self._free_node(op) or self._make_room(op, fair, tried)
            if node is None:
                return
            self._host.start_on(op, node)
            self._counters.starved_starts += 1
        self._starving_since.pop(op.id, None)

    def _free_node(self, op: Operation) -> NodeRecord | None:
        for node in self._cluster.nodes.values():
            if node.schedulable and node.fits(op.demand):
                return node
        return None

    def _make_room(
        self, op: Operation, fair: dict[int, float], tried: set[int]
    ) -> NodeRecord | None:
        """Preempt the most recently started victim tasks on one node until ``op`` fits there."""
        cluster = self._cluster
        cap = cluster.capacity
        above = {
            o.id for o in self._book.operations.values()
            if o is not op and o.dominant_share(cap) > fair.get(o.id, 0.0) + EPS
        }
        if not above:
            return None
        victims = sorted(
            (a for n in cluster.nodes.values() if n.schedulable
             for a in n.containers.values() if a.op.id in above),
            key=lambda a: (-a.started_at, -a.container_id),
        )
        d = op.demand
        for first in victims:
            node = first.node
            if node.machine_id in tried:
                continue
            # Tentative usage of each victim, so no victim drops below its fair share.
            usage: dict[int, tuple[float, float]] = {}
            chosen: list[Allocation] = []
            free_cpu, free_ram = node.free_cpu, node.free_ram
            local = sorted(
                (a for a in node.containers.values() if a.op.id in above),
                key=lambda a: (-a.started_at, -a.container_id),
            )
            for alloc in local:
                if d.cpu <= free_cpu + EPS and d.ram_gib <= free_ram + EPS:
                    break
                v = alloc.op
                uc, ur = usage.get(v.id, (v.usage_cpu, v.usage_ram))
                uc, ur = uc - v.demand.cpu, ur - v.demand.ram_gib
                if max(uc / cap.cpu, ur / cap.ram_gib) < fair.get(v.id, 0.0) - EPS:
                    continue
                usage[v.id] = (uc, ur)
                chosen.append(alloc)
                free_cpu += v.demand.cpu
                free_ram += v.demand.ram_gib
            if d.cpu <= free_cpu + EPS and d.ram_gib <= free_ram + EPS and chosen:
                self._preempt(op, node, chosen)
                return node
            tried.add(node.machine_id)  # no room to be made here for this operation
        return None

    def _preempt(self, op: Operation, node: NodeRecord, chosen: list[Allocation]) -> None:
        ctx = self._ctx
        now = ctx.clock.now()
        counters = self._counters
        for alloc in chosen:
            counters.preemptions += 1
            # Lost work counts only inside the measurement window.
            ran = now - max(alloc.started_at, counters.window_start_s)
            if ran > 0:
                counters.preempted_cpu_s += alloc.op.demand.cpu * ran
            group = ctx.groups.get(alloc.op.group)
            if group is not None:
                group.preempted += 1
            self._host.kill_container(alloc, EXIT_PREEMPTED)
        ctx.log.info(
            "task.preempted", operation=op.name, machine_id=node.machine_id,
            victims=[a.op.name for a in chosen],
        )
