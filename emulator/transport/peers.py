"""In-memory node<->node channel for ring liveness, with seeded message loss.

Implements ``ringmon.ports.PeerChannel``: messages are addressed by machine id and delivered
through the event loop (never re-entering the sender), after the transport latency. A fraction
of them is dropped, decided by one seeded RNG, so a run stays a function of its seed.
"""

from __future__ import annotations

import random
from typing import Any

from emulator.clock import LoopClock
from ringmon.ports import PeerReceiver


class MemoryPeers:
    def __init__(self, clock: LoopClock, seed: int, latency_s: float = 0.0) -> None:
        self._clock = clock
        self._latency = latency_s
        self._rng = random.Random(f"{seed}:peers")
        self._bound: dict[int, PeerReceiver] = {}
        self.loss = 0.0
        self.sent = 0
        self.lost = 0
        self.undeliverable = 0

    def set_loss(self, fraction: float) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"loss fraction must be in [0, 1], got {fraction}")
        self.loss = fraction

    def bind(self, machine_id: int, receiver: PeerReceiver) -> None:
        self._bound[machine_id] = receiver

    def unbind(self, machine_id: int, receiver: PeerReceiver) -> None:
        if self._bound.get(machine_id) is receiver:
            del self._bound[machine_id]

    def send(self, dst: int, msg: Any) -> None:
        self.sent += 1
        if self.loss > 0.0 and self._rng.random() < self.loss:
            self.lost += 1
            return
        if self._latency > 0:
            self._clock.call_later(self._latency, self._deliver, dst, msg)
        else:
            self._clock.call_soon(self._deliver, dst, msg)

    def _deliver(self, dst: int, msg: Any) -> None:
        # Resolved at delivery: a message to an id whose owner crashed goes nowhere.
        receiver = self._bound.get(dst)
        if receiver is None:
            self.undeliverable += 1
            return
        receiver.from_peer(msg)
