"""CPU of a 1,000-node placement run: the indexed placement policy against the old scan of every
node (tests/placement_reference.py) and the default policy, in one invocation:

    PYTHONPATH=$PWD python -m tests.placement_bench [--minutes 10] [--policy best-fit]

Both placement runs must end with the same result (the same choices, so the same containers
started and completed); the CPU each took (process time) and the ratio are printed.
"""

from __future__ import annotations

import argparse
import time
import unittest.mock
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from emulator.harness.runner import run_blocking
from emulator.scenario.loader import load_scenario
from tests.placement_reference import ScanPlacement

SCENARIO = """
[cluster]
nodes = [{{ count = 1000, cpu = 16, ram_gib = 64 }}]
[heartbeat]
interval_s = 3.0
[scheduler.placement]
policy = "{policy}"
{ops}
[run]
duration_s = {duration}
seed = 1
"""
# Twenty looping users asking for more than the cluster has: it stays full and tasks wait.
OP = """
[[workload.operations]]
name = "u{k}"
cpu = {cpu}
ram_gib = {ram}
tasks = 1000
seconds_mean = 60
seconds_deviation = 20
loop = true
"""


def scenario_text(policy: str, minutes: float) -> str:
    ops = "".join(OP.format(k=k, cpu=1 + k % 4, ram=2 * (1 + (k * 7) % 5)) for k in range(20))
    return SCENARIO.format(policy=policy, ops=ops, duration=minutes * 60)


def measure(policy: str, minutes: float, reference: bool) -> tuple[float, Any]:
    with TemporaryDirectory() as d:
        path = Path(d) / "bench.toml"
        path.write_text(scenario_text(policy, minutes))
        sc = load_scenario(path)
        patch = unittest.mock.patch("rm.borg.layer.PlacementPolicy", ScanPlacement) if reference else None
        t0 = time.process_time()
        if patch is not None:
            with patch:
                out = run_blocking(sc)
        else:
            out = run_blocking(sc)
        return time.process_time() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--policy", default="best-fit")
    args = ap.parse_args()
    base_s, base = measure("default", args.minutes, False)
    new_s, new = measure(args.policy, args.minutes, False)
    old_s, old = measure(args.policy, args.minutes, True)
    done = new.rm.counters.containers_completed
    assert done == old.rm.counters.containers_completed, "the two placements differ"
    assert new.rows == old.rows, "the two placements differ"
    print(f"1,000 nodes, {args.minutes:g} emulated min, {args.policy}: {done:,} tasks completed")
    base_done = base.rm.counters.containers_completed
    print(f"  default policy          {base_s:6.1f} s CPU ({base_done:,} completed)")
    print(f"  {args.policy} (scan)      {old_s:6.1f} s CPU  {old_s / base_s:.2f}x default")
    print(f"  {args.policy} (index)     {new_s:6.1f} s CPU  {new_s / base_s:.2f}x default")
    print(f"  scan / index: {old_s / new_s:.2f}x")


if __name__ == "__main__":
    main()
