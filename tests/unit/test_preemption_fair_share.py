"""Preemption aims at YARN/hierarchical-DRF fair shares: it keeps min shares and leaves a fair
allocation alone (issue 14)."""

from __future__ import annotations

from rm.protocol import Resources
from rm.scheduler.config import PreemptionConfig, SchedulerConfig
from tests.fake_nodes import FakeNodes


def cluster(nodes: list[tuple[float, float]], tolerance: float = 0.8) -> FakeNodes:
    preemption = PreemptionConfig(
        enabled=True, mode="full-share", starvation_timeout_s=30, tolerance=tolerance
    )
    return FakeNodes(SchedulerConfig(policy="drf", preemption=preemption), nodes)


def fill(env: FakeNodes) -> None:
    for i in range(len(env.links)):
        env.heartbeat(i)


def settle(env: FakeNodes) -> int:
    """Preemption passes over two starvation timeouts; returns the tasks preempted."""
    total = 0
    for t in (1, 40, 80, 120):
        env.clock.set(t)
        total += env.rm.check_preemption()
    return total


def test_a_pool_at_its_min_share_is_not_preempted_below_it() -> None:
    # 100 CPUs; P2 is guaranteed 70. Both pools want everything: the scheduler serves P2 first to 70,
    # P1 gets 30 -- its fair share, so nobody starves.
    env = cluster([(10, 40)] * 10)
    env.rm.add_pool("P1")
    env.rm.add_pool("P2", min_share=Resources(70, 0))
    env.submit("a", 1, 1, 1000, pool="P1")
    env.submit("b", 1, 1, 1000, pool="P2")
    fill(env)
    ops = env.ops()
    assert (ops["a"].running, ops["b"].running) == (30, 70)
    assert settle(env) == 0
    ops = env.ops()
    assert (ops["a"].running, ops["b"].running) == (30, 70)


def test_a_late_pool_preempts_up_to_its_min_share_and_no_further() -> None:
    env = cluster([(10, 40)] * 10)
    env.rm.add_pool("P1")
    env.rm.add_pool("P2", min_share=Resources(70, 0))
    env.submit("a", 1, 1, 1000, pool="P1")
    fill(env)  # P1 holds the whole cluster
    env.submit("b", 1, 1, 1000, pool="P2")
    assert settle(env) == 70
    ops = env.ops()
    assert (ops["a"].running, ops["b"].running) == (30, 70)


def test_pools_of_mixed_task_shapes_at_their_drf_share_are_left_alone() -> None:
    # P1 {<2,1>, <1,2>} and P2 {<1,1>}, equal weights, 60 x 60: the scheduler compares pools by
    # their aggregate usage and ends at 0.5 / 0.5, which is the hierarchical DRF fair share; even
    # with no tolerance below the fair share nobody starves.
    env = cluster([(6, 6)] * 10, tolerance=1.0)
    env.rm.add_pool("P1")
    env.rm.add_pool("P2")
    env.submit("wide", 2, 1, 100, pool="P1")
    env.submit("tall", 1, 2, 100, pool="P1")
    env.submit("square", 1, 1, 100, pool="P2")
    fill(env)
    pools = {p.name: p.usage for p in env.rm.pools_view()}
    assert pools["P1"] == Resources(30, 30) and pools["P2"] == Resources(30, 30)
    assert settle(env) == 0
