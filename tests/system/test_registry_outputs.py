"""The terminal table and report.html follow the scenario through the metrics registry: failure
detection with a crash fault, job results with jobs, nothing of either otherwise."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from emulator.harness.runner import run_blocking
from emulator.results import registry
from emulator.results.console import summary_table
from emulator.results.report import write_run_report
from emulator.results.summary import write_results
from tests.helpers import scenario

DETECTION = ("detection latency p50", "detection latency p99", "false removals", "nodes crashed")
JOBS = ("job completion time p50", "job completion time p99", "JCT p99", "jobs by pool")


def _run(tmp_path: Path, **sections: Any) -> tuple[str, str]:
    """(terminal table, report.html) of a small virtual-time run."""
    sc = scenario(rm={"expiry_s": 4.0, "monitor_interval_s": 1.0}, run={"duration_s": 60}, **sections)
    summary = write_results(run_blocking(sc), tmp_path)
    buf = io.StringIO()
    Console(file=buf, width=200).print(summary_table(summary, 0.0))
    return buf.getvalue(), write_run_report(tmp_path).read_text(encoding="utf-8")


def test_a_crash_fault_shows_detection_latency_and_false_removals(tmp_path: Path) -> None:
    table, page = _run(tmp_path, faults=[{"kind": "crash", "at_s": 20, "count": 1}])
    for label in DETECTION:
        assert label in table, label
        assert label in page, label
    assert "Jobs</h2>" not in page


def test_without_faults_or_jobs_neither_shows(tmp_path: Path) -> None:
    table, page = _run(tmp_path)
    for label in (*DETECTION, *JOBS):
        assert label not in table, label
        assert label not in page, label
    assert "heartbeats sent" in table and "h1 (min m_i/n_i)" in page


def test_jobs_show_completion_times_per_pool(tmp_path: Path) -> None:
    table, page = _run(tmp_path, workload={"operations": [
        {"name": "long", "pool": "x", "cpu": 1, "ram_gib": 1, "durations_s": [20.0], "submit_at_s": 0},
        {"name": "short", "pool": "y", "cpu": 1, "ram_gib": 1, "durations_s": [10.0], "submit_at_s": 1},
    ]})
    for label in JOBS:
        assert label in table, label
    assert "Jobs</h2>" in page and "<td>x</td>" in page and "<td>y</td>" in page
    for label in JOBS[:3]:
        assert label in page, label


def test_every_whole_run_metric_names_a_context_the_summary_can_show() -> None:
    everything = {"crashed_nodes": 1, "failure_detector": "kring", "jobs": {"count": 1}, "usage": {},
                  "tiers": {}, "rm_restarts": [], "tasks_lost": 0}
    assert {m.applies for m in registry.REGISTRY} <= registry.contexts(everything)


def test_compare_names_registry_figures_as_the_registry_does() -> None:
    from emulator.results.metrics import METRICS

    shared = [m for m in METRICS if m.key in registry.BY_NAME]
    assert len(shared) >= 25
    for m in shared:
        assert (m.label, m.unit) == (registry.BY_NAME[m.key].label, registry.BY_NAME[m.key].unit), m.key


def test_usage_figures_show_only_for_runs_with_usage_models(tmp_path: Path) -> None:
    sc = scenario(run={"duration_s": 30})
    summary = write_results(run_blocking(sc), tmp_path)
    usage = {"cpu_slack": 0.25, "ram_slack": 0.5, "ooms": 3, "ooms_per_task_day": 1.5,
             "machine_overflow_fraction": 0.0}
    with_usage = {**summary, "usage": usage}

    def table(s: dict[str, Any]) -> str:
        buf = io.StringIO()
        Console(file=buf, width=200).print(summary_table(s, 0.0))
        return buf.getvalue()

    shown, plain = table(with_usage), table(summary)
    for label, value in (("CPU slack", "25.00%"), ("RAM slack", "50.00%"), ("OOM kills", "3")):
        assert label in shown and value in shown, label
        assert label not in plain, label
