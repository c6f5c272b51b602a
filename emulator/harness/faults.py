"""Timed fault injection from the scenario's ``[[faults]]`` list (seeded node choice), and the
record of what was done to which node (crashed when, stalled since when) that the removal
metrics judge the RM's decisions by.

Node faults go to wherever the nodes are hosted (``NodeHosting``); RM faults to the RM. Every
fault, and the end of every timed one, is a ``fault.*`` event in events.jsonl.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from emulator.harness.hosting import NodeHosting
from emulator.scenario.fault_schema import (
    CrashFault,
    Fault,
    HealthFault,
    LivenessLossFault,
    MessageFault,
    NodeSelector,
    PauseFault,
    RMOverloadFault,
    RMRestartFault,
    RMStallFault,
    WorkerKillFault,
)
from emulator.time.clock import LoopClock
from rm import Log, ResourceManager


class NodeFates:
    """What the harness did to each node: crashed (and not rejoined) since when, paused until when.
    Kept by the harness, so it holds whatever the transport."""

    def __init__(self, clock: LoopClock) -> None:
        self._clock = clock
        self.crashed_at: dict[str, float] = {}  # address -> time of its (last) crash, ever
        # address -> who crashed it (last): "scenario", "page" (the status page) or "worker"
        self.crash_source: dict[str, str] = {}
        self.down: set[str] = set()  # crashed and not rejoined
        self._paused: dict[str, tuple[float, float]] = {}  # address -> (stalled since, until)

    def crashed(self, address: str, source: str = "scenario") -> None:
        self.crashed_at[address] = self._clock.now()
        self.crash_source[address] = source
        self.down.add(address)

    def rejoined(self, address: str) -> None:
        self.down.discard(address)

    def paused(self, address: str, seconds: float) -> None:
        now = self._clock.now()
        since, until = self._paused.get(address, (now, now))
        if until <= now:
            since = now
        self._paused[address] = (since, max(until, now + seconds))

    def is_down(self, address: str) -> bool:
        return address in self.down

    def stalled_for(self, address: str) -> float:
        """How long the node's loop has been stalled now (0 if it runs)."""
        p = self._paused.get(address)
        now = self._clock.now()
        if p is None or p[1] <= now or address in self.down:
            return 0.0
        return now - p[0]


class FaultInjector:
    def __init__(
        self,
        faults: list[Fault],
        hosting: NodeHosting,
        clock: LoopClock,
        seed: int,
        log: Log,
        rm: ResourceManager,
        restart_rm: Callable[[float], None],
    ) -> None:
        """``restart_rm(downtime_s)``: the harness's way to kill the RM process and start a new one."""
        self._faults = faults
        self._hosting = hosting
        self._addresses = hosting.addresses()
        self._known = set(self._addresses)
        self._clock = clock
        self._rng = random.Random(f"{seed}:faults")
        self._log = log
        self._rm = rm
        self._restart_rm = restart_rm
        self.fates = NodeFates(clock)

    def start(self, resumed: bool = False) -> None:
        """Schedule every fault: RM faults at their time, node faults ``hosting.lead_s`` before it
        (they carry their time and are applied then, wherever the nodes are). ``resumed``: this
        RM process takes a run over, the faults already due are the earlier process's past."""
        lead = self._hosting.lead_s
        now = self._clock.now()
        for index, fault in enumerate(self._faults):
            if resumed and fault.at_s < now:
                continue
            # Faults the RM process applies itself fire at their time, node faults ahead of it.
            here = RMStallFault | RMOverloadFault | RMRestartFault | WorkerKillFault
            early = 0.0 if isinstance(fault, here) else lead
            self._clock.call_later(max(0.0, fault.at_s - early - now), self._fire, index, fault)

    def select(self, sel: NodeSelector) -> list[str]:
        if sel.nodes:
            unknown = [a for a in sel.nodes if a not in self._known]
            if unknown:
                self._log.warning("fault.unknown_nodes", nodes=unknown)
            return [a for a in sel.nodes if a in self._known]
        if isinstance(sel, CrashFault) and sel.consecutive:
            return self._block(sel)
        k = sel.count if sel.count is not None else round((sel.fraction or 0.0) * len(self._addresses))
        return self._rng.sample(self._addresses, min(k, len(self._addresses)))

    def _block(self, fault: CrashFault) -> list[str]:
        """``count`` live nodes with consecutive machine ids (a rack)."""
        ids = self._hosting.machine_ids()
        live = sorted((mid, a) for a, mid in ids.items() if not self.fates.is_down(a))
        k = min(fault.count or 0, len(live))
        if fault.first_id is not None:
            start = next((i for i, (mid, _) in enumerate(live) if mid >= fault.first_id), len(live))
        else:
            start = self._rng.randrange(len(live) - k + 1) if live else 0
        return [a for _, a in live[start : start + k]]

    def _at(self, at_s: float, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn`` at emulated ``at_s`` (now if that has passed)."""
        delay = at_s - self._clock.now()
        if delay > 0:
            self._clock.call_later(delay, fn, *args)
        else:
            fn(*args)

    # ---- node faults (also the status page's way in) ---------------------------------------

    def crash(self, addresses: list[str], at_s: float | None = None, source: str = "scenario") -> list[str]:
        """``source``: who asks, "scenario" or "page" (kept apart in the results)."""
        at = self._clock.now() if at_s is None else at_s
        targets = [a for a in addresses if not self.fates.is_down(a)]
        self._hosting.crash(targets, at)
        self._at(at, self._record_crash, targets, source)
        return targets

    def _record_crash(self, targets: list[str], source: str = "scenario") -> None:
        for a in targets:
            self.fates.crashed(a, source)

    def rejoin(self, addresses: list[str], at_s: float | None = None) -> list[str]:
        at = self._clock.now() if at_s is None else at_s
        back = [a for a in addresses if self.fates.is_down(a)]
        self._hosting.rejoin(back, at)
        self._at(at, self._record_rejoin, back)
        return back

    def _record_rejoin(self, back: list[str]) -> None:
        for a in back:
            self.fates.rejoined(a)

    def pause(self, addresses: list[str], durations: list[float], at_s: float | None = None) -> None:
        at = self._clock.now() if at_s is None else at_s
        live = [(a, d) for a, d in zip(addresses, durations, strict=True) if not self.fates.is_down(a)]
        self._hosting.pause([a for a, _ in live], [d for _, d in live], at)
        self._at(at, self._record_pause, live)

    def _record_pause(self, live: list[tuple[str, float]]) -> None:
        for a, d in live:
            self.fates.paused(a, d)

    def lost_worker(self, addresses: list[str]) -> None:
        """A node-hosting process died (``kill -9``): all its nodes crashed together, now."""
        self._record_crash([a for a in addresses if not self.fates.is_down(a)], "worker")

    # ---- scheduled faults --------------------------------------------------------------------

    def _fire(self, index: int, fault: Fault) -> None:
        targets: list[str] = []
        detail: dict[str, Any] = {}
        at = fault.at_s
        match fault:
            case HealthFault(healthy=healthy):
                targets = self.select(fault)
                self._hosting.set_healthy(targets, healthy, at)
            case CrashFault(rejoin_after_s=rejoin):
                ids = self._hosting.machine_ids()
                targets = self.crash(self.select(fault), at)
                detail["machine_ids"] = sorted(ids.get(a, -1) for a in targets)[:50]
                if rejoin is not None:
                    back_at = at + rejoin
                    self._clock.call_later(
                        max(0.0, back_at - self._hosting.lead_s - self._clock.now()),
                        self._rejoin, index, targets, back_at,
                    )
            case PauseFault(duration_s=low, duration_max_s=high):
                targets = self.select(fault)
                durations = [low if high is None else self._rng.uniform(low, high) for _ in targets]
                self.pause(targets, durations, at)
                if durations:
                    detail["duration_min_s"] = round(min(durations), 3)
                    detail["duration_max_s"] = round(max(durations), 3)
            case LivenessLossFault(fraction=fraction, duration_s=duration):
                if not self._hosting.set_liveness_loss(fraction, at):
                    raise RuntimeError("a liveness_loss fault needs the ring")
                detail["fraction"] = fraction
                if duration is not None:
                    end = at + duration
                    ahead = max(0.0, end - self._hosting.lead_s - self._clock.now())
                    self._clock.call_later(ahead, self._end_loss, index, fault, end)
            case RMStallFault(duration_s=duration):
                self._rm.stall(duration)
                detail["duration_s"] = duration
            case RMOverloadFault(factor=factor, duration_s=duration):
                self._rm.set_cost_scale(factor)
                detail["factor"] = factor
                if duration is not None:
                    self._clock.call_later(duration, self._end, index, fault, self._rm.set_cost_scale, 1.0)
            case RMRestartFault(downtime_s=downtime):
                self._restart_rm(downtime)
                detail["downtime_s"] = downtime
            case MessageFault():
                pass  # applied by the transport wrapper for its window; logged here
            case WorkerKillFault(worker=worker):
                targets = self._hosting.kill_worker(worker)
                detail["worker"] = worker
        if self._hosting.lead_s and at > self._clock.now():
            detail["at_s"] = at  # handed over early; applied at this time
        self._log.info(
            "fault.injected",
            index=index,
            kind=type(fault).__name__,
            # Crashes and pauses list every node: removal metrics attribute removals by address.
            nodes=targets[: None if isinstance(fault, CrashFault | PauseFault) else 50],
            count=len(targets),
            **detail,
        )

    def _end_loss(self, index: int, fault: Fault, at_s: float) -> None:
        self._hosting.set_liveness_loss(0.0, at_s)
        self._log.info("fault.ended", index=index, kind=type(fault).__name__)

    def _end(self, index: int, fault: Fault, undo: Callable[[float], object], value: float) -> None:
        undo(value)
        self._log.info("fault.ended", index=index, kind=type(fault).__name__)

    def _rejoin(self, index: int, targets: list[str], at_s: float) -> None:
        back = self.rejoin(targets, at_s)
        self._log.info("fault.rejoin", index=index, nodes=back[:50], count=len(back))
