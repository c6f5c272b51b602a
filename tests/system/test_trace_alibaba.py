"""Alibaba cluster-trace-v2018 import (batch_task, with batch_instance): jobs, task sizes and
durations checked against the generating rows, gzip, the window, bad and huge input."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.scenario.loader import load_scenario
from emulator.scenario.schema import TraceConfig
from emulator.scenario.traces import alibaba
from emulator.scenario.traces.convert import operations
from emulator.scenario.traces.model import NodeGroup, Trace, TraceError
from tests.process.test_trace_bounds import emulator, one_error_line

RAM = 128.0  # machine_ram_gib: plan_mem 100 is a whole machine
# task_name, instance_num, job_name, task_type, status, start_time, end_time, plan_cpu, plan_mem
TASKS: list[tuple[object, ...]] = [
    ("M1", 2, "j_1", 1, "Terminated", 100, 160, 50, 0.5),
    ("R2_1", 1, "j_1", 1, "Terminated", 170, 200, 100, 1.0),
    ("M1", 3, "j_2", 1, "Failed", 150, 175, 200, 2.0),
    ("M1", 1, "j_3", 1, "Waiting", 0, 0, 100, 1),  # never ran
    ("M2", 4, "j_2", 1, "Terminated", 140, 150, "", ""),  # no plan
]
# instance_name, task_name, job_name, task_type, status, start, end, machine_id, seq_no, total_seq_no,
# cpu_avg, cpu_max, mem_avg, mem_max
INSTANCES: list[tuple[object, ...]] = [
    ("i1", "M1", "j_1", 1, "Terminated", 100, 150, "m_1", 1, 1, 40, 50, 0.3, 0.4),
    ("i2", "M1", "j_1", 1, "Terminated", 105, 160, "m_2", 1, 1, 40, 50, 0.3, 0.4),
    ("i3", "M1", "j_2", 1, "Failed", 150, 175, "m_3", 1, 1, 40, 50, 0.3, 0.4),
    ("i4", "M1", "j_2", 1, "Waiting", 0, 0, "", 1, 1, "", "", "", ""),
    ("i5", "M9", "j_9", 1, "Terminated", 10, 20, "m_4", 1, 1, 40, 50, 0.3, 0.4),
]


def write(path: Path, rows: list[tuple[object, ...]], extra: str = "") -> Path:
    text = "".join(",".join(str(v) for v in r) + "\n" for r in rows) + extra
    path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
    return path


def num(v: object) -> float:
    return float(str(v)) if v != "" else 0.0


def expected(instances: bool) -> dict[str, tuple[float, list[tuple[float, float, float]]]]:
    """job -> (submit, sorted (cpu, GiB, duration) of each task), read from the rows independently."""
    out: dict[str, tuple[float, list[tuple[float, float, float]]]] = {}
    for name, n, job, _, _, start, end, cpu, mem in TASKS:
        s, e = num(start), num(end)
        if not 0 < s < e:
            continue
        size = (max(num(cpu) / 100, 0.01), round(max(num(mem) / 100, 0.001) * RAM, 6))
        runs = [num(ie) - num(i_s) for _, t, jn, _, _, i_s, ie, *_ in INSTANCES
                if instances and (jn, t) == (job, name) and 0 < num(i_s) < num(ie)]
        runs = runs or [e - s] * int(num(n))
        submit, tasks = out.get(str(job), (s, []))
        out[str(job)] = (min(submit, s), sorted(tasks + [(*size, d) for d in runs]))
    return out


def seen(t: Trace) -> dict[str, tuple[float, list[tuple[float, float, float]]]]:
    return {j.job_id: (j.submit_s, sorted((g.cpu, g.ram_gib, d) for g in j.groups for d in g.durations_s))
            for j in t.jobs}


def cfg(**kw: object) -> TraceConfig:
    return TraceConfig(format="alibaba2018", path="x", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["batch_task.csv", "batch_task.csv.gz"])
def test_tasks_only(tmp_path: Path, name: str) -> None:
    t = alibaba.read(write(tmp_path / name, TASKS), cfg())
    assert seen(t) == expected(instances=False)
    assert [j.job_id for j in t.jobs] == ["j_1", "j_2"] and {j.pool for j in t.jobs} == {"batch"}
    assert t.nodes == []  # batch_task does not say
    assert any("1 task(s) that never ran" in w for w in t.warnings)
    assert any("1 task(s) without plan_cpu or plan_mem" in w for w in t.warnings)


def test_with_instances(tmp_path: Path) -> None:
    t = alibaba.read(write(tmp_path / "batch_task.csv", TASKS), cfg(),
                     write(tmp_path / "batch_instance.csv.gz", INSTANCES))
    assert seen(t) == expected(instances=True)
    assert t.nodes == [NodeGroup(4, 32.0, RAM)]  # four machines named


def test_window(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", TASKS)
    assert [j.job_id for j in alibaba.read(path, cfg(max_jobs=1)).jobs] == ["j_1"]
    assert [j.job_id for j in alibaba.read(path, cfg(start_s=10)).jobs] == ["j_2"]
    assert [j.job_id for j in alibaba.read(path, cfg(span_s=10)).jobs] == ["j_1"]


@pytest.mark.parametrize("text, expected", [
    ("M1,2,j_1,1,Terminated,100,160,50\n", "line 1: expected 9 comma-separated columns"),
    ("M1,two,j_1,1,Terminated,100,160,50,1\n",
     "line 1: column 2 `instance_num`: expected a number, got 'two'"),
    ("M1,2,j_1,1,Terminated,100,160,50,101\n", "column 9 `plan_mem`: expected a number in [0, 100]"),
    ("M1,2,j_1,1,Terminated,100,-160,50,1\n", "column 7 `end_time`: expected a number in 0..1e+12"),
    ("M1,2,,1,Terminated,100,160,50,1\n", "column 3 `job_name`: expected a name"),
    ("M1,0,j_1,1,Waiting,0,0,50,1\n", "no task that ran in the window"),
    ('M1,"2,j_1\n', "line 1: expected"),
])
def test_bad_rows_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "batch_task.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        alibaba.read(path, cfg())
    assert str(err.value).startswith(str(path)) and expected in str(err.value), str(err.value)


def test_cli_refuses_a_huge_instance_count(tmp_path: Path) -> None:
    write(tmp_path / "t.csv", [("M1", 10**9, "j_1", 1, "Terminated", 1, 2, 100, 1)])
    err = one_error_line(emulator("import", "alibaba2018", "t.csv", "-o", "s.toml", "--node-count", "2",
                                  cwd=tmp_path))
    assert "t.csv: line 1: `instance_num`: expected at most 2,000,000 tasks" in err, err
    write(tmp_path / "i.csv", [("i1", "M1", "j_1", 1, "T", 1, "soon", "m", 1, 1, 1, 1, 1, 1)])
    write(tmp_path / "t.csv", TASKS[:1])
    err = one_error_line(emulator("import", "alibaba2018", "t.csv", "--instances", "i.csv", "-o", "s.toml",
                                  cwd=tmp_path))
    assert "i.csv: line 1: column 7 `end_time`: expected a number, got 'soon'" in err, err


def test_imported_alibaba_replays(tmp_path: Path) -> None:
    out, run = tmp_path / "s.toml", tmp_path / "run"
    tasks, inst = write(tmp_path / "batch_task.csv", TASKS), write(tmp_path / "batch_instance.csv", INSTANCES)
    assert main(["import", "alibaba2018", str(tasks), "--instances", str(inst), "-o", str(out),
                 "--run", str(run)]) == 0
    with (run / "jobs.csv").open() as f:
        rows = {r["job_id"]: r for r in csv.DictReader(f)}
    want = expected(instances=True)
    assert set(rows) == set(want)
    first = min(s for s, _ in want.values())
    for job, (submit, tasks_) in want.items():
        assert float(rows[job]["submit_s"]) == submit - first and int(rows[job]["tasks"]) == len(tasks_)
    assert json.loads((run / "summary.json").read_text())["jobs"]["finished"] == len(want)
    # j_1's R2_1 waits for M1: requested once M1's every instance completed; its ideal time is the
    # path M1 (longest instance 55 s) then R2_1 (30 s).
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    submitted = {e["operation"]: e["t"] for e in events if e["event"] == "operation.submitted"}
    finished = {e["operation"]: e["t"] for e in events if e["event"] == "operation.finished"}
    ordered = [o for o in load_scenario(out).workload.operations if o.after]
    assert [(o.job, len(o.after)) for o in ordered] == [("j_1", 1)]
    assert submitted[ordered[0].name] >= finished[ordered[0].after[0]] > 0
    assert float(rows["j_1"]["ideal_s"]) == 55 + 30 and float(rows["j_1"]["jct_s"]) >= 85


def test_the_task_dag_in_task_names(tmp_path: Path) -> None:
    rows: list[tuple[object, ...]] = [
        ("M1", 2, "d", 1, "Terminated", 10, 70, 100, 1), ("M2", 1, "d", 1, "Terminated", 10, 40, 100, 1),
        ("R3_1_2", 1, "d", 1, "Terminated", 70, 100, 100, 1),
        ("J4_3", 1, "d", 1, "Terminated", 100, 110, 100, 1),
        ("task_LTg0MTUwNTA5", 1, "d", 1, "Terminated", 10, 20, 100, 1),  # independent
        ("R5_9", 1, "d", 1, "Terminated", 10, 20, 100, 1),  # task 9 never ran: dropped
        ("M9", 1, "d", 1, "Waiting", 0, 0, 100, 1),
        ("M1_2", 1, "c", 1, "Terminated", 10, 20, 100, 1), ("M2_1", 1, "c", 1, "Terminated", 10, 20, 100, 1),
    ]
    t = alibaba.read(write(tmp_path / "batch_task.csv", rows), cfg())
    d = next(j for j in t.jobs if j.job_id == "d")
    kinds = [g.kind for g in d.groups]
    after = {g.kind: sorted(kinds[i] for i in g.after) for g in d.groups}
    assert after == {"M1": [], "M2": [], "R3_1_2": ["M1", "M2"], "J4_3": ["R3_1_2"], "task_LTg0MTUwNTA5": [],
                     "R5_9": []}
    c = next(j for j in t.jobs if j.job_id == "c")
    assert [g.after for g in c.groups] == [[], []]  # a cycle: independent, with a warning
    assert any("1 dependency(ies) on tasks that did not run" in w for w in t.warnings), t.warnings
    assert any("1 job(s) whose task names make a dependency cycle" in w for w in t.warnings), t.warnings
    ops = {o["name"]: o for o in operations(t, cfg()) if o["job"] == "d"}
    by_kind = {d.groups[k].kind: name for k, name in enumerate(ops)}
    assert ops[by_kind["J4_3"]]["after"] == [by_kind["R3_1_2"]]
    assert sorted(ops[by_kind["R3_1_2"]]["after"]) == sorted([by_kind["M1"], by_kind["M2"]])


def test_a_scenario_reads_the_instances_beside_it(tmp_path: Path) -> None:
    (tmp_path / "trace").mkdir()
    write(tmp_path / "trace" / "batch_task.csv.gz", TASKS)
    write(tmp_path / "trace" / "batch_instance.csv", INSTANCES)
    sc_file = tmp_path / "s.toml"
    sc_file.write_text('[cluster]\nnodes = [{ count = 4, cpu = 32, ram_gib = 128 }]\n'
                       '[run]\nduration_s = 600\n'
                       '[workload.trace]\nformat = "alibaba2018"\npath = "trace/batch_task.csv.gz"\n'
                       'instances = "trace/batch_instance.csv"\n')
    ops = load_scenario(sc_file).workload.operations
    durations = sorted(d for o in ops for d in (o.durations_s or []))
    assert durations == sorted(d for _, tasks in expected(instances=True).values() for *_, d in tasks)
