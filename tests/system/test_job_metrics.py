"""Job-level results: completion time, queueing delay, slowdown and task waits, on a two-job case
computed by hand, then through a real run to summary.json and jobs.csv."""

from __future__ import annotations

import csv
import json
import random
from bisect import bisect_left
from pathlib import Path

import pytest

from emulator.measure.decisions import BATCH, BUCKETS_US, DecisionTimer
from emulator.measure.jobs import JobRecorder, stats
from emulator.results.jobs import CSV_COLUMNS, jobs_summary
from emulator.results.summary import write_results
from rm import LogHistogram
from rm.views.observer import OperationEvent, TaskStarted
from tests.helpers import run_with_handle, scenario


class Now:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_two_jobs_by_hand() -> None:
    """A (pool a, 2 tasks of 10 s) and B (pool b, 1 task of 20 s) submitted at 0 on a cluster with
    room for two tasks: A's tasks run 0-10; B's waits until 10 and runs 10-30.
    A: jct 10, delay 0, slowdown 1. B: jct 30, delay 10, slowdown 1.5. Task waits 0, 0, 10."""
    now = Now()
    rec = JobRecorder(now)
    rec.expect("A", "A", 10.0)
    rec.expect("B", "B", 20.0)
    rec.operation_submitted(OperationEvent(1, "A", "A", "a", 2, 0.0))
    rec.operation_submitted(OperationEvent(2, "B", "B", "b", 1, 0.0))
    rec.task_started(TaskStarted(1, "A", 0, 1))
    rec.task_started(TaskStarted(1, "A", 1, 1))
    now.t = 10.0
    rec.operation_finished(OperationEvent(1, "A", "A", "a", 2, 0.0))
    rec.task_started(TaskStarted(2, "B", 0, 1))
    rec.task_started(TaskStarted(1, "A", 1, 2))  # a rerun is not a wait
    now.t = 30.0
    rec.operation_finished(OperationEvent(2, "B", "B", "b", 1, 0.0))
    report = rec.report()
    a, b = report.rows
    assert (a.jct_s, a.queue_delay_s, a.slowdown) == (10.0, 0.0, 1.0)
    assert (b.jct_s, b.queue_delay_s, b.slowdown) == (30.0, 10.0, 1.5)
    s = jobs_summary(report)
    assert (s["count"], s["finished"]) == (2, 2)
    assert s["jct_s"] == {"p50": 20.0, "p90": 28.0, "p99": 29.8, "mean": 20.0}
    assert s["queue_delay_s"] == {"p50": 5.0, "p90": 9.0, "p99": 9.9, "mean": 5.0}
    assert s["slowdown"]["mean"] == 1.25
    assert s["task_wait_s"] == {"p50": 0.0, "p90": 8.0, "p99": 9.8, "mean": round(10 / 3, 6)}
    assert s["per_pool"]["b"]["jct_s"]["p50"] == 30.0
    assert s["per_pool"]["a"]["task_wait_s"]["p99"] == 0.0
    assert s["tasks_never_started"] == 0


def test_operations_of_one_job_are_one_row() -> None:
    """A replayed job split by task size: one row, from the first submit to the last finish."""
    now = Now()
    rec = JobRecorder(now)
    rec.expect("j", "j", 5.0)
    rec.expect("j.1", "j", 8.0)
    rec.operation_submitted(OperationEvent(1, "j", "j", "p", 1, 0.0))
    rec.operation_submitted(OperationEvent(2, "j.1", "j.1", "p", 3, 0.0))
    now.t = 2.0
    rec.task_started(TaskStarted(2, "j.1", 0, 1))
    now.t = 10.0
    rec.operation_finished(OperationEvent(2, "j.1", "j.1", "p", 3, 0.0))
    (row,) = rec.report().rows
    assert (row.job_id, row.tasks, row.ideal_s, row.first_start_s) == ("j", 4, 8.0, 2.0)
    assert row.finish_s is None  # `j` has not finished
    assert rec.report().tasks_never_started == 3


def test_stats_of_nothing_are_none() -> None:
    assert stats([]).p50 is None
    assert stats([4.0]).p99 == 4.0


def test_decision_timer_uses_its_wall_clock() -> None:
    ticks = iter([0.0, 0.000010, 1.0, 1.000500])
    timer = DecisionTimer(lambda: next(ticks))
    handler = timer.wrap(lambda item: None)
    handler(None)  # type: ignore[arg-type]
    handler(None)  # type: ignore[arg-type]
    s = timer.summary()
    assert s["count"] == 2 and s["max"] == pytest.approx(500.0, rel=1e-6)
    assert 9.5 <= s["p50"] <= 10.5 and 480 <= s["p99"] <= 500.0
    assert sum(timer.counts) == 2


def test_decision_timer_buckets_its_samples_in_batches_as_one_by_one() -> None:
    """Samples are held in a list and bucketed with numpy every BATCH events and on reading: the
    histograms and /metrics counts are those of one histogram call per event."""
    rng = random.Random(3)
    dts = [0.0, 1e-10, *(rng.lognormvariate(-11, 2) for _ in range(BATCH + 500))]
    ticks = iter([t for dt in dts for t in (1.0, 1.0 + dt)])
    timer = DecisionTimer(lambda: next(ticks))
    handler = timer.wrap(lambda item: None)
    for _ in dts:
        handler(None)  # type: ignore[arg-type]
    assert len(timer._samples[type(None)].dts) < BATCH  # bucketed on the way, not only when read
    one_by_one = LogHistogram()
    counts = [0] * (len(BUCKETS_US) + 1)
    for dt in dts:
        got = 1.0 + dt - 1.0  # as the timer computes it
        one_by_one.add(got)
        counts[bisect_left([edge / 1e6 for edge in BUCKETS_US], got)] += 1
    (h,) = timer.by_type.values()
    assert (h.count, h.zeros, h.max) == (one_by_one.count, one_by_one.zeros, one_by_one.max)
    assert h.sum == pytest.approx(one_by_one.sum, rel=1e-9)
    assert [h.quantile(q) for q in (0.1, 0.5, 0.9, 0.99)] == [
        one_by_one.quantile(q) for q in (0.1, 0.5, 0.9, 0.99)
    ]
    assert timer.counts == counts and sum(counts) == len(dts)
    assert timer.summary()["count"] == len(dts)


def test_a_run_writes_jobs(tmp_path: Path) -> None:
    """One node with room for one task; FIFO: `long` (submitted first) runs, `short` queues behind
    it. Heartbeats add at most an interval to each start and finish."""
    sc = scenario(
        cluster={"nodes": [{"count": 1, "cpu": 1, "ram_gib": 4}]},
        run={"duration_s": 120},
        scheduler={"policy": "fifo"},
        workload={"operations": [
            {"name": "long", "pool": "x", "cpu": 1, "ram_gib": 1, "durations_s": [30.0], "submit_at_s": 0},
            {"name": "short", "pool": "y", "cpu": 1, "ram_gib": 1, "durations_s": [10.0], "submit_at_s": 1},
        ]},
    )
    out, _ = run_with_handle(sc)
    summary = write_results(out, tmp_path)
    hb = sc.heartbeat.interval_s
    lines = (tmp_path / "jobs.csv").read_text().splitlines()
    assert tuple(next(csv.reader(lines[:1]))) == CSV_COLUMNS
    rows = {r["job_id"]: r for r in csv.DictReader(lines)}
    long, short = rows["long"], rows["short"]
    assert float(long["ideal_s"]) == 30.0 and float(short["ideal_s"]) == 10.0
    assert float(long["queue_delay_s"]) <= hb
    assert 30.0 <= float(long["jct_s"]) <= 30.0 + 2 * hb
    # `short` waits for `long` to finish.
    assert float(short["first_start_s"]) >= float(long["finish_s"])
    assert float(short["queue_delay_s"]) == pytest.approx(float(short["first_start_s"]) - 1.0, abs=1e-6)
    assert float(short["slowdown"]) == pytest.approx(float(short["jct_s"]) / 10.0, rel=1e-5)
    jobs = json.loads((tmp_path / "summary.json").read_text())["jobs"]
    assert jobs == summary["jobs"]
    assert (jobs["count"], jobs["finished"]) == (2, 2)
    assert set(jobs["per_pool"]) == {"x", "y"}
    assert set(jobs["jct_s"]) == {"p50", "p90", "p99", "mean"}
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert timing["scheduler_decision_us"]["count"] >= summary["update_events"] > 0
    assert "scheduler_decision_us" not in summary  # wall-clock: kept out of the reproducible summary
