"""The bench as a model (``model = "emulator-bench"``, scenarios/studies/bench.toml): one point
measures one thing about the emulator itself. ``speed``: a virtual-time run of E2's workload in one
heartbeat mode on one design (des: today's; asyncio: the first design, asyncio's loop as the
virtual clock and every ring liveness a message); ``floor``: the minimal periodic heartbeat loop;
``memory``: tracemalloc bytes per hosted NodeManager."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from emulator.models.bench.floor import floor_us_per_heartbeat
from emulator.models.bench.speed import machine, memory_per_node, speed

Count = Annotated[int, msgspec.Meta(ge=1)]
Pos = Annotated[float, msgspec.Meta(gt=0)]


class BenchParams(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    measure: Literal["speed", "floor", "memory"] = "speed"
    nodes: Count = 1000  # speed and floor: the cluster's size
    hours: Pos = 1.0  # speed: emulated hours
    interval_s: Pos = 3.0  # the heartbeat interval (speed and floor)
    mode: Literal["periodic", "delta"] = "periodic"  # speed: the heartbeat mode
    design: Literal["des", "asyncio"] = "des"  # speed: the event core (and ring liveness) it runs on
    seed: Annotated[int, msgspec.Meta(ge=0)] = 1  # speed: the workload's draws
    floor_heartbeats: Count = 300_000  # floor: heartbeats per run (the median of three runs)
    memory_nodes: Count = 5000  # memory: hosted nodes measured


def run_point(p: BenchParams) -> dict[str, Any]:
    if p.measure == "floor":
        # Unrounded: the speed points' multiples of it are taken from this (the report rounds it).
        return {"floor_us_per_heartbeat": floor_us_per_heartbeat(p.nodes, p.floor_heartbeats, p.interval_s)}
    if p.measure == "memory":
        return dict(memory_per_node(p.memory_nodes))
    return {**speed(p.nodes, p.hours, p.interval_s, p.mode, p.design, p.seed), "machine": machine()}
