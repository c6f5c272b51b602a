"""The workload's clients across RM processes: a new RM process on the run's journal and the
clients' submission log submits nothing twice, and what was due meanwhile goes out once."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from emulator.harness.eventlog import make_logger
from emulator.harness.workload import Submission, SubmissionLog, WorkloadDriver
from emulator.time.clock import LoopClock, run
from rm.protocol import ContainerStatus, KillContainers, LaunchContainers, Register, Resources
from rm.recovery.journal import Journal
from rm.shell.manager import ResourceManager
from tests.helpers import FakeClock, RecordingLink, scenario

WORK = {
    "operations": [
        {"name": "loop", "cpu": 1, "ram_gib": 1, "tasks": 10, "seconds_mean": 30, "loop": True},
        {"name": "timed", "cpu": 1, "ram_gib": 1, "tasks": 5, "seconds_mean": 30, "repeat": 4,
         "repeat_every_s": 100},
        {"name": "once", "cpu": 1, "ram_gib": 1, "tasks": 5, "seconds_mean": 30, "submit_at_s": 50},
    ]
}


def names(rm: ResourceManager) -> list[str]:
    return sorted(v.name for v in rm.operations_view())


def test_a_new_process_submits_only_what_was_not_submitted(tmp_path: Path) -> None:
    cfg = scenario(workload=WORK).workload

    async def main(clock: LoopClock) -> tuple[list[str], list[str], list[str]]:
        log = make_logger(clock, None)
        # The first RM process: no nodes, so nothing finishes; it dies at t = 150.
        rm1 = ResourceManager(clock, log, journal=Journal(tmp_path / "rm-journal.jsonl"))
        sub1 = SubmissionLog(tmp_path / "workload.jsonl")
        d1 = WorkloadDriver(cfg, rm1, clock, 1, sub1)
        d1.install_pools()
        rm1.start()
        d1.start()
        await clock.sleep_until(150)
        before = names(rm1)
        rm1.crash()  # the process dies, its clients with it
        d1.stop()
        # Down from 150 to 250: timed#2 (due at 200) was not submitted by anyone.
        await clock.sleep_until(250)
        rm2 = ResourceManager(clock, log, journal=Journal(tmp_path / "rm-journal.jsonl"), resume=True)
        sub2 = SubmissionLog(tmp_path / "workload.jsonl")
        d2 = WorkloadDriver(cfg, rm2, clock, 1, sub2)
        rm2.recover()
        d2.resume()
        rm2.start()
        d2.start()
        await clock.sleep_until(251)
        after_resume = names(rm2)
        await clock.sleep_until(400)
        sub2.close()
        for rm in (rm1, rm2):
            assert rm.journal is not None
            rm.journal.close()
        return before, after_resume, names(rm2)

    before, after_resume, end = run(main, "virtual")
    assert before == ["loop#0", "once", "timed#0", "timed#1"]
    assert after_resume == ["loop#0", "once", "timed#0", "timed#1", "timed#2"]  # late, once
    assert end == ["loop#0", "once", "timed#0", "timed#1", "timed#2", "timed#3"]
    log = SubmissionLog(tmp_path / "workload.jsonl").read()
    assert sorted((s.group, s.instance) for s in log) == [
        ("loop", 0), ("once", 0), ("timed", 0), ("timed", 1), ("timed", 2), ("timed", 3)
    ]


def test_a_looping_user_whose_operation_ended_with_the_process_goes_on(tmp_path: Path) -> None:
    cfg = scenario(workload=WORK).workload
    # The log says loop#0 was submitted, the journal has no live work: loop#0 finished, and the
    # process died before its user's next operation went out.
    sub = SubmissionLog(tmp_path / "workload.jsonl")
    sub.append(Submission("loop", 0, True))
    sub.close()

    async def main(clock: LoopClock) -> list[str]:
        log = make_logger(clock, None)
        rm0 = ResourceManager(clock, log, journal=Journal(tmp_path / "rm-journal.jsonl"))
        rm0.add_pool("default")
        rm0.crash()
        await clock.sleep_until(10)
        rm = ResourceManager(clock, log, journal=Journal(tmp_path / "rm-journal.jsonl"), resume=True)
        sub = SubmissionLog(tmp_path / "workload.jsonl")
        d = WorkloadDriver(cfg, rm, clock, 1, sub)
        rm.recover()
        d.resume()
        rm.start()
        d.start()
        await clock.sleep_until(11)
        sub.close()
        for r in (rm0, rm):
            assert r.journal is not None
            r.journal.close()
        return names(rm)

    assert run(main, "virtual") == ["loop#1", "timed#0"]


AM_WORK = {"operations": [
    {"name": "j.am", "job": "j", "cpu": 1, "ram_gib": 1, "durations_s": [500.0], "lasts_for_job": True},
    {"name": "j", "job": "j", "cpu": 4, "ram_gib": 4, "durations_s": [20.0], "after_start": ["j.am"]},
]}


@pytest.mark.parametrize("restart", ["new process", "same process"])
def test_a_running_am_is_kept_across_an_rm_restart_and_ended_with_its_job(
        tmp_path: Path, restart: str) -> None:
    """YARN's work-preserving restart: the AM's node re-registers with it, the RM places it back,
    and its client, told where by that node, ends it once the job's task is done (here it
    completed while the RM was down). The nodes come back in the other order, so the AM's node
    has another machine id than before."""
    cfg = scenario(cluster={"nodes": [{"count": 1, "cpu": 8, "ram_gib": 16}]}, workload=AM_WORK).workload
    clock = FakeClock()
    log = make_logger(clock, None)
    rm = ResourceManager(clock, log, heartbeat_mode="delta", journal=Journal(tmp_path / "j"))
    driver = WorkloadDriver(cfg, rm, cast(LoopClock, clock), 1, SubmissionLog(tmp_path / "w.jsonl"))
    driver.install_pools()
    rm.start()
    small, big = RecordingLink(), RecordingLink()
    rm.receive(small, Register(address="small", resources=Resources(1, 1)))  # only the AM fits
    driver.start()
    clock.advance_to(1.0)
    (am,) = [c.container_id for m in small.of(LaunchContainers) for c in m.containers]
    rm.receive(big, Register(address="big", resources=Resources(8, 16)))
    clock.advance_to(2.0)
    (task,) = [c.container_id for m in big.of(LaunchContainers) for c in m.containers]
    rm.crash()
    if restart == "new process":
        driver.stop()
        assert rm.journal is not None
        rm.journal.close()
        rm = ResourceManager(clock, log, heartbeat_mode="delta", journal=Journal(tmp_path / "j"), resume=True)
        driver = WorkloadDriver(cfg, rm, cast(LoopClock, clock), 1, SubmissionLog(tmp_path / "w.jsonl"))
        rm.recover()
        driver.resume()
        rm.start()
        driver.start()
    else:
        rm.recover()
    clock.advance_to(3.0)  # within the RM's wait for the nodes (rm.recovery_wait_s)
    small2, big2 = RecordingLink(), RecordingLink()
    rm.receive(big2, Register(address="big", resources=Resources(8, 16),
                              containers=(ContainerStatus(task, "complete"),)))
    rm.receive(small2, Register(address="small", resources=Resources(1, 1),
                                containers=(ContainerStatus(am, "running"),)))
    assert {v.name for v in rm.operations_view()} == {"j.am"}  # kept: the RM placed it back
    clock.advance_to(4.0)
    assert rm.operations_view() == []  # the job's AM ended with the job
    assert [m.container_ids for m in small2.of(KillContainers)] == [(am,)]
    assert rm.journal is not None
    rm.journal.close()
    driver.stop()
