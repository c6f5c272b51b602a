"""The E3 pipeline at a small scale: scenarios per mode, removals CSV and plot, figures."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from emulator.experiments.e3 import EXPERIMENTS, e3_scenario, run_e3
from emulator.scenario.loader import ScenarioError

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_every_e3_mode_builds_a_valid_scenario() -> None:
    for experiment, modes in EXPERIMENTS.items():
        for mode in modes:
            sc = e3_scenario(mode, SCENARIOS, experiment=experiment)
            assert any(type(f).__name__ in ("CrashFault", "PauseFault") for f in sc.faults)
    periodic = e3_scenario("periodic", SCENARIOS)
    assert periodic.node_count == 7500 and not periodic.ring_enabled and periodic.rm.expiry_s == 10
    calm = e3_scenario("periodic-no-overload", SCENARIOS)
    assert calm.rm.service_time.is_zero() and [type(f).__name__ for f in calm.faults] == ["CrashFault"]
    assert e3_scenario("paper-ring", SCENARIOS).ring.detector == "ring"
    small = e3_scenario("periodic", SCENARIOS, nodes=750)
    # A tenth of the nodes, ten times the cost per heartbeat: the same time to go round them all.
    assert small.rm.service_time.heartbeat_us == pytest.approx(10 * periodic.rm.service_time.heartbeat_us)
    with pytest.raises(ScenarioError, match="unknown mode"):
        e3_scenario("nope", SCENARIOS)


def test_small_e3_writes_removals_csv_plot_and_figures(tmp_path: Path) -> None:
    results = run_e3(tmp_path, ["ring", "periodic-no-overload"], SCENARIOS, nodes=200)
    ring = results["ring"]
    assert ring["crashed"] == 10 and ring["crashed_removed"] == 10 and ring["false_removals"] == 0
    assert ring["detection_latency_s"]["p99"] <= 6.0
    assert results["periodic-no-overload"]["crashed_removed"] == 10
    with (tmp_path / "removals.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sum(int(r["ring_removals"]) for r in rows) == 10
    assert all(int(r["ring_removals"]) == 0 for r in rows if float(r["t_s"]) < 400)
    assert (tmp_path / "removals.png").stat().st_size > 10_000
    assert (tmp_path / "ring" / "summary.json").exists()
