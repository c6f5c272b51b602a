"""Trace input that must not make a reader spin or grow without bound, nor end in a traceback:
caps checked before expansion, non-regular and oversized files refused unread, and one error line
(file, line or record, field, what was expected) for each malformed value."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from emulator.scenario.traces import google, rumen, sls, synth
from emulator.scenario.traces.model import Limits, TraceError

SYNTH_CLASS = {"class_name": "c", "mtasks_avg": 2, "mtime_avg": 10}


def synth_text(num_jobs: object = 3, **cls: object) -> str:
    return json.dumps({
        "num_jobs": num_jobs, "num_nodes": 2, "rand_seed": 1,
        "workloads": [{"job_classes": [{**SYNTH_CLASS, **cls}],
                       "time_distribution": [{"time": 0, "weight": 1}]}],
    })


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a reader that grows fails, not the machine


def emulator(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real command, bounded in time and memory (a reader that spins fails the test)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "emulator", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=30, preexec_fn=_limit_memory)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.mark.parametrize(("fmt", "text", "fld"), [
    ("sls", '{"job.start.ms": 0, "job.count": 1e9, "job.tasks": [{"duration.ms": 5}]}', "`job.count`"),
    ("sls", '{"job.start.ms": 0, "job.tasks": [{"count": 1e9, "duration.ms": 5}]}', "`job.tasks[].count`"),
    ("synth", synth_text(num_jobs=1e9), "`num_jobs`"),
    ("synth", synth_text(mtasks_avg=1e12), "`workloads[0].job_classes[0].mtasks_avg`"),
])
def test_import_refuses_a_small_trace_that_expands_past_the_cap(
    tmp_path: Path, fmt: str, text: str, fld: str
) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(text)
    proc = emulator("import", fmt, str(trace), "-o", "s.toml", "--node-count", "2", cwd=tmp_path)
    line = one_error_line(proc)
    assert str(trace) in line and fld in line and "at most 2,000,000 tasks" in line, line
    assert not (tmp_path / "s.toml").exists()


def test_the_cap_is_configurable_in_the_scenario_and_on_the_command_line(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"job.start.ms": 0, "job.count": 30, "job.tasks": [{"duration.ms": 5}]}')
    line = one_error_line(emulator("import", "sls", str(trace), "-o", "s.toml", "--node-count", "2",
                                   "--max-tasks", "20", cwd=tmp_path))
    assert "`job.count`: expected at most 20 tasks" in line and "30" in line, line
    sc = tmp_path / "s.toml"
    sc.write_text('[cluster]\nnodes = [{ count = 2, cpu = 4, ram_gib = 8 }]\n[workload.trace]\n'
                  'format = "sls"\npath = "t.json"\nmax_tasks = 20\n[run]\nduration_s = 60\n')
    line = one_error_line(emulator("validate", str(sc), cwd=tmp_path))
    assert "workload.trace" in line and "at most 20 tasks" in line, line
    sc.write_text(sc.read_text().replace("max_tasks = 20", "max_tasks = 30"))
    ok = emulator("validate", str(sc), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_a_scenario_whose_trace_is_dev_zero_is_refused_unread(tmp_path: Path) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text('[cluster]\nnodes = [{ count = 2, cpu = 4, ram_gib = 8 }]\n'
                  '[workload.trace]\nformat = "sls"\npath = "/dev/zero"\n[run]\nduration_s = 60\n')
    line = one_error_line(emulator("validate", str(sc), cwd=tmp_path))
    assert "/dev/zero: expected a regular file" in line, line
    line = one_error_line(emulator("import", "google2011", "/dev/zero", "-o", "x.toml", cwd=tmp_path))
    assert "/dev/zero: expected a regular file" in line, line


@pytest.mark.parametrize("reader", [sls.read, rumen.read, synth.read, google.read, sls.read_nodes])
def test_a_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path, reader: object) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def hung(*_: object) -> None:
        raise AssertionError("the reader waited for a writer to open the pipe")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)  # opening a pipe blocks until a writer comes: bound the test
    try:
        with pytest.raises(TraceError, match="expected a regular file"):
            reader(fifo)  # type: ignore[operator]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("reader", [sls.read, rumen.read, synth.read, google.read])
def test_a_file_over_the_size_limit_is_refused(tmp_path: Path, reader: object) -> None:
    big = tmp_path / "big"
    big.write_text(" " * 5000)
    with pytest.raises(TraceError, match=r"5,000 bytes; expected at most 4,096 \(`max_bytes`"):
        reader(big, limits=Limits(max_bytes=4096))  # type: ignore[operator]


ROW = "1,,j,0,m,1,u,0,0,0.1,0.1,0,0\n"


@pytest.mark.parametrize(("reader", "text", "expected"), [
    (google.read, ROW + "2,,j,0,m,4,u," + "x" * 200_000 + ",0,0.1,0.1,0,0\n",
     "line 2: expected comma-separated values: field larger than field limit"),
    (google.read, "1" + "0" * 30 + ",,j,0,m,1,u,0,0,0.1,0.1,0,0\n",
     "line 1: column 1 `timestamp`: expected an integer in 0..9223372036854775807"),
    # Too large for a float: `ts / 1e6` overflowed.
    (google.read, "1" + "0" * 400 + ",,j,0,m,1,u,0,0,0.1,0.1,0,0\n",
     "line 1: column 1 `timestamp`: expected an integer in 0..9223372036854775807"),
    (google.read, "1" + "0" * 5000 + ",,j,0,m,1,u,0,0,0.1,0.1,0,0\n",
     "line 1: column 1 `timestamp`: expected"),
    (synth.read, synth_text(mtime_avg=1e-300, mtime_stddev=1e300),
     "`workloads[0].job_classes[0].mtime_stddev`: expected at most 1e+06 x `mtime_avg`"),
    (synth.read, synth_text(mtime_avg=1e300),
     "`workloads[0].job_classes[0].mtime_avg`: expected a number <="),
    (sls.read, '{"job.start.ms": 0, "job.tasks": [{"count": 1' + "0" * 5000 + ', "duration.ms": 5}]}',
     "record 1 (line 1): not a usable JSON value"),
])
def test_malformed_values_are_one_error_naming_the_place(
    tmp_path: Path, reader: object, text: str, expected: str
) -> None:
    path = tmp_path / "trace.in"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        reader(path)  # type: ignore[operator]
    assert str(err.value).startswith(str(path)) and expected in str(err.value), str(err.value)
    assert "\n" not in str(err.value)
