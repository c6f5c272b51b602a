"""Pool maximums (YARN's maxResources, issue 32): a task that would take its pool, or a pool above
it, past its maximum waits; the pool's fair share stops at its maximum; "why is this waiting?"
says so; the placement policies, which order operations without pools, refuse them."""

from __future__ import annotations

import pytest

from emulator.scenario.loader import ScenarioError
from rm.config import RMConfig
from rm.protocol import ContainerStatus, Heartbeat, Register, Resources
from rm.scheduler.config import SchedulerConfig
from rm.shell.manager import ResourceManager
from rm.state.operations import OperationSpec
from tests.helpers import RecordingLink, node_view, scenario, sync_rm


def _cluster(policy: str) -> tuple[ResourceManager, RecordingLink]:
    rm, _ = sync_rm(RMConfig(), SchedulerConfig(policy=policy))
    link = RecordingLink()
    rm.receive(link, Register(address="n0", resources=Resources(16, 64)))
    return rm, link


def _submit(rm: ResourceManager, name: str, pool: str, tasks: int) -> None:
    spec = OperationSpec(name=name, pool=pool, demand=Resources(1, 2), durations=[100.0] * tasks)
    rm.submit_operation(spec)


def _running_by_pool(rm: ResourceManager) -> dict[str, int]:
    out: dict[str, int] = {}
    for op in rm.operations_view():
        out[op.pool] = out.get(op.pool, 0) + op.running
    return out


@pytest.mark.parametrize("policy", ["drf", "fifo", "packing", "tetris"])
def test_a_pool_never_holds_more_than_its_maximum(policy: str) -> None:
    rm, link = _cluster(policy)
    rm.add_pool("capped", max_cpu=4)
    rm.add_pool("free")
    _submit(rm, "first", "capped", 12)  # submitted first: FIFO would give it the whole node
    _submit(rm, "second", "free", 12)
    for hb in range(30):  # packing may place one task a heartbeat
        rm.receive(link, Heartbeat(machine_id=1, heartbeat_id=hb, healthy=True, statuses=(), full=True))
        assert _running_by_pool(rm).get("capped", 0) <= 4
    assert _running_by_pool(rm) == {"capped": 4, "free": 12}
    # A task of the capped pool ends: exactly one more of its own starts, not two.
    capped_op = next(op.id for op in rm.operations_view() if op.pool == "capped")
    first = next(c for c in node_view(rm, 1).containers if c.op_id == capped_op)
    rm.receive(link, Heartbeat(machine_id=1, heartbeat_id=30, healthy=True, full=True, statuses=(
        ContainerStatus(first.container_id, "complete", 0),)))
    assert _running_by_pool(rm)["capped"] == 4


def test_a_maximum_holds_the_pools_below_it_together() -> None:
    rm, link = _cluster("drf")
    rm.add_pool("team", max_cpu=6, max_ram=100)
    rm.add_pool("team.a", parent="team")
    rm.add_pool("team.b", parent="team")
    _submit(rm, "a", "team.a", 10)
    _submit(rm, "b", "team.b", 10)
    rm.receive(link, Heartbeat(machine_id=1, heartbeat_id=0, healthy=True, statuses=(), full=True))
    running = _running_by_pool(rm)
    assert running["team.a"] + running["team.b"] == 6 and running["team.a"] == running["team.b"] == 3


def test_the_fair_share_stops_at_the_maximum_and_the_reason_is_given() -> None:
    rm, link = _cluster("drf")
    rm.add_pool("capped", max_cpu=4)
    rm.add_pool("free")
    _submit(rm, "c", "capped", 20)
    _submit(rm, "f", "free", 20)
    shares = rm.shares().pools
    assert shares["capped"].fair == pytest.approx(4 / 16)  # not half of the cluster
    assert shares["free"].fair == pytest.approx(12 / 16)
    rm.receive(link, Heartbeat(machine_id=1, heartbeat_id=0, healthy=True, statuses=(), full=True))
    (why,) = [r for r in rm.pending_reasons() if r.pool == "capped"]
    assert why.reasons.get("pool_at_maximum") == 1
    assert "its pool is at its maximum: room for 0 cpu more, a task needs 1 cpu, 2 GiB" in why.lines


def test_pool_maximums_with_a_placement_policy_are_refused() -> None:
    pools = [{"name": "capped", "max_cpu": 4.0}]
    with pytest.raises(ScenarioError, match=r"at `workload.pools`: pool maximums \(capped\) would not apply"):
        scenario(scheduler={"placement": {"policy": "best-fit"}}, workload={"pools": pools, "operations": []})
    scenario(workload={"pools": pools, "operations": []})  # fine with the default placement
