"""E4's runner on a small serving + batch scenario: the three modes, the lecture's quantities,
and the table printer."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.experiments.e4 import markdown_table, run_e4
from emulator.scenario.loader import ScenarioError

SMALL = """
[cluster]
nodes = [{ count = 3, cpu = 16, ram_gib = 64 }]
[heartbeat]
interval_s = 5.0
usage_sample_s = 15.0
[scheduler.autopilot]
window_s = 60
hold_s = 120
[[workload.operations]]
name = "svc"
tier = "production"
cpu = 2
ram_gib = 8
tasks = 6
seconds_mean = 100000
usage.ram = { kind = "normal", mean = 0.4, cv = 0.05, task_cv = 0.1 }
usage.autopilot = true
usage.job_class = "serving"
[[workload.operations]]
name = "batch"
cpu = 1
ram_gib = 4
tasks = 20
seconds_mean = 300
loop = true
usage.ram = { kind = "normal", mean = 0.8, cv = 0.1, task_cv = 0.2 }
usage.autopilot = true
[run]
duration_s = 1800
seed = 2
"""


def test_e4_runs_three_ways_and_autopilot_cuts_slack_and_ooms(tmp_path: Path) -> None:
    path = tmp_path / "e4.toml"
    path.write_text(SMALL)
    data = run_e4(path, tmp_path / "runs")
    rows = {r["mode"]: r for r in data["rows"]}
    assert list(rows) == ["hard", "soft", "autopilot"]
    hard, soft, auto = rows["hard"], rows["soft"], rows["autopilot"]
    assert hard["ooms_over_limit"] > 0 and soft["ooms_over_limit"] == 0  # soft: no per-task limit
    assert auto["ram_slack"] < hard["ram_slack"]
    assert auto["ooms_per_task_day"] < hard["ooms_per_task_day"]  # the tight batch gets room
    assert (tmp_path / "runs" / "autopilot" / "summary.json").exists()
    table = markdown_table(data)
    assert "| autopilot |" in table and "(60%)" in table


def test_e4_needs_usage_models(tmp_path: Path) -> None:
    path = tmp_path / "plain.toml"
    path.write_text("[cluster]\nnodes = [{ count = 1, cpu = 8, ram_gib = 16 }]\n[run]\nduration_s = 10\n")
    with pytest.raises(ScenarioError, match="usage"):
        run_e4(path, tmp_path / "runs")
