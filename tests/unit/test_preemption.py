"""Fair-share preemption: starving operations take tasks back from operations above their share."""

from __future__ import annotations

import pytest

from rm.protocol import EXIT_PREEMPTED, KillContainers
from rm.scheduler.config import PreemptionConfig, SchedulerConfig
from tests.fake_nodes import FakeNodes


@pytest.fixture
def env() -> FakeNodes:
    nodes = FakeNodes(
        SchedulerConfig(
            policy="drf",
            preemption=PreemptionConfig(enabled=True, mode="full-share", starvation_timeout_s=30),
        ),
        [(6, 6), (6, 6)],
    )
    return nodes


def killed(env: FakeNodes) -> list[int]:
    out = []
    for link in env.links:
        for msg in link.of(KillContainers):
            assert msg.exit_code == EXIT_PREEMPTED
            out.extend(msg.container_ids)
    return out


def test_starving_operation_preempts_the_newest_tasks_until_its_fair_share(env: FakeNodes) -> None:
    env.submit("x", 1, 1, 100)
    env.heartbeat(0)  # x fills node 0 at t = 0
    env.clock.set(10)
    env.heartbeat(1)  # ... and node 1 at t = 10: these are its most recent tasks
    newest = set(env.running[1])
    env.clock.set(20)
    env.submit("y", 1, 1, 100)
    rm = env.rm
    assert rm.check_preemption() == 0  # starving from t = 20
    env.clock.set(30)
    rm.start_measurement(30.0)  # lost work counts from here
    env.clock.set(45)
    assert rm.check_preemption() == 0  # not for 30 s yet
    env.clock.set(50)
    assert rm.check_preemption() == 6
    assert set(killed(env)) == newest
    ops = env.ops()
    assert (ops["x"].running, ops["y"].running) == (6, 6)
    # Preempted tasks are pending again; their work inside the window (6 tasks x 1 cpu x 20 s of
    # their 40 s) is lost.
    assert ops["x"].pending == 100 - 6
    snap = rm.snapshot()
    assert snap.preemption is not None
    assert snap.preemption.preemptions == 6
    assert snap.preemption.preempted_cpu_s == pytest.approx(6 * 20)
    assert snap.counters.tasks_preempted == 6
    # At its fair share: nothing more to do.
    env.clock.set(100)
    assert rm.check_preemption() == 0


def test_operations_below_their_share_are_never_preempted(env: FakeNodes) -> None:
    env.submit("x", 1, 1, 100)
    env.submit("z", 1, 1, 3)  # z can use only 3 slots: its fair share is 3 / 12
    env.heartbeat(0)  # x 3, z 3 on node 0 (DRF alternates)
    env.clock.set(10)
    env.heartbeat(1)  # x takes node 1: x 9
    z_id = env.ops()["z"].id
    z_containers = {cid for i in (0, 1) for cid, op in env.running[i].items() if op == z_id}
    assert len(z_containers) == 3
    env.clock.set(20)
    env.submit("y", 1, 1, 100)
    env.rm.check_preemption()
    env.clock.set(60)
    env.rm.check_preemption()
    ops = env.ops()
    # Fair shares: z 3/12, x and y (12 - 3) / 2 = 4.5 tasks each. y takes tasks only from x, and
    # only while x stays at or above its own share: 4 of them (a 5th would leave x at 4 < 4.5).
    assert not z_containers & set(killed(env))
    assert ops["z"].running == 3
    assert ops["y"].running == 4
    assert ops["x"].running == 5


def test_preemption_is_off_unless_enabled() -> None:
    env = FakeNodes(SchedulerConfig(policy="drf"), [(4, 4)])
    assert env.rm.snapshot().preemption is None
