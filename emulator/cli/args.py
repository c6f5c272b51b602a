"""Argument types for the command line: a bad number is an argparse error (usage, exit 2), never a
traceback or a run that cannot end (``--speed nan``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

LIMIT = 1e9  # as in the scenario schema


def number(low: float, *, inclusive: bool = False, high: float = LIMIT) -> Callable[[str], float]:
    """A finite float above ``low`` (or at it, ``inclusive``) and at most ``high``."""
    relation = ">=" if inclusive else ">"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        above = value >= low if inclusive else value > low
        if not (math.isfinite(value) and above and value <= high):
            raise argparse.ArgumentTypeError(
                f"expected a number {relation} {low:g} and <= {high:g}, got {text}"
            )
        return value

    return parse


def count(low: int = 1, high: int = 10_000_000) -> Callable[[str], int]:
    """An integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low:,} to {high:,}, got {text}")
        return value

    return parse


positive = number(0.0)
non_negative = number(0.0, inclusive=True)
