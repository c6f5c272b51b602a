"""Google 2019 (clusterdata v3) import from BigQuery exports, JSON lines and CSV: each run's length
and size (its SCHEDULE event's request), submit times (collection events), tiers, the cluster;
the window, gzip, bad input named."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from emulator.cli.main import main
from emulator.scenario.schema import TraceConfig
from emulator.scenario.traces import google2019
from emulator.scenario.traces.model import NodeGroup, Trace, TraceError
from tests.process.test_trace_bounds import emulator, one_error_line

S = 1_000_000  # µs
AFTER_END = 2**63 - 1


def ev(t: float, kind: str, cid: int, index: int, cpus: float | None = None, mem: float | None = None,
       priority: int | None = None, machine: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"time": str(int(t * S)) if t >= 0 else str(AFTER_END), "type": kind,
                           "collection_id": str(cid), "instance_index": index}
    if cpus is not None:
        out["resource_request"] = {"cpus": cpus, "memory": mem}
    if priority is not None:
        out["priority"] = priority
    if machine is not None:
        out["machine_id"] = str(machine)
    return out


EVENTS = [
    ev(0, "SUBMIT", 1, 0, 0.1, 0.05, 200), ev(0, "SUBMIT", 1, 1, 0.1, 0.05, 200),
    ev(5, "SCHEDULE", 1, 0, 0.1, 0.05, 200, machine=101),
    ev(6, "SCHEDULE", 1, 1, 0.1, 0.05, 200, machine=102),
    ev(20, "UPDATE_RUNNING", 1, 1, 0.2, 0.1, 200, machine=102),  # does not resize the run going on
    ev(30, "EVICT", 1, 1, machine=102), ev(35, "SCHEDULE", 1, 1, 0.2, 0.1, 200, machine=103),
    ev(40, "SUBMIT", 2, 0, 0.05, 0.02, 25), ev(41, "SCHEDULE", 2, 0, 0.05, 0.02, 25, machine=101),
    ev(65, "FINISH", 1, 0, machine=101), ev(95, "FINISH", 1, 1, machine=103),
    ev(120, "SUBMIT", 3, 0, 0.1, 0.1, 110),  # never scheduled
    ev(-1, "FINISH", 2, 0),  # after the trace's end: ignored (instance 0 of job 2 runs to 120 s)
]
# job -> (pool, submit, sorted (cpu, GiB, duration)): 32 cpu, 128 GiB machines.
EXPECTED = {
    "1": ("production", 0.0, sorted([(3.2, 6.4, 60.0), (3.2, 6.4, 24.0), (6.4, 12.8, 60.0)])),
    "2": ("free", 40.0, [(1.6, 2.56, 79.0)]),
}
COLLECTIONS = [
    {"time": "0", "type": 0, "collection_id": "1", "priority": 200, "collection_type": 0},
    {"time": "1000000", "type": 0, "collection_id": "4", "priority": 200, "collection_type": 1},
    {"time": "38000000", "type": 0, "collection_id": "2", "priority": 25, "collection_type": 0},
]


def json_lines(path: Path, events: list[dict[str, Any]]) -> Path:
    text = "".join(json.dumps(e) + "\n" for e in events)
    path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
    return path


def csv_export(path: Path, events: list[dict[str, Any]]) -> Path:
    cols = ["time", "type", "collection_id", "scheduling_class", "instance_index", "machine_id", "priority",
            "resource_request.cpus", "resource_request.memory"]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for e in events:
            req = e.get("resource_request", {})
            w.writerow([e["time"], e["type"], e["collection_id"], 2, e["instance_index"],
                        e.get("machine_id", ""), e.get("priority", ""), req.get("cpus", ""),
                        req.get("memory", "")])
    return path


def seen(t: Trace) -> dict[str, tuple[str, float, list[tuple[float, float, float]]]]:
    return {j.job_id: (j.pool, j.submit_s,
                       sorted((g.cpu, g.ram_gib, d) for g in j.groups for d in g.durations_s))
            for j in t.jobs}


def cfg(**kw: object) -> TraceConfig:
    return TraceConfig(format="google2019", path="x", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["instance_events.json", "instance_events.json.gz", "instance_events.csv"])
def test_runs_sizes_tiers_and_cluster(tmp_path: Path, name: str) -> None:
    write = csv_export if ".csv" in name else json_lines
    numbered = [{**e, "type": google2019.TYPES.index(e["type"])} for e in EVENTS]  # as exported: numbers
    t = google2019.read(write(tmp_path / name, numbered if "gz" in name else EVENTS), cfg())
    assert seen(t) == EXPECTED
    assert t.nodes == [NodeGroup(3, 32.0, 128.0)]


def test_collection_events_give_submit_times(tmp_path: Path) -> None:
    t = google2019.read(json_lines(tmp_path / "i.json", EVENTS), cfg(),
                        json_lines(tmp_path / "c.json", COLLECTIONS))
    assert {j: (p, s) for j, (p, s, _) in seen(t).items()} == {"1": ("production", 0.0), "2": ("free", 38.0)}
    assert any("1 alloc set(s)" in w for w in t.warnings)


def test_window(tmp_path: Path) -> None:
    path = json_lines(tmp_path / "i.json", EVENTS)
    assert list(seen(google2019.read(path, cfg(max_jobs=1)))) == ["1"]
    assert seen(google2019.read(path, cfg(start_s=30))) == {"2": EXPECTED["2"]}


@pytest.mark.parametrize("text, expected", [
    ('{"time": "0", "type": 0, "collection_id": "1", "instance_index": 0}\n[1]\n',
     "line 2: expected a JSON object"),
    ('{"time": "0", "type": 11, "collection_id": "1", "instance_index": 0}\n',
     "line 1: `type`: expected an event type 0..10 or its name, got '11'"),
    ('{"time": "0", "type": 3, "collection_id": "1", "instance_index": 0, "resource_request": {"cpus": 2}}\n',
     "line 1: `resource_request.cpus`: expected a number in [0, 1]"),
    ('{"time": "-3", "type": 3, "collection_id": "1", "instance_index": 0}\n',
     "line 1: `time`: expected microseconds"),
    ('{"time": "0", "type": 3, "collection_id": "1"}\n',
     "line 1: `instance_index`: expected an integer (the field"),
    ('{"time": "0", "type": 3, "collection_id": "1", "instance_index": 0\n',
     "line 1: expected a JSON object"),
    ("time,type,instance_index\n0,0,0\n", "line 1: expected a header row naming the columns"),
    ("time,type,collection_id,instance_index\n0,SUBMIT,1\n",
     "line 2: expected 4 columns as the header names"),
    ("", "no instance events"),
])
def test_bad_input_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "instance_events.json"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        google2019.read(path, cfg())
    assert str(err.value).startswith(str(path)) and expected in str(err.value), str(err.value)


def test_cli_error_is_one_line_and_the_import_replays(tmp_path: Path) -> None:
    bad = json_lines(tmp_path / "bad.json", [*EVENTS[:3], {**EVENTS[3], "instance_index": "first"}])
    err = one_error_line(emulator("import", "google2019", str(bad), "-o", "s.toml", cwd=tmp_path))
    assert "bad.json: line 4: `instance_index`: expected an integer, got 'first'" in err, err
    out, run = tmp_path / "s.toml", tmp_path / "run"
    assert main(["import", "google2019", str(json_lines(tmp_path / "i.json", EVENTS)), "-o", str(out),
                 "--run", str(run)]) == 0
    with (run / "jobs.csv").open() as f:
        rows = {r["job_id"]: r for r in csv.DictReader(f)}
    assert {j: (r["pool"], float(r["submit_s"]), int(r["tasks"])) for j, r in rows.items()} == {
        j: (p, s, len(tasks)) for j, (p, s, tasks) in EXPECTED.items()}
    assert json.loads((run / "summary.json").read_text())["jobs"]["finished"] == 2
