"""YT's preemption rule (issue 14; seed 000 §4.1): inside node updates, on the reporting node, up to
the starvation tolerance only, keeping each operation's first jobs, with a per-node backoff and a
ramp-up grace for new operations."""

from __future__ import annotations

from typing import Any

import msgspec

from rm.protocol import Resources
from rm.scheduler.config import PreemptionConfig, SchedulerConfig
from tests.fake_nodes import FakeNodes
from tests.unit.test_preemption import killed


def cluster(nodes: list[tuple[float, float]], **preemption: Any) -> FakeNodes:
    cfg: dict[str, Any] = {"starvation_timeout_s": 30.0, "min_unpreemptable_jobs": 0, "rampup_grace_s": 0.0}
    cfg.update(preemption)
    config = msgspec.convert({"enabled": True, **cfg}, PreemptionConfig)
    return FakeNodes(SchedulerConfig(policy="drf", preemption=config), nodes)


def beat(env: FakeNodes, i: int, t: float) -> None:
    """Node ``i`` reports at ``t`` after the periodic check of that moment; containers the RM
    killed are gone from the node by then."""
    env.clock.set(t)
    env.rm.check_preemption()
    gone = set(killed(env))
    for running in env.running:
        for cid in gone & set(running):
            del running[cid]
    env.heartbeat(i)


def test_default_mode_is_yt() -> None:
    assert PreemptionConfig().mode == "yt"


def test_tops_up_only_to_the_tolerance_inside_a_node_update() -> None:
    env = cluster([(6, 6), (6, 6)])
    env.submit("x", 1, 1, 100)
    env.heartbeat(0)
    env.heartbeat(1)  # x holds all 12 slots
    env.clock.set(20)
    env.submit("y", 1, 1, 100)
    env.rm.check_preemption()  # y starving from 20
    env.clock.set(50)
    # The periodic check only marks y starving; nothing is preempted outside a node update.
    assert env.rm.check_preemption() == 0
    assert killed(env) == []
    on_node_0 = set(env.running[0])
    beat(env, 0, 50)
    ops = env.ops()
    # Fair share 6 of 12; tolerance 0.8: y stops at 5 (5/12 >= 0.4), all on the reporting node.
    assert ops["y"].running == 5 and ops["x"].running == 7
    assert len(killed(env)) == 5
    assert set(killed(env)) <= on_node_0
    beat(env, 1, 60)  # no longer starving: node 1 keeps its tasks
    assert len(killed(env)) == 5


def test_the_old_full_share_rule_is_still_selectable() -> None:
    env = FakeNodes(SchedulerConfig(policy="drf", preemption=PreemptionConfig(
        enabled=True, mode="full-share", starvation_timeout_s=30)), [(6, 6), (6, 6)])
    env.submit("x", 1, 1, 100)
    env.heartbeat(0)
    env.heartbeat(1)
    env.clock.set(20)
    env.submit("y", 1, 1, 100)
    env.rm.check_preemption()
    env.clock.set(50)
    assert env.rm.check_preemption() == 6  # to the full fair share, in the periodic pass


def test_an_operation_keeps_its_first_unpreemptable_jobs() -> None:
    env = cluster([(6, 6), (6, 6)], min_unpreemptable_jobs=10)
    env.submit("x", 1, 1, 100)
    env.heartbeat(0)
    env.heartbeat(1)
    env.clock.set(20)
    env.submit("y", 1, 1, 100)
    env.rm.check_preemption()
    beat(env, 0, 50)
    beat(env, 1, 60)
    ops = env.ops()
    # x runs 12; only the two above its first 10 can go, though y stays starving at 2.
    assert ops["x"].running == 10 and ops["y"].running == 2
    assert len(killed(env)) == 2


def test_a_node_tries_preemption_at_most_once_per_backoff() -> None:
    env = cluster([(12, 12), (12, 12)], node_backoff_s=10.0)
    env.submit("x", 1, 1, 100)
    env.heartbeat(0)
    env.heartbeat(1)  # x holds 24
    env.clock.set(20)
    env.submit("y", 1, 1, 100)
    env.rm.check_preemption()
    env.clock.set(25)
    env.submit("z", 1, 1, 100)
    env.rm.check_preemption()
    beat(env, 0, 50)  # y starving (since 20), z not yet: y takes 7 (7/24 >= 0.8 x 1/3) on node 0
    ops = env.ops()
    assert (ops["y"].running, ops["z"].running) == (7, 0)
    beat(env, 0, 56)  # z starving since 55, but node 0 tried 6 s ago
    assert env.ops()["z"].running == 0
    beat(env, 0, 61)  # backoff over: z takes the 5 x tasks left on node 0
    ops = env.ops()
    assert (ops["x"].running, ops["y"].running, ops["z"].running) == (12, 7, 5)


def test_a_new_operation_gets_a_ramp_up_grace() -> None:
    env = cluster([(6, 6), (6, 6)], rampup_grace_s=60.0)
    env.submit("x", 1, 1, 100)
    env.heartbeat(0)
    env.heartbeat(1)
    env.clock.set(20)
    env.submit("y", 1, 1, 100)
    for t in (20, 50, 55, 79):
        beat(env, 0, t)
    assert killed(env) == []  # starvation is counted only from 80 (submitted 20 + grace 60)
    beat(env, 0, 80)
    assert killed(env) == []  # ... and lasts 30 s
    beat(env, 0, 110)
    assert env.ops()["y"].running == 5


def test_a_fair_allocation_is_left_alone() -> None:
    env = cluster([(6, 6)] * 4, tolerance=1.0)
    env.submit("x", 1, 1, 100)
    env.submit("y", 1, 1, 100)
    for i in range(4):
        env.heartbeat(i)
    ops = env.ops()
    assert (ops["x"].running, ops["y"].running) == (12, 12)
    for t in (1, 40, 80, 120):
        for i in range(4):
            beat(env, i, t)
    assert killed(env) == []


def test_a_pool_at_its_min_share_keeps_it_and_the_late_pool_stops_at_its_tolerance() -> None:
    # P2 is guaranteed 70 of 100 CPUs and holds them; P1 (fair share 30) arrives late and starves
    # at 30 below its tolerance, but may only take what P2 holds above 70.
    env = cluster([(10, 40)] * 10)
    env.rm.add_pool("P1")
    env.rm.add_pool("P2", min_share=Resources(70, 0))
    env.submit("b", 1, 1, 1000, pool="P2")
    for i in range(10):
        env.heartbeat(i)
    assert env.ops()["b"].running == 100
    env.submit("a", 1, 1, 1000, pool="P1")
    for t in (1, 40, 80, 120, 160):
        for i in range(10):
            beat(env, i, t + i * 0.1)
    ops = env.ops()
    assert ops["b"].running >= 70
    assert ops["a"].running == 24  # 0.8 x 30, topped up to the tolerance only
