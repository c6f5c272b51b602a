"""Borg priority tiers (design.md §3b): higher tiers are scheduled first, production preempts
lower tiers to fit (fewest, lowest, most recent victims), lower tiers never preempt higher."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from emulator.harness.runner import run_blocking
from emulator.scenario.loader import load_scenario
from rm.borg.tiers import TierCounters

BASE = """
[cluster]
nodes = [{{ count = 2, cpu = 8, ram_gib = 32 }}]
[heartbeat]
interval_s = 1.0
[scheduler]
tiers = {{ enabled = {enabled}, check_interval_s = 2.0 }}
[[workload.operations]]
name = "early"
cpu = 2
ram_gib = 4
tasks = 8
seconds_mean = 500
tier = "{early}"
[[workload.operations]]
name = "late"
cpu = 4
ram_gib = 4
tasks = 2
seconds_mean = 50
submit_at_s = 20
tier = "{late}"
[run]
duration_s = 200
seed = 1
"""


class Result(NamedTuple):
    late_done: int
    preempted: int
    tiers: TierCounters | None


def run(tmp_path: Path, early: str, late: str, enabled: bool = True) -> Result:
    path = tmp_path / "t.toml"
    path.write_text(BASE.format(early=early, late=late, enabled=str(enabled).lower()))
    out = run_blocking(load_scenario(path))
    groups = out.rm.groups
    done = groups["late"].completed_tasks if "late" in groups else 0
    return Result(done, out.rm.counters.tasks_preempted, out.rm.tiers)


def test_production_preempts_batch_to_fit(tmp_path: Path) -> None:
    r = run(tmp_path, early="batch", late="production")
    assert r.late_done == 2  # ran at once instead of waiting 500 s for the batch tasks
    tiers = r.tiers
    assert tiers is not None
    # Each 4-core production task needs two 2-core batch tasks gone: 4 victims in all.
    assert tiers.preempted == {"batch": 4} and r.preempted == 4
    assert tiers.started_by_preemption == {"production": 2}
    assert 4 * 2 * 18 <= tiers.lost_cpu_s["batch"] <= 4 * 2 * 21  # 2 cores x ~20 s each


def test_lower_tiers_never_preempt_higher(tmp_path: Path) -> None:
    for early, late in (("production", "batch"), ("production", "mid"), ("monitoring", "production")):
        r = run(tmp_path, early=early, late=late)
        assert r.late_done == 0 and r.preempted == 0, (early, late)


def test_mid_does_not_preempt_and_tiers_off_means_no_preemption(tmp_path: Path) -> None:
    assert run(tmp_path, early="free", late="mid").preempted == 0
    r = run(tmp_path, early="batch", late="production", enabled=False)
    assert r.preempted == 0 and r.tiers is None


ORDER = """
[cluster]
nodes = [{ count = 1, cpu = 4, ram_gib = 16 }]
[heartbeat]
interval_s = 1.0
[scheduler]
tiers = { enabled = true, preempt_from = "monitoring" }  # ordering only
[[workload.operations]]
name = "hog"
cpu = 1
ram_gib = 1
tasks = 4
seconds_mean = 30
[[workload.operations]]
name = "batch"
cpu = 1
ram_gib = 1
tasks = 4
seconds_mean = 30
submit_at_s = 10
[[workload.operations]]
name = "prod"
cpu = 1
ram_gib = 1
tasks = 4
seconds_mean = 30
submit_at_s = 10
tier = "production"
[run]
duration_s = 45
seed = 1
"""


def test_higher_tier_is_offered_resources_first(tmp_path: Path) -> None:
    # At t=30 the hog's 4 slots free up; batch (share 0) and prod (share 0) both wait, batch
    # was submitted first in the file; the tier decides: prod gets all four.
    path = tmp_path / "o.toml"
    path.write_text(ORDER)
    out = run_blocking(load_scenario(path))
    views = {v.group: v for v in out.operations}
    assert views["prod"].running == 4 and views["batch"].running == 0
