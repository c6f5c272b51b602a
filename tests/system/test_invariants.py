"""The invariant checker catches what it promises to catch."""

from __future__ import annotations

import pytest

from emulator.harness.hosting import NodeReality
from emulator.harness.invariants import InvariantChecker, InvariantViolation
from emulator.harness.runner import RunHandle, run_blocking
from emulator.measure.sampler import SampleRow
from rm.protocol import ContainerStatus, Heartbeat, LaunchContainers
from rm.views.observer import RMObserver, TaskCompleted
from tests.helpers import run_with_handle, scenario

LONG = {"operations": [{"name": "a", "cpu": 1, "ram_gib": 1, "job_count": 40, "seconds_mean": 10_000}]}


def test_healthy_run_passes_every_check() -> None:
    out = run_blocking(scenario(workload=LONG, run={"duration_s": 120}), check_invariants=True)
    assert out.rm.counters.allocations == 32
    assert out.invariants is not None and out.invariants.invariant_checks >= 40


def test_a_container_vanishing_from_a_node_is_reported_at_quiescence() -> None:
    def vanish(handle: RunHandle, row: SampleRow) -> None:
        if row.t_s == 30:
            # A container dies on the node without any report (what a lost launch also looks like).
            node = handle.hosting.processes[0].node
            cid = min(node.running_containers())
            del node._containers[cid]  # its completion entry is skipped when due
            node._statuses = None

    with pytest.raises(InvariantViolation, match=r"believes node .* runs containers it does not: \[\d+\]"):
        run_with_handle(scenario(workload=LONG, run={"duration_s": 60}), check_invariants=True, on_row=vanish)


def test_a_second_completion_of_the_same_task_is_reported() -> None:
    from rm.protocol import Register, Resources
    from rm.state.operations import OperationSpec
    from tests.helpers import RecordingLink, sync_rm

    rm, _ = sync_rm()
    seen: list[TaskCompleted] = []
    checker = InvariantChecker(rm)
    link = RecordingLink()
    rm.receive(link, Register(address="n", resources=Resources(4, 4)))
    rm.add_pool("p")
    rm.submit_operation(OperationSpec(name="o", pool="p", demand=Resources(1, 1), durations=[5.0] * 8))
    rm.receive(link, Heartbeat(machine_id=1, heartbeat_id=0, healthy=True, statuses=(), full=True))
    c = link.last(LaunchContainers).containers[0]
    class Spy(RMObserver):
        def task_completed(self, ev: TaskCompleted) -> None:
            seen.append(ev)

    rm.observe(Spy())
    rm.receive(
        link,
        Heartbeat(
            machine_id=1,
            heartbeat_id=1,
            healthy=True,
            statuses=(ContainerStatus(c.container_id, "complete"),),
            full=True,
        ),
    )
    checker.check_step(None)
    assert [ev.task for ev in seen] == [0]
    with pytest.raises(InvariantViolation, match=r"task o\[0\] completed twice"):
        checker.task_completed(seen[0])  # what a buggy RM that re-credits a completion would do


def test_cli_reports_a_violation_with_exit_status_3(
    monkeypatch: pytest.MonkeyPatch, tmp_path, capsys
) -> None:
    from emulator.cli import main as cli

    def broken(self: InvariantChecker, nodes: list[NodeReality] | None) -> None:
        raise InvariantViolation("t=1.000s: node n0 allocated beyond capacity")

    monkeypatch.setattr(InvariantChecker, "check_step", broken)
    code = cli.main(
        ["run", "scenarios/drf-paper-example.toml", "--quiet", "--check-invariants", "--out", str(tmp_path)]
    )
    assert code == 3
    assert "invariant violated: t=1.000s: node n0 allocated beyond capacity" in capsys.readouterr().err
