"""Timed fault injection from the scenario's ``[[faults]]`` list (seeded node choice)."""

from __future__ import annotations

import random
from typing import Any

from emulator.clock import LoopClock
from emulator.scenario import Fault, HealthFault, MessageFault, NodeSelector
from nodemanager.node import NodeManager


class FaultInjector:
    def __init__(
        self, faults: list[Fault], nodes: list[NodeManager], clock: LoopClock, seed: int, log: Any
    ) -> None:
        self._faults = faults
        self._nodes = nodes
        self._by_address = {n.address: n for n in nodes}
        self._clock = clock
        self._rng = random.Random(f"{seed}:faults")
        self._log = log

    def start(self) -> None:
        for index, fault in enumerate(self._faults):
            self._clock.call_later(fault.at_s, self._fire, index, fault)

    def select(self, sel: NodeSelector) -> list[NodeManager]:
        if sel.nodes:
            unknown = [a for a in sel.nodes if a not in self._by_address]
            if unknown:
                self._log.warning("fault.unknown_nodes", nodes=unknown)
            return [self._by_address[a] for a in sel.nodes if a in self._by_address]
        k = sel.count if sel.count is not None else round((sel.fraction or 0.0) * len(self._nodes))
        return self._rng.sample(self._nodes, min(k, len(self._nodes)))

    def _fire(self, index: int, fault: Fault) -> None:
        targets = self.select(fault) if isinstance(fault, NodeSelector) else []
        match fault:
            case HealthFault(healthy=healthy):
                for node in targets:
                    node.set_healthy(healthy)
            case MessageFault():
                pass  # applied by the transport wrapper for its window; logged here
        self._log.info(
            "fault.injected",
            index=index,
            kind=type(fault).__name__,
            nodes=[n.address for n in targets][:50],
            count=len(targets),
        )
