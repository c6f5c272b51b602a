"""A node's side of the RM protocol: registering (with every container it runs, so a restarted
RM learns them) and heartbeats (periodic: the full report; delta: only what changed), and what the
RM answers (acknowledgements by identity, launches, kills, resync, shutdown)."""

from __future__ import annotations

from nodemanager.state import NodeFields, NodeState
from rm.protocol import (
    EXIT_KILLED,
    ContainerStatus,
    ContainerUsage,
    Heartbeat,
    HeartbeatResponse,
    Register,
    RegisterResponse,
)

_RUNNING = NodeState.RUNNING


class RMReporting(NodeFields):
    """Part of ``NodeManager`` (nodemanager/node.py)."""

    __slots__ = ()

    def _start_registration(self) -> None:
        if self._membership is not None:
            self._membership.leave()
        statuses = self._full_statuses()
        carried = self._reg_carried
        if self.state is NodeState.REGISTERING and carried is not None:
            # Another Register of the same attempt (a retry, or a reconnect): the answer that
            # comes may be to any of them, so only what every one of them carried is delivered.
            now_carried = {s.container_id: s for s in statuses}
            self._reg_carried = {
                cid: st for cid, st in carried.items() if now_carried.get(cid) is st
            }
            if self._reg_healthy != self._healthy:
                self._reg_healthy = None
        else:
            self._reg_carried = {s.container_id: s for s in statuses}
            self._reg_healthy = self._healthy
            # A new attempt: distinct from every earlier one, even at the same instant.
            self._attempt_at = max(self._clock.now(), self._attempt_at + 1e-6)
        self.state = NodeState.REGISTERING
        self._inflight = None
        self._inflight_at = self._clock.now()
        self._touch()  # an idle delta node must tick to retry a lost registration
        self._send(
            Register(
                address=self.address,
                resources=self.resources,
                credentials=self.credentials,
                healthy=self._healthy,
                containers=statuses,
                peer_endpoint=self.peer_endpoint,
                attempt_at=self._attempt_at,
            )
        )

    def _on_register_response(self, msg: RegisterResponse) -> None:
        if self.state is not NodeState.REGISTERING:
            return
        if msg.action == "shutdown":
            self._stats.registrations_refused += 1
            self._log.warning("node.rejected", node=self.address, reason=msg.reason)
            self.stop()
            return
        self.machine_id = msg.machine_id
        self.state = NodeState.RUNNING
        self._last_response_id = 0
        self._inflight = None
        # The registration delivered exactly what it carried: a container that completed (or
        # was killed) after the Register left is still a change to report, not acknowledged.
        carried, self._reg_carried = self._reg_carried or {}, None
        changes = self._changes
        for cid, status in carried.items():
            if changes.get(cid) is status:
                del changes[cid]
        self._statuses = None
        healthy, self._reg_healthy = self._reg_healthy, None
        # Health the RM may not know (it changed while registering) is reported again.
        self._reported_healthy = healthy if healthy is not None else not self._healthy
        self._stats.registrations += 1
        if self._membership is not None:
            self._membership.join(self.machine_id, msg.ring)
        self._touch()  # report what is left (delta mode: an idle node arms no tick otherwise)

    def _full_statuses(self) -> tuple[ContainerStatus, ...]:
        statuses = self._statuses
        if statuses is None:
            # A running status not yet acknowledged is reported as that same object (so that
            # the answer acknowledges it); the others are made afresh.
            changes = self._changes
            running = [changes.get(cid) or ContainerStatus(cid, "running") for cid in self._containers]
            done = [s for s in changes.values() if s.state == "complete"]
            statuses = self._statuses = (*running, *done)
        return statuses

    def _heartbeat(self) -> None:
        now = self._clock.now()
        stats = self._stats
        if self._inflight is not None:
            if now - self._inflight_at < self._config.effective_rpc_timeout():
                stats.heartbeats_skipped += 1
                return
            # Lost or hopelessly late: send the same report again (the RM treats it as duplicate).
            self._inflight_at = now
            stats.heartbeats_sent += 1
            if self._timing is not None:
                self._timing.sent(now)
            self._send(self._inflight)
            return
        if self._config.mode == "delta":
            usage_moved = self._usage is not None and self._usage.dirty
            if not self._changes and not usage_moved and self._healthy == self._reported_healthy:
                return
            statuses = tuple(self._changes.values())
            full = False
        else:
            cached = self._statuses  # the full report, made once until it changes
            statuses = cached if cached is not None else self._full_statuses()
            full = True
        usage = self._usage_report(full) if self._usage is not None else ()
        hb = Heartbeat(
            machine_id=self.machine_id,
            heartbeat_id=self._last_response_id,
            healthy=self._healthy,
            statuses=statuses,
            full=full,
            usage=usage,
        )
        self._inflight = hb
        self._inflight_at = now
        changes = self._changes
        self._inflight_changes = tuple(changes.items()) if changes else ()
        stats.heartbeats_sent += 1
        stats.statuses_sent += len(statuses)
        if self._timing is not None:
            self._timing.sent(now)
        self._send(hb)

    def _usage_report(self, full: bool) -> tuple[ContainerUsage, ...]:
        """Periodic: every usage-modelled container's usage; delta: those that moved enough.
        A lost heartbeat is resent as it was, so what it carried is not reported again."""
        usage = self._usage
        if usage is None or not usage.containers:
            return ()
        tracked = usage.containers
        if full:
            out = tuple(t.report(cid) for cid, t in tracked.items())
        else:
            out = tuple(tracked[cid].report(cid) for cid in sorted(usage.dirty) if cid in tracked)
        usage.dirty.clear()
        self._stats.usage_reports_sent += len(out)
        return out

    def _retire(self, carried: tuple[tuple[int, ContainerStatus], ...]) -> None:
        """The answered report's changes, acknowledged: those not changed again since (the same
        status object) are no longer reported."""
        changes = self._changes
        for cid, status in carried:
            if changes.get(cid) is status:
                del changes[cid]
                if status.state == "complete":
                    self._statuses = None

    def heartbeat_answered(self, msg: HeartbeatResponse) -> None:
        """``receive(msg)`` of a heartbeat's answer, for a host that dispatches by type itself
        (every answer: one dispatch less). A stopped node ignores it, as ``receive`` does."""
        sent = self._inflight
        if self.state is not _RUNNING:
            return
        action = msg.action
        if action != "normal":  # (nearly every answer is: one comparison)
            # Actions count even unasked: the RM declared us lost while we had nothing to report.
            if action == "shutdown":
                self._log.info("node.shutdown", node=self.address, machine_id=self.machine_id)
                self.stop()
                return
            if action == "resync":
                self._stats.resyncs += 1
                self._start_registration()
                return
        if sent is None:
            return
        if msg.heartbeat_id != sent.heartbeat_id + 1:
            return  # a late answer to an earlier copy
        self._stats.heartbeat_responses += 1
        if self._timing is not None:
            self._timing.answered(self._inflight_at, self._clock.now())
        self._inflight = None
        self._last_response_id = msg.heartbeat_id
        self._reported_healthy = sent.healthy
        carried = self._inflight_changes
        if carried:  # a periodic report repeats acknowledged statuses: not walked for nothing
            self._retire(carried)
        if msg.launch:  # most answers carry neither: no loop set up for nothing
            for launch in msg.launch:
                self._launch(launch)
        if msg.kill:
            for cid in msg.kill:
                self._kill(cid, EXIT_KILLED)
        if self._tick_timer is None:  # a periodic node's next tick is armed: nothing to touch
            self._touch()
