"""What the RM observed of real usage (design.md §3b): per task and per node, the last
``history`` reports, for stochastic-bin-packing admission and Autopilot."""

from __future__ import annotations

from collections import deque


class Observations:
    """CPU and RAM usage samples, newest last, at most ``history`` of each."""

    __slots__ = ("cpu", "ram")

    def __init__(self, history: int) -> None:
        self.cpu: deque[float] = deque(maxlen=history)
        self.ram: deque[float] = deque(maxlen=history)

    def add(self, cpu: float, ram: float) -> None:
        self.cpu.append(cpu)
        self.ram.append(ram)

    def of(self, r: int) -> deque[float]:
        return self.cpu if r == 0 else self.ram
