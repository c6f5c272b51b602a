"""Google 2011 task events: each run at the request its SCHEDULE row carried, `#` comment lines and
a header row read past, and `machine_events` as the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.scenario.loader import load_scenario
from emulator.scenario.traces import google
from emulator.scenario.traces.model import DEFAULT_LIMITS, NodeGroup, TraceError

S = 1_000_000


def row(t: float, job: str, index: int, event: int, cpu: str = "", mem: str = "", machine: str = "m1",
        priority: str = "4") -> str:
    return f"{int(t * S)},,{job},{index},{machine},{event},u,1,{priority},{cpu},{mem},0.001,0"


# Task 0 runs at 0.1 / 0.05, is evicted, waits with a larger request, and runs again at the request
# of its second SCHEDULE row; task 1 runs once at 0.2 / 0.1 with an UPDATE while it runs.
EVENTS = [
    "# clusterdata-2011 task_events, part 00000",
    "timestamp,missing info,job ID,task index,machine ID,event type,user,scheduling class,priority,"
    "CPU request,memory request,disk request,different-machines restriction",
    row(0, "j", 0, 0, "0.1", "0.05"), row(0, "j", 1, 0, "0.2", "0.1"),
    row(10, "j", 0, 1), row(10, "j", 1, 1),
    row(30, "j", 0, 2),  # evicted after 20 s
    row(31, "j", 0, 7, "0.3", "0.2"),  # UPDATE_PENDING: larger
    row(40, "j", 1, 8, "0.5", "0.5"),  # UPDATE_RUNNING: the run going on keeps its size
    row(50, "j", 0, 1, "0.4", "0.25", machine="m2"),  # runs at this row's request
    row(90, "j", 0, 4), row(100, "j", 1, 4),
]


def test_each_run_at_its_schedule_request(tmp_path: Path) -> None:
    path = tmp_path / "task_events.csv"
    path.write_text("\n".join(EVENTS) + "\n")
    (job,) = google.read(path).jobs
    runs = sorted((g.cpu, g.ram_gib, d) for g in job.groups for d in g.durations_s)
    # x 32 cpu / 128 GiB: run 1 of task 0 at 0.1/0.05 for 20 s, run 2 at 0.4/0.25 for 40 s; task 1
    # at 0.2/0.1 for 90 s (not its later 0.5/0.5).
    assert runs == [(3.2, 6.4, 20.0), (6.4, 12.8, 90.0), (12.8, 32.0, 40.0)]


def test_comment_and_header_lines_are_read_past_but_not_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / "task_events.csv"
    path.write_text("\n".join([*EVENTS[2:5], EVENTS[1]]) + "\n")  # a header row after data is an error
    with pytest.raises(TraceError, match=r"line 4: column 1 `timestamp`: expected an integer"):
        google.read(path)


MACHINES = [
    "# machine_events",
    "0,m1,0,p,0.5,0.25", "0,m2,0,p,1,1", "0,m3,0,p,1,1",
    "0,m4,0,p,,",  # no capacity recorded: left out
    "5000000,m2,2,p,0.5,0.25",  # resized: now as m1
    "6000000,m1,1,,,",  # removed: it was there
]


def test_machine_events_are_the_cluster(tmp_path: Path) -> None:
    path = tmp_path / "machine_events.csv"
    path.write_text("\n".join(MACHINES) + "\n")
    warnings: list[str] = []
    nodes = google.read_machines(path, 32.0, 128.0, DEFAULT_LIMITS, warnings)
    assert nodes == [NodeGroup(2, 16.0, 32.0), NodeGroup(1, 32.0, 128.0)]
    assert len(warnings) == 1 and "1 machine(s) without a recorded capacity" in warnings[0]
    events = tmp_path / "task_events.csv"
    events.write_text("\n".join(EVENTS) + "\n")
    out = tmp_path / "s.toml"
    assert main(["import", "google2011", str(events), "--machine-events", str(path), "-o", str(out)]) == 0
    nodes_ = [(g.count, g.cpu, g.ram_gib) for g in load_scenario(out).cluster.nodes]
    assert nodes_ == [(2, 16, 32), (1, 32, 128)]


@pytest.mark.parametrize("text, expected", [
    ("0,m1,0,p,0.5\n", "line 1: expected 6 comma-separated columns"),
    ("0,m1,3,p,0.5,0.5\n",
     "line 1: column 3 `event_type`: expected 0 (ADD), 1 (REMOVE) or 2 (UPDATE), got '3'"),
    ("0,m1,0,p,2,0.5\n", "line 1: column 5 `cpus`: expected a number in (0, 1]"),
    ("0,,0,p,1,0.5\n", "line 1: column 2 `machine_id`: expected a value"),
    ("# nothing\n", "no machine with a capacity"),
])
def test_bad_machine_events_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "machine_events.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        google.read_machines(path, 32.0, 128.0, DEFAULT_LIMITS, [])
    assert str(err.value).startswith(str(path)) and expected in str(err.value), str(err.value)
