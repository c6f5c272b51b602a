"""Usage distinct from requests (design.md §3b): OOM on the hard limit, the node's OOM killer
(lowest tier first), CPU throttling, usage in heartbeats (periodic vs delta), scenario errors."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from emulator.cli.main import main
from emulator.harness.eventlog import make_logger
from emulator.harness.runner import run_blocking
from emulator.results.usage import usage_summary
from emulator.scenario.loader import load_scenario
from nodemanager.config import HeartbeatConfig, HeartbeatMode
from nodemanager.node import NodeManager
from nodemanager.stats import NodeCounters
from rm.protocol import (
    EXIT_OOM,
    EXIT_SUCCESS,
    ContainerLaunch,
    Heartbeat,
    HeartbeatResponse,
    LaunchContainers,
    RegisterResponse,
    Resources,
    TaskUsage,
    UsageModel,
)
from tests.helpers import FakeClock, RecordingLink

ROOT = Path(__file__).resolve().parents[2]


def const(mean: float) -> UsageModel:
    return UsageModel(kind="constant", mean=mean)


def make_node(mode: HeartbeatMode = "periodic", cap: Resources | None = None
              ) -> tuple[NodeManager, RecordingLink, FakeClock, NodeCounters]:
    clock = FakeClock()
    link = RecordingLink()
    stats = NodeCounters()
    cfg = HeartbeatConfig(mode=mode, interval_s=10.0, usage_sample_s=5.0, usage_report_threshold=0.1)
    node = NodeManager("n0", cap or Resources(4, 8), cfg, clock, link.send, stats, make_logger(clock, None))
    node.start(phase_s=1.0)
    clock.advance_to(1.5)
    node.receive(RegisterResponse(action="normal", machine_id=1))
    return node, link, clock, stats


def completions(link: RecordingLink) -> dict[int, int]:
    return {s.container_id: s.exit_code for hb in link.of(Heartbeat) for s in hb.statuses
            if s.state == "complete"}


def answer_all(node: NodeManager, link: RecordingLink) -> None:
    hb = link.last(Heartbeat)
    node.receive(HeartbeatResponse(action="normal", heartbeat_id=hb.heartbeat_id + 1))


def test_memory_above_the_hard_limit_is_an_oom() -> None:
    node, link, clock, stats = make_node()
    over = TaskUsage(ram=const(1.2), tier=1)  # uses 120% of its request, hard limit = request
    under = TaskUsage(ram=const(0.9), tier=1)
    node.receive(LaunchContainers(containers=(
        ContainerLaunch(1, Resources(1, 2), 100.0, over), ContainerLaunch(2, Resources(1, 2), 100.0, under),
    )))
    clock.advance_to(7.0)  # first usage sample at t=6.5
    assert set(node.running_containers()) == {2}
    clock.advance_to(11.5)
    assert completions(link) == {1: EXIT_OOM}
    assert stats.usage.ooms_limit == 1 and stats.usage.tiers[1].ooms == 1


def test_soft_limit_oom_only_when_the_node_overflows_and_lowest_tier_goes_first() -> None:
    node, link, clock, stats = make_node(cap=Resources(8, 8))
    # Soft limits (no per-task OOM): each uses 4 GiB; 3 x 4 = 12 > 8 GiB. Tier 3 is production.
    node.receive(LaunchContainers(containers=(
        ContainerLaunch(1, Resources(1, 3), 100.0, TaskUsage(tier=3, ram=const(4 / 3), ram_hard=False)),
        ContainerLaunch(2, Resources(1, 2.5), 100.0, TaskUsage(tier=0, ram=const(1.6), ram_hard=False)),
        ContainerLaunch(3, Resources(1, 2.5), 100.0, TaskUsage(tier=2, ram=const(1.6), ram_hard=False)),
    )))
    clock.advance_to(7.0)
    # 4 + 4 + 4 = 12 GiB: the free-tier task goes (8 left, fits); production and mid survive.
    assert set(node.running_containers()) == {1, 3}
    assert stats.usage.ooms_node == 1 and stats.usage.ooms_limit == 0
    assert stats.usage.tiers[0].ooms == 1
    assert stats.usage.overflow_s == 0.0  # overflow is counted for the time after a sample
    clock.advance_to(11.5)
    assert completions(link) == {2: EXIT_OOM}


def test_cpu_above_the_limit_is_throttled_and_the_task_runs_longer() -> None:
    node, link, clock, stats = make_node()
    # Wants twice its 1-core request from the first sample (t=6.5) on: progress halves there.
    node.receive(LaunchContainers(containers=(
        ContainerLaunch(1, Resources(1, 1), 20.0, TaskUsage(cpu=const(2.0))),
    )))
    clock.advance_to(21.6)  # unthrottled it would end at t=21.5
    assert 1 in node.running_containers()
    # 5 s at full rate, then 15 s of work at rate 0.5 = 30 s: ends at t = 6.5 + 30 = 36.5.
    clock.advance_to(36.4)
    assert 1 in node.running_containers()
    clock.advance_to(36.6)
    assert 1 not in node.running_containers()
    assert stats.usage.finished_run_s == pytest.approx(35.0)
    assert stats.usage.finished_work_s == pytest.approx(20.0)
    answer_all(node, link)
    clock.advance_to(41.5)
    assert completions(link)[1] == EXIT_SUCCESS


def test_slack_is_time_weighted_limit_minus_usage_over_limit() -> None:
    node, _link, clock, stats = make_node()
    node.receive(LaunchContainers(containers=(
        ContainerLaunch(1, Resources(2, 4), 1000.0, TaskUsage(cpu=const(0.25), ram=const(0.5))),
    )))
    clock.advance_to(101.5)
    summary = usage_summary(stats)
    assert summary["cpu_slack"] == pytest.approx(0.75)
    assert summary["ram_slack"] == pytest.approx(0.5)


@pytest.mark.parametrize("mode", ["periodic", "delta"])
def test_heartbeats_carry_usage_every_beat_or_only_when_it_moved(mode: HeartbeatMode) -> None:
    node, link, clock, stats = make_node(mode)
    node.receive(LaunchContainers(containers=(
        ContainerLaunch(1, Resources(1, 1), 1000.0, TaskUsage(cpu=const(0.5))),
        ContainerLaunch(2, Resources(1, 1), 1000.0, None),  # no model: never in usage reports
    )))
    for t in range(11, 100, 10):
        clock.advance_to(t + 0.5)
        if link.of(Heartbeat):
            answer_all(node, link)
    with_usage = [hb.usage for hb in link.of(Heartbeat) if hb.usage]
    assert all(u[0].container_id == 1 and u[0].cpu == 0.5 for u in with_usage)
    if mode == "periodic":
        assert len(with_usage) == len(link.of(Heartbeat)) == 9
    else:  # constant usage: reported once, when it first appeared
        assert len(with_usage) == 1
    assert stats.usage_reports_sent == len(with_usage)


USAGE_SCENARIO = """
[cluster]
nodes = [{ count = 4, cpu = 8, ram_gib = 16 }]
[heartbeat]
interval_s = 3.0
usage_sample_s = 5.0
[[workload.operations]]
name = "a"
cpu = 1
ram_gib = 2
tasks = 40
seconds_mean = 60
tier = "mid"
usage.cpu = { kind = "normal", mean = 0.8, cv = 0.2 }
usage.ram = { kind = "lognormal", mean = 0.75, cv = 0.15 }
[[workload.operations]]
name = "b"
cpu = 2
ram_gib = 2
tasks = 30
seconds_mean = 60
usage.cpu = { kind = "bursty", mean = 0.5, peak = 1.5, on_s = 20, off_s = 20 }
[run]
duration_s = 900
seed = 3
"""


def test_a_usage_scenario_retries_oom_killed_tasks_to_completion(tmp_path: Path) -> None:
    path = tmp_path / "u.toml"
    path.write_text(USAGE_SCENARIO)
    out = run_blocking(load_scenario(path))
    u = usage_summary(out.nodes)
    assert u["ooms"] > 0  # lognormal memory crosses its request now and then
    assert out.rm.counters.tasks_requeued == u["ooms"]
    assert out.rm.counters.containers_completed == 70  # every OOM-killed task ran again
    assert set(u["tiers"]) == {"batch", "mid"} and u["tiers"]["batch"]["ooms"] == 0
    assert u["throttle_slowdown"] > 1.0  # the bursty CPU exceeds its request while on
    again = run_blocking(load_scenario(path))
    assert msgspec.json.encode(usage_summary(again.nodes)) == msgspec.json.encode(u)  # seeded


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('usage.cpu = { kind = "gamma" }', "at `workload.operations[0].usage.cpu.kind`"),
        ("usage.ram = { mean = -1 }", "at `workload.operations[0].usage.ram.mean`: expected `float` > 0"),
        ('usage.ram_limit = "medium"', "at `workload.operations[0].usage.ram_limit`"),
        ('tier = "gold"', "at `workload.operations[0].tier`"),
        ("usage.disk = {}", "at `workload.operations[0].usage.disk`: unknown field (expected one of"),
    ],
)
def test_bad_usage_values_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, expected: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        "[cluster]\nnodes = [{ count = 1, cpu = 8, ram_gib = 16 }]\n[run]\nduration_s = 10\n"
        f"[[workload.operations]]\nname = 'x'\ncpu = 1\nram_gib = 1\ntasks = 1\nseconds_mean = 5\n{line}\n"
    )
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_usage_over_time_stays_within_the_cluster_and_shows_in_the_report(tmp_path: Path) -> None:
    # usage_timeseries.csv gives usage as it stands at each sample: never more cores in use than
    # the cluster has (integrals that advance only when nodes sample, divided by the 3 s row,
    # read several times the real usage every few rows); report.html draws it beside allocation.
    out = tmp_path / "u"
    assert main(["run", str(ROOT / "scenarios" / "usage-quickstart.toml"), "--set", "run.duration_s=600",
                 "--out", str(out), "--quiet"]) == 0
    lines = (out / "usage_timeseries.csv").read_text().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, map(float, line.split(",")), strict=True)) for line in lines[1:]]
    cores = 30 * 32 + 20 * 48  # the scenario's cluster has at most this many
    busy = [r for r in rows if r["cpu_allocated"] > 0]
    assert busy and all(0 < r["cpu_used"] <= cores for r in busy)
    assert max(r["cpu_used"] for r in busy) < 2 * (sum(r["cpu_used"] for r in busy) / len(busy))
    report = (out / "report.html").read_text()
    assert "Memory: allocated, limits and real usage (GiB)" in report and "Usage by tier" in report
