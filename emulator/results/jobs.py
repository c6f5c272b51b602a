"""Job-level results: the ``jobs`` section of summary.json, ``jobs.csv`` (one row per job) and
``jobruntime.csv`` (SLS's job runtime file, in its columns, for scripts written for SLS)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import msgspec

from emulator.measure.jobs import JobRow, JobsReport, stats

JOBS_FILE = "jobs.csv"
SLS_JOBS_FILE = "jobruntime.csv"
SLS_COLUMNS = ("JobID", "real_start_time", "real_end_time", "simulate_start_time", "simulate_end_time")
CSV_COLUMNS = (
    "job_id", "pool", "submit_s", "first_start_s", "finish_s", "jct_s", "queue_delay_s", "ideal_s",
    "slowdown", "tasks", "am_containers",
)


def _section(rows: list[JobRow], task_wait: Any) -> dict[str, Any]:
    jct = [r.jct_s for r in rows if r.jct_s is not None]
    delay = [r.queue_delay_s for r in rows if r.queue_delay_s is not None]
    slow = [r.slowdown for r in rows if r.slowdown is not None]
    return {
        "count": len(rows),
        "finished": len(jct),
        "jct_s": msgspec.to_builtins(stats(jct)),
        "queue_delay_s": msgspec.to_builtins(stats(delay)),
        "slowdown": msgspec.to_builtins(stats(slow)),
        "task_wait_s": msgspec.to_builtins(task_wait),
    }


def jobs_summary(report: JobsReport) -> dict[str, Any]:
    """``{"count", "finished", "jct_s", "queue_delay_s", "slowdown", "task_wait_s", "per_pool"}``;
    each figure ``{"p50", "p90", "p99", "mean"}`` (None without values). Completion times and
    slowdowns of finished jobs; queueing delays of jobs that started."""
    out = _section(report.rows, report.task_wait_s)
    pools = sorted({r.pool for r in report.rows})
    out["per_pool"] = {
        p: _section([r for r in report.rows if r.pool == p], report.task_wait_s_by_pool.get(p, stats([])))
        for p in pools
    }
    out["tasks_never_started"] = report.tasks_never_started
    return out


def _cell(x: float | None) -> str | float:
    return "" if x is None else round(x, 6)


def write_jobs_csv(report: JobsReport, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in report.rows:
            w.writerow([
                r.job_id, r.pool, _cell(r.submit_s), _cell(r.first_start_s), _cell(r.finish_s),
                _cell(r.jct_s), _cell(r.queue_delay_s), _cell(r.ideal_s), _cell(r.slowdown), r.tasks,
                r.am_containers,
            ])


def write_sls_jobs_csv(report: JobsReport, path: Path) -> None:
    """SLS's ``jobruntime.csv``: a row per finished job (SLS writes one when a job ends), start =
    submission and end = finish in integer ms from the run's start. The emulator keeps no wall
    clock per job, so the ``real_*`` columns hold the same times as ``simulate_*``."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(SLS_COLUMNS)
        for r in report.rows:
            if r.finish_s is None:
                continue
            start, end = round(r.submit_s * 1000), round(r.finish_s * 1000)
            w.writerow([r.job_id, start, end, start, end])
