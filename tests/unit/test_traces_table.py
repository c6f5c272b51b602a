"""The trace-replay table (docs/traces.md) from a study's output: per workload and policy, means
over the seeds; a study that does not keep what it needs is refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.study.renderers.traces import NotTraces, table


def _figure(p50: float, p90: float, p99: float) -> dict[str, float]:
    return {"p50": p50, "p90": p90, "p99": p99, "mean": p50}


def _point(workload: str, seed: int, policy: str, jct_p50: float) -> dict[str, Any]:
    jobs = {"count": 10, "finished": 9, "jct_s": _figure(jct_p50, 2 * jct_p50, 3 * jct_p50),
            "queue_delay_s": _figure(1, 2, 3), "slowdown": _figure(1.5, 2.5, 3.5),
            "task_wait_s": _figure(4, 5, 6), "per_pool": {}}
    return {"variant": f"{workload}-{seed}", "coords": {"scheduler.policy": policy},
            "metrics": {"jobs.count": 10, "jobs.finished": 9, "cpu_utilization": 0.5},
            "collected": {"jobs": jobs, "timing.scheduler_decision_us": {"p50": 2.0, "p99": 8.0}}}


def output() -> dict[str, Any]:
    points = [_point(w, s, pol, 100 * s) for w in ("synth", "google-slice") for s in (1, 2)
              for pol in ("drf", "fifo")]
    return {"file": "traces.toml", "points": points,
            "study": {"collect": ["jobs", "timing.scheduler_decision_us"],
                      "axes": {"scheduler.policy": ["drf", "fifo"]}}}


def test_a_row_per_workload_and_policy_means_over_the_seeds() -> None:
    rows = table(output()).splitlines()
    assert len(rows) == 2 + 4
    # Seeds 1 and 2: JCT p50 100 and 200 -> 150; p99 300 and 600 -> 450; 9 of 10 jobs each.
    assert rows[2] == ("| synth | drf | 18/20 | 150 | 300 | 450 | 2.0 | 1.50 | 2.50 | 5 | 50.0% "
                       "| 2.0 / 8.0 |")
    assert rows[4].startswith("| google-slice | drf | 18/20 |")


def test_a_study_without_the_jobs_section_is_refused_by_name() -> None:
    out = output()
    out["study"]["collect"] = ["jobs"]
    with pytest.raises(NotTraces, match=r"traces\.toml: the traces table needs the study to collect jobs, "
                       r"timing\.scheduler_decision_us and vary `scheduler\.policy`"):
        table(out)
