"""Chaos across real processes (127.0.0.1): an RM process and three node worker processes while a
seeded script freezes a worker, kills and restarts the RM, kills and restarts a worker, and freezes
the RM. Nothing is lost, nothing runs twice, every freeze is reported as a stall (~25 s)."""

from __future__ import annotations

import itertools
from pathlib import Path

from emulator.experiments.chaos import Chaos, plan


def test_the_plan_is_seeded_and_keeps_each_act_in_its_window() -> None:
    acts = plan(7, 20.0, 3)
    assert acts == plan(7, 20.0, 3) and acts != plan(8, 20.0, 3)
    assert [a.kind for a in acts] == ["freeze_worker", "kill_rm", "kill_worker", "freeze_rm"]
    assert acts[0].target != acts[2].target  # the frozen worker and the killed one differ
    assert all(a.at_wall_s < b.at_wall_s for a, b in itertools.pairwise(acts))


def test_chaos_across_processes_loses_nothing_runs_nothing_twice_and_reports_every_stall(
    tmp_path: Path,
) -> None:
    result = Chaos(tmp_path, nodes=30, workers=3, seed=7, speed=10, duration_s=200).run()
    assert result.problems == [], result
    assert result.completed == result.tasks == 360 and result.operations_finished == 1
    # The RM froze for longer than the liveliness monitor's expiry: the run says it is overloaded.
    assert result.rm_exit == 4
    assert any(who == "the RM process" and b - a > 4 for who, a, b in result.stalls_rm)
