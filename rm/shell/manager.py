"""The ResourceManager shell: the two queues, the periodic checks, routing, and the RM's lives.

Two single-server queues, as in YARN: ``inbound`` takes node messages (the resource tracker:
validate, apply statuses, answer; ring messages go to the membership service) and turns
heartbeats into node-update events; ``events`` is the scheduler's queue (node updates and
continuous-scheduling passes). Each may charge an emulated service time per item.

Everything a crash loses lives in one ``RMLife``; what outlives it (configuration, counters,
time integrals, the journal, observers, the membership service) stays here. ``crash`` drops the
life; ``recover`` starts a new one from the journal. The views it gives of itself (``snapshot``,
``shares``, ``nodes_view``, ...) are built in ``rm.shell.view_builders``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from functools import partial

import msgspec

from ringmon.config import RingConfig
from ringmon.protocol import ProbeAck, RingMessage
from rm.config import RMConfig
from rm.counters import RMCounters
from rm.membership.service import MembershipService
from rm.ports import Clock, Link, Log
from rm.protocol import ZERO, Disconnected, Heartbeat, Register, Resources
from rm.queues.dispatcher import Dispatcher, Handler
from rm.queues.inbound import InboundAdmission, inbound_cost
from rm.queues.timers import Periodic
from rm.recovery.durability import Durability
from rm.recovery.journal import AnyRecord, Journal, PoolAdded, Submitted, Totals
from rm.recovery.restart import Recovery
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.loop import SchedulerItem
from rm.shell.context import RMContext
from rm.shell.life import RMLife, operation_event
from rm.shell.view_builders import (
    fair_shares,
    node_view,
    nodes_view,
    operations_view,
    pools_view,
    rm_snapshot,
    sampled_shares,
)
from rm.state.cluster import NodeRecord
from rm.state.operations import OperationSpec
from rm.views.observer import RMObserver
from rm.views.pending_reasons import PendingReasons
from rm.views.pending_reasons import explain as explain_pending
from rm.views.snapshot import NodeView, OperationView, PoolView, RingSnapshot, RMSnapshot, SharesSnapshot

Inbound = tuple[Link | None, object]


class RMUnavailable(Exception):
    """The RM is down (between a crash and its recovery): clients retry later."""


class ResourceManager:
    def __init__(
        self,
        clock: Clock,
        log: Log,
        config: RMConfig | None = None,
        scheduler: SchedulerConfig | None = None,
        heartbeat_mode: str = "periodic",
        ring: RingConfig | None = None,
        journal: Journal | None = None,
        resume: bool = False,
    ) -> None:
        """``ring``: run the ring membership service (the ring is on); ``journal``: keep a
        durable record of the work, for work-preserving restart; ``resume``: the journal is an
        earlier RM process's, this one starts down and ``recover()`` starts its first life."""
        config = config or RMConfig()
        scheduler = scheduler or SchedulerConfig()
        continuous = scheduler.continuous if scheduler.continuous is not None else heartbeat_mode == "delta"
        monitor = config.liveliness_monitor
        self._monitor_enabled = monitor if monitor is not None else heartbeat_mode == "periodic"
        self.clock = clock
        self.log = log
        self.config = config
        self._ctx = RMContext(clock, log, config, scheduler, continuous, self._journal)
        timed = not config.service_time.is_zero()
        self.inbound: Dispatcher[Inbound] = Dispatcher(
            clock, self._handle_inbound, partial(inbound_cost, config.service_time) if timed else None
        )
        self.journal = journal
        self.up = True
        self._stopped = False
        self._epoch = 0
        self.membership = (
            MembershipService(ring, clock, log, self, self._ctx.outbox) if ring is not None else None
        )
        self._ctx.membership = self.membership
        self._life = self._new_life(RMLife(self._ctx, None))
        # The scheduler queue: made by the first life, handled by each life's loop in turn.
        self.events: Dispatcher[SchedulerItem] = self._life.events
        self.admission = InboundAdmission(self.inbound, self._ctx.noisy)
        # When a message from any node last arrived (the ring's evidence that someone is alive).
        self.last_inbound_at = clock.now()
        # Told of each registered node's heartbeat as it arrives (``observe_heartbeat_arrivals``).
        self._heartbeat_arrived: Callable[[Link, float], None] | None = None
        self._timers: list[Periodic] = []
        self._durability = Durability(
            journal, clock, log, self._ctx.counters, lambda: self._life.journal_snapshot(),
            lambda: self.up and not self._stopped, self.stop, resume,
        )
        if resume:
            if journal is None:
                raise ValueError("resume needs the journal to resume from")
            self.up = False
        else:
            self._durability.write_snapshot()

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Arm the periodic checks: the liveliness monitor, lost-command repair, preemption."""
        cfg = self.config
        if self._monitor_enabled:
            period = cfg.monitor_interval_s or cfg.expiry_s / 3
            self._timers.append(Periodic(self.clock, period, self._check_liveliness))
        self._timers.append(Periodic(self.clock, cfg.command_timeout_s, self._resend))
        if self._ctx.preemption is not None:
            period = self._ctx.scheduler.preemption.check_interval_s
            self._timers.append(Periodic(self.clock, period, self._check_preemption))
        if self._ctx.tiers is not None:
            period = self._ctx.scheduler.tiers.check_interval_s
            self._timers.append(Periodic(self.clock, period, self._check_tiers))
        if self._ctx.autopilot is not None:
            period = self._ctx.scheduler.autopilot.window_s
            self._timers.append(Periodic(self.clock, period, self._autopilot_tick))
        if self.membership is not None:
            self._timers.append(Periodic(self.clock, self.membership.interval_s, self._sweep_ring))
        for t in self._timers:
            t.start()

    def stop(self) -> None:
        """The end of the run: nothing fires or is accepted any more, what is queued is dropped,
        so the RM's view holds still for the end-of-run checks while nodes go on."""
        self._stopped = True
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        self._ctx.noisy.flush()
        self.inbound.clear()
        self.admission.clear()
        self.events.clear()
        self._life.scheduling.cancel()

    def observe(self, observer: RMObserver) -> None:
        self._ctx.observers.add(observer)

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def continuous(self) -> bool:
        return self._ctx.continuous

    # ---- inbound messages --------------------------------------------------------------

    def receive(self, link: Link, msg: object) -> None:
        """Called by a transport for every message from a node connection."""
        arrived = self._heartbeat_arrived
        if self.up and not self._stopped:
            # ``is_registered(link)``, inlined: every message from a node asks.
            registered = self._life.cluster.on_link(link) is not None
            if registered:
                # Evidence that some node is alive (a stranger's frames are not).
                now = self.last_inbound_at = self.clock.now()
                if arrived is not None and type(msg) is Heartbeat:
                    arrived(link, now)
            if type(msg) is ProbeAck and self.membership is not None:
                self.membership.ack_arrived(link, msg)  # timed on arrival, not after the queue
            if registered:
                # ``admission.admit`` for a registered link, inlined: the first class. A heartbeat
                # the idle RM serves at once goes to the tracker as ``_handle_inbound`` would send it.
                direct = self._heartbeat_direct
                inbound = self.inbound
                if direct is None or type(msg) is not Heartbeat or not inbound.serve_now(direct, link, msg):
                    inbound.submit((link, msg))
            else:
                self.admission.admit(link, msg, False)
        elif arrived is not None and type(msg) is Heartbeat and self.is_registered(link):
            arrived(link, self.clock.now())  # it arrived, though a stopped RM drops it

    def is_registered(self, link: Link) -> bool:
        """A node is registered on ``link`` now."""
        return self._life.cluster.on_link(link) is not None

    def _handle_inbound(self, item: Inbound) -> None:
        link, msg = item
        tracker = self._life.tracker
        if type(msg) is Heartbeat and link is not None:  # most of what the RM handles: no match
            tracker.on_heartbeat(link, msg)
            if self.membership is not None:
                self.membership.flush_due()
            return
        match msg:
            case Heartbeat() if link is not None:
                tracker.on_heartbeat(link, msg)
            case Register() if link is not None:
                tracker.on_register(link, msg)
                if self.is_registered(link):  # a node that registers is alive: the ring is not silent
                    self.last_inbound_at = self.clock.now()
            case RingMessage() if self.membership is not None:
                # Reports, probe answers, ring sync requests, probe deadlines.
                self.membership.handle(link, msg)
            case Disconnected() if link is not None:
                node = self._life.cluster.on_link(link)
                if node is not None and self.membership is not None:
                    self.membership.node_disconnected(node)
            case _:
                self._ctx.noisy.warning("rm.unexpected_message", type=type(msg).__name__)
        if self.membership is not None:
            # The flush timer starves while the RM drains a long queue: check the batch here too.
            self.membership.flush_due()

    def _new_life(self, life: RMLife) -> RMLife:
        """``life`` is the RM's from now on (its loop handles the scheduler queue's items)."""
        self._life = life
        self._bind_direct()
        return life

    def _bind_direct(self) -> None:
        """``_heartbeat_direct``: the tracker's ``on_heartbeat`` while it is all ``_handle_inbound``
        does with a heartbeat (no ring service to flush, the handler not wrapped); else None."""
        direct = self.inbound.handler == self._handle_inbound and self.membership is None
        self._heartbeat_direct = self._life.tracker.on_heartbeat if direct else None

    def observe_heartbeat_arrivals(self, observer: Callable[[Link, float], None] | None) -> None:
        """Tell ``observer(link, now)`` of each registered node's heartbeat as it arrives, before it
        queues, with the clock reading the RM takes anyway (a harness's arrival count for h2);
        also while the RM is stopped, which drops the heartbeat. None: no observer."""
        self._heartbeat_arrived = observer

    def instrument(
        self, inbound: Callable[[Handler[Inbound]], Handler[Inbound]],
        events: Callable[[Handler[SchedulerItem]], Handler[SchedulerItem]],
    ) -> None:
        """Wrap the queues' handlers (cost accounting)."""
        self.inbound.instrument(inbound)
        self.events.instrument(events)
        self._bind_direct()

    # ---- faults --------------------------------------------------------------------------

    def stall(self, seconds: float) -> None:
        """The RM process pauses: no node message is handled for ``seconds`` (they queue)."""
        self.inbound.stall(seconds)

    def set_cost_scale(self, factor: float) -> None:
        """Overload: every service-time cost is multiplied by ``factor``."""
        self.inbound.cost_scale = factor

    # ---- membership host ---------------------------------------------------------------------

    def node(self, machine_id: int) -> NodeRecord | None:
        return self._life.cluster.nodes.get(machine_id)

    def nodes(self) -> Collection[NodeRecord]:
        return self._life.cluster.nodes.values()

    def remove_node(self, node: NodeRecord, reason: str) -> None:
        self._life.lose_node(node, reason)

    def enqueue(self, msg: RingMessage) -> None:
        if not self._stopped:
            self.inbound.submit((None, msg))

    # ---- periodic checks -------------------------------------------------------------------

    def _check_liveliness(self) -> None:
        """YARN's NMLivelinessMonitor: a node with no heartbeat processed for ``expiry_s`` is lost."""
        deadline = self.clock.now() - self.config.expiry_s
        life = self._life
        for node in [n for n in life.cluster.nodes.values() if n.last_heartbeat_at < deadline]:
            life.lose_node(node, reason="expired")

    def _resend(self) -> None:
        self._life.resend_overdue()

    def _sweep_ring(self) -> None:
        if self.up and self.membership is not None:
            self.membership.sweep(self.last_inbound_at)

    def _check_preemption(self) -> None:
        self.check_preemption()

    def check_preemption(self) -> int:
        """The periodic preemption check now; returns the tasks preempted (`yt` mode: none here, it
        only refreshes who is starving; the preemption happens in node updates)."""
        life = self._life
        if self.up and not life.holding() and life.preemptor is not None:
            return life.preemptor.check()
        return 0

    def _autopilot_tick(self) -> None:
        if self.up:
            self._life.autopilot_tick()

    def _check_tiers(self) -> None:
        life = self._life
        if self.up and not life.holding() and life.tier_preemptor is not None:
            life.tier_preemptor.check()

    # ---- clients: pools and operations -------------------------------------------------

    def add_pool(
        self, name: str, weight: float = 1.0, min_share: Resources = ZERO, parent: str = "root",
        max_cpu: float | None = None, max_ram: float | None = None,
    ) -> None:
        """``max_cpu`` / ``max_ram``: the most the pool may hold (YARN's maxResources; None: no limit)."""
        self._life.book.add_pool(name, weight, min_share, parent, max_cpu, max_ram)
        self._journal(PoolAdded(name=name, weight=weight, min_share=min_share, parent=parent,
                                max_cpu=max_cpu, max_ram=max_ram))

    def has_pool(self, name: str) -> bool:
        return name in self._life.book.pools

    def submit_operation(self, spec: OperationSpec) -> int:
        """Accept an operation; returns its id."""
        if not self.up:
            raise RMUnavailable(f"operation {spec.name!r}: the RM is down")
        life = self._life
        ctx = self._ctx
        op = life.add_operation(spec, self.clock.now())
        self._journal(Submitted(op_id=op.id, spec=spec, at=op.submitted_at))
        ctx.groups[op.group].operations_submitted += 1
        self.log.info("operation.submitted", operation=op.name, pool=op.pool.name, tasks=op.total)
        if ctx.observers:
            ctx.observers.operation_submitted(operation_event(op))
        if op.total == 0:
            life.finish_operation(op)
        elif ctx.continuous:
            life.request_pass()
        return op.id

    def end_container(self, machine_id: int, container_id: int) -> bool:
        """A client is done with a running container before its task's time is up (a job's AM
        container once the job's other tasks completed): the task completes now and the node is
        told to stop the container. False if the RM is down or does not run that container."""
        return self.up and self._life.end_container(machine_id, container_id)

    def request_pass(self) -> None:
        """Queue a continuous-scheduling pass over every node with free resources."""
        self._life.request_pass()

    # ---- lives -------------------------------------------------------------------------------

    def crash(self) -> None:
        """The RM process dies: every bit of soft state is gone, queued messages with it. Only the
        journal (if any) survives; ``recover`` starts the next life from it."""
        if not self.up:
            return
        now = self.clock.now()
        self.up = False
        self._life.end()
        self._life.cluster.advance(now)
        self._life = self._new_life(RMLife(self._ctx, self.events, self._epoch))
        self.inbound.clear()
        self.admission.clear()
        self.events.clear()
        self._durability.close()
        self._ctx.counters.restarts += 1
        self.log.warning("rm.crashed", epoch=self._epoch)
        if self.membership is not None:
            self.membership.reset()
        self._ctx.observers.rm_crashed()

    def recover(self, died_at: float | None = None) -> Recovery:
        """Start a new life: rebuild pools and operations from the journal, then wait for the
        nodes to re-register with their containers (``rm.recovery.restart``). ``died_at``: when this
        process takes over from an earlier one, when that one died (emulated s)."""
        if self.up:
            raise RuntimeError("recover() is for an RM that crashed")
        state = self._durability.read(died_at)
        self._epoch = state.epoch + 1
        life = self._life = self._new_life(RMLife(
            self._ctx, self.events, self._epoch, state.next_op_id, state.next_container_id
        ))
        recovery = life.recover(state)
        self._durability.write_snapshot()
        self.up = True
        self.log.info(
            "rm.recovered", epoch=self._epoch, operations=recovery.stats.operations,
            waiting_containers=recovery.stats.waiting, journal_records=state.records, torn=state.torn,
        )
        if self.membership is not None:
            self.membership.reset()
        self.last_inbound_at = self.clock.now()
        self._ctx.observers.rm_recovered()
        recovery.start(self.config.recovery_wait_s)
        return recovery

    def _journal(self, rec: AnyRecord) -> None:
        self._durability.record(rec)

    @property
    def earlier(self) -> Totals:
        """What earlier RM processes of this run did (when this one took the run over)."""
        return self._durability.earlier

    def durable_state(self) -> list[AnyRecord]:
        """The live work as journal records: what a compacted journal holds now."""
        return self._life.journal_snapshot()

    def recovery_waiting(self) -> int | None:
        """Containers a restarted RM still waits for (None: not recovering)."""
        life = self._life
        return len(life.recovery.waiting) if life.recovery is not None and life.recovery.active else None

    def waiting_by_operation(self) -> dict[int, int]:
        """Journaled containers not yet back on a node, per operation id (running, on no node)."""
        rec = self._life.recovery
        out: dict[int, int] = {}
        if rec is not None and rec.active:
            for w in rec.waiting.values():
                out[w.op.id] = out.get(w.op.id, 0) + 1
        return out

    # ---- measurement -------------------------------------------------------------------------

    def start_measurement(self, now: float) -> None:
        """The measurement window starts now (after the warm-up): time integrals and lost work
        count from here."""
        self._life.cluster.advance(now)
        self._ctx.integral.reset(now)
        if self._ctx.preemption is not None:
            self._ctx.preemption.preempted_cpu_s = 0.0
            self._ctx.preemption.window_start_s = now
            for node in self._life.cluster.nodes.values():
                for alloc in node.containers.values():
                    alloc.restart_usage_count(now)

    @property
    def allocations(self) -> int:
        """Containers allocated so far."""
        return self._ctx.counters.allocations

    def counters(self) -> RMCounters:
        return msgspec.structs.replace(self._ctx.counters)

    def live_counters(self) -> RMCounters:
        """The counters themselves, kept up to date (read-only: a meter that reads one around
        every scheduler event takes them once rather than a copy or a property each time)."""
        return self._ctx.counters

    def snapshot(self) -> RMSnapshot:
        return rm_snapshot(self._life, self._ctx, self.clock.now(), self.up, self._epoch, self.inbound,
                           self.events, self.membership)

    def shares(self) -> SharesSnapshot:
        """Fair shares of the live operations: each one's, its workload entry's and its pools'."""
        return fair_shares(self._life.book, self._life.cluster.capacity)

    def sampled_shares(self) -> SharesSnapshot:
        """``shares()`` less the operations' own: what the sampler reads each interval."""
        return sampled_shares(self._life.book, self._life.cluster.capacity)

    def pending_reasons(self, op_ids: set[int] | None = None) -> list[PendingReasons]:
        """Why each operation with pending tasks waits (``op_ids``: only these), from the
        scheduler's state now; computed on request (rm/views/pending_reasons.py)."""
        life = self._life
        return explain_pending(life.policy, life.cluster, life.book, self.clock.now(), life.holding(), op_ids)

    def operations_view(self) -> list[OperationView]:
        return operations_view(self._life.book)

    def pools_view(self) -> list[PoolView]:
        return pools_view(self._life.book)

    def nodes_view(self) -> list[NodeView]:
        return nodes_view(self._life.cluster)

    def node_view(self, machine_id: int) -> NodeView | None:
        """One registered node's view (None: no such node), e.g. where a client's container runs
        once its node re-registered after a restart."""
        node = self._life.cluster.nodes.get(machine_id)
        return None if node is None else node_view(node)

    def commands_in_flight(self) -> tuple[set[int], set[int]]:
        """Containers launched and killed that no node report has confirmed yet (commands on
        the wire, or lost and due to be sent again)."""
        return self._life.ledger.in_flight()

    def ring_snapshot(self) -> RingSnapshot | None:
        return self.membership.ring_snapshot() if self.membership is not None else None

    def ring_quiet_since(self) -> float | None:
        """When the ring last changed, or None while a change is on its way (or no ring)."""
        return self.membership.quiet_since() if self.membership is not None else None

