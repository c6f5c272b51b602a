"""The indexed placement policy chooses exactly the nodes the old scan of every node chose
(tests/placement_reference.py), on randomized workloads: heterogeneous nodes joining, leaving
and turning unhealthy, tasks of every tier starting and ending, overcommit, and each admission
method on observed usage."""

from __future__ import annotations

import random

import pytest

from rm.borg.placement import PlacementPolicy
from rm.borg.sbp import Admission
from rm.borg.task_usage import record_usage
from rm.protocol import ContainerUsage, Resources
from rm.scheduler.borg_config import AdmissionConfig, AdmissionMethod, PlacementConfig, PlacementName
from rm.state.cluster import Allocation, Cluster, NodeRecord
from rm.state.operations import Operation, OperationSpec
from rm.state.workload import WorkloadBook
from tests.helpers import RecordingLink
from tests.placement_reference import ScanPlacement

SIZES = [0.5, 1.0, 2.0, 3.0, 4.0, 8.0]


class Twin:
    """One cluster with its policy; two twins get the same events."""

    def __init__(self, policy: type[PlacementPolicy], config: PlacementConfig,
                 admission: AdmissionConfig | None) -> None:
        self.cluster = Cluster()
        self.book = WorkloadBook()
        self.book.add_pool("p")
        adm = Admission(admission) if admission is not None else None
        self.policy = policy(config, self.book, self.cluster, adm)
        self.allocs: dict[int, Allocation] = {}
        self.next_cid = 1
        self.nodes: list[NodeRecord] = []

    def add_node(self, name: str, cpu: float, ram: float) -> None:
        self.nodes.append(self.cluster.add(name, Resources(cpu, ram), RecordingLink(), 0.0))

    def submit(self, cpu: float, ram: float, tier: int, tasks: int) -> None:
        spec = OperationSpec(name=f"o{self.book.next_op_id}", pool="p", demand=Resources(cpu, ram),
                             durations=[10.0] * tasks, tier=tier)
        self.book.add_operation(spec, 0.0)

    def place(self) -> tuple[int, int] | None:
        pick = self.policy.place(self.cluster.nodes.values())
        if pick is None:
            return None
        op, node = pick
        self.start(op, node)
        return op.id, node.seq

    def start(self, op: Operation, node: NodeRecord) -> None:
        alloc = Allocation(self.next_cid, node, op, op.take_task(0.0), 0.0)
        self.next_cid += 1
        self.allocs[alloc.container_id] = alloc
        self.cluster.place(alloc, 0.0)

    def release(self, cid: int) -> None:
        alloc = self.allocs.pop(cid)
        self.cluster.release(alloc, 0.0)
        alloc.op.task_ended()

    def remove_node(self, k: int) -> None:
        node = self.nodes.pop(k)
        for cid in list(node.containers):
            alloc = self.allocs.pop(cid)
            self.cluster.release(alloc, 0.0)
            alloc.op.requeue(alloc.task)
        self.cluster.remove(node, 0.0)


def drive(a: Twin, b: Twin, rng: random.Random, steps: int) -> int:
    """Apply the same random events to both; returns how many tasks were placed."""
    placed = 0
    for i in range(6):
        for t in (a, b):
            t.add_node(f"n{i}", [4.0, 8.0, 16.0][i % 3], [16.0, 32.0, 64.0][(i // 3) % 3])
    for step in range(steps):
        x = rng.random()
        if x < 0.4:
            got = a.place(), b.place()
            assert got[0] == got[1], (step, got)
            placed += got[0] is not None
        elif x < 0.55:
            cpu = rng.choice(SIZES) if rng.random() < 0.7 else round(rng.uniform(0.1, 6), 3)
            ram = rng.choice(SIZES) * 2
            args = (cpu, ram, rng.randrange(5), rng.randint(1, 6))
            a.submit(*args)
            b.submit(*args)
        elif x < 0.7 and a.allocs:
            cid = rng.choice(sorted(a.allocs))
            a.release(cid)
            b.release(cid)
        elif x < 0.85 and a.nodes:
            k = rng.randrange(len(a.nodes))
            reports = tuple(
                ContainerUsage(cid, round(al.op.demand.cpu * rng.uniform(0, 1.5), 6),
                               round(al.op.demand.ram_gib * rng.uniform(0.2, 1.1), 6))
                for cid, al in a.nodes[k].containers.items() if rng.random() < 0.9)
            for t in (a, b):
                record_usage(t.nodes[k], reports, 8)
        elif x < 0.9:
            name, cpu, ram = f"m{step}", rng.choice([4.0, 8.0, 16.0, 32.0]), rng.choice([16.0, 64.0])
            a.add_node(name, cpu, ram)
            b.add_node(name, cpu, ram)
        elif x < 0.95 and len(a.nodes) > 2:
            k = rng.randrange(len(a.nodes))
            a.remove_node(k)
            b.remove_node(k)
        elif a.nodes:
            k = rng.randrange(len(a.nodes))
            healthy = rng.random() < 0.5
            for t in (a, b):
                t.cluster.set_healthy(t.nodes[k], healthy, 0.0)
    return placed


METHODS: list[AdmissionMethod | None] = [None, "av", "perc", "gpa-g", "gpa-sqrt", "cantelli", "emp-perc"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("policy", ["first-fit", "best-fit", "worst-fit", "next-fit"])
def test_indexed_policy_chooses_the_nodes_the_scan_chose(policy: PlacementName,
                                                         method: AdmissionMethod | None) -> None:
    total = 0
    for seed in range(3):
        rng = random.Random(f"{policy}:{method}:{seed}")
        config = PlacementConfig(policy=policy, overcommit=rng.choice([1.0, 1.0, 1.5, 3.0]))
        adm = None if method is None else AdmissionConfig(
            method=method, slo=rng.choice([0.9, 0.99, 0.999]), av_factor=rng.choice([1.0, 1.25]))
        a = Twin(PlacementPolicy, config, adm)
        b = Twin(ScanPlacement, config, adm)
        total += drive(a, b, rng, 600)
    assert total > 100  # the comparison saw real placements
