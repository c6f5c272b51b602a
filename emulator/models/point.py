"""One point of a model study as a model's table sees it: which variant and axis values, the
parameters it ran with and the model's result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np


class ModelPoint(msgspec.Struct, frozen=True, kw_only=True):
    variant: str
    label: str  # the variant's description, else its name: what a table calls it
    coords: dict[str, Any]  # axis name -> value (seed, or a parameter path)
    params: dict[str, Any]  # the parameters as run, every override applied
    output: dict[str, Any]  # the model's result


def by_variant(points: list[ModelPoint]) -> dict[str, list[ModelPoint]]:
    """The points grouped by variant, in the study's order (each group in its axes' order)."""
    out: dict[str, list[ModelPoint]] = {}
    for p in points:
        out.setdefault(p.variant, []).append(p)
    return out


def per_variant(points: list[ModelPoint], table: Callable[[list[ModelPoint]], str]) -> str:
    """``table`` of each variant's points; with several variants, each under its label."""
    groups = by_variant(points)
    if len(groups) <= 1:
        return table(points)
    return "\n\n".join(f"**{ps[0].label}**\n\n{table(ps)}" for ps in groups.values())


def plain(result: dict[str, Any]) -> dict[str, Any]:
    """A model's result as JSON holds it: numpy's scalars as Python's (the same values)."""
    def scalar(x: Any) -> Any:
        if isinstance(x, np.integer):
            return int(x)
        if isinstance(x, np.floating):
            return float(x)
        raise NotImplementedError(f"{type(x).__name__} in a model's result")

    out: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(result, enc_hook=scalar))
    return out
