"""Workload distributions (durations, sizes) and arrival processes: seeded, bounded, and the old
Normal model drawing exactly what it drew before."""

from __future__ import annotations

import random
import statistics
from typing import Any

import msgspec
import pytest

from emulator.harness.workload import submit_times, task_durations
from emulator.scenario.distributions import (
    Distribution,
    Empirical,
    Exponential,
    LogNormal,
    Normal,
    Pareto,
    PoissonArrivals,
    value_rng,
)
from emulator.scenario.loader import ScenarioError, scenario_from_dict
from emulator.scenario.schema import OperationConfig
from tests.helpers import run_with_handle, scenario


def dist(**table: Any) -> Distribution:
    out: Distribution = msgspec.convert(table, Distribution)
    return out


def draws(d: Distribution, n: int = 20_000, floor: float = 0.0) -> list[float]:
    rng = random.Random(1)
    return [d.draw(rng, floor) for _ in range(n)]


def test_kinds_from_tables() -> None:
    assert isinstance(dist(kind="normal", mean=5, stddev=1), Normal)
    assert isinstance(dist(kind="lognormal", mean=5, stddev=1), LogNormal)
    assert isinstance(dist(kind="exponential", mean=5), Exponential)
    assert isinstance(dist(kind="pareto", scale=1, shape=2), Pareto)
    assert isinstance(dist(kind="empirical", values=[1, 2]), Empirical)
    with pytest.raises(msgspec.ValidationError):
        dist(kind="pareto", scale=1)  # no shape
    with pytest.raises(msgspec.ValidationError):
        dist(kind="normal", mean=5, min=6, max=3)


def test_means_and_tails() -> None:
    # LogNormal is given the values' own mean and deviation, as SYNTH gives them.
    xs = draws(LogNormal(mean=100, stddev=50))
    assert statistics.fmean(xs) == pytest.approx(100, rel=0.03)
    assert statistics.stdev(xs) == pytest.approx(50, rel=0.08)
    assert statistics.fmean(draws(Exponential(mean=30))) == pytest.approx(30, rel=0.03)
    p = draws(Pareto(scale=10, shape=3))
    assert min(p) >= 10 and statistics.fmean(p) == pytest.approx(15, rel=0.05)  # shape·scale/(shape-1)
    assert set(draws(Empirical(values=[3, 7, 11]), 500)) == {3, 7, 11}


def test_bounds_clip() -> None:
    xs = draws(Pareto(scale=1, shape=0.5, max=50), 5000, floor=2)
    assert min(xs) == 2 and max(xs) == 50
    assert min(draws(Normal(mean=1, stddev=5, min=0.5), 2000)) == 0.5


def test_old_normal_model_draws_unchanged() -> None:
    """The draws of an operation with seconds_mean/deviation are those of the original code."""
    op = msgspec.convert({"name": "a", "cpu": 1, "ram_gib": 1, "tasks": 50, "seconds_mean": 100,
                          "seconds_deviation": 30}, OperationConfig)
    rng = random.Random("7:a:3")
    expected = [max(1.0, rng.gauss(100, 30)) for _ in range(50)]
    assert task_durations(op, value_rng(7, "a", 3), 1.0) == expected


def test_arrivals() -> None:
    poisson = msgspec.convert({"name": "a", "cpu": 1, "ram_gib": 1, "tasks": 1, "seconds_mean": 1,
                               "submit_at_s": 100, "arrivals": {"kind": "poisson", "rate_per_s": 0.5,
                                                                 "count": 4000}}, OperationConfig)
    times = submit_times(poisson, 3)
    assert times == submit_times(poisson, 3) != submit_times(poisson, 4)
    assert len(times) == 4000 and times == sorted(times) and times[0] > 100
    gaps = [b - a for a, b in zip([100.0, *times], times, strict=False)]
    assert statistics.fmean(gaps) == pytest.approx(2.0, rel=0.05)
    recorded = msgspec.convert({"name": "a", "cpu": 1, "ram_gib": 1, "tasks": 1, "seconds_mean": 1,
                                "submit_at_s": 10, "arrivals": {"kind": "recorded", "at_s": [5, 0, 2]}},
                               OperationConfig)
    assert submit_times(recorded, 0) == [10, 12, 15]
    assert isinstance(poisson.arrivals, PoissonArrivals) and poisson.instance_count == 4000


@pytest.mark.parametrize("op, message", [
    ({"seconds_mean": 5, "seconds": {"kind": "exponential", "mean": 5}}, "give the task durations once"),
    ({"seconds_mean": 5, "cpu": {"kind": "lognormal", "mean": 2, "stddev": 1}}, "`cpu`: a size distribution"),
    ({"seconds_mean": 5, "repeat": 3, "arrivals": {"kind": "recorded", "at_s": [1]}}, "`arrivals` replaces"),
    ({"durations_s": [1, 2], "tasks": 3}, "differs from the 2 `durations_s`"),
    ({"seconds": {"kind": "weibull", "mean": 1}}, "expected one of `normal`, `lognormal`"),
])
def test_bad_operations_are_named(op: dict[str, Any], message: str) -> None:
    base = {"name": "a", "cpu": 1, "ram_gib": 1, "tasks": 2}
    if "durations_s" in op:
        del base["tasks"]
    with pytest.raises(ScenarioError, match=r"workload\.operations") as err:
        scenario_from_dict({"cluster": {"nodes": [{"cpu": 4, "ram_gib": 4}]}, "run": {"duration_s": 10},
                            "workload": {"operations": [{**base, **op}]}}, "t.toml")
    assert message in str(err.value)


def test_a_run_with_distributions() -> None:
    sc = scenario(workload={"operations": [
        {"name": "heavy", "cpu": {"kind": "empirical", "values": [1, 2]}, "ram_gib": 1, "tasks": 20,
         "seconds": {"kind": "pareto", "scale": 2, "shape": 1.2, "max": 40},
         "arrivals": {"kind": "poisson", "rate_per_s": 0.2, "count": 5}},
    ]}, run={"duration_s": 300, "seed": 5})
    out, _ = run_with_handle(sc)
    assert out.jobs is not None
    assert [r.job_id for r in out.jobs.rows] == [f"heavy#{k}" for k in range(5)]
    assert all(r.finish_s is not None and 2 <= r.ideal_s <= 40 for r in out.jobs.rows)
