"""Trace replay: each format read from small files written from its documentation, bad input
named by file, record/line and field, and a trace -> scenario -> run round trip."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.scenario.loader import ScenarioError, load_scenario
from emulator.scenario.schema import TraceConfig
from emulator.scenario.traces import google, rumen, sls, synth
from emulator.scenario.traces.convert import operations, select
from emulator.scenario.traces.model import NodeGroup, TraceError

DATA = Path(__file__).parents[1] / "data" / "traces"


def groups(job: object) -> list[tuple[float, float, list[float]]]:
    return [(g.cpu, g.ram_gib, g.durations_s) for g in job.groups]  # type: ignore[attr-defined]


def test_sls() -> None:
    t = sls.read(DATA / "sls.json")
    a, b = t.jobs
    assert (a.job_id, a.pool, a.submit_s) == ("job_1", "sls_queue_1", 0.0)
    # `count = 2` of 2048 MB/1 vcore for start..end = 17.043 s; a 4096 MB/2 vcore reduce of 50 s.
    assert groups(a) == [(1.0, 2.0, [17.043, 17.043]), (2.0, 4.0, [50.0])]
    # Defaults: 1024 MB, 1 vcore.
    assert (b.job_id, b.pool, b.submit_s) == ("job_2", "sls_queue_2", 105.204)
    assert groups(b) == [(1.0, 1.0, [22.163, 19.589])]
    # The cluster, as SLS builds it: the header's 3 nodes and the 3 distinct container hosts.
    assert t.nodes == [NodeGroup(6, 10.0, 10.0)] and t.warnings == []
    # Reduces after maps (a MapReduce AM), and an AM container per job.
    assert [g.after for g in a.groups] == [[], [0]] and a.am == b.am == (1.0, 1.0)


def test_sls_nodes() -> None:
    nodes, warnings = sls.read_nodes(DATA / "sls-nodes.json")
    assert nodes == [NodeGroup(2, 8.0, 16.0), NodeGroup(1, 10.0, 10.0)] and warnings == []


def test_rumen() -> None:
    t = rumen.read(DATA / "rumen.json")
    a, b = t.jobs
    # Each task's last attempt, as SLS takes it: the first map's second (20 s; its failed first
    # attempt is not a container), the second map 25 s; every container of SLS's default size
    # (jobMapMB/jobReduceMB are the heap, jobProperties' vcores unread by SLS).
    assert groups(a) == [(1.0, 1.0, [20.0, 25.0]), (1.0, 1.0, [55.0])]
    assert (a.pool, b.pool, b.submit_s) == ("research", "prod", 30.0)
    assert groups(b) == [(1.0, 1.0, [30.0])]  # its last attempt (-1 times) never ran: the one before
    assert t.nodes == [NodeGroup(3, 10.0, 10.0)]  # the tasks' last hosts


def test_synth_reproducible_from_its_seed(tmp_path: Path) -> None:
    t = synth.read(DATA / "synth.json")
    assert len(t.jobs) == 40 and t.nodes == [NodeGroup(8, 10.0, 10.0)]
    assert {j.pool for j in t.jobs} == {"interactive", "batch"}
    assert all(0 <= j.submit_s < 600 for j in t.jobs)
    interactive = [j for j in t.jobs if j.pool == "interactive"]
    assert all(g.cpu == 1.0 and g.ram_gib in (1.0, 2.0) for j in interactive for g in j.groups)
    again = synth.read(DATA / "synth.json")
    assert [groups(j) for j in again.jobs] == [groups(j) for j in t.jobs]
    doc = json.loads((DATA / "synth.json").read_text())
    doc["rand_seed"] = 8
    other = tmp_path / "s.json"
    other.write_text(json.dumps(doc))
    assert [groups(j) for j in synth.read(other).jobs] != [groups(j) for j in t.jobs]


def test_google() -> None:
    t = google.read(DATA / "google-task-events.csv")
    prod, free = t.jobs
    # Task 0: 5 -> 65 s; task 1 evicted at 95 (90 s), rescheduled 96 -> 126 (30 s).
    # Requests x the largest machine (32 cpu, 128 GiB).
    assert (prod.job_id, prod.pool, prod.submit_s) == ("6251812952", "production", 0.0)
    assert groups(prod) == [(2.0, 4.0704, [60.0, 90.0, 30.0])]
    assert (free.pool, free.submit_s) == ("free", 30.0)
    assert groups(free) == [(0.4, 2.0352, [50.0])]  # killed after 50 s
    assert t.nodes == [NodeGroup(3, 32.0, 128.0)]


@pytest.mark.parametrize("reader, text, expected", [
    (sls.read, '{"job.start.ms": 0, "job.tasks": [{"duration.ms": 5}]}\n{"job.start.ms": "soon"',
     "record 2: not valid JSON at line 2"),
    (sls.read, '{"job.start.ms": 0, "job.tasks": [{"container.start.ms": 5}]}',
     "record 1 (line 1): `job.tasks[0].container.duration.ms`: expected `container.duration.ms` (or "
     "`duration.ms`), or both"),
    (sls.read, '{"job.start.ms": 0,\n "job.tasks": [{"duration.ms": 5, "container.vcores": -1}]}',
     "record 1 (line 1): `job.tasks[0].container.vcores`: expected a number > 0, got -1"),
    (sls.read, '{"job.tasks": []}', "`job.start.ms`: expected a number (the field is required)"),
    (rumen.read, '{"jobID": "j", "submitTime": 0, "mapTasks": {}}', "`mapTasks`: expected a JSON array"),
    (synth.read, '{"num_jobs": 1, "num_nodes": 1, "workloads": [{"job_classes": [], '
                 '"time_distribution": [{"time": 0, "weight": 1}]}]}',
     "`workloads[0].job_classes`: expected at least one job class"),
    (google.read, "1,,j,0,m,1,u,0,0,0.1,0.1,0,0\n2,,j,0,m,9,u,0,0,0.1,0.1,0,0\n",
     "line 2: column 6 `event_type`: expected an event type 0..8, got '9'"),
    (google.read, "1,,j,0,m,1\n", "line 1: expected 13 comma-separated columns"),
    (google.read, "", "no task events"),
])
def test_bad_traces_are_named(tmp_path: Path, reader: object, text: str, expected: str) -> None:
    path = tmp_path / "trace.in"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        reader(path)  # type: ignore[operator]
    assert str(err.value).startswith(str(path)) and expected in str(err.value), str(err.value)


def test_unknown_fields_warned_once(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    tasks = [{"duration.ms": 5, "gpu": 1}, {"gpu": 2, "duration.ms": 1}]
    job = {"job.start.ms": 0, "job.colour": "red", "job.tasks": tasks}
    path.write_text(json.dumps(job) + "\n" + json.dumps(job))
    t = sls.read(path)
    assert len(t.warnings) == 2
    assert "unknown field `job.colour` (first at line 1)" in t.warnings[0]
    assert "`job.tasks[].gpu`" in t.warnings[1]


def test_selection_and_time_scale() -> None:
    t = google.read(DATA / "google-task-events.csv")
    cfg = TraceConfig(format="google2011", path="x", start_s=10, time_scale=0.5, offset_s=100)
    (only,) = select(t.jobs, cfg)
    assert only.job_id == "6252000001"
    (op,) = operations(t, cfg)
    assert (op["submit_at_s"], op["durations_s"], op["pool"]) == (100.0, [25.0], "free")
    assert len(select(t.jobs, TraceConfig(format="sls", path="x", sample=2))) == 1
    assert len(select(t.jobs, TraceConfig(format="sls", path="x", max_jobs=1))) == 1
    # A job split by size: named after the job, tied by `job`.
    ops = operations(sls.read(DATA / "sls.json"), TraceConfig(format="sls", path="x", pool="q"))
    assert [(o["name"], o.get("job"), o["pool"]) for o in ops] == [
        ("job_1.am", "job_1", "q"), ("job_1", "job_1", "q"), ("job_1.1", "job_1", "q"),
        ("job_2.am", "job_2", "q"), ("job_2", "job_2", "q")]


def test_trace_in_a_scenario_with_generated_operations(tmp_path: Path) -> None:
    sc_file = tmp_path / "s.toml"
    sc_file.write_text(f"""
[cluster]
nodes = [{{count = 3, cpu = 10, ram_gib = 16}}]
[run]
duration_s = 300
[[workload.operations]]
name = "job_1"
cpu = 1
ram_gib = 1
tasks = 2
seconds = {{kind = "exponential", mean = 20, max = 100}}
[workload.trace]
format = "sls"
path = "{DATA / 'sls.json'}"
""")
    sc = load_scenario(sc_file)
    names = [o.name for o in sc.workload.operations]
    assert names == ["job_1", "job_1~2.am", "job_1~2", "job_1~2.1", "job_2.am", "job_2"]  # job_1 renamed
    assert sc.workload.trace is None  # replaced by its operations
    bad = tmp_path / "bad.toml"
    bad.write_text(sc_file.read_text().replace('format = "sls"', 'format = "rumen"'))
    with pytest.raises(ScenarioError) as err:
        load_scenario(bad)
    assert "bad.toml: at `workload.trace`: " in str(err.value)
    assert "sls.json: record 1 (line 1): `jobID`: expected a string" in str(err.value)
    missing = tmp_path / "missing.toml"
    missing.write_text(sc_file.read_text().replace("sls.json", "nope.json"))
    with pytest.raises(ScenarioError, match=r"nope\.json: no such file"):
        load_scenario(missing)


@pytest.mark.parametrize("fmt, file, extra", [
    ("sls", "sls.json", ["--nodes", str(DATA / "sls-nodes.json")]),
    ("rumen", "rumen.json", []),
    ("synth", "synth.json", ["--max-jobs", "10"]),
    ("google2011", "google-task-events.csv", []),
])
def test_import_then_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, file: str,
                         extra: list[str]) -> None:
    out = tmp_path / "scenario.toml"
    assert main(["import", fmt, str(DATA / file), "-o", str(out), *extra]) == 0
    sc = load_scenario(out)
    jobs = {o.job or o.name for o in sc.workload.operations}
    assert main(["run", str(out), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    with (tmp_path / "run" / "jobs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["job_id"] for r in rows} == jobs
    assert all(r["finish_s"] for r in rows)  # the run is long enough for every job
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["jobs"]["finished"] == len(jobs)


def test_import_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.toml"
    assert main(["import", "google2011", str(DATA / "google-bad.csv"), "-o", str(out)]) == 2
    assert "google-bad.csv: line 2: column 10 `cpu_request`" in capsys.readouterr().err
    assert not out.exists()
    # SLS without a nodes file nor a header: the cluster is not known.
    lone = tmp_path / "t.json"
    lone.write_text('{"job.start.ms": 0, "job.tasks": [{"duration.ms": 5000}]}')
    assert main(["import", "sls", str(lone), "-o", str(out)]) == 2
    assert "--nodes FILE" in capsys.readouterr().err
    assert main(["import", "sls", str(lone), "-o", str(out), "--node-count", "2"]) == 0


def test_one_command_replays_a_trace_into_job_results(tmp_path: Path) -> None:
    # `emulator import ... --run DIR`: the trace becomes a scenario file and runs at once.
    run = tmp_path / "run"
    assert main(["import", "sls", str(DATA / "sls.json"), "--nodes", str(DATA / "sls-nodes.json"),
                 "-o", str(tmp_path / "sls.toml"), "--run", str(run)]) == 0
    with (run / "jobs.csv").open() as f:
        jobs = list(csv.DictReader(f))
    assert {j["job_id"] for j in jobs} == {"job_1", "job_2"} and all(j["jct_s"] for j in jobs)
    assert (run / "report.html").is_file() and (run / "scenario.toml").is_file()
