"""Expanding the scenario's cluster section into concrete nodes (seeded)."""

from __future__ import annotations

import random

from emulator.scenario.schema import Dist, Scenario
from rm.protocol import Resources


def draw(value: float | Dist, rng: random.Random) -> float:
    if not isinstance(value, Dist):
        return float(value)
    if value.uniform is not None:
        return rng.uniform(*value.uniform)
    if value.uniform_int is not None:
        return float(rng.randint(*value.uniform_int))
    assert value.choice is not None
    return float(rng.choice(value.choice))


def node_specs(scenario: Scenario) -> list[tuple[str, Resources]]:
    """(address, resources) per node, in registration order."""
    rng = random.Random(f"{scenario.run.seed}:cluster")
    out: list[tuple[str, Resources]] = []
    for gi, group in enumerate(scenario.cluster.nodes):
        for i in range(group.count):
            res = Resources(draw(group.cpu, rng), draw(group.ram_gib, rng))
            out.append((f"{group.name}-{gi}-{i:05d}", res))
    return out


def phases(scenario: Scenario, count: int) -> list[float]:
    """First-heartbeat (registration) offsets: spread over one interval so nodes do not beat in
    lockstep, or over ``cluster.join_over_s`` when that is longer."""
    hb = scenario.heartbeat
    span = max(hb.interval_s if hb.spread else 0.0, scenario.cluster.join_over_s)
    if not span:
        return [0.0] * count
    rng = random.Random(f"{scenario.run.seed}:phase")
    return [rng.uniform(0.0, span) for _ in range(count)]
