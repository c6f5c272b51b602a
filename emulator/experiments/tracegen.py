"""A synthetic sample in the Google cluster trace 2011 ``task_events`` format, for the figures in
docs/traces.md: generated from the documented schema, not taken from the real trace (which is
hundreds of GB). ``python -m emulator.experiments.tracegen OUT.csv [--seed N]``.

Shape (assumed, loosely after the trace's published analyses): Poisson job arrivals; priority
tiers ~30% free (0-1), ~55% batch (2-8), ~15% production (9-11); most jobs have one task, the rest
a heavy-tailed count; task durations lognormal with a long tail; normalised CPU requests
0.0125-0.125, memory 0.003-0.06; some free and batch runs evicted and rescheduled, some killed or
failed.
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

from emulator.scenario.traces.google import EVICT, FAIL, FINISH, KILL, SCHEDULE, SUBMIT


def _lognormal(rng: random.Random, mean: float, stddev: float) -> float:
    sigma2 = math.log1p((stddev / mean) ** 2)
    return rng.lognormvariate(math.log(mean) - sigma2 / 2, math.sqrt(sigma2))


def google_sample(seed: int = 0, jobs: int = 300, span_s: float = 3600.0, machines: int = 40) -> str:
    rng = random.Random(seed)
    rows: list[tuple[float, str]] = []  # (time, the line after its timestamp)
    t = 0.0
    for j in range(jobs):
        t += rng.expovariate(jobs / span_s)
        job_id = 6_000_000_000 + j * 7919
        u = rng.random()
        priority = rng.choice((0, 1)) if u < 0.30 else (rng.randint(2, 8) if u < 0.85 else rng.randint(9, 11))
        ntasks = 1 if rng.random() < 0.6 else min(200, max(2, round(_lognormal(rng, 25, 40))))
        cpu = round(rng.choice((0.0125, 0.025, 0.03125, 0.0625, 0.125)), 5)
        mem = round(rng.uniform(0.003, 0.06), 5)
        long_running = priority >= 9
        user = f"user_{rng.randrange(30)}"
        sched_class = 3 if long_running else rng.randrange(3)
        for i in range(ntasks):
            submit = t + rng.uniform(0, 2)
            start = submit + rng.uniform(0.5, 5)
            head, tail = f",,{job_id},{i}", f"{user},{sched_class},{priority},{cpu},{mem},0.0001,0"
            rows.append((submit, f"{head},,{SUBMIT},{tail}"))
            mean = 2400.0 if long_running else 420.0
            for _ in range(3):  # at most two evictions, then the last run
                machine = 1_000_000 + rng.randrange(machines)
                duration = min(3 * 3600.0, max(5.0, _lognormal(rng, mean, 2.5 * mean)))
                rows.append((start, f"{head},{machine},{SCHEDULE},{tail}"))
                r = rng.random()
                if priority < 9 and r < 0.08:
                    end = start + duration * rng.uniform(0.1, 0.9)
                    rows.append((end, f"{head},{machine},{EVICT},{tail}"))
                    start = end + rng.uniform(1, 30)
                    continue
                kind = KILL if r > 0.95 else (FAIL if r > 0.92 else FINISH)
                rows.append((start + duration, f"{head},{machine},{kind},{tail}"))
                break
    rows.sort(key=lambda r: r[0])
    return "".join(f"{round(t * 1e6)}{rest}\n" for t, rest in rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("out", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=300)
    a = p.parse_args()
    a.out.write_text(google_sample(a.seed, a.jobs), encoding="utf-8")


if __name__ == "__main__":
    main()
