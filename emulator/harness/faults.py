"""Timed fault injection from the scenario's ``[[faults]]`` list (seeded node choice).

Every fault, and the end of every timed one, is a ``fault.*`` event in events.jsonl.
"""

from __future__ import annotations

import random
from typing import Any

from emulator.scenario.schema import (
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
)
from emulator.time.clock import LoopClock
from nodemanager.node import NodeManager


class FaultInjector:
    def __init__(
        self,
        faults: list[Fault],
        nodes: list[NodeManager],
        clock: LoopClock,
        seed: int,
        log: Any,
        rm: Any = None,
        peers: Any = None,
        restart_rm: Any = None,
    ) -> None:
        self._faults = faults
        self._nodes = nodes
        self._by_address = {n.address: n for n in nodes}
        self._clock = clock
        self._rng = random.Random(f"{seed}:faults")
        self._log = log
        self._rm = rm
        self._peers = peers
        # ``restart_rm(downtime_s)``: the harness's way to kill the RM process and start a new one.
        self._restart_rm = restart_rm
        # address -> emulated time of its (last) crash; read by the removal metrics.
        self.crashed_at: dict[str, float] = {}

    def start(self) -> None:
        for index, fault in enumerate(self._faults):
            self._clock.call_later(fault.at_s, self._fire, index, fault)

    def select(self, sel: NodeSelector) -> list[NodeManager]:
        if sel.nodes:
            unknown = [a for a in sel.nodes if a not in self._by_address]
            if unknown:
                self._log.warning("fault.unknown_nodes", nodes=unknown)
            return [self._by_address[a] for a in sel.nodes if a in self._by_address]
        if isinstance(sel, CrashFault) and sel.consecutive:
            return self._block(sel)
        k = sel.count if sel.count is not None else round((sel.fraction or 0.0) * len(self._nodes))
        return self._rng.sample(self._nodes, min(k, len(self._nodes)))

    def _block(self, fault: CrashFault) -> list[NodeManager]:
        """``count`` live nodes with consecutive machine ids (a rack)."""
        live = [n for n in self._nodes if n.machine_id > 0 and not n.crashed]
        live.sort(key=lambda n: n.machine_id)
        k = min(fault.count or 0, len(live))
        if fault.first_id is not None:
            start = next((i for i, n in enumerate(live) if n.machine_id >= fault.first_id), len(live))
        else:
            start = self._rng.randrange(len(live) - k + 1) if live else 0
        return live[start : start + k]

    def _fire(self, index: int, fault: Fault) -> None:
        targets: list[NodeManager] = []
        detail: dict[str, Any] = {}
        now = self._clock.now()
        match fault:
            case HealthFault(healthy=healthy):
                targets = self.select(fault)
                for node in targets:
                    node.set_healthy(healthy)
            case CrashFault(rejoin_after_s=rejoin):
                targets = [n for n in self.select(fault) if not n.crashed]
                for node in targets:
                    node.crash()
                    self.crashed_at[node.address] = now
                detail["machine_ids"] = sorted(n.machine_id for n in targets)[:50]
                if rejoin is not None:
                    self._clock.call_later(rejoin, self._rejoin, index, targets)
            case PauseFault(duration_s=low, duration_max_s=high):
                targets = self.select(fault)
                durations = [low if high is None else self._rng.uniform(low, high) for _ in targets]
                for node, d in zip(targets, durations, strict=True):
                    node.pause(d)
                if durations:
                    detail["duration_min_s"] = round(min(durations), 3)
                    detail["duration_max_s"] = round(max(durations), 3)
            case LivenessLossFault(fraction=fraction, duration_s=duration):
                self._need(self._peers, fault)
                self._peers.set_loss(fraction)
                detail["fraction"] = fraction
                if duration is not None:
                    self._clock.call_later(duration, self._end, index, fault, self._peers.set_loss, 0.0)
            case RMStallFault(duration_s=duration):
                self._need(self._rm, fault)
                self._rm.inbound.stall(duration)
                detail["duration_s"] = duration
            case RMOverloadFault(factor=factor, duration_s=duration):
                self._need(self._rm, fault)
                self._rm.inbound.cost_scale = factor
                detail["factor"] = factor
                if duration is not None:
                    self._clock.call_later(duration, self._end, index, fault, self._set_scale, 1.0)
            case RMRestartFault(downtime_s=downtime):
                self._need(self._restart_rm, fault)
                self._restart_rm(downtime)
                detail["downtime_s"] = downtime
            case MessageFault():
                pass  # applied by the transport wrapper for its window; logged here
        self._log.info(
            "fault.injected",
            index=index,
            kind=type(fault).__name__,
            # Crashes and pauses list every node: removal metrics attribute removals by address.
            nodes=[n.address for n in targets][: None if isinstance(fault, CrashFault | PauseFault) else 50],
            count=len(targets),
            **detail,
        )

    def _set_scale(self, factor: float) -> None:
        self._rm.inbound.cost_scale = factor

    def _end(self, index: int, fault: Fault, undo: Any, value: Any) -> None:
        undo(value)
        self._log.info("fault.ended", index=index, kind=type(fault).__name__)

    def _rejoin(self, index: int, targets: list[NodeManager]) -> None:
        back = [n for n in targets if n.crashed]
        for node in back:
            node.rejoin()
        self._log.info("fault.rejoin", index=index, nodes=[n.address for n in back][:50], count=len(back))

    @staticmethod
    def _need(component: Any, fault: Fault) -> None:
        if component is None:
            raise RuntimeError(f"{type(fault).__name__} needs the harness to provide its target")
