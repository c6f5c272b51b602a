"""Baselines selectable in the scenario: Tetris (parameter f), DRFH node choice, and whole runs of
every policy with the new metrics in summary.json."""

from __future__ import annotations

import pytest

from emulator.harness.runner import run_blocking
from emulator.results.compare import compare_table, load_summary
from emulator.results.summary import build_summary, write_results
from emulator.scenario.loader import scenario_from_dict
from rm.protocol import Resources
from rm.scheduler.config import SchedulerConfig
from rm.scheduler.policies.drfh import DRFHPolicy
from rm.scheduler.policies.tetris import TetrisPolicy
from rm.scheduler.policy import PolicyCounters
from rm.state.cluster import Cluster
from rm.state.operations import Operation, OperationSpec, Pool
from tests.helpers import FakeClock, RecordingLink


def op(op_id: int, pool: Pool, cpu: float, ram: float, running: int = 0) -> Operation:
    spec = OperationSpec(name=f"op{op_id}", pool=pool.name, demand=Resources(cpu, ram), durations=[1.0] * 50)
    o = Operation(op_id, spec, pool, 0.0)
    pool.operations.append(o)
    for _ in range(running):
        o.take_task(0.0)
    return o


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_tetris_f_trades_fairness_for_packing(clock: FakeClock) -> None:
    cluster = Cluster()
    node = cluster.add("n", Resources(40, 40), link=RecordingLink(), now=0.0)
    node.free_cpu, node.free_ram = 4.0, 16.0  # a RAM-heavy hole
    root = Pool("root")
    cpu_op = op(1, root, 2, 1)  # neediest (no usage), packs badly here
    op(2, root, 1, 3, running=2)
    ram_op = op(3, root, 1, 4, running=4)  # least needy, packs best: <D, F> largest
    fair = TetrisPolicy(root, cluster, SchedulerConfig(tetris_f=1.0), clock, PolicyCounters())
    greedy = TetrisPolicy(root, cluster, SchedulerConfig(tetris_f=0.0), clock, PolicyCounters())
    head = TetrisPolicy(root, cluster, SchedulerConfig(tetris_f=0.5), clock, PolicyCounters())
    assert fair.assign(node) is cpu_op
    assert greedy.assign(node) is ram_op
    # f = 0.5: only the first ceil(1.5) = 2 of the fairness order compete; op2 packs better.
    assert head.assign(node).name == "op2"  # type: ignore[union-attr]


def test_drfh_places_the_neediest_operation_on_the_best_matching_node(clock: FakeClock) -> None:
    cluster = Cluster()
    square = cluster.add("square", Resources(8, 8), link=RecordingLink(), now=0.0)
    tall = cluster.add("tall", Resources(4, 16), link=RecordingLink(), now=0.0)
    root = Pool("root")
    ram_heavy = op(1, root, 1, 4)
    cpu_heavy = op(2, root, 2, 1, running=1)
    policy = DRFHPolicy(root, cluster, SchedulerConfig(policy="drfh"), clock, PolicyCounters())
    first = policy.place(cluster.nodes.values())
    assert first == (ram_heavy, tall)  # same cpu:ram ratio as the tall node
    ram_heavy.take_task(0.0)
    ram_heavy.take_task(0.0)
    assert policy.place(cluster.nodes.values()) == (cpu_heavy, square)


def small_scenario(policy: str, **scheduler: object) -> dict:
    return {
        "name": f"tiny-{policy}",
        "cluster": {
            "nodes": [{"count": 6, "cpu": {"uniform_int": [8, 24]}, "ram_gib": {"uniform_int": [16, 96]}}]
        },
        "heartbeat": {"interval_s": 5.0, "on_completion": True},
        "scheduler": {"policy": policy, "preemption": {"enabled": True}, **scheduler},
        "workload": {
            "operations": [
                {"name": "cpu", "pool": "u1", "cpu": 4, "ram_gib": 2, "job_count": 40, "seconds_mean": 60,
                 "seconds_deviation": 10, "loop": True},
                {"name": "ram", "pool": "u2", "cpu": 1, "ram_gib": 8, "job_count": 40, "seconds_mean": 50,
                 "seconds_deviation": 10, "loop": True},
                {"name": "late", "pool": "u3", "cpu": 2, "ram_gib": 2, "job_count": 60, "seconds_mean": 80,
                 "submit_at_s": 300, "loop": True},
            ],
        },
        "run": {"duration_s": 1200, "warmup_s": 200, "seed": 5, "sample_interval_s": 10},
    }


@pytest.mark.parametrize("policy", ["drf", "fifo", "packing", "tetris", "drfh"])
def test_every_policy_runs_from_a_scenario_and_reports_the_new_metrics(policy: str, tmp_path) -> None:
    outcome = run_blocking(scenario_from_dict(small_scenario(policy), "<test>"))
    summary = write_results(outcome, tmp_path)
    assert summary["policy"] == policy
    assert summary["allocations"] > 100
    for key in (
        "refusals", "fallback_allocations", "preemptions", "preempted_cpu_s",
        "cpu_utilization_excl_preempted", "fairness_deviation", "fragmentation_gap_cpu",
        "fragmentation_gap_ram", "fair_cpu_bound",
    ):
        assert key in summary
    assert summary["cpu_utilization_excl_preempted"] <= summary["cpu_utilization"]
    gap = summary["fair_cpu_bound"] - summary["cpu_utilization"]
    assert summary["fragmentation_gap_cpu"] == pytest.approx(gap, abs=1e-5)
    assert {p["name"] for p in summary["pools"]} == {"u1", "u2", "u3"}
    if policy == "packing":
        assert summary["refusals"] > 0
        assert 0 < summary["acceptance_rate"] < 1
        assert all(o["acceptance_rate"] is not None for o in summary["operations"])
    else:
        assert summary["refusals"] == 0
    header = (tmp_path / "timeseries.csv").read_text().splitlines()[0].split(",")
    # The sampler's columns end with the scheduler counters; the per-pool / per-entry shares follow.
    sampler = [c for c in header if not c.startswith(("pool:", "op:"))]
    assert sampler[-3:] == ["refusals", "fallback_allocations", "preemptions"]
    assert "pool:u1:dominant_share" in header


def test_late_operation_gets_its_share_through_preemption(tmp_path) -> None:
    # The old cluster-wide rule: under YT's (the default) the late operation here ramps up through
    # ordinary scheduling within its grace and nothing is preempted.
    on_cfg = small_scenario("drf")
    on_cfg["scheduler"]["preemption"] = {"enabled": True, "mode": "full-share"}
    on = build_summary(run_blocking(scenario_from_dict(on_cfg, "<test>")))
    off_cfg = small_scenario("drf")
    off_cfg["scheduler"]["preemption"] = {"enabled": False}
    off = build_summary(run_blocking(scenario_from_dict(off_cfg, "<test>")))
    assert on["preemptions"] > 0 and on["preempted_cpu_s"] > 0
    assert off["preemptions"] == 0
    assert off["cpu_utilization_excl_preempted"] == off["cpu_utilization"]


def test_compare_puts_runs_next_to_the_thesis_reference(tmp_path) -> None:
    from rich.console import Console

    dirs = []
    for policy in ("drf", "packing"):
        d = tmp_path / policy
        write_results(run_blocking(scenario_from_dict(small_scenario(policy), "<test>")), d)
        dirs.append((policy, load_summary(d)))
    console = Console(width=200, record=True)
    console.print(compare_table(dirs, "thesis-e1"))
    text = console.export_text()
    assert "thesis with packing" in text and "96.70%" in text and "+4.50 pp" in text
    a, b = dirs[0][1]["cpu_utilization"], dirs[1][1]["cpu_utilization"]
    assert f"{(b - a) * 100:+.2f} pp" in text


def test_e1_scenarios_differ_only_in_the_policy() -> None:
    from pathlib import Path

    import msgspec

    from emulator.scenario.loader import load_scenario

    root = Path(__file__).resolve().parents[2] / "scenarios"
    plain = load_scenario(root / "e1-no-packing.toml")
    packed = load_scenario(root / "e1-packing.toml")
    assert plain.node_count == 73 and len(plain.workload.operations) == 24
    assert plain.heartbeat.interval_s == 5 and plain.heartbeat.on_completion
    assert plain.scheduler.preemption.enabled and packed.scheduler.preemption.enabled
    assert (plain.scheduler.policy, packed.scheduler.policy) == ("drf", "packing")
    same = msgspec.structs.replace(packed, name=plain.name, description=plain.description,
                                   scheduler=plain.scheduler)
    assert same == plain
