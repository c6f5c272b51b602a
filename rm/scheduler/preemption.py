"""Fair-share preemption (design.md §3; seed 000 §4.1, YT's fair-share preemption).

Every ``check_interval_s`` the fair shares are recomputed (progressive filling on the pooled
cluster). An operation with pending tasks whose dominant share stays below ``tolerance`` x its
fair share for ``starvation_timeout_s`` is *starving*. Two rules (``PreemptionConfig.mode``):

``yt`` (the default; YT's fair-share strategy as the thesis ran it): preemption happens inside a
node update, on that node only, at most once per ``node_backoff_s`` per node. Starving
operations, most starved first, start tasks on the node -- in its free space, else by preempting
tasks there -- only while they are below ``tolerance`` x their fair share (they are topped up to
the tolerance, not to the full share). An operation's first ``min_unpreemptable_jobs`` running
tasks are never taken, and an operation younger than ``rampup_grace_s`` is not starving yet.

``full-share`` (the emulator's first rule): in one cluster-wide pass per check, each starving
operation is topped up to its full fair share, on free space where a task fits, else by
preempting on one node at a time.

In both, victims are tasks of operations above their fair share, most recently started first; a
task is never taken if that would put its operation, or any pool above it, below its fair share
or a pool below its min share (as YARN checks the whole queue path). Preempted tasks go back to
pending and their work is counted as lost: ``lost_work = "consumed"`` (the default; as the
thesis measured it) counts the CPU-seconds the task actually used (its reported usage, or its
request when it has no usage model), ``"reserved"`` (the rule before issue 33) its request times
the time it ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from rm.counters import GroupCounters, PreemptionCounters
from rm.ports import Clock, Log
from rm.protocol import EXIT_PREEMPTED
from rm.scheduler.config import PreemptionConfig
from rm.scheduler.fair_share import FairShares, progressive_filling
from rm.state.cluster import EPS, Allocation, Cluster, NodeRecord
from rm.state.operations import Operation, Pool
from rm.state.workload import WorkloadBook


class PreemptionHost(Protocol):
    def start_on(self, op: Operation, node: NodeRecord) -> None:
        """Start one task of ``op`` on ``node`` now."""
        ...

    def kill_container(self, alloc: Allocation, exit_code: int) -> None:
        """Take a running task back: the node kills it, the task is pending again."""
        ...


class Preemptor:
    def __init__(
        self, config: PreemptionConfig, clock: Clock, log: Log, groups: Mapping[str, GroupCounters],
        counters: PreemptionCounters, cluster: Cluster, book: WorkloadBook, host: PreemptionHost,
    ) -> None:
        self.config = config
        self._clock = clock
        self._log = log
        self._groups = groups  # the RM's per-group counters (a task preempted counts to its group)
        self._counters = counters
        self._cluster = cluster
        self._book = book
        self._host = host
        self._starving_since: dict[int, float] = {}
        # `yt`: fair shares and starving operations as of the last check; node -> last attempt.
        self._shares: FairShares | None = None
        self._starving: list[Operation] = []
        self._last_attempt: dict[int, float] = {}

    # ---- the pass ------------------------------------------------------------------------

    def check(self) -> int:
        """The periodic check: refresh starvation; ``full-share`` also preempts now. Returns the
        number of tasks preempted."""
        starving = self._refresh()
        if self.config.mode != "full-share" or self._shares is None:
            return 0
        before = self._counters.preemptions
        for op in starving:
            self._satisfy(op, self._shares)
        return self._counters.preemptions - before

    def _refresh(self) -> list[Operation]:
        """Recompute fair shares and who is starving, most starved first."""
        now = self._clock.now()
        cap = self._cluster.capacity
        ops = list(self._book.operations.values())
        if cap.cpu <= 0 or cap.ram_gib <= 0 or not ops:
            self._starving_since.clear()
            self._shares, self._starving = None, []
            return []
        shares = progressive_filling(self._book.root, ops, cap)
        fair = shares.operations
        grace = self.config.rampup_grace_s if self.config.mode == "yt" else 0.0
        starving: list[Operation] = []
        for op in ops:
            f = fair.get(op.id, 0.0)
            if (op.pending and op.dominant_share(cap) < self.config.tolerance * f - EPS
                    and now - op.submitted_at >= grace):
                since = self._starving_since.setdefault(op.id, now)
                if now - since >= self.config.starvation_timeout_s:
                    starving.append(op)
            else:
                self._starving_since.pop(op.id, None)
        for gone in set(self._starving_since) - {op.id for op in ops}:
            del self._starving_since[gone]
        starving.sort(key=lambda op: (op.dominant_share(cap) / fair[op.id], op.id))
        self._shares, self._starving = shares, starving
        return starving

    # ---- yt: inside a node update ----------------------------------------------------------

    def on_node(self, node: NodeRecord) -> int:
        """``yt``: preemptive scheduling on ``node`` after its ordinary fill; returns the number
        of tasks preempted."""
        shares = self._shares
        if self.config.mode != "yt" or shares is None or not self._starving or not node.schedulable:
            return 0
        now = self._clock.now()
        last = self._last_attempt.get(node.machine_id)
        if last is not None and now - last < self.config.node_backoff_s:
            return 0
        self._last_attempt[node.machine_id] = now
        cap = self._cluster.capacity
        tol = self.config.tolerance
        fair = shares.operations
        live = self._book.operations
        before = self._counters.preemptions
        for op in self._starving:
            if live.get(op.id) is not op:
                continue
            d = op.demand
            if d.cpu > node.total.cpu + EPS or d.ram_gib > node.total.ram_gib + EPS:
                continue
            # Topped up only while still starving (below the tolerance), as YT's preemptive pass.
            while op.pending and op.dominant_share(cap) < tol * fair.get(op.id, 0.0) - EPS:
                if not node.fits(d):
                    chosen = self._room_on(node, op, shares, self._above(op, shares), guard=True)
                    if chosen is None:
                        break
                    self._preempt(op, node, chosen)
                self._host.start_on(op, node)
                self._counters.starved_starts += 1
        return self._counters.preemptions - before

    # ---- full-share: one cluster-wide pass -------------------------------------------------

    def _satisfy(self, op: Operation, shares: FairShares) -> None:
        cap = self._cluster.capacity
        fair = shares.operations
        tried: set[int] = set()
        while op.pending and op.dominant_share(cap) < fair[op.id] - EPS:
            node = self._free_node(op) or self._make_room(op, shares, tried)
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

    def _above(self, op: Operation, shares: FairShares) -> set[int]:
        """Operations other than ``op`` above their fair share: the possible victims."""
        cap = self._cluster.capacity
        fair = shares.operations
        return {
            o.id for o in self._book.operations.values()
            if o is not op and o.dominant_share(cap) > fair.get(o.id, 0.0) + EPS
        }

    def _make_room(
        self, op: Operation, shares: FairShares, tried: set[int]
    ) -> NodeRecord | None:
        """Preempt the most recently started victim tasks on one node until ``op`` fits there."""
        above = self._above(op, shares)
        if not above:
            return None
        victims = sorted(
            (a for n in self._cluster.nodes.values() if n.schedulable
             for a in n.containers.values() if a.op.id in above),
            key=lambda a: (-a.started_at, -a.container_id),
        )
        for first in victims:
            node = first.node
            if node.machine_id in tried:
                continue
            chosen = self._room_on(node, op, shares, above, guard=False)
            if chosen is not None:
                self._preempt(op, node, chosen)
                return node
            tried.add(node.machine_id)  # no room to be made here for this operation
        return None

    def _room_on(
        self, node: NodeRecord, op: Operation, shares: FairShares, above: set[int], guard: bool
    ) -> list[Allocation] | None:
        """The newest victim tasks on ``node`` whose preemption lets ``op``'s task fit, or None.
        ``guard``: an operation keeps its first ``min_unpreemptable_jobs`` running tasks."""
        if not above:
            return None
        cap = self._cluster.capacity
        fair = shares.operations
        keep = self.config.min_unpreemptable_jobs if guard else 0
        mine = {p.name for p in op.pools_up}
        d = op.demand
        # Tentative usage of each victim and of its pools, so none drops below its fair share.
        usage: dict[int, tuple[float, float]] = {}
        running: dict[int, int] = {}
        # Pools the starving operation is in get the task back: only the victim's own are checked.
        pool_usage: dict[str, tuple[float, float]] = {}
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
            left = running.get(v.id, v.running) - 1
            if left < keep:
                continue
            uc, ur = usage.get(v.id, (v.usage_cpu, v.usage_ram))
            uc, ur = uc - v.demand.cpu, ur - v.demand.ram_gib
            if max(uc / cap.cpu, ur / cap.ram_gib) < fair.get(v.id, 0.0) - EPS:
                continue
            after = {
                p.name: (pc - v.demand.cpu, pr - v.demand.ram_gib)
                for p in v.pools_up if p.name not in mine
                for pc, pr in [pool_usage.get(p.name, (p.usage_cpu, p.usage_ram))]
            }
            if not all(self._pool_keeps_share(p, *after[p.name], shares) for p in v.pools_up
                       if p.name not in mine):
                continue
            pool_usage.update(after)
            usage[v.id] = (uc, ur)
            running[v.id] = left
            chosen.append(alloc)
            free_cpu += v.demand.cpu
            free_ram += v.demand.ram_gib
        if d.cpu <= free_cpu + EPS and d.ram_gib <= free_ram + EPS and chosen:
            return chosen
        return None

    def _pool_keeps_share(self, pool: Pool, cpu: float, ram: float, shares: FairShares) -> bool:
        """Whether ``pool`` with this usage stays at its fair share and is not needy for its min share
        (the scheduler's test: usage of its dominant resource below the min share of it)."""
        cap = self._cluster.capacity
        sc, sr = cpu / cap.cpu, ram / cap.ram_gib
        if max(sc, sr) < shares.pools.get(pool.name, 0.0) - EPS:
            return False
        used, floor = (cpu, pool.min_share.cpu) if sc >= sr else (ram, pool.min_share.ram_gib)
        return not used < floor - EPS

    def _preempt(self, op: Operation, node: NodeRecord, chosen: list[Allocation]) -> None:
        now = self._clock.now()
        counters = self._counters
        for alloc in chosen:
            counters.preemptions += 1
            # Lost work counts only inside the measurement window.
            if self.config.lost_work == "consumed":
                counters.preempted_cpu_s += alloc.cpu_used_s(now)
            else:
                ran = now - max(alloc.started_at, counters.window_start_s)
                if ran > 0:
                    counters.preempted_cpu_s += alloc.op.demand.cpu * ran
            group = self._groups.get(alloc.op.group)
            if group is not None:
                group.preempted += 1
            self._host.kill_container(alloc, EXIT_PREEMPTED)
        self._log.info(
            "task.preempted", operation=op.name, machine_id=node.machine_id,
            victims=[a.op.name for a in chosen],
        )
