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

from typing import TYPE_CHECKING, NamedTuple

from rm.cluster import Allocation, NodeRecord
from rm.operations import Operation
from rm.protocol import EXIT_PREEMPTED
from rm.resources import EPS
from rm.scheduler.config import PreemptionConfig
from rm.scheduler.fair_share import progressive_filling

if TYPE_CHECKING:
    from rm.manager import ResourceManager


class PreemptionRecord(NamedTuple):
    t: float
    started_at: float
    cpu: float
    ram_gib: float
    victim: str  # workload group of the preempted task
    starving: str  # workload group it made room for


class Preemptor:
    def __init__(self, rm: ResourceManager, config: PreemptionConfig) -> None:
        self._rm = rm
        self.config = config
        self._starving_since: dict[int, float] = {}
        self.records: list[PreemptionRecord] = []
        self.starved_starts = 0  # tasks started for starving operations (with or without kills)

    @property
    def preemptions(self) -> int:
        return len(self.records)

    def preempted_cpu_s(self, since: float = 0.0) -> float:
        """CPU-seconds of work lost to preemption, counting only run time after ``since``."""
        return sum(r.cpu * (r.t - max(r.started_at, since)) for r in self.records if r.t > since)

    # ---- the pass ------------------------------------------------------------------------

    def check(self) -> int:
        """One preemption pass; returns the number of tasks preempted."""
        rm = self._rm
        now = rm.clock.now()
        cap = rm.cluster.capacity
        ops = list(rm.operations.values())
        if cap.cpu <= 0 or cap.ram_gib <= 0 or not ops:
            self._starving_since.clear()
            return 0
        fair = progressive_filling(rm.root, ops, cap).operations
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
        before = len(self.records)
        for op in starving:
            self._satisfy(op, fair)
        return len(self.records) - before

    def _satisfy(self, op: Operation, fair: dict[int, float]) -> None:
        rm = self._rm
        cap = rm.cluster.capacity
        tried: set[int] = set()
        while op.pending and op.dominant_share(cap) < fair[op.id] - EPS:
            node = self._free_node(op) or self._make_room(op, fair, tried)
            if node is None:
                return
            rm.start_on(op, node)
            self.starved_starts += 1
        self._starving_since.pop(op.id, None)

    def _free_node(self, op: Operation) -> NodeRecord | None:
        for node in self._rm.cluster.nodes.values():
            if node.schedulable and node.fits(op.demand):
                return node
        return None

    def _make_room(
        self, op: Operation, fair: dict[int, float], tried: set[int]
    ) -> NodeRecord | None:
        """Preempt the most recently started victim tasks on one node until ``op`` fits there."""
        rm = self._rm
        cap = rm.cluster.capacity
        above = {
            o.id for o in rm.operations.values()
            if o is not op and o.dominant_share(cap) > fair.get(o.id, 0.0) + EPS
        }
        if not above:
            return None
        victims = sorted(
            (a for n in rm.cluster.nodes.values() if n.schedulable
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
                now = rm.clock.now()
                for alloc in chosen:
                    self.records.append(
                        PreemptionRecord(
                            now, alloc.started_at, alloc.op.demand.cpu, alloc.op.demand.ram_gib,
                            alloc.op.group, op.group,
                        )
                    )
                    rm.kill_container(alloc, EXIT_PREEMPTED)
                rm.log.info(
                    "task.preempted", operation=op.name, machine_id=node.machine_id,
                    victims=[a.op.name for a in chosen],
                )
                return node
            tried.add(node.machine_id)  # no room to be made here for this operation
        return None
