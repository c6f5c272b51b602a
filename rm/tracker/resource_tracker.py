"""Resource tracker service: the protocol rules of design.md §2 steps 1-2.

Sans-IO: it takes one message and the link it came on, updates the cluster view and the ledger,
tells the life's outcomes (``TrackerHost``) what happened, and answers through the RM's outbox.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Protocol

from rm.borg.task_usage import record_usage
from rm.ports import Link
from rm.protocol import (
    EXIT_KILLED,
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    Register,
    RegisterResponse,
    resources_problem,
)
from rm.scheduler.loop import NodeUpdate, SchedulerItem
from rm.state.cluster import Allocation, Cluster, NodeRecord, NodeState
from rm.tracker.container_ledger import ContainerLedger
from rm.tracker.services import TrackerServices
from rm.views.observer import NodeEvent

_RUNNING = NodeState.RUNNING


class TrackerHost(Protocol):
    """What the tracker asks of the RM life when a report changes something."""

    # Queues an item on the RM's scheduler queue (``node_update`` is a ``NodeUpdate`` through it).
    submit_event: Callable[[SchedulerItem], None]

    def lose_node(self, node: NodeRecord, reason: str) -> None: ...

    def container_finished(self, alloc: Allocation, exit_code: int) -> None: ...

    def set_node_health(self, node: NodeRecord, healthy: bool) -> None: ...

    def send_kill(self, node: NodeRecord, container_ids: list[int], exit_code: int = EXIT_KILLED) -> None: ...

    def node_update(self, node: NodeRecord) -> None: ...

    def claim(self, cid: int, node: NodeRecord) -> Allocation | None:
        """After an RM restart: the journal's container ``cid``, if it ran on ``node``."""
        ...

    def node_reported(self, node: NodeRecord) -> None:
        """After an RM restart: ``node`` re-registered with its full container list."""
        ...


def authorised(link: Link, msg: Register, secret: str) -> bool:
    """Whether a registration may join with ``secret`` configured. A transport with a wire proves
    the secret per connection itself (challenge-response: it never crosses the wire) and says so on
    the link (``authenticated``); there what the message carries does not count. Without a wire
    (in memory) the registration carries the secret."""
    verdict = getattr(link, "authenticated", None)
    if verdict is not None:
        return bool(verdict)
    return hmac.compare_digest(msg.credentials.encode(), secret.encode())


class ResourceTracker:
    def __init__(
        self, ctx: TrackerServices, cluster: Cluster, ledger: ContainerLedger, host: TrackerHost,
    ) -> None:
        self._ctx = ctx
        self._cluster = cluster
        self._ledger = ledger
        self._host = host
        # ``ledger.awaits(node)`` as a look-up (every heartbeat asks): the ledger's own table.
        self._awaiting = ledger.awaiting
        # Bound once (none is ever replaced, TrackerServices says): every heartbeat reads them.
        self._nodes = cluster.nodes
        self._counters = ctx.counters
        self._now = ctx.clock.now
        self._reply = ctx.outbox.send
        self._submit_event = host.submit_event

    # ---- registration ------------------------------------------------------------------

    def on_register(self, link: Link, msg: Register) -> None:
        ctx = self._ctx
        cfg = ctx.config
        counters = ctx.counters
        reason = ""
        if cfg.credentials and not authorised(link, msg, cfg.credentials):
            reason = "bad credentials"
        elif problem := resources_problem(msg.resources):
            reason = problem
        elif msg.resources.cpu < cfg.min_cpu or msg.resources.ram_gib < cfg.min_ram_gib:
            reason = (
                f"resources {msg.resources.cpu:g} cpu / {msg.resources.ram_gib:g} GiB below the "
                f"minimum allocation {cfg.min_cpu:g} cpu / {cfg.min_ram_gib:g} GiB"
            )
        if reason:
            counters.rejected += 1
            ctx.noisy.warning("node.rejected", address=msg.address, reason=reason)
            ctx.outbox.send(link, RegisterResponse(action="shutdown", reason=reason))
            return
        now = ctx.clock.now()
        host = self._host
        node = self._cluster.by_address.get(msg.address)
        if (
            node is not None and node.link is link and msg.attempt_at >= 0
            and node.attempt_at == msg.attempt_at and node.last_response_id == 0
        ):
            # A retry of the registration we handled (its answer was late, not lost: a registering
            # storm's queue). Registering again would cost as much, change the ring and requeue
            # what started meanwhile, so more retries come: answer it again instead.
            counters.registrations_repeated += 1
            ring = ctx.membership.current_ring() if ctx.membership is not None else None
            ctx.outbox.send(link, RegisterResponse(action="normal", machine_id=node.machine_id, ring=ring))
            return
        if node is not None and node.total != msg.resources:
            host.lose_node(node, reason="re-registered with different resources")
            node = None
        if node is None:
            node = self._cluster.add(msg.address, msg.resources, link, now)
            ctx.log.info(
                "node.registered",
                machine_id=node.machine_id,
                address=msg.address,
                cpu=msg.resources.cpu,
                ram_gib=msg.resources.ram_gib,
            )
        else:
            self._cluster.relink(node, link)
            ctx.log.info("node.reregistered", machine_id=node.machine_id, address=msg.address)
        node.last_response_id = 0
        node.last_response = None
        node.last_heartbeat_at = now
        node.peer_endpoint = msg.peer_endpoint
        node.attempt_at = msg.attempt_at
        counters.registrations += 1
        if ctx.membership is not None:
            ctx.membership.node_joined(node)
        if ctx.observers:
            ctx.observers.node_registered(NodeEvent(node.machine_id, node.address))
        if msg.healthy != node.schedulable:
            host.set_node_health(node, msg.healthy)
        ring = ctx.membership.current_ring() if ctx.membership is not None else None
        # Answered before reconciling: that may end a restart's recovery or free room, and the pass
        # it starts may send launches here, which a node still registering would drop.
        ctx.outbox.send(link, RegisterResponse(action="normal", machine_id=node.machine_id, ring=ring))
        kill = self._reconcile(node, msg.containers)
        host.send_kill(node, kill)
        host.node_update(node)

    def _reconcile(self, node: NodeRecord, reported: tuple[ContainerStatus, ...]) -> list[int]:
        """Align the RM's view with a node's full report; returns containers the node must kill."""
        host = self._host
        ledger = self._ledger
        running: set[int] = set()
        kill: list[int] = []
        for st in reported:
            cid = st.container_id
            alloc = node.containers.get(cid)
            if alloc is None:
                alloc = host.claim(cid, node)
            if st.state == "complete":
                if alloc is not None:
                    host.container_finished(alloc, st.exit_code)
                ledger.kill_confirmed(node, cid)
            elif alloc is not None:
                running.add(cid)
                ledger.confirmed(cid)
            else:
                kill.append(cid)
        for cid in [c for c in node.containers if c not in running]:
            # The node does not run it: it never started or died with the node's old life.
            host.container_finished(node.containers[cid], -1)
        host.node_reported(node)
        return kill

    # ---- heartbeats --------------------------------------------------------------------

    def on_heartbeat(self, link: Link, hb: Heartbeat) -> None:
        counters = self._counters
        node = self._nodes.get(hb.machine_id)
        if node is None or node.link is not link:
            self._resync(link, hb, "unknown node")
            return
        last_id = node.last_response_id
        if hb.heartbeat_id != last_id:
            if hb.heartbeat_id + 1 == last_id and node.last_response is not None:
                counters.duplicates += 1
                self._reply(link, node.last_response)
                return
            self._resync(link, hb, "heartbeat id out of order")
            return
        statuses = hb.statuses
        counters.heartbeats += 1
        counters.statuses += len(statuses)
        now = self._now()
        node.last_heartbeat_at = now
        if hb.healthy != (node.state is _RUNNING):  # ``node.schedulable``, without its call
            self._host.set_node_health(node, hb.healthy)
        if hb.usage:
            ctx = self._ctx
            record_usage(node, hb.usage, ctx.scheduler.admission.history, ctx.autopilot, now)
        confirm = node in self._awaiting  # most reports repeat what is confirmed already
        kill: list[int] | None = None
        # A periodic node resends the same statuses until something changes (in memory the same
        # object; over TCP the RM's decoder hands back the tuple it decoded from the same bytes):
        # while every status in it is still a running container of ours (``Cluster.release``
        # forgets it), the walk would do nothing.
        if statuses is not node.quiet_report or confirm:
            host = self._host
            ledger = self._ledger
            containers = node.containers
            kill = []
            quiet_walk = not confirm
            for st in statuses:
                cid = st.container_id
                if st.state == "complete":
                    quiet_walk = False
                    alloc = containers.get(cid)
                    if alloc is not None:
                        host.container_finished(alloc, st.exit_code)
                    else:
                        ledger.kill_confirmed(node, cid)
                elif cid not in containers:
                    quiet_walk = False
                    kill.append(cid)
                elif confirm:
                    ledger.confirmed(cid)
            node.quiet_report = statuses if quiet_walk else None
            if kill:
                ledger.expect_kills(node, kill, now)
        # Positional: a quiet report's answer (most) is made without matching keywords.
        response = (HeartbeatResponse("normal", last_id + 1, (), tuple(kill)) if kill
                    else HeartbeatResponse("normal", last_id + 1))
        node.last_response_id = last_id + 1
        node.last_response = response
        self._reply(link, response)
        self._submit_event(NodeUpdate(node))  # ``host.node_update(node)``, without its call

    def _resync(self, link: Link, hb: Heartbeat, why: str) -> None:
        self._ctx.counters.resyncs += 1
        self._ctx.noisy.info("node.resync", machine_id=hb.machine_id, reason=why)
        self._ctx.outbox.send(link, HeartbeatResponse(action="resync", heartbeat_id=hb.heartbeat_id))
