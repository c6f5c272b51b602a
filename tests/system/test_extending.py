"""docs/extending.md's example as a test: the policy in examples/hbemu-policy-example, made
discoverable the way an install would (its entry points in a dist-info on sys.path), runs a
scenario by name with its own parameters and passes the conformance suite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emulator.scenario.loader import ScenarioError
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.registry import policies
from tests.helpers import run_with_handle, scenario
from tests.plugin_support import install_example
from tests.policy_conformance import check_deterministic, check_never_over_allocates


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_example(tmp_path / "site", monkeypatch)


def test_without_the_package_the_name_is_unknown() -> None:
    if "smallest-first" in policies().names():
        pytest.skip("the example is installed in this environment")
    with pytest.raises(ScenarioError, match="unknown scheduling policy `smallest-first`; expected one of"):
        scenario(scheduler={"policy": "smallest-first"})


@pytest.mark.usefixtures("example")
def test_the_entry_point_registers_the_policy() -> None:
    entry = policies().entry("smallest-first")
    assert (entry.value, entry.origin) == ("hbemu_policy_example:SmallestFirst", "hbemu-policy-example")


def _end(params: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """One 4-cpu node; `big` (2 cpu) is submitted before `small` (1 cpu), 30 s tasks; 50 s run.
    Per operation at the end: (running, completed)."""
    sc = scenario(
        cluster={"nodes": [{"count": 1, "cpu": 4, "ram_gib": 16}]},
        scheduler={"policy": "smallest-first", "params": params},
        workload={"operations": [
            {"name": "big", "cpu": 2, "ram_gib": 1, "tasks": 6, "seconds_mean": 30},
            {"name": "small", "cpu": 1, "ram_gib": 1, "tasks": 8, "seconds_mean": 30},
        ]},
        run={"duration_s": 50},
    )
    outcome, _ = run_with_handle(sc)
    return {op.name: (op.running, op.completed) for op in outcome.operations}


@pytest.mark.usefixtures("example")
def test_a_scenario_runs_the_plugged_policy_with_its_parameters() -> None:
    assert _end({"by": "cpu"}) == {"big": (0, 0), "small": (4, 4)}  # the smallest first
    assert _end({"by": "cpu", "largest_first": True}) == {"big": (2, 2), "small": (0, 0)}


@pytest.mark.usefixtures("example")
def test_its_parameters_are_checked_against_its_struct() -> None:
    with pytest.raises(ScenarioError, match=(
        r"<test>: at `scheduler.params.size`: unknown field \(the parameters of policy `smallest-first`: "
        r"`by`, `largest_first`\)"
    )):
        scenario(scheduler={"policy": "smallest-first", "params": {"size": 1}})
    with pytest.raises(ScenarioError, match=r"at `scheduler.params.by`: invalid enum value 'disk'"):
        scenario(scheduler={"policy": "smallest-first", "params": {"by": "disk"}})


@pytest.mark.usefixtures("example")
@pytest.mark.parametrize("params", [{}, {"by": "ram", "largest_first": True}])
def test_it_passes_the_conformance_suite(params: dict[str, Any]) -> None:
    config = SchedulerConfig(policy="smallest-first", params=params)
    check_never_over_allocates(config, seed=1)
    check_deterministic(config, seed=2)
