"""Preemption's lost work (issue 33): the CPU a preempted task actually used, as the thesis counted
it, or (`lost_work = "reserved"`, the earlier rule) its request times the time it ran."""

from __future__ import annotations

import pytest

from rm.protocol import ContainerUsage
from rm.scheduler.config import LostWork, PreemptionConfig, SchedulerConfig
from tests.fake_nodes import FakeNodes


def lost_cpu_s(lost_work: LostWork, rates: tuple[float, float]) -> float:
    """x fills node 0 at t = 0 and node 1 at t = 10; node 1's tasks (1 core each) report using
    ``rates[0]`` cores at t = 15 and ``rates[1]`` at t = 45; the window starts at t = 40; y starves
    from t = 20 and takes node 1's six tasks at t = 50."""
    env = FakeNodes(SchedulerConfig(policy="drf", preemption=PreemptionConfig(
        enabled=True, mode="full-share", starvation_timeout_s=30, lost_work=lost_work)), [(6, 6), (6, 6)])
    env.submit("x", 1, 1, 100)
    env.heartbeat(0)
    env.clock.set(10)
    env.heartbeat(1)
    victims = list(env.running[1])
    env.clock.set(15)
    env.heartbeat(1, usage=tuple(ContainerUsage(c, rates[0], 1.0) for c in victims))
    env.clock.set(20)
    env.submit("y", 1, 1, 100)
    env.rm.check_preemption()
    env.clock.set(40)
    env.rm.start_measurement(40.0)
    env.clock.set(45)
    env.heartbeat(1, usage=tuple(ContainerUsage(c, rates[1], 1.0) for c in victims))
    env.clock.set(50)
    assert env.rm.check_preemption() == 6
    snap = env.rm.snapshot()
    assert snap.preemption is not None
    return snap.preemption.preempted_cpu_s


def test_lost_work_is_the_cpu_the_preempted_tasks_used_in_the_window() -> None:
    # Ran 10 s of the window at 0.5 cores: 5 CPU-seconds each.
    assert lost_cpu_s("consumed", (0.5, 0.5)) == pytest.approx(6 * 5.0)
    # 5 s at 0.5, then 5 s at 0.25 (each report holds until the next).
    assert lost_cpu_s("consumed", (0.5, 0.25)) == pytest.approx(6 * (2.5 + 1.25))
    # The earlier rule: the request (1 core) for the 10 s, whatever was used.
    assert lost_cpu_s("reserved", (0.5, 0.25)) == pytest.approx(6 * 10.0)
