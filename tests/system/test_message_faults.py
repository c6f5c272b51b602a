"""Lost, duplicated, reordered and delayed messages: no task lost or run twice, lost commands repaired.

Every run here has the invariant checker on (tests/conftest.py): a task completed twice or a
container the RM and the node disagree on at the end fails the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import run_blocking
from emulator.results.summary import build_summary
from tests.helpers import scenario

WORK = {
    "operations": [
        {"name": "a", "cpu": 1, "ram_gib": 2, "job_count": 150, "seconds_mean": 40, "seconds_deviation": 10},
        {"name": "b", "cpu": 2, "ram_gib": 1, "job_count": 100, "seconds_mean": 60, "seconds_deviation": 10},
    ]
}


def faulty_run(mode: str, **fault: object) -> tuple[dict[str, Any], RunOutcome]:
    sc = scenario(
        heartbeat={"mode": mode, "interval_s": 3, "rpc_timeout_s": 9},
        rm={"expiry_s": 120, "command_timeout_s": 15},
        # The RM's probe must outlast the injected delay (up to 2 s each way) or a delayed answer
        # is, rightly, a removal (validation refuses a shorter one).
        ring={"probe_timeout": 1.5},
        workload=WORK,
        faults=[{"kind": "messages", "at_s": 0, "duration_s": 900, **fault}],
        run={"duration_s": 1500, "seed": 3},
    )
    out = run_blocking(sc, check_invariants=True)
    return build_summary(out), out


@pytest.mark.parametrize("mode", ["periodic", "delta"])
@pytest.mark.parametrize(
    "fault",
    [
        {"loss": 0.1},
        {"duplicate": 0.2},
        {"reorder": 0.2},
        {"delay_s": 2.0},
        {"loss": 0.05, "duplicate": 0.05, "reorder": 0.05, "delay_s": 1.0},
    ],
    ids=["loss", "duplicate", "reorder", "delay", "mixed"],
)
def test_every_task_completes_exactly_once(mode: str, fault: dict) -> None:
    summary, out = faulty_run(mode, **fault)
    assert summary["containers_completed"] == 250
    assert summary["nodes_lost"] == 0
    plan = out.message_faults
    assert plan is not None
    assert plan.dropped + plan.duplicated + plan.reordered + plan.delayed > 0


@pytest.mark.parametrize("mode", ["periodic", "delta"])
def test_lost_launches_and_kills_are_resent(mode: str) -> None:
    summary, out = faulty_run(
        mode, loss=0.3, types=["LaunchContainers", "KillContainers"], direction="to_node"
    )
    assert out.message_faults is not None and out.message_faults.dropped > 0
    assert out.rm.counters.commands_resent > 0
    assert summary["containers_completed"] == 250


def test_lost_heartbeats_and_responses_are_retried_not_double_counted() -> None:
    summary, out = faulty_run("delta", loss=0.3, types=["Heartbeat", "HeartbeatResponse"])
    assert out.message_faults is not None and out.message_faults.dropped > 10
    assert out.rm.counters.duplicates > 0  # a resent heartbeat whose answer was lost
    assert summary["containers_completed"] == 250
