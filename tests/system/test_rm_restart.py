"""Work-preserving RM restart: the journal, the rebuilt RM, and whole runs that restart the RM.

Every scenario run here has the invariant checker on (tests/conftest.py): a task completed twice,
a task lost, or a container the RM and its node disagree on at the end fails the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emulator.harness.eventlog import make_logger
from emulator.harness.outcome import RunOutcome
from emulator.harness.runner import RunHandle, run_blocking
from emulator.results.summary import build_summary
from emulator.scenario.loader import ScenarioError
from rm.protocol import ContainerStatus, LaunchContainers, Register, RegisterResponse, Resources
from rm.recovery import durability
from rm.recovery.journal import Ended, Journal, JournalState, Started, Submitted
from rm.shell.manager import ResourceManager
from rm.state.operations import OperationSpec
from tests.helpers import FakeClock, RecordingLink, run_with_handle, scenario

WORK = {
    "operations": [
        {"name": "a", "cpu": 1, "ram_gib": 2, "job_count": 60, "seconds_mean": 40, "seconds_deviation": 10,
         "loop": True},
        {"name": "b", "cpu": 2, "ram_gib": 1, "job_count": 40, "seconds_mean": 90, "seconds_deviation": 20,
         "loop": True},
    ]
}


def restart_run(tmp_path: Path, mode: str = "periodic", faults: list[dict[str, Any]] | None = None,
                **sections: Any) -> tuple[dict[str, Any], RunOutcome, RunHandle]:
    data: dict[str, Any] = {
        "cluster": {"nodes": [{"count": 12, "cpu": 8, "ram_gib": 16}]},
        "heartbeat": {"mode": mode, "interval_s": 3},
        "rm": {"expiry_s": 60},
        "workload": WORK,
        "faults": faults if faults is not None else [{"kind": "rm_restart", "at_s": 200, "downtime_s": 8}],
        "run": {"duration_s": 600, "seed": 5},
    }
    sc = scenario(**{**data, **sections})
    out, handle = run_with_handle(sc, tmp_path / "events.jsonl")
    return build_summary(out), out, handle


# ---- the journal ------------------------------------------------------------------------------


def test_replay_rebuilds_live_work_and_a_torn_tail_ends_it(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl")
    j.open()
    spec = OperationSpec(name="x", pool="p", demand=Resources(1, 1), durations=[5.0, 5.0, 5.0])
    j.append(Submitted(op_id=7, spec=spec, at=1.0))
    j.append(Started(cid=1, op_id=7, task=0, address="n1", at=2.0))
    j.append(Started(cid=2, op_id=7, task=1, address="n2", at=2.0))
    j.append(Ended(cid=1, completed=True))
    j.append(Ended(cid=2, completed=False))  # requeued: pending again, not running
    j.append(Started(cid=3, op_id=7, task=1, address="n1", at=9.0))
    j.close()
    with (tmp_path / "j.jsonl").open("ab") as f:
        f.write(b'["end",3,tr')  # the RM died in the middle of this write
    state = j.read()
    assert state.torn
    assert state.operations[7].completed == {0}
    assert set(state.running) == {3} and state.running[3].address == "n1"
    assert (state.next_op_id, state.next_container_id) == (8, 4)


def test_an_operation_whose_tasks_all_completed_is_not_recovered(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl")
    j.open()
    spec = OperationSpec(name="x", pool="p", demand=Resources(1, 1), durations=[5.0])
    j.append(Submitted(op_id=1, spec=spec, at=0.0))
    j.append(Started(cid=1, op_id=1, task=0, address="n1", at=0.0))
    j.append(Ended(cid=1, completed=True))
    j.close()
    assert j.read().operations == {}


def _state_key(state: JournalState) -> tuple[Any, ...]:
    ops = {i: (o.spec.name, sorted(o.completed)) for i, o in state.operations.items()}
    running = {c: (r.op_id, r.task, r.address) for c, r in state.running.items()}
    return ops, running, [p.name for p in state.pools]


def test_compacted_journal_replays_to_the_live_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Compact every few hundred records: the file is rewritten many times during the run.
    monkeypatch.setattr(durability, "COMPACT_MIN", 300)
    summary, _, handle = restart_run(tmp_path, faults=[], rm={"expiry_s": 60, "journal": True})
    rm = handle.side.rm
    assert rm.journal is not None and summary["containers_completed"] > 500
    from_file = rm.journal.read()
    from_memory = JournalState()
    for rec in rm.durable_state():
        from_memory.apply(rec)
    assert _state_key(from_file) == _state_key(from_memory)
    assert from_file.running  # work was live at the end
    # Compacted: rewritten several times, and the file holds a fraction of what was appended.
    assert rm.journal.rewrites >= 3
    assert from_file.records < rm.journal.appended_total / 2


# ---- the RM's restart, message by message ----------------------------------------------------


def journaled_rm(clock: FakeClock, tmp_path: Path) -> ResourceManager:
    """Synchronous, continuously scheduling (a submission is placed at once), journaled."""
    log = make_logger(clock, None)
    journal = Journal(tmp_path / "j")
    return ResourceManager(clock, log, heartbeat_mode="delta", journal=journal)


def test_journaled_launch_the_node_never_got_is_rerun(tmp_path: Path) -> None:
    clock = FakeClock()
    rm = journaled_rm(clock, tmp_path)
    rm.add_pool("p")
    link = RecordingLink()
    node = Register(address="n1", resources=Resources(8, 16))
    rm.receive(link, node)
    rm.submit_operation(OperationSpec(name="x", pool="p", demand=Resources(2, 2), durations=[50.0] * 3))
    sent = [c.container_id for m in link.of(LaunchContainers) for c in m.containers]
    assert len(sent) == 3
    clock.set(10.0)
    rm.crash()  # the launch was journaled, then the RM died before the node got it
    assert rm.operations_view() == [] and rm.nodes_view() == []
    rm.recover()
    assert rm.recovery_waiting() == 3
    link2 = RecordingLink()
    # The node runs one of them (it got that launch), not the other two.
    rm.receive(link2, Register(address="n1", resources=Resources(8, 16),
                               containers=(ContainerStatus(sent[0], "running"),)))
    assert link2.last(RegisterResponse).action == "normal"
    assert rm.recovery_waiting() is None  # every journaled container is accounted for: scheduling resumes
    op = rm.operations_view()[0]
    assert op.running == 3 and not op.pending  # one kept, two started again
    relaunched = [c.container_id for m in link2.of(LaunchContainers) for c in m.containers]
    assert len(relaunched) == 2 and min(relaunched) > max(sent)  # new containers, never reused ids
    (n1,) = [n for n in rm.nodes_view() if n.address == "n1"]
    assert sent[0] in {c.container_id for c in n1.containers}
    assert rm.journal is not None
    rm.journal.close()


def test_the_last_node_back_is_answered_before_the_launches_recovery_frees(tmp_path: Path) -> None:
    clock = FakeClock()
    rm = journaled_rm(clock, tmp_path)  # continuous: the end of recovery runs a pass at once
    rm.add_pool("p")
    link = RecordingLink()
    rm.receive(link, Register(address="n1", resources=Resources(8, 16)))
    rm.submit_operation(OperationSpec(name="x", pool="p", demand=Resources(2, 2), durations=[50.0] * 6))
    sent = [c.container_id for m in link.of(LaunchContainers) for c in m.containers]
    assert len(sent) == 4
    rm.crash()
    rm.recover()
    link2 = RecordingLink()
    # The node got one launch: recovery ends with this registration and frees room for three.
    rm.receive(link2, Register(address="n1", resources=Resources(8, 16),
                               containers=(ContainerStatus(sent[0], "running"),)))
    kinds = [type(m).__name__ for m in link2.sent]
    assert kinds[0] == "RegisterResponse" and "LaunchContainers" in kinds, kinds
    assert rm.journal is not None
    rm.journal.close()


def test_scheduling_is_held_until_the_journaled_containers_are_back(tmp_path: Path) -> None:
    clock = FakeClock()
    rm = journaled_rm(clock, tmp_path)
    rm.add_pool("p")
    l1, l2 = RecordingLink(), RecordingLink()
    rm.receive(l1, Register(address="n1", resources=Resources(4, 4)))
    rm.receive(l2, Register(address="n2", resources=Resources(4, 4)))
    rm.submit_operation(OperationSpec(name="x", pool="p", demand=Resources(2, 2), durations=[50.0] * 6))
    on_n1 = [c.container_id for m in l1.of(LaunchContainers) for c in m.containers]
    assert len(on_n1) == 2
    rm.crash()
    rm.recover()
    l3 = RecordingLink()
    # n2 comes back first, with its containers; n1 (two containers) is not back yet.
    on_n2 = [c.container_id for m in l2.of(LaunchContainers) for c in m.containers]
    rm.receive(l3, Register(address="n2", resources=Resources(4, 4),
                            containers=tuple(ContainerStatus(c, "running") for c in on_n2)))
    assert rm.recovery_waiting() == 2 and not l3.of(LaunchContainers)
    clock.advance_to(rm.config.recovery_wait_s + 0.1)  # the wait expired: n1's containers are
    assert rm.recovery_waiting() is None  # presumed gone and run again
    op = rm.operations_view()[0]
    assert op.pending == 2 + 2  # n1's two, plus the two that never fitted
    assert rm.journal is not None
    rm.journal.close()


def test_a_node_update_while_scheduling_is_held_starts_nothing(tmp_path: Path) -> None:
    """A node that registers while the RM waits for its journaled containers gets a node update
    with tasks pending and room for them: held, nothing is offered until the wait ends."""
    clock = FakeClock()
    rm = journaled_rm(clock, tmp_path)
    rm.add_pool("p")
    l1 = RecordingLink()
    rm.receive(l1, Register(address="n1", resources=Resources(4, 4)))
    rm.submit_operation(OperationSpec(name="x", pool="p", demand=Resources(2, 2), durations=[50.0] * 6))
    rm.crash()
    rm.recover()
    l3 = RecordingLink()
    rm.receive(l3, Register(address="n3", resources=Resources(8, 8)))
    assert l3.last(RegisterResponse).action == "normal"
    assert rm.recovery_waiting() == 2 and not l3.of(LaunchContainers)
    clock.advance_to(rm.config.recovery_wait_s + 0.1)  # n1 never came back: scheduling resumes
    assert rm.recovery_waiting() is None
    assert sum(len(m.containers) for m in l3.of(LaunchContainers)) == 4
    assert rm.journal is not None
    rm.journal.close()


# ---- whole runs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["periodic", "delta"])
def test_restart_keeps_every_running_container(tmp_path: Path, mode: str) -> None:
    summary, out, _ = restart_run(tmp_path, mode)
    (r,) = summary["rm_restarts"]
    assert r["containers_waiting"] > 50
    assert r["containers_kept"] == r["containers_waiting"] and r["containers_rerun"] == 0
    assert r["nodes_back"] == 12 and r["recovery_s"] is not None and r["recovery_s"] < 10
    # Nothing ran twice, nothing was lost, no node was declared dead, and work went on afterwards.
    assert summary["tasks_requeued"] == 0 and summary["nodes_lost"] == 0
    assert summary["tasks_lost"] == 0 and summary["tasks_duplicated"] == 0
    completed_after = [row for row in out.rows if row.t_s > 300]
    assert completed_after and out.rm.counters.containers_completed > summary["tasks_completed_once"] // 2
    assert out.rm.epoch == 1
    events = (tmp_path / "events.jsonl").read_text()
    assert '"rm.crashed"' in events and '"rm.recovered"' in events and '"rm.recovery_finished"' in events


def test_the_replay_wall_time_is_in_timing_json_so_the_summary_repeats(tmp_path: Path) -> None:
    import json

    from emulator.results.summary import write_results

    summaries = []
    for i in (1, 2):
        (tmp_path / str(i)).mkdir()
        _, out, _ = restart_run(tmp_path / str(i))
        write_results(out, tmp_path / f"run{i}")
        summaries.append((tmp_path / f"run{i}" / "summary.json").read_bytes())
        timing = json.loads((tmp_path / f"run{i}" / "timing.json").read_text())
        assert len(timing["rm_restart_replay_wall_s"]) == 1 and timing["rm_restart_replay_wall_s"][0] > 0
    assert b"rm_restarts" in summaries[0] and summaries[0] == summaries[1]


def test_containers_of_a_node_that_died_meanwhile_run_again_after_the_wait(tmp_path: Path) -> None:
    faults = [
        {"kind": "crash", "at_s": 195, "nodes": ["node-0-00003"]},
        {"kind": "rm_restart", "at_s": 200, "downtime_s": 8},
    ]
    summary, _, _ = restart_run(tmp_path, faults=faults, rm={"expiry_s": 60, "recovery_wait_s": 20})
    (r,) = summary["rm_restarts"]
    assert r["nodes_expected"] == 11 and r["nodes_back"] == 11
    assert r["containers_rerun"] > 0
    assert r["containers_kept"] + r["containers_rerun"] == r["containers_waiting"]
    assert r["scheduling_resumed_s"] == pytest.approx(20)  # held for the whole wait
    assert summary["tasks_lost"] == 0


def test_submissions_while_the_rm_is_down_wait_for_it(tmp_path: Path) -> None:
    work = {"operations": [
        *WORK["operations"],
        {"name": "late", "cpu": 1, "ram_gib": 1, "job_count": 10, "seconds_mean": 20, "submit_at_s": 204},
    ]}
    summary, out, _ = restart_run(tmp_path, workload=work)
    late = next(o for o in summary["operations"] if o["name"] == "late")
    assert late["completed_tasks"] == 10
    assert out.rm.groups["late"].operations_finished == 1


def test_ring_is_rebuilt_after_a_restart_with_newer_versions(tmp_path: Path) -> None:
    summary, _, handle = restart_run(tmp_path, "delta")
    ring = handle.side.rm.ring_snapshot()
    assert ring is not None
    assert ring.version >> 32 == 1  # the new life's versions are above the old life's
    assert len(ring.members) == 12
    for proc in handle.hosting.processes:
        view = proc.ring_view()
        assert view is not None and view.version == ring.version
    assert summary["false_removals"] == 0


def test_rm_restart_without_a_journal_is_a_clear_error() -> None:
    with pytest.raises(ScenarioError, match="journal"):
        scenario(rm={"journal": False}, faults=[{"kind": "rm_restart", "at_s": 5}])


def test_soak_scenario_at_a_tenth_of_its_size_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    from emulator.scenario.loader import load_scenario

    # scenarios/soak.toml (two emulated hours, every fault kind, one RM restart) with 100 nodes and
    # a tenth of the work; `make soak` runs it whole.
    sc = load_scenario(Path(__file__).parents[2] / "scenarios" / "soak.toml", {
        "cluster.nodes.0.count": 100,
        "workload.operations.0.tasks": 50,
        "workload.operations.1.tasks": 200,
    })
    out = run_blocking(sc, tmp_path / "events.jsonl", check_invariants=True)
    s = build_summary(out)
    assert s["tasks_lost"] == 0 and s["tasks_duplicated"] == 0
    assert s["invariant_checks"] > 400
    assert s["rm_restarts"][0]["nodes_back"] >= 95 and s["rm_restarts"][0]["containers_kept"] > 0
    assert s["crashed_nodes"] > 0 and s["nodes_lost"] > 0  # the faults did happen
    assert s["false_removals"] == 0


def test_emulator_recovery_prints_one_row_per_cluster_size(tmp_path: Path) -> None:
    import json

    from emulator.cli.main import main

    text = (Path(__file__).parents[2] / "scenarios" / "rm-restart.toml").read_text()
    text = text.replace("nodes = [1000, 10000]", "nodes = [20, 40]")
    (tmp_path / "r.toml").write_text(text)
    assert main(["recovery", str(tmp_path / "r.toml"), "--out", str(tmp_path / "out")]) == 0
    rows = json.loads((tmp_path / "out" / "recovery.json").read_text())
    assert [r["nodes"] for r in rows] == [20, 40]
    for r in rows:
        assert r["nodes_back"] == r["nodes"] and r["containers_kept"] == r["containers_waiting"] > 0
        assert r["tasks_lost"] == 0 and r["recovery_s"] is not None
    assert main(["recovery", "scenarios/quickstart.toml"]) == 2  # no [sweep], no rm_restart: clear error


def test_ids_never_repeat_across_rm_processes_even_with_no_live_work(tmp_path: Path) -> None:
    clock = FakeClock()
    rm = journaled_rm(clock, tmp_path)
    rm.add_pool("p")
    link = RecordingLink()
    rm.receive(link, Register(address="n1", resources=Resources(8, 16)))
    op1 = rm.submit_operation(OperationSpec(name="x", pool="p", demand=Resources(2, 2), durations=[5.0]))
    (c1,) = [c.container_id for m in link.of(LaunchContainers) for c in m.containers]
    rm.crash()
    rm.recover()
    # The node comes back, its container completed meanwhile: no work is live any more.
    rm.receive(RecordingLink(), Register(address="n1", resources=Resources(8, 16),
                                         containers=(ContainerStatus(c1, "complete"),)))
    assert rm.operations_view() == []
    rm.crash()
    rm.recover()  # the journal is rewritten as a snapshot of no live work
    assert rm.journal is not None
    rm.journal.close()
    # A new RM process on that journal hands out new ids, not 1 again.
    log = make_logger(clock, None)
    rm2 = ResourceManager(clock, log, heartbeat_mode="delta", journal=Journal(tmp_path / "j"), resume=True)
    assert not rm2.snapshot().up
    rm2.recover()
    link2 = RecordingLink()
    rm2.receive(link2, Register(address="n1", resources=Resources(8, 16)))
    op2 = rm2.submit_operation(OperationSpec(name="y", pool="p", demand=Resources(2, 2), durations=[5.0]))
    (c2,) = [c.container_id for m in link2.of(LaunchContainers) for c in m.containers]
    assert op2 > op1 and c2 > c1
    assert rm2.journal is not None
    rm2.journal.close()
