"""Nodes hosted in worker processes, as the RM side of a TCP run sees them (``NodeHosting``).

Workers connect to the harness's control server (``control``). Node faults go to the worker that
hosts each node, ``lead_s`` ahead of their emulated time, and are applied then; the nodes' real
state is gathered from every worker for the invariant checker. A worker whose control connection
drops without being told to stop has died: its nodes are gone together (a correlated crash the
ring must detect), and the run goes on.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable

import msgspec

from emulator.harness.control import ControlServer, LivenessLoss, NodeFault, WorkerLink
from emulator.harness.hosting import NodeReality
from emulator.harness.nodehost import HostConfig, HostReport
from emulator.measure.timing import HeartbeatTiming
from emulator.transport.faulty import MessageFaultCounters
from nodemanager.stats import NodeCounters
from ringmon.ports import RingCounters


class DeadWorker(msgspec.Struct, frozen=True):
    """A node-hosting process that died during the run."""

    worker: int
    pid: int
    nodes: int
    t_s: float


class WorkerHosting:
    def __init__(
        self,
        addresses: list[str],
        control: ControlServer,
        machine_ids: Callable[[], dict[str, int]],
        ring: bool,
        lead_s: float,
        now: Callable[[], float],
    ) -> None:
        """``addresses``: the scenario's nodes (empty: whatever workers announce);
        ``machine_ids()``: the RM's view of who holds which id; ``now()``: emulated time."""
        self._addresses = addresses
        self._control = control
        self._machine_ids = machine_ids
        self._ring = ring
        self._lead = lead_s
        self._now = now
        self._worker_of: dict[str, int] = {}
        self._counters = NodeCounters()
        self._timing = HeartbeatTiming()
        self.dead: list[DeadWorker] = []
        self.gathered: tuple[int, list[NodeReality]] | None = None  # (ring version, realities)

    @property
    def lead_s(self) -> float:
        return self._lead

    def joined(self, link: WorkerLink) -> None:
        for a in link.nodes:
            self._worker_of[a] = link.worker

    def died(self, link: WorkerLink) -> None:
        self.dead.append(DeadWorker(link.worker, link.pid, len(link.nodes), round(self._now(), 6)))

    def addresses(self) -> list[str]:
        return self._addresses or list(self._worker_of)

    def counters(self) -> NodeCounters:
        return self._counters

    def heartbeat_intervals(self) -> HeartbeatTiming:
        """Empty until the workers' reports come in at the end of the run."""
        return self._timing

    def _by_worker(self, addresses: list[str]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for a in addresses:
            w = self._worker_of.get(a)
            if w is not None:
                out.setdefault(w, []).append(a)
        return out

    def _send(self, kind: str, addresses: list[str], at_s: float, durations: list[float] | None = None,
              healthy: bool = True) -> None:
        d = dict(zip(addresses, durations, strict=True)) if durations is not None else {}
        for w, mine in self._by_worker(addresses).items():
            link = self._control.workers.get(w)
            if link is not None and link.alive:
                link.send(NodeFault(kind=kind, addresses=mine, at_s=at_s,  # type: ignore[arg-type]
                                    durations=[d[a] for a in mine] if durations is not None else [],
                                    healthy=healthy))

    def crash(self, addresses: list[str], at_s: float) -> None:
        self._send("crash", addresses, at_s)

    def rejoin(self, addresses: list[str], at_s: float) -> None:
        self._send("rejoin", addresses, at_s)

    def pause(self, addresses: list[str], durations: list[float], at_s: float) -> None:
        self._send("pause", addresses, at_s, durations)

    def set_healthy(self, addresses: list[str], healthy: bool, at_s: float) -> None:
        self._send("health", addresses, at_s, healthy=healthy)

    def set_liveness_loss(self, fraction: float, at_s: float) -> bool:
        if not self._ring:
            return False
        self._control.broadcast(LivenessLoss(fraction=fraction, at_s=at_s))
        return True

    def kill_worker(self, worker: int) -> list[str]:
        """SIGKILL: its control connection drops, and ``died`` follows as for any dead worker."""
        link = self._control.workers.get(worker)
        if link is None or not link.alive:
            return []
        try:
            os.kill(link.pid, signal.SIGKILL)
        except ProcessLookupError:
            return []
        return list(link.nodes)

    def machine_ids(self) -> dict[str, int]:
        return self._machine_ids()

    def realities(self) -> list[NodeReality] | None:
        return self.gathered[1] if self.gathered is not None else None

    async def gather(self) -> list[NodeReality]:
        return await self._control.gather()

    def add_reports(self, reports: list[HostReport]) -> None:
        total = self._counters
        for report in reports:
            for name, value in msgspec.structs.asdict(report.counters).items():
                setattr(total, name, getattr(total, name) + value)
            self._timing.add_intervals(report.intervals)


def sum_ring(reports: list[HostReport]) -> RingCounters | None:
    parts = [r.ring for r in reports if r.ring is not None]
    if not parts:
        return None
    total = RingCounters()
    for part in parts:
        for name, value in msgspec.structs.asdict(part).items():
            setattr(total, name, getattr(total, name) + value)
    return total


def sum_message_faults(parts: list[MessageFaultCounters | None]) -> MessageFaultCounters | None:
    present = [p for p in parts if p is not None]
    if not present:
        return None
    total = MessageFaultCounters()
    for part in present:
        for name, value in msgspec.structs.asdict(part).items():
            setattr(total, name, getattr(total, name) + value)
    return total


async def spawn(cfg: HostConfig) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "emulator.harness.nodehost",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        # Its own process group: a Ctrl-C at the terminal reaches the harness, which stops it.
        start_new_session=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(msgspec.json.encode(cfg))
    await proc.stdin.drain()
    proc.stdin.close()
    return proc


async def collect(proc: asyncio.subprocess.Process, timeout_s: float) -> HostReport | None:
    """The worker's report, or None if it died (or did not finish in time and was killed)."""
    try:
        async with asyncio.timeout(timeout_s):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    if proc.returncode != 0 or not out.strip():
        return None
    return msgspec.json.decode(out.strip().splitlines()[-1], type=HostReport)
