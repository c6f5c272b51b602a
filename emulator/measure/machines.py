"""How many machines a run actually used: nodes holding at least one container at each sample of
the measurement window — what a placement policy's packing is judged on, beside the offline FFD
bound of the workload (design.md §3b)."""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from typing import Protocol


class NodeLike(Protocol):
    @property
    def containers(self) -> Sized: ...


class MachinesUsed:
    def __init__(self, nodes: Callable[[], Sequence[NodeLike]], warmup_s: float) -> None:
        self._nodes = nodes
        self._warmup_s = warmup_s
        self._samples: list[int] = []

    def sample(self, t_s: float) -> None:
        if t_s >= self._warmup_s:
            self._samples.append(sum(1 for n in self._nodes() if len(n.containers) > 0))

    def summary(self) -> dict[str, float] | None:
        """Mean and max over the window's samples (None before any)."""
        if not self._samples:
            return None
        return {"mean": round(sum(self._samples) / len(self._samples), 3), "max": max(self._samples)}
