"""What the RM observed of real usage (design.md §3b): per task and per node, the last
``history`` reports, for stochastic-bin-packing admission and Autopilot."""

from __future__ import annotations

from collections import deque
from typing import Any


class Observations:
    """CPU and RAM usage samples, newest last, at most ``history`` of each."""

    __slots__ = ("cpu", "memo", "ram")

    def __init__(self, history: int) -> None:
        self.cpu: deque[float] = deque(maxlen=history)
        self.ram: deque[float] = deque(maxlen=history)
        # Statistics of the samples as they stand (the admission's), forgotten on the next sample.
        self.memo: dict[Any, Any] = {}

    def add(self, cpu: float, ram: float) -> None:
        self.cpu.append(cpu)
        self.ram.append(ram)
        if self.memo:
            self.memo = {}

    def of(self, r: int) -> deque[float]:
        return self.cpu if r == 0 else self.ram
