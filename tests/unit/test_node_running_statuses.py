"""A node's full report keeps its running containers' statuses as they start and end
(``NodeFields._running``): every report holds what rebuilding it from the running containers
would (launch order; a status not yet acknowledged as the very object in ``_changes``, so that
the answer acknowledges it), through launches, completions, kills, lost answers and resyncs."""

from __future__ import annotations

import random

import pytest

from emulator.harness.eventlog import make_logger
from nodemanager.config import HeartbeatConfig
from nodemanager.node import NodeManager
from nodemanager.stats import NodeCounters
from rm.protocol import (
    ContainerLaunch,
    ContainerStatus,
    Heartbeat,
    HeartbeatResponse,
    KillContainers,
    LaunchContainers,
    RegisterResponse,
    Resources,
)
from tests.helpers import FakeClock, RecordingLink


def rebuilt(node: NodeManager) -> list[ContainerStatus]:
    """The report made afresh from the running containers (as the node made it before)."""
    changes = node._changes
    running = [changes.get(cid) or ContainerStatus(cid, "running") for cid in node._containers]
    return [*running, *(s for s in changes.values() if s.state == "complete")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_full_report_is_the_one_rebuilt_from_the_running_containers(seed: int) -> None:
    rng = random.Random(seed)
    clock = FakeClock()
    link = RecordingLink()
    checked: list[int] = []

    def send(msg: object) -> None:
        if isinstance(msg, Heartbeat):
            # What the node reports is what it would rebuild now: same values, same order, and
            # each change not acknowledged is that same object.
            assert list(msg.statuses) == rebuilt(node)
            changes = node._changes
            assert all(s is changes[s.container_id] for s in msg.statuses if s.container_id in changes)
            checked.append(len(msg.statuses))
        link.send(msg)

    config = HeartbeatConfig(mode="periodic", interval_s=1.0, on_completion=bool(seed % 2))
    node = NodeManager("n0", Resources(8, 16), config, clock, send, NodeCounters(), make_logger(clock, None))
    node.start(phase_s=0.5)
    clock.advance_to(0.6)
    node.receive(RegisterResponse(action="normal", machine_id=1))
    next_cid, t = 1, 0.6
    for _ in range(400):
        t += rng.uniform(0.05, 0.6)
        clock.advance_to(t)
        sent = node._inflight
        if sent is not None and rng.random() < 0.9:  # else the answer is lost: sent again
            if rng.random() < 0.05:
                node.receive(HeartbeatResponse(action="resync", heartbeat_id=sent.heartbeat_id + 1))
                node.receive(RegisterResponse(action="normal", machine_id=1))
            else:
                launches = tuple(
                    ContainerLaunch(next_cid + k, Resources(1, 1), rng.uniform(0.2, 4.0))
                    for k in range(rng.choice([0, 0, 1, 2, 3]))
                )
                next_cid += len(launches)
                answer = HeartbeatResponse("normal", sent.heartbeat_id + 1, launch=launches)
                node.receive(answer)
        if node._containers and rng.random() < 0.1:
            node.receive(KillContainers(container_ids=(rng.choice(list(node._containers)),)))
        if rng.random() < 0.05:
            node.receive(LaunchContainers(containers=(ContainerLaunch(next_cid, Resources(1, 1), 1.0),)))
            next_cid += 1
        assert list(node._full_statuses()) == rebuilt(node)
    assert len(link.of(Heartbeat)) == len(checked) and node._stats.containers_finished > 50
    assert max(checked) >= 5 and next_cid > 150, (max(checked), next_cid)
