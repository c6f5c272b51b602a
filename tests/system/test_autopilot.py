"""Autopilot (design.md §3b): statistics on a hand-made histogram, recommendations by class and
OOM tolerance, margin and hold, and limits applied to a running group end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.harness.runner import run_blocking
from emulator.results.usage import usage_summary
from emulator.scenario.loader import load_scenario
from rm.borg.autopilot import DecayingHistogram, GroupAutopilot, recommend_cpu, recommend_ram
from rm.protocol import Resources
from rm.scheduler.borg_config import AutopilotConfig


def hand_made() -> DecayingHistogram:
    h = DecayingHistogram(width=1.0, buckets=10, half_life_s=100.0, keep_s=1e9)
    for v in (1, 1, 2, 3):  # window 1, closed at t=100: buckets 1, 1, 2, 3
        h.add(v)
    h.close(100.0)
    for v in (5, 5):  # window 2, closed at t=200
        h.add(v)
    h.close(200.0)
    return h


def test_statistics_of_a_hand_made_histogram() -> None:
    h = hand_made()
    # At t=200 window 1 weighs 2^(-100/100) = 0.5, window 2 weighs 1:
    # weights {1: 1.0, 2: 0.5, 3: 0.5, 5: 2.0}, total 4.
    assert h.weighted(200.0)[:5] == [1.0, 0.5, 0.5, 0.0, 2.0]
    assert h.s_avg(200.0) == pytest.approx((1 * 1.0 + 2 * 0.5 + 3 * 0.5 + 5 * 2.0) / 4)  # 3.375
    assert h.s_pct(200.0, 25) == 1  # 1.0 of 4 reached at bucket 1
    assert h.s_pct(200.0, 50) == 3  # 2.0 of 4 reached at bucket 3
    assert h.s_pct(200.0, 60) == 5
    assert h.s_max(1) == 5
    # Load-adjusted (the lecture's h[k] = b[k]·weight): {1: 1, 2: 1, 3: 1.5, 5: 10}, total 13.5.
    assert h.s_pct(200.0, 25, load_adjusted=True) == 3  # 3.375 reached at bucket 3
    assert h.s_pct(200.0, 50, load_adjusted=True) == 5
    h.add(2)
    h.close(300.0)
    assert h.s_max(1) == 2 and h.s_max(2) == 5  # the largest bucket with samples in the last N
    # Later, window 1 weighs less: at t=300, 0.25 vs 0.5 and 1.
    assert h.weighted(300.0)[:5] == [0.5, 1.25, 0.25, 0.0, 1.0]


def test_recommendations_by_class_and_tolerance() -> None:
    h = hand_made()
    assert recommend_cpu(h, "batch", 200.0, 95) == pytest.approx(3.375)  # S_avg
    assert recommend_cpu(h, "serving", 200.0, 95) == 5  # S_p95
    assert recommend_ram(h, "low", 200.0, 1) == 5  # S_p98
    assert recommend_ram(h, "minimal", 200.0, 1) == 5  # S_max
    h.add(1)
    h.close(300.0)
    # At t=300: weights {1: 0.25 x 2 + 1, 2: 0.25, 3: 0.25, 5: 0.5 x 2}, total 3; S_p60 needs 1.8:
    # cumulative 1.5, 1.75, 2.0 -> bucket 3. Medium: max(S_p60, 0.5 · S_max) = max(3, 0.5 x 5).
    assert recommend_ram(h, "medium", 300.0, 2) == 3
    for v in [1] * 8 + [9]:
        h.add(v)
    h.close(400.0)
    # Now mostly 1s (S_p60 = 1) but a 9 in the last window: 0.5 x S_max = 4.5 wins.
    assert h.s_pct(400.0, 60) == 1
    assert recommend_ram(h, "medium", 400.0, 1) == 4.5


def test_margin_and_max_over_the_hold_period() -> None:
    cfg = AutopilotConfig(enabled=True, buckets=10, range_factor=1.0, margin=0.1, hold_s=150.0,
                          cpu_half_life_s=1e9, ram_half_life_s=1e9)
    g = GroupAutopilot(cfg, Resources(10, 10), "batch", "minimal")
    assert g.limits == Resources(10, 10)  # the request, until a recommendation
    g.observe(4, 6)
    assert g.tick(100.0)
    assert g.limits == Resources(pytest.approx(4.4), pytest.approx(6.6))  # type: ignore[arg-type]
    for t in (200.0, 300.0):
        g.observe(2, 3)
        g.tick(t)
    # Batch CPU is S_avg over all windows (no decay): (4 + 2 + 2) / 3; RAM S_max of the last 12
    # windows is still 6. Held: the max over the last 150 s of recommendations.
    assert g.limits.cpu == pytest.approx(max(3.0, 8 / 3) * 1.1)
    assert g.limits.ram_gib == pytest.approx(6.6)


SCENARIO = """
[cluster]
nodes = [{{ count = 4, cpu = 16, ram_gib = 64 }}]
[heartbeat]
interval_s = 3.0
usage_sample_s = 10.0
[scheduler.autopilot]
enabled = {enabled}
window_s = 60
cpu_half_life_s = 600
ram_half_life_s = 1200
hold_s = 300
[[workload.operations]]
name = "svc"
cpu = 2
ram_gib = 8
tasks = 10
seconds_mean = 3000
usage.cpu = {{ kind = "normal", mean = 0.4, cv = 0.2 }}
usage.ram = {{ kind = "normal", mean = 0.4, cv = 0.1 }}
usage.autopilot = true
usage.job_class = "serving"
[run]
duration_s = 1800
seed = 4
"""


def test_autopilot_shrinks_the_limits_of_a_running_group(tmp_path: Path) -> None:
    results = {}
    for enabled in ("false", "true"):
        path = tmp_path / f"a-{enabled}.toml"
        path.write_text(SCENARIO.format(enabled=enabled))
        results[enabled] = usage_summary(run_blocking(load_scenario(path)).nodes)
    off, on = results["false"], results["true"]
    assert off["ram_slack"] == pytest.approx(0.6, abs=0.02)  # uses 40% of the user's limit
    assert on["ram_slack"] < 0.35  # limits follow usage (S_p98 + 15%) once the windows fill
    assert on["cpu_slack"] < off["cpu_slack"]
    assert off["ooms"] == 0
