"""Where the nodes of a run live, as the RM side of the harness sees it.

The RM side (``emulator.harness.rmside``) is the same for every transport; what differs is how
nodes are hosted. ``NodeHosting`` is that difference: in memory the nodes are objects in this
process (``MemoryHosting``); over TCP they live in worker processes reached by a control channel.
Faults, counters and the invariant checker's view of node reality all go through it.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from emulator.harness.nodeproc import NodeProcess
from emulator.measure.timing import HeartbeatTiming
from emulator.transport.metered import Meter
from emulator.transport.peers import MemoryPeers
from nodemanager.node import NodeState
from nodemanager.stats import NodeCounters
from ringmon.membership import RingView
from ringmon.ports import RingCounters
from rm.protocol import Resources


def ring_digest(view: RingView) -> int:
    """A fingerprint of a ring's members (cheap to send between processes)."""
    return hash(view.ids)


class NodeReality(msgspec.Struct, frozen=True, array_like=True):
    """What one node really runs and holds, for the invariant checker."""

    address: str
    machine_id: int
    running: bool  # registered and running (not new, registering, stopped or crashed)
    paused: bool
    used: Resources
    capacity: Resources
    containers: tuple[int, ...]
    unreported: tuple[int, ...]  # completions the RM has not acknowledged yet
    ring_version: int | None  # None: no active ring monitor
    ring_size: int
    ring_digest: int


def reality(proc: NodeProcess) -> NodeReality:
    view = proc.ring_view()
    return NodeReality(
        address=proc.address,
        machine_id=proc.machine_id,
        running=proc.state is NodeState.RUNNING and not proc.crashed,
        paused=proc.paused,
        used=proc.used(),
        capacity=proc.resources,
        containers=tuple(proc.running_containers()),
        unreported=tuple(sorted(proc.unreported_completions())),
        ring_version=view.version if view is not None else None,
        ring_size=len(view.ids) if view is not None else 0,
        ring_digest=ring_digest(view) if view is not None else 0,
    )


class NodeHosting(Protocol):
    """Node faults take the emulated time ``at_s`` they are due at: a host that needs time to
    reach its nodes (``lead_s`` > 0) is told that much ahead and applies them on time."""

    @property
    def lead_s(self) -> float:
        """How early (emulated s) node faults should be handed over."""
        ...

    def addresses(self) -> list[str]:
        """Every node of the run, in registration order."""
        ...

    def counters(self) -> NodeCounters:
        """Totals over every node."""
        ...

    def heartbeat_intervals(self) -> HeartbeatTiming:
        """The nodes' heartbeats by the sample interval they were sent in (n_i, m_i)."""
        ...

    def crash(self, addresses: list[str], at_s: float) -> None: ...

    def rejoin(self, addresses: list[str], at_s: float) -> None: ...

    def pause(self, addresses: list[str], durations: list[float], at_s: float) -> None: ...

    def set_healthy(self, addresses: list[str], healthy: bool, at_s: float) -> None: ...

    def set_liveness_loss(self, fraction: float, at_s: float) -> bool:
        """Drop this fraction of node-to-node ring messages; False if there is no ring."""
        ...

    def kill_worker(self, worker: int) -> list[str]:
        """Kill node-hosting process ``worker`` now (SIGKILL); returns the nodes it hosted."""
        ...

    def machine_ids(self) -> dict[str, int]:
        """The machine id each live (not crashed, registered) node holds."""
        ...

    def realities(self) -> list[NodeReality] | None:
        """Every node's real state (see ``NodeReality``); None when not known now."""
        ...


class MemoryHosting:
    """Nodes as objects in this process, connected by the in-memory transport."""

    def __init__(
        self, processes: list[NodeProcess], counters: NodeCounters, timing: HeartbeatTiming,
        to_rm: Meter, peers: MemoryPeers | None, ring: RingCounters | None,
    ) -> None:
        self.processes = processes
        self.by_address = {p.address: p for p in processes}
        self._counters = counters
        self.timing = timing
        self.to_rm = to_rm
        self.peers = peers
        self.ring = ring

    lead_s = 0.0  # the nodes are here: faults apply when they are handed over

    def addresses(self) -> list[str]:
        return [p.address for p in self.processes]

    def counters(self) -> NodeCounters:
        return self._counters

    def heartbeat_intervals(self) -> HeartbeatTiming:
        return self.timing

    def _each(self, addresses: list[str]) -> list[NodeProcess]:
        return [self.by_address[a] for a in addresses if a in self.by_address]

    def crash(self, addresses: list[str], at_s: float) -> None:
        for p in self._each(addresses):
            p.crash()

    def rejoin(self, addresses: list[str], at_s: float) -> None:
        for p in self._each(addresses):
            p.rejoin()

    def pause(self, addresses: list[str], durations: list[float], at_s: float) -> None:
        for p, d in zip(self._each(addresses), durations, strict=True):
            p.pause(d)

    def set_healthy(self, addresses: list[str], healthy: bool, at_s: float) -> None:
        for p in self._each(addresses):
            p.set_healthy(healthy)

    def set_liveness_loss(self, fraction: float, at_s: float) -> bool:
        if self.peers is None:
            return False
        self.peers.set_loss(fraction)
        return True

    def kill_worker(self, worker: int) -> list[str]:
        raise RuntimeError("nodes in memory have no worker process to kill")

    def machine_ids(self) -> dict[str, int]:
        return {p.address: p.machine_id for p in self.processes if p.machine_id > 0 and not p.crashed}

    def realities(self) -> list[NodeReality]:
        return [reality(p) for p in self.processes]

    def live_count(self) -> int:
        return sum(1 for p in self.processes if not p.crashed and p.state is not NodeState.STOPPED)
