"""Exponential backoff with seeded jitter, in emulated seconds (reconnecting clients)."""

from __future__ import annotations

import random


def backoff_delay(attempt: int, rng: random.Random, initial_s: float = 0.1, maximum_s: float = 5.0) -> float:
    """The wait before attempt ``attempt + 1``: doubling from ``initial_s`` up to ``maximum_s``, ±20%."""
    return float(min(maximum_s, initial_s * 2**attempt) * rng.uniform(0.8, 1.2))


class Backoff:
    """One client's backoff state."""

    def __init__(self, initial_s: float = 0.1, maximum_s: float = 5.0, seed: int = 0) -> None:
        self.initial_s = initial_s
        self.maximum_s = maximum_s
        self._rng = random.Random(f"{seed}:backoff")
        self.attempt = 0

    def next_delay(self) -> float:
        delay = backoff_delay(self.attempt, self._rng, self.initial_s, self.maximum_s)
        self.attempt += 1
        return delay

    def reset(self) -> None:
        self.attempt = 0
