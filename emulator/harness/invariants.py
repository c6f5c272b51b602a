"""The invariant checker: capacity, exactly-once tasks, RM view == node reality at quiescence, and
ring agreement once membership changes have settled (see ``check_ring`` and docs/ring.md).

On in tests (``HBEMU_CHECK_INVARIANTS=1``, set by tests/conftest.py) and with ``run --check-invariants``.
A violation raises ``InvariantViolation`` with a report that names the node, task or container.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodemanager.node import NodeManager, NodeState
from rm.cluster import Allocation
from rm.manager import ResourceManager
from rm.operations import Operation
from rm.resources import EPS

if TYPE_CHECKING:
    from emulator.transport.faulty import MessageFaultPlan
    from rm.membership import MembershipService

# Ring changes have settled once nothing has changed for this many ring intervals (plus
# SETTLE_LATENCY_S for messages in flight): time for a node that lost a delta to hear a newer
# version from a neighbour's liveness and fetch the ring (ringmon.monitor anti-entropy).
SETTLE_INTERVALS = 4
SETTLE_LATENCY_S = 1.0


class InvariantViolation(Exception):
    pass


class InvariantChecker:
    def __init__(
        self,
        rm: ResourceManager,
        nodes: list[NodeManager],
        membership: MembershipService | None = None,
        message_faults: MessageFaultPlan | None = None,
    ) -> None:
        self._rm = rm
        self._nodes = {n.address: n for n in nodes}
        self._membership = membership
        self._message_faults = message_faults
        self.ring_checks = 0
        self._completed: set[tuple[int, int]] = set()
        # Every operation ever submitted (op id -> name, tasks) and its completions, across RM lives.
        self._submitted: dict[int, tuple[str, int]] = {}
        self._done: dict[int, int] = {}
        self.checks = 0
        rm.task_completed.append(self._on_completed)
        rm.operation_submitted.append(self._on_submitted)

    def _fail(self, what: str) -> None:
        raise InvariantViolation(f"t={self._rm.clock.now():.3f}s: {what}")

    def _on_completed(self, alloc: Allocation) -> None:
        key = (alloc.op.id, alloc.task.index)
        if key in self._completed:
            self._fail(f"task {alloc.op.name}[{alloc.task.index}] completed twice")
        self._completed.add(key)
        self._done[alloc.op.id] = self._done.get(alloc.op.id, 0) + 1

    def _on_submitted(self, op: Operation) -> None:
        self._submitted[op.id] = (op.name, op.total)

    def lost_tasks(self) -> dict[str, int]:
        """Tasks neither completed nor pending nor running, per operation (must be empty)."""
        lost: dict[str, int] = {}
        for op_id, (name, total) in self._submitted.items():
            accounted = self._done.get(op_id, 0)
            live = self._rm.operations.get(op_id)
            if live is not None:
                accounted += len(live.pending) + live.running
            if accounted != total:
                lost[name] = total - accounted
        return lost

    def summary(self) -> dict[str, int]:
        return {
            "invariant_checks": self.checks,
            # Samples at which membership had settled and every live node's ring was compared.
            "ring_agreement_checks": self.ring_checks,
            "tasks_submitted": sum(total for _, total in self._submitted.values()),
            "tasks_completed_once": len(self._completed),
            "tasks_lost": sum(self.lost_tasks().values()),
            # A second completion of a task stops the run, so a finished run has none.
            "tasks_duplicated": 0,
        }

    def check_step(self) -> None:
        """Cheap enough to run every sample: capacity and task accounting."""
        self.checks += 1
        placed: dict[tuple[int, int], int] = {}
        for rec in self._rm.cluster.nodes.values():
            if rec.free_cpu < -EPS or rec.free_ram < -EPS:
                self._fail(f"node {rec.machine_id} ({rec.address}) allocated beyond capacity: "
                           f"free {rec.free_cpu:g} cpu / {rec.free_ram:g} GiB")
            for cid, alloc in rec.containers.items():
                key = (alloc.op.id, alloc.task.index)
                if key in placed:
                    self._fail(f"task {alloc.op.name}[{alloc.task.index}] runs twice: containers "
                               f"{placed[key]} and {cid}")
                placed[key] = cid
        for nm in self._nodes.values():
            used, cap = nm.used(), nm.resources
            if used.cpu > cap.cpu + EPS or used.ram_gib > cap.ram_gib + EPS:
                self._fail(f"node {nm.address} runs more than it has: {used} of {cap}")
        for op in self._rm.operations.values():
            if op.running + len(op.pending) + op.completed != op.total:
                self._fail(f"operation {op.name}: running {op.running} + pending {len(op.pending)} + "
                           f"completed {op.completed} != {op.total} tasks")
        if self._membership is not None:
            self.check_ring()

    def ring_settled(self) -> bool:
        """Membership changes have settled: nothing pending at the RM (joins/removals not yet
        published, open suspicions, suspects held by the brake), its inbound queue empty, and no
        ring change published and no message-fault window active for the settle time."""
        ms = self._membership
        if ms is None or not self._rm.up or self._rm.recovery is not None:
            return False  # an RM restart: nodes rejoin a new ring as they reconnect
        quiet = ms.quiet_since()
        if quiet is None or self._rm.inbound.depth:
            return False
        now = self._rm.clock.now()
        if self._message_faults is not None:
            for w in self._message_faults.windows:
                if w.start <= now:
                    quiet = max(quiet, min(w.end, now))
        return now - quiet >= SETTLE_INTERVALS * ms.interval_s + SETTLE_LATENCY_S

    def check_ring(self) -> None:
        """When settled: the RM's published ring is its set of registered nodes, and every live
        node (running, ring monitor active, loop not stalled) holds exactly that ring version."""
        ms = self._membership
        if ms is None or not self.ring_settled():
            return
        self.ring_checks += 1
        pub = ms.ring.published
        registered = set(self._rm.cluster.nodes)
        if set(pub.ids) != registered:
            missing, extra = sorted(registered - pub.members)[:10], sorted(pub.members - registered)[:10]
            self._fail(f"the RM's ring v{pub.version} is not its registered nodes: missing {missing}, "
                       f"extra {extra}")
        for nm in self._nodes.values():
            mon = nm.monitor
            if nm.state is not NodeState.RUNNING or mon is None or not mon.active or nm.paused:
                continue
            view = mon.view
            if view is None or view.version != pub.version or view.members != pub.members:
                held = "no ring" if view is None else f"ring v{view.version} ({len(view.ids)} members)"
                self._fail(f"ring disagreement after settling: node {nm.address} (id {nm.machine_id}) "
                           f"holds {held}, the RM's ring is v{pub.version} ({len(pub.ids)} members)")

    def check_quiescent(self) -> None:
        """The RM's containers per node equal what the node runs, give or take unreported completions."""
        self.check_step()
        lost = self.lost_tasks()
        if lost:
            some = dict(sorted(lost.items())[:10])
            self._fail(f"tasks lost (neither completed, pending nor running): {some}")
        for rec in self._rm.cluster.nodes.values():
            nm = self._nodes.get(rec.address)
            if nm is None or nm.state is not NodeState.RUNNING:
                continue
            real = set(nm.running_containers())
            unreported = nm.unreported_completions()
            rm_view = set(rec.containers)
            if not real <= rm_view:
                self._fail(f"node {rec.address} runs containers the RM does not know: "
                           f"{sorted(real - rm_view)[:10]}")
            missing = rm_view - real - unreported
            if missing:
                self._fail(f"the RM believes node {rec.address} runs containers it does not: "
                           f"{sorted(missing)[:10]}")
