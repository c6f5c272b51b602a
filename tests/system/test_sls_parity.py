"""SLS parity: Hadoop SLS's own sample files (tests/data/traces/hadoop-sls, see NOTICE) and
generated edge cases read as SLS reads them, checked against an independent reading of the raw
files; and a replay in which reduces wait for maps and tasks for their job's AM container."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from emulator.cli.main import main
from emulator.harness.runner import run_blocking
from emulator.results.summary import build_summary
from emulator.scenario.loader import ScenarioError, load_scenario, scenario_from_dict
from emulator.scenario.schema import TraceConfig
from emulator.scenario.traces import rumen, sls, synth
from emulator.scenario.traces.convert import import_scenario, operations
from emulator.scenario.traces.model import NodeGroup, TraceError

HADOOP = Path(__file__).parents[1] / "data" / "traces" / "hadoop-sls"


def records(path: Path) -> list[Any]:
    """The JSON objects of a file holding several one after another, read without the project."""
    text, pos = path.read_text(), 0
    out: list[Any] = []
    decoder = json.JSONDecoder()
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return out
        value, pos = decoder.raw_decode(text, pos)
        out.append(value)


def test_the_sls_nodes_file_counts_its_nameless_node_as_sls_does() -> None:
    nodes, warnings = sls.read_nodes(HADOOP / "nodes.json")
    names = {f"/{r['rack']}/{n.get('node')}" for r in records(HADOOP / "nodes.json") for n in r["nodes"]}
    assert len(names) == 20  # SLS's own unit test asserts 20 nodes for this file
    assert nodes == [NodeGroup(20, 10.0, 10.0)]
    assert any("/rack5/null" in w for w in warnings), warnings


@pytest.mark.parametrize("name", ["inputsls.json", "sls_dag.json"])
def test_sls_samples_read_as_sls_reads_them(name: str) -> None:
    raw = records(HADOOP / name)
    t = sls.read(HADOOP / name)
    assert len(t.jobs) == len(raw)
    for job, r in zip(t.jobs, raw, strict=True):
        assert (job.job_id, job.pool) == (r["job.id"], r["job.queue.name"])
        assert job.submit_s == r["job.start.ms"] / 1000  # absolute, as SLS keeps it
        assert job.am == (1.0, 1.0)  # SLS's AM container: 1024 MB, 1 vcore
        tasks = r["job.tasks"]
        assert job.tasks == len(tasks)
        want = sorted((x["container.end.ms"] - x["container.start.ms"]) / 1000 for x in tasks)
        assert sorted(d for g in job.groups for d in g.durations_s) == want
        assert all((g.cpu, g.ram_gib, g.after) == (1.0, 1.0, []) for g in job.groups)  # only maps
        delays = sorted(g.delay_s for g in job.groups for _ in g.durations_s)
        if r.get("yarn.sls.am.type") == "dag":
            assert delays == sorted(x.get("container.request.delay", 0) / 1000 for x in tasks)
        else:
            assert set(delays) == {0.0}  # a MapReduce AM asks for every map at once
    # No nodes file: the cluster is the distinct container.host values, of SLS's default size.
    hosts = {x["container.host"] for r in raw for x in r["job.tasks"]}
    assert t.nodes == [NodeGroup(len(hosts), 10.0, 10.0)] and len(hosts) == 3
    assert t.warnings == []


def test_the_dag_sample_requests_each_container_after_its_delay() -> None:
    ops = operations(sls.read(HADOOP / "sls_dag.json"), TraceConfig(format="sls", path="x"))
    first = [o for o in ops if o["job"] == "job_1"]
    assert first[0]["name"] == "job_1.am"
    by_delay = sorted((o["submit_at_s"], o["durations_s"]) for o in first[1:])
    assert by_delay == [(0.0, [17.843]), (1.0, [17.043]), (1.5, [14.928])]
    assert all(o["after_start"] == ["job_1.am"] for o in first[1:])
    second = [o for o in ops if o["job"] == "job_2"]
    assert {o["submit_at_s"] for o in second} == {105.204}


def test_container_duration_ms_comes_first(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"job.start.ms": 0, "job.tasks": [
        {"container.duration.ms": 7000},
        {"container.duration.ms": 4000, "duration.ms": 3000, "container.start.ms": 0,
         "container.end.ms": 1000},
        {"duration.ms": 3000, "container.start.ms": 0, "container.end.ms": 1000},
    ]}))
    t = sls.read(path)
    assert [d for g in t.jobs[0].groups for d in g.durations_s] == [7.0, 4.0, 3.0]
    assert t.warnings == []  # a known field


def test_submit_times_are_absolute_unless_rebased(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("".join(json.dumps({"job.start.ms": ms, "job.id": f"j{ms}",
                                        "job.tasks": [{"duration.ms": 1000}]}) for ms in (5000, 8000)))
    t = sls.read(path)
    absolute = operations(t, TraceConfig(format="sls", path="x"))
    assert sorted({o["submit_at_s"] for o in absolute}) == [5.0, 8.0]
    rebased = operations(t, TraceConfig(format="sls", path="x", rebase=True))
    assert sorted({o["submit_at_s"] for o in rebased}) == [0.0, 3.0]


def test_reduces_wait_for_maps_and_tasks_for_the_am(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"job.start.ms": 0, "job.id": "mr", "job.tasks": [
        {"container.type": "reduce", "duration.ms": 30000, "container.memory-mb": 2048},
        {"container.type": "map", "count": 3, "duration.ms": 10000},
    ]}))
    ops = {o["name"]: o for o in operations(sls.read(path), TraceConfig(format="sls", path="x"))}
    assert set(ops) == {"mr.am", "mr", "mr.1"}
    reduce, maps = ops["mr"], ops["mr.1"]
    assert (reduce["ram_gib"], maps["durations_s"]) == (2.0, [10.0, 10.0, 10.0])
    assert reduce["after"] == ["mr.1"] and "after" not in maps
    assert reduce["after_start"] == maps["after_start"] == ["mr.am"]
    assert ops["mr.am"]["durations_s"] == [40.0]  # ideally, the job's critical path
    assert ops["mr.am"]["lasts_for_job"] is True  # in fact, until the job's other tasks are done
    plain = operations(sls.read(path), TraceConfig(format="sls", path="x", am=False))
    assert [o["name"] for o in plain] == ["mr", "mr.1"] and all("after_start" not in o for o in plain)


def test_copies_never_take_an_id_the_trace_gives(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    task = [{"duration.ms": 5}]
    path.write_text("".join(json.dumps(j) for j in (
        {"job.start.ms": 0, "job.count": 2, "job.tasks": task},
        {"job.start.ms": 0, "job.id": "job_0", "job.tasks": task},
        {"job.start.ms": 0, "job.id": "job_2", "job.tasks": task},
    )))
    ids = [j.job_id for j in sls.read(path).jobs]
    assert ids == ["job_1", "job_3", "job_0", "job_2"]


RUMEN_JOB: dict[str, Any] = {
    "jobID": "job_1", "submitTime": 1371222054499, "queue": "sls_queue_1", "outcome": "SUCCESS",
    "jobMapMB": 200, "jobReduceMB": 200,  # the JVM heap (-Xmx200m), as in 2jobs2min-rumen-jh.json
    "jobProperties": {"mapreduce.map.memory.mb": "1024", "mapreduce.map.java.opts": "-Xmx200m"},
    "mapTasks": [{"taskID": f"m{i}", "attempts": [
        {"hostName": f"/default-rack/a{i}", "startTime": 1371222061000 + i, "finishTime": 1371222078000}]}
        for i in range(2)],
    "reduceTasks": [{"taskID": "r0", "attempts": [
        {"hostName": "/default-rack/a2", "startTime": 1371222080000, "finishTime": 1371222150000}]}],
}


def test_rumen_containers_have_slss_default_size_and_reduces_wait(tmp_path: Path) -> None:
    killed = {"jobID": "job_2", "submitTime": 1371222060000, "outcome": "KILLED", "mapTasks": [
        {"taskID": "m", "attempts": []}]}
    unfinished = {"jobID": "job_3", "submitTime": 1371222060000, "mapTasks": [{"taskID": "m", "attempts": [
        {"hostName": "/default-rack/a9", "startTime": 1371222061000, "finishTime": -1}]}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(RUMEN_JOB) + json.dumps(killed) + json.dumps(unfinished))
    t = rumen.read(path)
    (job,) = t.jobs
    assert [(g.kind, g.cpu, g.ram_gib, len(g.durations_s)) for g in job.groups] == [
        ("map", 1.0, 1.0, 2), ("reduce", 1.0, 1.0, 1)]
    assert job.groups[1].after == [0] and job.am == (1.0, 1.0)
    assert t.nodes == [NodeGroup(4, 10.0, 10.0)]  # every task's last host, a skipped job's too (SLS)
    assert any("job job_2 (KILLED): task mapTasks[0] (m) has no attempt: skipped, as SLS refuses the job"
               in w for w in t.warnings), t.warnings
    assert any("job job_3 has no finished task attempt: skipped" in w for w in t.warnings), t.warnings


def test_slss_rumen_sample_replays_at_slss_utilisation() -> None:
    """SLS's own 2jobs2min-rumen-jh.json (two TeraGen jobs of 96 maps; the fields SLS reads, kept
    unchanged): its memory utilisation on its 4 hosts of 10 GiB over the 240 s run is the
    trace's own container-seconds at 1024 MB, plus what each container waits for the heartbeat
    that reports it (SLS's NodeManagers beat every second), plus the AMs."""
    raw = records(HADOOP / "2jobs2min-rumen-jh.json")
    t = rumen.read(HADOOP / "2jobs2min-rumen-jh.json")
    assert [j.tasks for j in t.jobs] == [len(r["mapTasks"]) for r in raw] == [96, 96]
    assert t.nodes == [NodeGroup(4, 10.0, 10.0)]
    spans = [(a["finishTime"] - a["startTime"]) / 1000 for r in raw for task in r["mapTasks"]
             for a in task["attempts"][-1:]]
    assert sorted(d for j in t.jobs for g in j.groups for d in g.durations_s) == sorted(spans)
    results = {}
    for am in (False, True):
        cfg = TraceConfig(format="rumen", path="x", am=am)
        data, _ = import_scenario(cfg, HADOOP / "2jobs2min-rumen-jh.json")
        data["heartbeat"] = {"interval_s": 1.0}  # yarn.sls.nm.heartbeat.interval.ms = 1000
        out = run_blocking(scenario_from_dict(data, "<2jobs2min>"))
        results[am] = build_summary(out)
    assert results[False]["jobs"]["finished"] == results[True]["jobs"]["finished"] == 2
    capacity = 4 * 10.0 * 240  # GiB x s
    held = (sum(spans) + len(spans) * 0.5) / capacity  # each container: half a heartbeat on average
    assert results[False]["ram_utilization"] == pytest.approx(0.425, abs=0.002)
    assert results[False]["ram_utilization"] == pytest.approx(held, abs=0.002)
    # With SLS's AM per job (1 GiB, held while its job runs: about 70 s each).
    assert results[True]["ram_utilization"] - results[False]["ram_utilization"] == pytest.approx(
        2 * 70 / capacity, abs=0.005)


def _check_synth_job(job: Any, raw_class: dict[str, Any]) -> None:
    kinds = [g.kind for g in job.groups]
    if raw_class.get("type", "mapreduce") == "mapreduce":
        maps = [i for i, k in enumerate(kinds) if k == "map"]
        assert all(g.after == maps for g in job.groups if g.kind == "reduce")
    else:
        assert all(g.after == [] for g in job.groups)


@pytest.mark.parametrize("name", ["syn.json", "syn_generic.json", "syn_stream.json"])
def test_synth_samples_in_every_form(name: str) -> None:
    (raw,) = records(HADOOP / name)
    (workload,) = raw["workloads"]
    (cls,) = workload["job_classes"]
    t = synth.read(HADOOP / name)
    assert len(t.jobs) == raw["num_jobs"] and t.nodes == [NodeGroup(raw["num_nodes"], 10.0, 10.0)]
    first, last = (b["time"] for b in workload["time_distribution"])
    sizes = {"map": (1.0, 1.0), "reduce": (2.0, 2.0), "stream": (4.0, 4.0)}
    for job in t.jobs:
        assert first <= job.submit_s < last  # absolute, within SYNTH's window
        assert job.pool == workload["queue_name"] and job.am == (1.0, 1.0)
        assert all((g.cpu, g.ram_gib) == sizes[g.kind] for g in job.groups)
        _check_synth_job(job, cls)
    if name == "syn_stream.json":
        assert all(g.durations_s == [60000.0, 60000.0] for j in t.jobs for g in j.groups)
    else:
        assert all({g.kind for g in j.groups} <= {"map", "reduce"} for j in t.jobs)
        assert any(len(j.groups) == 2 for j in t.jobs)
    assert t.warnings == []


def test_synth_sample_forms_and_their_errors(tmp_path: Path) -> None:
    doc = records(HADOOP / "syn_generic.json")[0]
    tasks = doc["workloads"][0]["job_classes"][0]["tasks"]
    tasks[0]["max_memory"] = {"discrete": [512, 3072], "weights": [0, 1]}
    tasks[1]["time"] = {"val": 20, "std": 4, "dist": "NORM"}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    t = synth.read(path)
    assert {g.ram_gib for j in t.jobs for g in j.groups if g.kind == "map"} == {3.0}
    tasks[1]["time"]["dist"] = "GAMMA"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=r"`workloads\[0\]\.job_classes\[0\]\.tasks\[1\]\.time\.dist`: "
                                         r"expected `LOGNORM` or `NORM`, got \"GAMMA\""):
        synth.read(path)


def _events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def test_replay_keeps_maps_before_reduces_and_writes_slss_job_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["import", "synth", str(HADOOP / "syn.json"), "-o", str(tmp_path / "s.toml"),
                 "--run", str(run)]) == 0
    sc = load_scenario(tmp_path / "s.toml")
    ops = {o.name: o for o in sc.workload.operations}
    ev = _events(run)
    submitted = {e["operation"]: e["t"] for e in ev if e["event"] == "operation.submitted"}
    started = {e["operation"]: e["t"] for e in ev if e["event"] == "operation.started"}
    finished = {e["operation"]: e["t"] for e in ev if e["event"] == "operation.finished"}
    assert set(submitted) == set(ops)
    critical: dict[str, float] = {}
    for name, op in ops.items():
        for dep in op.after:  # reduces: requested once every map completed
            assert submitted[name] >= finished[dep] and ops[dep].job == op.job
        for dep in op.after_start:  # every task group: once its job's AM container runs
            assert submitted[name] >= started[dep]
        if op.after:
            assert op.durations_s is not None
            longest = {d: max(ops[d].durations_s or [0.0]) for d in op.after}
            critical[op.job] = max(longest.values()) + max(op.durations_s)
    assert len(critical) >= 5  # most jobs have reduces
    with (run / "jobs.csv").open() as f:
        rows = {r["job_id"]: r for r in csv.DictReader(f)}
    for job in rows:  # its tasks, its AM container apart
        assert int(rows[job]["tasks"]) == sum(o.task_count for o in ops.values()
                                              if o.job == job and not o.lasts_for_job)
        assert int(rows[job]["am_containers"]) == 1
    summary = json.loads((run / "summary.json").read_text())
    assert summary["jobs"]["tasks_never_started"] == 0
    for job, path_s in critical.items():
        r = rows[job]
        assert float(r["ideal_s"]) == pytest.approx(path_s, abs=1e-5)  # slowdown against it
        assert float(r["jct_s"]) >= path_s - 1e-6 and float(r["slowdown"]) >= 1 - 1e-9
    with (run / "jobruntime.csv").open() as f:
        sls_rows = list(csv.reader(f))
    assert sls_rows[0] == ["JobID", "real_start_time", "real_end_time", "simulate_start_time",
                           "simulate_end_time"]
    for job_id, real_start, real_end, sim_start, sim_end in sls_rows[1:]:
        r = rows[job_id]
        assert int(sim_start) == round(float(r["submit_s"]) * 1000) and int(sim_start) >= 1000
        assert int(sim_end) == round(float(r["finish_s"]) * 1000)
        assert (real_start, real_end) == (sim_start, sim_end)
    assert len(sls_rows) - 1 == sum(1 for r in rows.values() if r["finish_s"])


def test_an_sls_trace_without_a_nodes_file_imports_with_its_hosts(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.toml"
    assert main(["import", "sls", str(HADOOP / "inputsls.json"), "-o", str(out)]) == 0
    assert "3 nodes" in capsys.readouterr().out
    assert main(["import", "sls", str(HADOOP / "inputsls.json"), "--nodes", str(HADOOP / "nodes.json"),
                 "-o", str(out)]) == 0
    assert "20 nodes" in capsys.readouterr().out
    # SYNTH's submits stay in its [1, 60) s window; --rebase moves the first to 0; --no-am: no AMs.
    assert main(["import", "synth", str(HADOOP / "syn.json"), "-o", str(out)]) == 0
    ops = load_scenario(out).workload.operations
    assert min(o.submit_at_s for o in ops) >= 1 and sum(o.lasts_for_job for o in ops) == 10
    assert main(["import", "synth", str(HADOOP / "syn.json"), "-o", str(out), "--rebase", "--no-am"]) == 0
    ops = load_scenario(out).workload.operations
    assert min(o.submit_at_s for o in ops) == 0 and not any(o.lasts_for_job or o.after_start for o in ops)


@pytest.mark.parametrize(("ops", "expected"), [
    ('name = "a"\nafter = ["nope"]', "`after` names `nope`; expected another operation"),
    ('name = "a"\nafter = ["b"]\n[[workload.operations]]\nname = "b"\ncpu = 1\nram_gib = 1\ntasks = 1\n'
     'seconds_mean = 1\nafter_start = ["a"]', "cycle: a -> b -> a"),
    ('name = "a"\nafter = ["b"]\n[[workload.operations]]\nname = "b"\ncpu = 1\nram_gib = 1\ntasks = 1\n'
     'seconds_mean = 1\nrepeat = 2',
     "operation `b`: operation `a` waits for it, so it must be submitted once"),
])
def test_bad_order_is_one_clear_error(tmp_path: Path, ops: str, expected: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[cluster]\nnodes = [{ count = 1, cpu = 4, ram_gib = 8 }]\n[run]\nduration_s = 60\n'
                    f'[[workload.operations]]\ncpu = 1\nram_gib = 1\ntasks = 1\nseconds_mean = 1\n{ops}\n')
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert expected in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_custom_am_types_map_onto_slss_simulators_or_the_job_is_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json"
    tasks = [{"container.type": "reduce", "duration.ms": 5000}, {"container.type": "map", "duration.ms": 1000,
                                                                 "container.request.delay": 2000}]
    path.write_text("".join(json.dumps(j) for j in (
        {"job.start.ms": 0, "job.id": "spark_1", "am.type": "spark", "job.tasks": tasks},
        {"job.start.ms": 0, "job.id": "mr_1", "job.tasks": tasks, "am.memory-mb": 2048, "am.vcores": 2},
    )))
    # As SLS without a simulator class for `spark`: that job is skipped, with one warning naming it.
    t = sls.read(path)
    assert [j.job_id for j in t.jobs] == ["mr_1"]
    assert t.jobs[0].am == (2.0, 2.0)  # its own AM size (SLS's `am.` + resource name)
    (w,) = t.warnings
    assert "record 1 (line 1): job spark_1: `am.type` \"spark\"" in w and "dag, mapreduce, stream" in w, w
    assert "--am-type" in w
    # Mapped onto SLS's DAG simulator: each container after its request delay, no map -> reduce order.
    (dag,) = [j for j in sls.read(path, am_types={"spark": "dag"}).jobs if j.job_id == "spark_1"]
    assert sorted((g.kind, g.delay_s, g.after) for g in dag.groups) == [("map", 2.0, []), ("reduce", 0.0, [])]
    (mr,) = [j for j in sls.read(path, am_types={"spark": "mapreduce"}).jobs if j.job_id == "spark_1"]
    assert [(g.kind, g.delay_s, g.after) for g in mr.groups] == [("reduce", 0.0, [1]), ("map", 0.0, [])]
    # The command line: --am-type, and a bad mapping or a trace of nothing but unknown types is one error.
    out = tmp_path / "s.toml"
    assert main(["import", "sls", str(path), "-o", str(out), "--node-count", "2",
                 "--am-type", "spark=dag"]) == 0
    assert {o.job for o in load_scenario(out).workload.operations} == {"spark_1", "mr_1"}
    with pytest.raises(SystemExit):
        main(["import", "sls", str(path), "-o", str(out), "--am-type", "spark"])
    assert "expected TYPE=mapreduce, TYPE=dag or TYPE=stream" in capsys.readouterr().err
    only = tmp_path / "only.json"
    only.write_text(json.dumps({"job.start.ms": 0, "am.type": "tez", "job.tasks": tasks}))
    assert main(["import", "sls", str(only), "-o", str(out), "--node-count", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {only}: no jobs left: the AM type of all 1 has no behaviour")
    assert "\n" not in err
