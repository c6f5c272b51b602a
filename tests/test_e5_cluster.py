"""E5 inside an emulated cluster (emulator e5 --cluster): the RM packs arriving tasks with
stochastic-bin-packing admission on the usage its nodes report; a smaller cluster than
scenarios/e5-cluster.toml, one seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.experiments.e5cluster import markdown_table, run_e5_cluster

SCENARIO = Path("scenarios/e5-cluster.toml")
# A quarter of the workload on 12 nodes; arrivals over ~20 min, measured from 40 min to 70 min.
SMALL = {
    "cluster.nodes.0.count": 12,
    "workload.operations.0.arrivals.count": 40, "workload.operations.0.arrivals.rate_per_s": 0.033,
    "workload.operations.1.arrivals.count": 30, "workload.operations.1.arrivals.rate_per_s": 0.025,
    "workload.operations.2.arrivals.count": 30, "workload.operations.2.arrivals.rate_per_s": 0.025,
    "scheduler.admission.min_samples": 10,
    "run.duration_s": 4200, "run.warmup_s": 2400,
}


def test_admission_in_the_cluster_trades_machines_for_overflow() -> None:
    data = run_e5_cluster(SCENARIO, (1,), {"request", "av 1", "gpa-g"}, SMALL)
    by = {(r["method"], r["slo"]): r for r in data["rows"]}
    req, av1 = by[("request", None)], by[("av 1", None)]
    strict, loose = by[("gpa-g", 0.99)], by[("gpa-g", 0.9)]
    assert data["tasks"] == 100 and all(r["pending"] == 0 for r in data["rows"])
    # Requests reserve the most machines and (usage below requests) almost never overflow; the
    # mean alone packs tightest and overflows most; a stricter SLO costs machines, saves overflow.
    assert req["machines_mean"] > strict["machines_mean"] >= loose["machines_mean"] >= av1["machines_mean"]
    assert req["overflow"] < 0.01 < loose["overflow"] < av1["overflow"]
    assert strict["overflow"] < loose["overflow"]
    assert data["ffd_machines"][0] <= req["machines_mean"] + 1
    table = markdown_table(data)
    assert "| gpa-g |" in table and "(0.01%)" in table and "100 tasks" in table


def test_table_of_a_committed_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path("docs/e5-cluster.json")
    assert main(["e5", "--cluster", "--table", str(path)]) == 0
    out = capsys.readouterr().out
    data = json.loads(path.read_text(encoding="utf-8"))
    assert len(data["rows"][0]["seeds"]) >= 3
    for method in ("request", "av 1.25", "perc", "gpa-g", "gpa-sqrt", "cantelli", "emp-perc"):
        assert f"| {method} |" in out
