"""A node registering with NaN, infinite or absurd resources is refused with a reason: accepted, it
would make the cluster's capacity (and every utilisation figure of the run) NaN or infinite."""

from __future__ import annotations

import math

import pytest

from rm.config import RMConfig
from rm.protocol import Register, RegisterResponse, Resources
from tests.helpers import RecordingLink, sync_rm


@pytest.mark.parametrize(
    ("cpu", "ram"),
    [(math.nan, 16.0), (8.0, math.nan), (math.inf, 16.0), (8.0, math.inf), (1e300, 16.0), (8.0, -math.inf)],
    ids=["nan-cpu", "nan-ram", "inf-cpu", "inf-ram", "1e300-cpu", "minus-inf-ram"],
)
def test_non_finite_or_absurd_resources_are_refused_with_a_reason(cpu: float, ram: float) -> None:
    rm, _ = sync_rm(RMConfig())
    good = RecordingLink()
    rm.receive(good, Register(address="good", resources=Resources(8, 16)))
    bad = RecordingLink()
    rm.receive(bad, Register(address="bad", resources=Resources(cpu, ram)))
    resp = bad.last(RegisterResponse)
    assert resp.action == "shutdown"
    assert "resources:" in resp.reason and "expected a number in (0, 1e+06]" in resp.reason
    assert [n.address for n in rm.nodes_view()] == ["good"]
    snap = rm.snapshot()
    assert snap.capacity == Resources(8, 16)
    assert math.isfinite(snap.cpu_utilization) and math.isfinite(snap.ram_utilization)


def test_the_largest_allowed_node_registers() -> None:
    rm, _ = sync_rm(RMConfig())
    link = RecordingLink()
    rm.receive(link, Register(address="big", resources=Resources(1e6, 1e6)))
    assert link.last(RegisterResponse).action == "normal"
