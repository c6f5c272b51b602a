"""Seeded random distributions for task durations and sizes, and operation arrival processes.

A distribution is a table with a ``kind``: ``normal`` (mean, stddev), ``lognormal`` (the mean and
standard deviation of the values themselves, as SLS's SYNTH generator gives them), ``exponential``
(mean), ``pareto`` (``scale`` = the smallest value, ``shape`` = the tail index: heavy for small
shapes) or ``empirical`` (draws uniformly among recorded ``values``). Every kind takes optional
``min``/``max`` bounds: a draw outside them is clipped (durations default to
``workload.min_task_seconds`` below).
"""

from __future__ import annotations

import math
import random
from typing import Annotated

import msgspec

LIMIT = 1e9
_Pos = Annotated[float, msgspec.Meta(gt=0, le=LIMIT)]
_NonNeg = Annotated[float, msgspec.Meta(ge=0, le=LIMIT)]


class _Dist(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True, tag_field="kind"):
    min: _NonNeg | None = None
    max: _Pos | None = None

    def __post_init__(self) -> None:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"`min` ({self.min:g}) must be <= `max` ({self.max:g})")

    def _raw(self, rng: random.Random) -> float:
        raise NotImplementedError

    def draw(self, rng: random.Random, floor: float = 0.0) -> float:
        """One value, clipped to [max(min, floor), max]."""
        x = self._raw(rng)
        low = max(self.min or 0.0, floor)
        if x < low:
            x = low
        if self.max is not None and x > self.max:
            x = self.max
        return x

    def largest(self) -> float | None:
        """The largest value a draw can give (None: unbounded)."""
        return self.max


class Normal(_Dist, kw_only=True, frozen=True, tag="normal"):
    mean: _Pos
    stddev: _NonNeg = 0.0

    def _raw(self, rng: random.Random) -> float:
        return rng.gauss(self.mean, self.stddev) if self.stddev > 0 else self.mean


class LogNormal(_Dist, kw_only=True, frozen=True, tag="lognormal"):
    """Parameterised by the values' own mean and standard deviation (not the log's)."""

    mean: _Pos
    stddev: _NonNeg

    def _raw(self, rng: random.Random) -> float:
        if self.stddev == 0:
            return self.mean
        sigma2 = math.log1p((self.stddev / self.mean) ** 2)
        mu = math.log(self.mean) - sigma2 / 2
        return rng.lognormvariate(mu, math.sqrt(sigma2))


class Exponential(_Dist, kw_only=True, frozen=True, tag="exponential"):
    mean: _Pos

    def _raw(self, rng: random.Random) -> float:
        return rng.expovariate(1.0 / self.mean)


class Pareto(_Dist, kw_only=True, frozen=True, tag="pareto"):
    """P(X > x) = (scale / x)^shape for x >= scale; the mean is infinite for shape <= 1."""

    scale: _Pos
    shape: _Pos

    def _raw(self, rng: random.Random) -> float:
        return self.scale * rng.paretovariate(self.shape)


class Empirical(_Dist, kw_only=True, frozen=True, tag="empirical"):
    values: Annotated[list[_Pos], msgspec.Meta(min_length=1)]

    def _raw(self, rng: random.Random) -> float:
        return self.values[rng.randrange(len(self.values))]

    def largest(self) -> float | None:
        top = max(self.values)
        return top if self.max is None else min(top, self.max)


Distribution = Normal | LogNormal | Exponential | Pareto | Empirical


class PoissonArrivals(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True,
                      tag_field="kind", tag="poisson"):
    """``count`` submissions, exponentially spaced at ``rate_per_s`` from the operation's
    ``submit_at_s``."""

    rate_per_s: _Pos
    count: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]

    def times(self, start_s: float, rng: random.Random) -> list[float]:
        t = start_s
        out = []
        for _ in range(self.count):
            t += rng.expovariate(self.rate_per_s)
            out.append(t)
        return out


class RecordedArrivals(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True,
                       tag_field="kind", tag="recorded"):
    """Submissions at these times (seconds from ``submit_at_s``), in any order."""

    at_s: Annotated[list[_NonNeg], msgspec.Meta(min_length=1, max_length=1_000_000)]

    @property
    def count(self) -> int:
        return len(self.at_s)

    def times(self, start_s: float, rng: random.Random) -> list[float]:
        return sorted(start_s + t for t in self.at_s)


Arrivals = PoissonArrivals | RecordedArrivals


def value_rng(seed: int, *key: object) -> random.Random:
    """A generator of its own for one purpose (an operation's k-th draw, its arrivals): adding an
    operation or a draw elsewhere does not move anyone else's values."""
    return random.Random(":".join(str(k) for k in (seed, *key)))
