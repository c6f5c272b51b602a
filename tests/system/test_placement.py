"""Placement policies (design.md §3b): next-fit, first-fit, best-fit, worst-fit as a node-choice
layer over the RM's real cluster view, overcommit for lower tiers, and an end-to-end run."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.harness.runner import run_blocking
from emulator.results.summary import write_results
from emulator.scenario.loader import load_scenario
from rm.borg.placement import PlacementPolicy
from rm.protocol import Resources
from rm.scheduler.borg_config import PlacementConfig, PlacementName
from rm.state.cluster import Allocation, Cluster, NodeRecord
from rm.state.operations import Operation, OperationSpec
from rm.state.workload import WorkloadBook
from tests.helpers import RecordingLink


class World:
    def __init__(self, reserved: list[float], policy: PlacementName, overcommit: float = 1.0) -> None:
        self.cluster = Cluster()
        self.book = WorkloadBook()
        self.nodes = [
            self.cluster.add(f"n{i}", Resources(10, 100), RecordingLink(), 0.0) for i in range(len(reserved))
        ]
        filler = self.op("filler", 1.0, tasks=100)
        for node, cpu in zip(self.nodes, reserved, strict=True):
            for _ in range(int(cpu)):
                self.start(filler, node)
        config = PlacementConfig(policy=policy, overcommit=overcommit)
        self.policy = PlacementPolicy(config, self.book, self.cluster)

    def op(self, name: str, cpu: float, tasks: int = 10, tier: int = 1) -> Operation:
        spec = OperationSpec(
            name=name, pool="p", demand=Resources(cpu, 1), durations=[10.0] * tasks, tier=tier
        )
        if "p" not in self.book.pools:
            self.book.add_pool("p")
        return self.book.add_operation(spec, 0.0)

    def start(self, op: Operation, node: NodeRecord) -> None:
        task = op.take_task(0.0)
        self.cluster.place(Allocation(len(node.containers) + 1000 * node.seq, node, op, task, 0.0), 0.0)

    def next(self) -> int:
        """Place one task; returns the index of the node it went to."""
        pick = self.policy.place(self.cluster.nodes.values())
        assert pick is not None
        op, node = pick
        self.start(op, node)
        return self.nodes.index(node)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("first-fit", [0, 0, 1, 2, 2]),  # n0 has 4 free, n1 2, n2 10
        ("best-fit", [1, 0, 0, 2, 2]),  # fullest that fits: n1 (8 -> 10), then n0 (6 -> 8 -> 10)
        ("worst-fit", [2, 2, 2, 0, 2]),  # emptiest: n2 (0, 2, 4 reserved), then n0 (6) ties n2 (6)
        ("next-fit", [0, 0, 1, 2, 2]),  # stays on a node until it is full, never goes back
    ],
)
def test_each_rule_chooses_its_node(policy: PlacementName, expected: list[int]) -> None:
    w = World([6, 8, 0], policy)
    filler = next(iter(w.book.operations.values()))
    w.book.remove_operation(filler)
    w.op("job", 2.0)
    assert [w.next() for _ in range(5)] == expected


def test_next_fit_does_not_return_to_a_node_it_left() -> None:
    w = World([6, 8, 0], "next-fit")
    w.book.remove_operation(next(iter(w.book.operations.values())))
    w.op("a", 4.0)
    assert [w.next() for _ in range(3)] == [0, 2, 2]  # n0 then n2; n1 (2 free) never fits 4
    small = w.op("b", 2.0)
    w.book.remove_operation(next(op for op in w.book.operations.values() if op.name == "a"))
    # The cursor is on n2 (2 free): next-fit stays there although n0 and n1 have room too.
    assert w.next() == 2 and small.running == 1
    assert w.next() == 1  # n2 full: on (cyclically) to the next node that fits (n0 is full)


def test_overcommit_lets_lower_tiers_reserve_beyond_capacity_but_not_production() -> None:
    w = World([10, 10], "first-fit", overcommit=1.5)
    w.book.remove_operation(next(iter(w.book.operations.values())))
    prod = w.op("prod", 2.0, tier=3)
    batch = w.op("batch", 2.0, tier=1)
    node = w.nodes[0]
    assert w.policy.fits(node, prod)  # 0 production cores reserved + 2 <= 10, and 12 <= 15
    assert w.policy.fits(node, batch)
    for _ in range(2):
        w.start(batch, node)  # 14 reserved
    assert not w.policy.fits(node, batch)  # 16 > 1.5 x 10
    w2 = World([0], "first-fit", overcommit=1.5)
    w2.book.remove_operation(next(iter(w2.book.operations.values())))
    p = w2.op("prod", 4.0, tier=3)
    for _ in range(2):
        w2.start(p, w2.nodes[0])  # 8 production cores
    assert not w2.policy.fits(w2.nodes[0], p)  # 12 > 10: production is never overcommitted
    assert w2.policy.fits(w2.nodes[0], w2.op("b", 4.0, tier=0))  # 12 <= 15


def test_tiers_then_dominant_share_order_the_operations() -> None:
    w = World([0], "first-fit")
    w.book.remove_operation(next(iter(w.book.operations.values())))
    low = w.op("low", 1.0, tier=1)
    high = w.op("high", 1.0, tier=4)
    assert w.policy.order()[:2] == [high, low]


SCENARIO = """
[cluster]
nodes = [{{ count = 3, cpu = 8, ram_gib = 32 }}]
[heartbeat]
interval_s = 1.0
overcommit = 1.5
[scheduler.placement]
policy = "{policy}"
overcommit = 1.5
[[workload.operations]]
name = "a"
cpu = 2
ram_gib = 4
tasks = 30
seconds_mean = 20
usage.cpu = {{ kind = "normal", mean = 0.5, cv = 0.2 }}
[run]
duration_s = 200
seed = 2
"""


@pytest.mark.parametrize("policy", ["next-fit", "first-fit", "best-fit", "worst-fit"])
def test_placement_runs_end_to_end_with_overcommit(tmp_path: Path, policy: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(SCENARIO.format(policy=policy))
    out = run_blocking(load_scenario(path))
    assert out.rm.counters.containers_completed == 30
    assert out.nodes.containers_rejected == 0
    # 3 nodes x 8 cores x 1.5 = 36 reservable cores: 18 tasks of 2 cores at once, not 12.
    assert max(r.cpu_utilization for r in out.rows) == pytest.approx(1.5)


LIGHT = """
[cluster]
nodes = [{{ count = 10, cpu = 8, ram_gib = 32 }}]
[heartbeat]
interval_s = 1.0
[scheduler.placement]
policy = "{policy}"
[[workload.operations]]
name = "a"
cpu = 2
ram_gib = 4
tasks = 8
seconds_mean = 100
submit_at_s = 5
[run]
duration_s = 60
warmup_s = 10
seed = 2
"""


def test_packing_policies_use_fewer_machines_than_spreading(tmp_path: Path) -> None:
    # 8 tasks of 2 cores, submitted once all nodes have registered, fit on 2 of the 10 nodes:
    # first- and best-fit fill nodes one by one, worst-fit spreads them over 8; the summary
    # reports the machines used beside the FFD bound.
    used = {}
    for policy in ("first-fit", "best-fit", "worst-fit"):
        path = tmp_path / f"{policy}.toml"
        path.write_text(LIGHT.format(policy=policy))
        binpack = write_results(run_blocking(load_scenario(path)), tmp_path / policy)["binpack"]
        assert binpack["ffd_machines"] == 2
        used[policy] = binpack["machines_used"]
    assert used["first-fit"] == used["best-fit"] == {"mean": 2.0, "max": 2}
    assert used["worst-fit"] == {"mean": 8.0, "max": 8}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("[scheduler.placement]\npolicy = 'best-fit'\novercommit = 2.0\n",
         "set `heartbeat.overcommit` >= it (now 1)"),
        ("[scheduler.placement]\novercommit = 2.0\n[heartbeat]\novercommit = 2.0\n",
         "`scheduler.placement.overcommit` needs a placement policy"),
        ("[scheduler.admission]\nmethod = 'gpa-g'\n",
         "`scheduler.admission.method` needs a placement policy"),
        ("[scheduler.placement]\npolicy = 'almost-fit'\n", "at `scheduler.placement.policy`"),
        ("[scheduler.admission]\nmethod = 'gpa-sqrt'\nslo = 1.0\n", "at `scheduler.admission.slo`"),
    ],
)
def test_bad_placement_settings_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, expected: str
) -> None:
    path = tmp_path / "bad.toml"
    base = "[cluster]\nnodes = [{ count = 1, cpu = 8, ram_gib = 16 }]\n[run]\nduration_s = 10\n"
    path.write_text(base + extra)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
