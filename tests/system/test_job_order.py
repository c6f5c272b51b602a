"""Order within a job as a general workload feature: an operation waits for others to complete
(`after`) or to run (`after_start`); the RM is never given it before; the job's ideal time is its
critical path; a job with an operation still held back is not finished."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from emulator.cli.main import main

SCENARIO = """
[cluster]
nodes = [{ count = 1, cpu = 4, ram_gib = 8 }]
[run]
duration_s = %(duration)s
[[workload.operations]]
name = "am"
job = "j"
cpu = 1
ram_gib = 1
durations_s = [%(am_s)s]
lasts_for_job = %(lasts)s
[[workload.operations]]
name = "maps"
job = "j"
cpu = 1
ram_gib = 1
durations_s = [5, 4, 3]
after_start = ["am"]
[[workload.operations]]
name = "reduce"
job = "j"
cpu = 2
ram_gib = 2
durations_s = [7]
after = ["maps"]
after_start = ["am"]
submit_at_s = %(reduce_at)s
"""


Times = dict[str, dict[str, float]]


def _run(tmp_path: Path, duration: int, reduce_at: float, am_s: float = 14,
         lasts: str = "false") -> tuple[Times, dict[str, str]]:
    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO % {"duration": duration, "reduce_at": reduce_at, "am_s": am_s, "lasts": lasts})
    run = tmp_path / "run"
    assert main(["run", str(sc), "--out", str(run), "--quiet"]) == 0
    times: dict[str, dict[str, float]] = {}
    for line in (run / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["event"] in ("operation.submitted", "operation.started", "operation.finished"):
            times.setdefault(e["event"].split(".")[1], {})[e["operation"]] = e["t"]
    with (run / "jobs.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    return times, row


def test_an_operation_is_submitted_only_once_what_it_waits_for_allows(tmp_path: Path) -> None:
    t, row = _run(tmp_path, 60, 0)
    # Three 1-cpu maps and a 2-cpu reduce would fit the 4-cpu node with the AM at once: only the
    # order keeps the reduce back until every map completed, and the maps until the AM runs.
    assert t["submitted"]["maps"] >= t["started"]["am"]
    assert t["submitted"]["reduce"] >= t["finished"]["maps"] >= t["started"]["maps"] + 5
    assert t["started"]["reduce"] >= t["finished"]["maps"]
    # Ideal: the AM's start, the longest map (5 s), then the reduce (7 s); the AM's 14 s is longer.
    assert float(row["ideal_s"]) == 14.0
    assert float(row["jct_s"]) >= 12.0 and row["finish_s"]


def test_a_job_whose_operation_is_still_held_back_is_not_finished(tmp_path: Path) -> None:
    # The reduce may not be submitted before 500 s: the run ends first, with the maps done.
    t, row = _run(tmp_path, 60, 500)
    assert "reduce" not in t["submitted"] and "maps" in t["finished"] and "am" in t["finished"]
    assert row["finish_s"] == "" and row["jct_s"] == ""


def test_an_am_holds_its_container_until_the_rest_of_its_job_completed(tmp_path: Path) -> None:
    # Its ideal time is 1 s, but it lasts for the job: it ends when the reduce does, not before.
    t, row = _run(tmp_path, 60, 0, am_s=1, lasts="true")
    assert t["finished"]["am"] >= t["finished"]["reduce"] >= t["started"]["am"] + 12
    assert t["finished"]["am"] - t["finished"]["reduce"] < 1.0  # ended at once, not after 10^6 s
    assert float(row["ideal_s"]) == 12.0  # the AM's start, the longest map, the reduce
    assert float(row["finish_s"]) == t["finished"]["am"]
