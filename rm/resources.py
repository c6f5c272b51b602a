"""Resource vectors: cores and GiB of RAM."""

from __future__ import annotations

import msgspec

EPS = 1e-9


class Resources(msgspec.Struct, frozen=True, array_like=True, gc=False):
    cpu: float
    ram_gib: float

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.ram_gib + other.ram_gib)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.ram_gib - other.ram_gib)

    def dominant_share(self, capacity: Resources) -> float:
        return max(
            self.cpu / capacity.cpu if capacity.cpu > 0 else 0.0,
            self.ram_gib / capacity.ram_gib if capacity.ram_gib > 0 else 0.0,
        )


ZERO = Resources(0.0, 0.0)
