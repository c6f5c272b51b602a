"""Intervals too short for the run's size are refused with one error naming the field and the
bound: a microsecond heartbeat would otherwise be a run whose work has no bound."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import pytest

from emulator.cli.main import main
from emulator.scenario.loader import ScenarioError, load_scenario, scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]


def scenario(nodes: int = 10, duration: float = 600, **sections: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "cluster": {"nodes": [{"count": nodes, "cpu": 8, "ram_gib": 16}]},
        "run": {"duration_s": duration},
    }
    for name, fields in sections.items():
        data[name] = {**data.get(name, {}), **fields}
    return data


@pytest.mark.parametrize(("data", "expected"), [
    (scenario(heartbeat={"interval_s": 1e-6}),
     "at `heartbeat.interval_s`: 1e-06 s makes 600,000,000 heartbeat ticks per node over the run (600 s); "
     "expected at most 1,000,000: `heartbeat.interval_s` >= 0.001 or a shorter `run.duration_s`"),
    (scenario(nodes=400_000, duration=60, heartbeat={"interval_s": 0.01}),
     "at `heartbeat.interval_s`: 0.01 s makes 40,000,000 heartbeat ticks per emulated second (400,000 "
     "nodes); expected at most 10,000,000: `heartbeat.interval_s` >= 0.041 or fewer nodes"),
    (scenario(heartbeat={"mode": "delta"}, ring={"interval_s": 1e-7}),
     "at `ring.interval_s`: 1e-07 s makes 6,000,000,000 ring checks per node over the run"),
    (scenario(rm={"monitor_interval_s": 1e-6}), "at `rm.monitor_interval_s`: 1e-06 s makes"),
    (scenario(run={"duration_s": 600, "sample_interval_s": 1e-4}),
     "at `run.sample_interval_s`: 0.0001 s makes 6,000,000 samples of the time series over the run "
     "(600 s); expected at most 1,000,000"),
    (scenario(scheduler={"preemption": {"enabled": True, "check_interval_s": 1e-4}}),
     "at `scheduler.preemption.check_interval_s`: 0.0001 s makes 6,000,000 preemption checks"),
])
def test_an_interval_too_short_for_the_run_is_one_error(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(data, "s.toml", machine_bytes=1 << 62)  # whatever memory this machine has
    assert str(err.value).startswith("s.toml: ") and expected in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_the_bounds_leave_reasonable_intervals_alone() -> None:
    scenario_from_dict(scenario(heartbeat={"interval_s": 0.01}, run={"sample_interval_s": 0.01}))
    scenario_from_dict(scenario(nodes=20_000, duration=86_400, heartbeat={"interval_s": 1.0}),
                       machine_bytes=1 << 62)


def test_every_shipped_scenario_passes() -> None:
    for path in sorted(glob.glob(str(ROOT / "scenarios" / "**" / "*.toml"), recursive=True)):
        if "/studies/" in path:
            continue  # study files, not cluster scenarios
        load_scenario(path)


def test_validate_prints_it_as_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text("[cluster]\nnodes = [{ count = 10, cpu = 8, ram_gib = 16 }]\n"
                  "[heartbeat]\ninterval_s = 1e-9\n[run]\nduration_s = 60\n")
    assert main(["validate", str(sc)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {sc}: at `heartbeat.interval_s`: 1e-09 s makes"), err
