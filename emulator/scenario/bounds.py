"""Bounded number types for scenario fields, and what every section of the scenario file is built
on: ``Base`` (unknown fields refused) and ``Dist`` (a seeded random node size)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from rm.protocol import MAX_NODE_RESOURCE

# Upper bounds keep infinities (and absurd values) out at the edge; NaN fails every bound.
LIMIT = 1e9
Positive = Annotated[float, msgspec.Meta(gt=0, le=LIMIT)]
NonNegative = Annotated[float, msgspec.Meta(ge=0, le=LIMIT)]
Count = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]
# [workload.trace]'s default bounds (the trace readers' too): tasks a trace may expand into, bytes
# its file may hold.
MAX_TRACE_TASKS = 2_000_000
MAX_TRACE_BYTES = 1 << 30
Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]
TaskCount = Annotated[int, msgspec.Meta(ge=0, le=10_000_000)]
# What a node may declare: the RM refuses a registration outside these bounds.
NodeResource = Annotated[float, msgspec.Meta(gt=0, le=MAX_NODE_RESOURCE)]
NodeResourceInt = Annotated[int, msgspec.Meta(ge=1, le=int(MAX_NODE_RESOURCE))]


class Base(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    pass


class Dist(Base, kw_only=True, frozen=True):
    """A seeded random value; give exactly one of the fields."""

    uniform: tuple[NodeResource, NodeResource] | None = None
    uniform_int: tuple[NodeResourceInt, NodeResourceInt] | None = None
    choice: Annotated[list[NodeResource], msgspec.Meta(min_length=1)] | None = None

    def __post_init__(self) -> None:
        given = [f for f in ("uniform", "uniform_int", "choice") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of `uniform`, `uniform_int`, `choice`")
        for name in ("uniform", "uniform_int"):
            rng = getattr(self, name)
            if rng is not None and not (0 < rng[0] <= rng[1]):
                raise ValueError(f"`{name}` needs 0 < low <= high, got {list(rng)}")

    def largest(self) -> float:
        """The largest value a draw can give."""
        if self.uniform is not None:
            return self.uniform[1]
        if self.uniform_int is not None:
            return float(self.uniform_int[1])
        assert self.choice is not None
        return max(self.choice)


ResourceValue = NodeResource | Dist


def largest(value: float | Dist) -> float:
    return value.largest() if isinstance(value, Dist) else value
