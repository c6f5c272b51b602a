"""Scaffolding for the ring / membership / fault tests: small scenarios run in virtual time."""

from __future__ import annotations

from typing import Any, NamedTuple

from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import RunHandle
from emulator.results.summary import build_summary
from emulator.scenario.loader import scenario_from_dict
from tests.helpers import run_with_handle

INTERVAL = 3.0


def ring_scenario(
    nodes: int = 200,
    faults: list[dict[str, Any]] | None = None,
    ring: dict[str, Any] | None = None,
    duration_s: float = 150.0,
    mode: str = "delta",
    seed: int = 1,
    rm: dict[str, Any] | None = None,
    job_count: int = 1500,
    loop: bool = True,
) -> dict[str, Any]:
    return {
        "name": "ring-test",
        "cluster": {"nodes": [{"count": nodes, "cpu": 20, "ram_gib": 40}]},
        "heartbeat": {"mode": mode, "interval_s": INTERVAL},
        "ring": {"interval_s": INTERVAL, **(ring or {})},
        "rm": rm or {},
        "workload": {
            "operations": [
                {
                    "name": "job", "cpu": 1, "ram_gib": 2, "job_count": job_count,
                    "seconds_mean": 40, "seconds_deviation": 10, "loop": loop,
                }
            ]
        },
        "faults": faults or [],
        "run": {"duration_s": duration_s, "seed": seed},
    }


class RingRun(NamedTuple):
    outcome: RunOutcome
    handle: RunHandle


def run_ring(**kw: Any) -> tuple[RingRun, dict[str, Any]]:
    outcome, handle = run_with_handle(scenario_from_dict(ring_scenario(**kw), "<test>"))
    return RingRun(outcome, handle), build_summary(outcome)
