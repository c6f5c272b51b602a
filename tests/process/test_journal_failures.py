"""A journal that cannot be written stops the run at once (one error line, partial results, exit
status 5); a damaged journal is one clear error at replay, a torn last line is skipped and said;
and the invariant checker finds running tasks that sit on no node."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.harness.invariants import InvariantViolation
from emulator.harness.runner import RunHandle
from emulator.measure.sampler import SampleRow
from rm.recovery.journal import Epoch, Journal, JournalCorrupt
from tests.helpers import run_with_handle, scenario

SCENARIO = """
name = "journal-full"
[cluster]
nodes = [{ count = 10, cpu = 8, ram_gib = 32 }]
[heartbeat]
mode = "periodic"
interval_s = 1.0
[rm]
journal = true
[[workload.operations]]
name = "batch"
cpu = 1
ram_gib = 2
tasks = 3000
seconds_mean = 5
seconds_deviation = 1
[run]
duration_s = 300
"""

# The journal of this run reaches ~270 KB; every other file stays under ~120 KB.
LIMIT = 128 * 1024


def _file_size_limit() -> None:
    # The real thing: the kernel refuses writes past the limit (EFBIG) instead of killing us.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def test_a_journal_write_refused_by_the_kernel_stops_the_run_with_one_error(tmp_path: Path) -> None:
    sc = tmp_path / "full.toml"
    sc.write_text(SCENARIO)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "emulator", "run", str(sc), "--out", str(out), "--quiet"],
        preexec_fn=_file_size_limit, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 5, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"error: journal {out}/rm-journal.jsonl: write failed: File too large")
    assert "partial results in" in lines[0]
    s = json.loads((out / "summary.json").read_text())
    assert s["partial"] is True and "File too large" in s["failure"]
    assert s["ended_at_s"] < 300
    # The RM stopped on its first failed write: no task ran on in its books past that point.
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events].count("journal.write_failed") == 1
    failed_at = next(e["t"] for e in events if e["event"] == "journal.write_failed")
    assert s["ended_at_s"] == pytest.approx(failed_at, abs=1e-3)
    # The run was checked to its end: every running task on a node (tests turn invariants on).
    assert s["cpu_utilization"] <= 1.0


def test_a_failed_append_is_raised_again_on_every_later_append(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl")
    j.open()
    j.append(Epoch(n=1))
    assert j._file is not None
    j._file.close()  # the file goes away under the journal (EBADF on the next write)
    j._file = open("/dev/full", "wb", buffering=0)  # noqa: SIM115 - the journal closes it
    from rm.recovery.journal import JournalWriteFailed

    with pytest.raises(JournalWriteFailed, match="write failed: No space left on device"):
        j.append(Epoch(n=2))
    with pytest.raises(JournalWriteFailed):
        j.append(Epoch(n=3))
    assert j.appended_total == 1
    j.close()


def _journal(tmp_path: Path, lines: list[bytes]) -> Journal:
    path = tmp_path / "rm-journal.jsonl"
    path.write_bytes(b"".join(lines))
    return Journal(path)


def test_a_bad_line_in_the_middle_of_the_journal_is_one_clear_error(tmp_path: Path) -> None:
    good = b'["epoch",1]\n'
    j = _journal(tmp_path, [good, b'["end",3,tru\n', b'["end",4,true]\n'])
    with pytest.raises(JournalCorrupt) as err:
        j.read()
    msg = str(err.value)
    assert msg.startswith(f"{j.path}: line 2: expected a journal record")
    assert "'[\"end\",3,tru" in msg and "not a write torn by a crash" in msg


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    j = _journal(tmp_path, [b'["epoch",4]\n', b'["end",3,tr'])
    state = j.read()
    assert state.epoch == 4 and state.torn and state.torn_line == 2 and state.records == 1


def test_a_running_task_on_no_node_is_an_invariant_violation() -> None:
    long = {"operations": [{"name": "a", "cpu": 1, "ram_gib": 1, "job_count": 40, "seconds_mean": 10_000}]}

    def vanish(handle: RunHandle, row: SampleRow) -> None:
        if row.t_s == 30:
            # What a launch half-made by a failed journal write left: the task counts as running
            # but its container sits on no node at the RM.
            node = next(iter(handle.side.rm._life.cluster.nodes.values()))
            del node.containers[min(node.containers)]

    with pytest.raises(InvariantViolation, match=r"operation a: 32 tasks running, 31 containers on nodes"):
        run_with_handle(scenario(workload=long, run={"duration_s": 60}), check_invariants=True, on_row=vanish)


def test_an_rm_taking_over_a_damaged_journal_says_where_and_exits_2(tmp_path: Path) -> None:
    import time

    import msgspec

    from tests.process.test_rm_process_restart import SCENARIO as RM_SCENARIO

    sc = tmp_path / "resume.toml"
    sc.write_text(RM_SCENARIO)
    out = tmp_path / "rm"
    out.mkdir()
    record = {"scenario": "resume", "epoch": time.time() - 5, "speed": 20.0, "finished": False}
    (out / "rm-run.json").write_bytes(msgspec.json.encode(record))
    (out / "rm-journal.jsonl").write_bytes(b'["epoch",1]\n["ids",1,x\n["epoch",2]\n')
    proc = subprocess.run(
        [sys.executable, "-m", "emulator", "rm", str(sc), "--out", str(out), "--listen", "127.0.0.1:0",
         "--recover", "--quiet"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"error: {out}/rm-journal.jsonl: line 2: expected a journal record" in proc.stderr


RM_SCENARIO = """
name = "rm-full"
[cluster]
nodes = [{ count = 20, cpu = 8, ram_gib = 32 }]
[heartbeat]
mode = "periodic"
interval_s = 1.0
[[workload.operations]]
name = "batch"
cpu = 1
ram_gib = 2
tasks = 3000
seconds_mean = 5
[run]
duration_s = 100
clock = "realtime"
speed = 10
"""


def test_a_standalone_rm_whose_journal_fills_stops_with_one_error_and_exit_5(tmp_path: Path) -> None:
    import re
    import time

    sc = tmp_path / "rm.toml"
    sc.write_text(RM_SCENARIO)
    out = tmp_path / "rm"
    epoch = time.time() + 2
    rm = subprocess.Popen(
        [sys.executable, "-m", "emulator", "rm", str(sc), "--out", str(out), "--start-at", str(epoch),
         "--quiet"],
        stderr=subprocess.PIPE, text=True, preexec_fn=_file_size_limit,
    )
    nodes = None
    try:
        assert rm.stderr is not None
        # The secret it made, where it listens, and the command that starts its nodes.
        said = rm.stderr.readline() + rm.stderr.readline() + rm.stderr.readline()
        m = re.search(r"listening on (\S+:\d+)", said)
        assert m and "start its nodes: emulator nodes" in said, said
        nodes = subprocess.Popen(
            [sys.executable, "-m", "emulator", "nodes", "--connect", m[1], "--scenario", str(sc), "--count",
             "20", "--start-at", str(epoch), "--credentials-file", str(out / "rm-secret"), "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _, err = rm.communicate(timeout=60)
    finally:
        for p in (rm, nodes):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()
    assert rm.returncode == 5, err
    (line,) = err.strip().splitlines()
    journal = out / "rm-journal.jsonl"
    assert line.startswith(f"error: journal {journal}: write failed: File too large: the run stopped")
    assert line.endswith("(start `emulator rm` on it again to resume the run)")
    s = json.loads((out / "summary.json").read_text())
    assert s["partial"] is True and s["ended_at_s"] < 100


def test_recovery_says_it_skipped_a_torn_last_line(tmp_path: Path) -> None:
    import io

    from emulator.harness.eventlog import make_logger
    from rm.shell.manager import ResourceManager
    from tests.helpers import FakeClock

    j = _journal(tmp_path, [b'["epoch",4]\n', b'["end",3,tr'])
    clock = FakeClock()
    sink = io.StringIO()
    rm = ResourceManager(clock, make_logger(clock, sink), heartbeat_mode="delta", journal=j, resume=True)
    rm.recover()
    j.close()
    events = [json.loads(line) for line in sink.getvalue().splitlines()]
    (torn,) = [e for e in events if e["event"] == "journal.torn_line_skipped"]
    assert torn["line"] == 2 and torn["level"] == "warning"


def test_a_journal_that_cannot_be_written_at_the_start_is_one_error(tmp_path: Path) -> None:
    sc = tmp_path / "full.toml"
    sc.write_text(SCENARIO)
    out = tmp_path / "out"
    # The first snapshot is written beside the journal, then renamed over it: make that fail.
    (out / "rm-journal.jsonl.tmp").mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, "-m", "emulator", "run", str(sc), "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 5, proc.stderr
    assert proc.stderr.strip() == f"error: journal {out}/rm-journal.jsonl: write failed: Is a directory"


def test_the_clients_submission_log_fails_and_replays_as_the_journal_does(tmp_path: Path) -> None:
    from emulator.harness.workload import Submission, SubmissionLog
    from rm.recovery.journal import JournalWriteFailed

    log = SubmissionLog(tmp_path / "workload.jsonl")
    log._file = open("/dev/full", "wb", buffering=0)  # noqa: SIM115 - the log closes it
    with pytest.raises(JournalWriteFailed, match=r"workload\.jsonl: write failed: No space left on device"):
        log.append(Submission("a", 0, True))
    log.close()
    log.path.write_bytes(b'["a",0,true]\n["a",1,tr\n["a",2,true]\n')
    with pytest.raises(JournalCorrupt, match=r"workload\.jsonl: line 2: expected a submission"):
        log.read()
    log.path.write_bytes(b'["a",0,true]\n["a",1,tr')
    assert log.read() == [Submission("a", 0, True)]  # a torn last line
