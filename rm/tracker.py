"""Resource tracker service: the protocol rules of design.md §2 steps 1-2.

Sans-IO: it takes one message and the link it came on, updates the cluster through the
``ResourceManager``, and answers through ``link.send``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rm.cluster import NodeRecord
from rm.protocol import (
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    Register,
    RegisterResponse,
)

if TYPE_CHECKING:
    from rm.manager import ResourceManager


class TrackerStats:
    __slots__ = ("duplicates", "heartbeats", "registrations", "rejected", "resyncs", "statuses")

    def __init__(self) -> None:
        self.heartbeats = 0
        self.statuses = 0
        self.registrations = 0
        self.rejected = 0
        self.resyncs = 0
        self.duplicates = 0


class ResourceTracker:
    def __init__(self, rm: ResourceManager) -> None:
        self._rm = rm
        self.stats = TrackerStats()

    # ---- registration ------------------------------------------------------------------

    def on_register(self, link: Any, msg: Register) -> None:
        rm = self._rm
        cfg = rm.config
        reason = ""
        if cfg.credentials and msg.credentials != cfg.credentials:
            reason = "bad credentials"
        elif msg.resources.cpu < cfg.min_cpu or msg.resources.ram_gib < cfg.min_ram_gib:
            reason = (
                f"resources {msg.resources.cpu:g} cpu / {msg.resources.ram_gib:g} GiB below the "
                f"minimum allocation {cfg.min_cpu:g} cpu / {cfg.min_ram_gib:g} GiB"
            )
        if reason:
            self.stats.rejected += 1
            rm.log.warning("node.rejected", address=msg.address, reason=reason)
            link.send(RegisterResponse(action="shutdown", reason=reason))
            return
        now = rm.clock.now()
        node = rm.cluster.by_address.get(msg.address)
        if node is not None and node.total != msg.resources:
            rm.lose_node(node, reason="re-registered with different resources")
            node = None
        if node is None:
            node = rm.cluster.add(msg.address, msg.resources, link, now)
            rm.log.info(
                "node.registered",
                machine_id=node.machine_id,
                address=msg.address,
                cpu=msg.resources.cpu,
                ram_gib=msg.resources.ram_gib,
            )
        else:
            node.link = link
            rm.log.info("node.reregistered", machine_id=node.machine_id, address=msg.address)
        node.last_response_id = 0
        node.last_response = None
        node.last_heartbeat_at = now
        self.stats.registrations += 1
        for listener in rm.node_registered:
            listener(node)
        if msg.healthy != node.schedulable:
            rm.set_node_health(node, msg.healthy)
        kill = self._reconcile(node, msg.containers)
        ring = rm.ring_provider() if rm.ring_provider is not None else None
        link.send(RegisterResponse(action="normal", machine_id=node.machine_id, ring=ring))
        rm.send_kill(node, kill)
        rm.node_update(node)

    def _reconcile(self, node: NodeRecord, reported: tuple[ContainerStatus, ...]) -> list[int]:
        """Align the RM's view with a node's full report; returns containers the node must kill."""
        rm = self._rm
        running: set[int] = set()
        kill: list[int] = []
        recovery = rm.recovery
        for st in reported:
            cid = st.container_id
            alloc = node.containers.get(cid)
            if alloc is None and recovery is not None:
                alloc = recovery.claim(cid, node)  # after an RM restart: the journal's container
            if st.state == "complete":
                if alloc is not None:
                    rm.container_finished(alloc, st.exit_code)
                rm.pending_kills.pop(cid, None)
            elif alloc is not None:
                running.add(cid)
                rm.unconfirmed.pop(cid, None)
            else:
                kill.append(cid)
        for cid in [c for c in node.containers if c not in running]:
            # The node does not run it: it never started or died with the node's old life.
            rm.container_finished(node.containers[cid], -1)
        if recovery is not None:
            recovery.node_reported(node)
        return kill

    # ---- heartbeats --------------------------------------------------------------------

    def on_heartbeat(self, link: Any, hb: Heartbeat) -> None:
        rm = self._rm
        node = rm.cluster.nodes.get(hb.machine_id)
        if node is None or node.link is not link:
            self._resync(link, hb, "unknown node")
            return
        if hb.heartbeat_id + 1 == node.last_response_id and node.last_response is not None:
            self.stats.duplicates += 1
            link.send(node.last_response)
            return
        if hb.heartbeat_id != node.last_response_id:
            self._resync(link, hb, "heartbeat id out of order")
            return
        self.stats.heartbeats += 1
        self.stats.statuses += len(hb.statuses)
        now = rm.clock.now()
        node.last_heartbeat_at = now
        if hb.healthy != node.schedulable:
            rm.set_node_health(node, hb.healthy)
        kill: list[int] = []
        containers = node.containers
        unconfirmed = rm.unconfirmed
        for st in hb.statuses:
            cid = st.container_id
            alloc = containers.get(cid)
            if st.state == "complete":
                if alloc is not None:
                    rm.container_finished(alloc, st.exit_code)
                else:
                    rm.pending_kills.pop(cid, None)
            elif alloc is None:
                kill.append(cid)
            elif unconfirmed:
                unconfirmed.pop(cid, None)
        response = HeartbeatResponse(
            action="normal", heartbeat_id=node.last_response_id + 1, kill=tuple(kill)
        )
        rm.expect_kills(node, kill)
        node.last_response_id += 1
        node.last_response = response
        link.send(response)
        rm.node_update(node)

    def _resync(self, link: Any, hb: Heartbeat, why: str) -> None:
        self.stats.resyncs += 1
        self._rm.log.info("node.resync", machine_id=hb.machine_id, reason=why)
        link.send(HeartbeatResponse(action="resync", heartbeat_id=hb.heartbeat_id))

