"""Lag judged by time, not by samples: one long freeze of the RM or of a worker is one late probe
among thousands (p99 stays low), yet a stall longer than the failure detector's timeout voids the
run, and the removals it caused are reported as its own."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from emulator.harness.runner import RunHandle
from emulator.measure.lag import LATE_SHARE_MAX, Stall, StallLog, judge_stalls
from emulator.measure.sampler import SampleRow
from tests.helpers import run_with_handle, scenario
from tests.process.test_tcp_processes import start_run, wait_for_workers

FREEZE_WALL_S = 1.0


def test_a_stalled_loop_longer_than_the_detector_timeout_makes_the_run_overloaded() -> None:
    sc = scenario(
        cluster={"nodes": [{"count": 8, "cpu": 8, "ram_gib": 16}]},
        heartbeat={"mode": "periodic", "interval_s": 1.0},
        rm={"expiry_s": 3.0},
        workload={"operations": [{"name": "a", "cpu": 1, "ram_gib": 1, "tasks": 40, "seconds_mean": 5,
                                  "loop": True}]},
        run={"duration_s": 24, "clock": "realtime", "speed": 4, "warmup_s": 0},
    )

    def freeze(handle: RunHandle, row: SampleRow) -> None:
        if 10 <= row.t_s < 11:
            time.sleep(FREEZE_WALL_S)  # the whole process stops: 4 emulated s at speed 4

    out, _ = run_with_handle(sc, on_row=freeze)
    lag = out.lag
    assert lag is not None
    # By samples the freeze is invisible: one late probe among ~1,500.
    assert lag.rm_loop_s is not None and lag.rm_loop_s.p99 <= lag.threshold_s
    assert lag.detector_timeout_s == 3.0
    assert lag.longest_stall_s == pytest.approx(4.0, abs=0.5)
    assert lag.overloaded, lag
    assert any("stalled for" in r and "longer than the failure detector's timeout (3 s)" in r
               for r in lag.reasons), lag.reasons
    (who, start, end), *_ = lag.stalls
    assert who == "the emulator's process" and 9 <= start <= 12 and end - start > 3
    # Every sample interval the stall overlapped is set aside, not just the one it ended in.
    assert len(lag.lagged_intervals) >= 4


def test_stall_windows_merge_and_the_share_of_time_late_is_judged() -> None:
    log = StallLog(floor_s=0.1)
    log.add(10.0, 12.0)
    log.add(11.5, 12.5)  # the next probe, still in the same stall
    log.add(30.0, 30.5)
    assert log.stalls == [Stall(10.0, 12.5), Stall(30.0, 30.5)] and log.late_s == pytest.approx(3.0)
    reasons: list[str] = []
    v = judge_stalls(0.1, {"the RM process": log}, None, 50.0, [], reasons)
    assert v.late_share == pytest.approx(0.06) and v.late_share > LATE_SHARE_MAX
    assert reasons == ["the RM process ran more than 0.1 s late for 6.0% of the run"]
    assert judge_stalls(0.1, {"the RM process": log}, None, 100.0, [], []).late_share < LATE_SHARE_MAX
    # A removal within the detector's timeout after a stall that outlasted it is the stall's.
    reasons = []
    v = judge_stalls(0.1, {"worker 1": log}, 2.0, 1000.0, [5.0, 13.0, 14.4, 15.0], reasons)
    assert v.removals_in_stalls == 2 and v.longest_stall_s == 2.5
    assert reasons[0].startswith("worker 1 stalled for 2.5 s at t=10.0 s")
    assert reasons[1].startswith("2 node removals during or right after a stall")


def test_the_warm_up_is_not_judged_but_its_removals_are() -> None:
    """Like h1/h2, the verdict judges the measured window: a stall while nodes register (the
    warm-up) voids nothing by itself, one across its end counts for its part after it; a node
    removal it caused is in the results, so it still voids the run."""
    log = StallLog(floor_s=0.1)
    log.add(4.0, 12.0)  # 8 s, in a 15 s warm-up
    log.add(14.0, 18.0)  # 4 s, of which 3 s after it
    reasons: list[str] = []
    v = judge_stalls(0.1, {"the RM process": log}, 3.75, 400.0, [], reasons, measured_from_s=15.0)
    assert v.longest_stall_s == pytest.approx(3.0) and reasons == []
    assert v.late_share == pytest.approx(3.0 / 385.0, abs=1e-6)
    reasons = []
    v = judge_stalls(0.1, {"the RM process": log}, 3.75, 400.0, [], reasons)  # no warm-up
    assert v.longest_stall_s == pytest.approx(8.0) and reasons
    reasons = []
    v = judge_stalls(0.1, {"the RM process": log}, 3.75, 400.0, [10.0], reasons, measured_from_s=15.0)
    assert v.removals_in_stalls == 1
    assert reasons == ["1 node removals during or right after a stall are the emulator's, not the nodes'"]


def test_a_worker_frozen_with_sigstop_is_reported_with_the_removals_it_caused(tmp_path: Path) -> None:
    proc, out = start_run(tmp_path, "tcp", nodes=40, duration=50)
    try:
        victim, *_ = wait_for_workers(proc, 2)
        time.sleep(2 + 1.5)  # past the epoch (2 s of margin), to t = 15 s
        os.kill(victim, signal.SIGSTOP)
        time.sleep(FREEZE_WALL_S)  # 10 emulated s: well past the ring's 3.75 s of silence
        os.kill(victim, signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    s = json.loads((out / "summary.json").read_text())
    lag = s["lag"]
    assert proc.returncode == 4, (err, lag)
    assert s["overloaded"] and lag["longest_stall_s"] > 8
    assert any(r.startswith("worker ") and "stalled for" in r for r in lag["reasons"]), lag["reasons"]
    # The frozen worker's nodes were removed although alive: the stall's doing, and said so.
    false = s["false_removals"]
    assert false > 0 and s["removals_in_stalls"] == lag["removals_in_stalls"] >= false, (false, lag)
    assert "overloaded" in err and "are the emulator's, not the nodes'" in err
