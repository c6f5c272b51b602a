"""The invariant checker: capacity, exactly-once tasks, RM view == node reality at quiescence, and
ring agreement once membership changes have settled (see ``check_ring`` and docs/ring.md).

On in tests (``HBEMU_CHECK_INVARIANTS=1``, set by tests/conftest.py) and with ``run --check-invariants``.
It reads the RM through its views and the nodes through ``NodeReality`` records, so it checks a
run the same way whatever the transport. A violation raises ``InvariantViolation`` with a report
that names the node, task or container.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from emulator.harness.hosting import NodeReality
from rm import EPS, OperationEvent, ResourceManager, RMObserver, TaskCompleted

# Ring changes have settled once nothing has changed for this many ring intervals (plus
# SETTLE_LATENCY_S for messages in flight): time for a node that lost a delta to hear a newer
# version from a neighbour's liveness and fetch the ring (ringmon.monitor anti-entropy).
SETTLE_INTERVALS = 4
SETTLE_LATENCY_S = 1.0


class InvariantViolation(Exception):
    pass


class InvariantSummary(msgspec.Struct, frozen=True):
    invariant_checks: int
    # Samples at which membership had settled and every live node's ring was compared.
    ring_agreement_checks: int
    tasks_submitted: int
    tasks_completed_once: int
    tasks_lost: int
    # A second completion of a task stops the run, so a finished run has none.
    tasks_duplicated: int
    # The end-of-run comparison of the RM's containers with the nodes': passed, or why not run.
    end_check: str


class InvariantChecker(RMObserver):
    def __init__(
        self,
        rm: ResourceManager,
        ring_interval_s: float | None = None,
        quiet_windows: Callable[[], list[tuple[float, float]]] = list,
        overcommit: float = 1.0,
    ) -> None:
        """``ring_interval_s``: the ring's interval when the ring is on; ``quiet_windows()``: time
        windows (message faults) after which ring changes need the settle time again."""
        self._rm = rm
        self._ring_interval = ring_interval_s
        self._quiet_windows = quiet_windows
        # Reservations may reach this × capacity (scheduler.placement.overcommit, design.md §3b).
        self._over = overcommit - 1.0
        self.ring_checks = 0
        self._completed: set[tuple[int, int]] = set()
        # Every operation ever submitted (op id -> name, tasks) and its completions, across RM lives.
        self._submitted: dict[int, tuple[str, int]] = {}
        self._done: dict[int, int] = {}
        self.checks = 0
        self.end_check = "not run"
        rm.observe(self)

    def _fail(self, what: str) -> None:
        raise InvariantViolation(f"t={self._rm.clock.now():.3f}s: {what}")

    def task_completed(self, ev: TaskCompleted) -> None:
        key = (ev.op_id, ev.task)
        if key in self._completed:
            self._fail(f"task {ev.operation}[{ev.task}] completed twice")
        self._completed.add(key)
        self._done[ev.op_id] = self._done.get(ev.op_id, 0) + 1

    def operation_submitted(self, ev: OperationEvent) -> None:
        self._submitted[ev.op_id] = (ev.name, ev.tasks)

    def lost_tasks(self) -> dict[str, int]:
        """Tasks neither completed nor pending nor running, per operation (must be empty)."""
        live = {op.id: op for op in self._rm.operations_view()}
        lost: dict[str, int] = {}
        for op_id, (name, total) in self._submitted.items():
            accounted = self._done.get(op_id, 0)
            op = live.get(op_id)
            if op is not None:
                accounted += op.pending + op.running
            if accounted != total:
                lost[name] = total - accounted
        return lost

    def summary(self) -> InvariantSummary:
        return InvariantSummary(
            invariant_checks=self.checks,
            ring_agreement_checks=self.ring_checks,
            tasks_submitted=sum(total for _, total in self._submitted.values()),
            tasks_completed_once=len(self._completed),
            tasks_lost=sum(self.lost_tasks().values()),
            tasks_duplicated=0,
            end_check=self.end_check,
        )

    def check_step(self, nodes: list[NodeReality] | None) -> None:
        """Cheap enough to run every sample: capacity and task accounting (and ring agreement
        when it has settled). ``nodes``: the nodes' reality, when the harness has it now."""
        self.checks += 1
        placed: dict[tuple[int, int], int] = {}
        on_nodes: dict[int, int] = {}  # containers per operation id
        for rec in self._rm.nodes_view():
            over = self._over
            if (rec.free.cpu < -EPS - over * rec.total.cpu
                    or rec.free.ram_gib < -EPS - over * rec.total.ram_gib):
                self._fail(f"node {rec.machine_id} ({rec.address}) allocated beyond capacity: "
                           f"free {rec.free.cpu:g} cpu / {rec.free.ram_gib:g} GiB")
            for c in rec.containers:
                key = (c.op_id, c.task)
                if key in placed:
                    self._fail(f"task {c.op_id}[{c.task}] runs twice: containers {placed[key]} and "
                               f"{c.container_id}")
                placed[key] = c.container_id
                on_nodes[c.op_id] = on_nodes.get(c.op_id, 0) + 1
        waiting = self._rm.waiting_by_operation()
        for op in self._rm.operations_view():
            if op.running + op.pending + op.completed != op.total:
                self._fail(f"operation {op.name}: running {op.running} + pending {op.pending} + "
                           f"completed {op.completed} != {op.total} tasks")
            # A running task sits on a node (or, after an RM restart, waits for its node to be back).
            held = on_nodes.get(op.id, 0) + waiting.get(op.id, 0)
            if op.running != held:
                self._fail(f"operation {op.name}: {op.running} tasks running, {held} containers on nodes"
                           + (f" ({waiting[op.id]} awaited after a restart)" if op.id in waiting else ""))
        if nodes is None:
            return
        for nm in nodes:
            room = 1.0 + self._over
            if (nm.used.cpu > nm.capacity.cpu * room + EPS
                    or nm.used.ram_gib > nm.capacity.ram_gib * room + EPS):
                self._fail(f"node {nm.address} runs more than it has: {nm.used} of {nm.capacity}")
        self.check_ring(nodes)

    def ring_settled(self) -> bool:
        """Membership changes have settled: nothing pending at the RM (joins/removals not yet
        published, open suspicions, suspects held by the brake), its inbound queue empty, and no
        ring change published and no message-fault window active for the settle time."""
        if self._ring_interval is None:
            return False
        snap = self._rm.snapshot()
        if not snap.up or snap.recovering:
            return False  # an RM restart: nodes rejoin a new ring as they reconnect
        quiet = self._rm.ring_quiet_since()
        if quiet is None or snap.inbound.depth:
            return False
        now = snap.t
        for start, end in self._quiet_windows():
            if start <= now:
                quiet = max(quiet, min(end, now))
        return now - quiet >= SETTLE_INTERVALS * self._ring_interval + SETTLE_LATENCY_S

    def check_ring(self, nodes: list[NodeReality]) -> None:
        """When settled: the RM's published ring is its set of registered nodes, and every live
        node (running, ring monitor active, loop not stalled) holds exactly that ring version."""
        if not self.ring_settled():
            return
        ring = self._rm.ring_snapshot()
        if ring is None:
            return
        self.ring_checks += 1
        registered = {n.machine_id for n in self._rm.nodes_view()}
        members = set(ring.members)
        if members != registered:
            missing, extra = sorted(registered - members)[:10], sorted(members - registered)[:10]
            self._fail(f"the RM's ring v{ring.version} is not its registered nodes: missing {missing}, "
                       f"extra {extra}")
        digest = hash(ring.members)
        for nm in nodes:
            if not nm.running or nm.ring_version is None or nm.paused:
                continue
            if nm.ring_version != ring.version or nm.ring_digest != digest:
                self._fail(f"ring disagreement after settling: node {nm.address} (id {nm.machine_id}) "
                           f"holds ring v{nm.ring_version} ({nm.ring_size} members), the RM's ring is "
                           f"v{ring.version} ({len(ring.members)} members)")

    def skip_end_check(self, why: str) -> None:
        self.end_check = f"skipped: {why}"

    def check_quiescent(self, nodes: list[NodeReality]) -> None:
        """The RM's containers per node equal what the node runs, give or take unreported completions."""
        self.end_check = "failed"
        self.check_step(nodes)
        lost = self.lost_tasks()
        if lost:
            some = dict(sorted(lost.items())[:10])
            self._fail(f"tasks lost (neither completed, pending nor running): {some}")
        real = {n.address: n for n in nodes}
        # Commands not yet confirmed are on the wire or lost and due again (a run that ends inside
        # a message-loss window): the RM's repair, not a disagreement.
        launching, killing = self._rm.commands_in_flight()
        for rec in self._rm.nodes_view():
            nm = real.get(rec.address)
            if nm is None or not nm.running:
                continue
            running = set(nm.containers)
            rm_view = {c.container_id for c in rec.containers}
            if not running - killing <= rm_view:
                self._fail(f"node {rec.address} runs containers the RM does not know: "
                           f"{sorted(running - killing - rm_view)[:10]}")
            missing = rm_view - running - set(nm.unreported) - launching
            if missing:
                self._fail(f"the RM believes node {rec.address} runs containers it does not: "
                           f"{sorted(missing)[:10]}")
        self.end_check = "passed"
