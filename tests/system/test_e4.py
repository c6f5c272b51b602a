"""E4's Borg cell (issue 33): the recommenders' statistics, Borg's kill order, the OOM bump, a
one-day run of the four modes on a tiny cell (as a model study's points), and its input errors."""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pytest

from emulator.cli.main import main
from emulator.models.overcommit import E4Config, markdown_table, run_point, variants_table
from emulator.models.overcommit.cell import AUTOPILOT, Cell
from emulator.models.overcommit.recommend import (
    AutopilotStats,
    MLRecommender,
    load_adjusted_percentile,
    window_counts,
)
from emulator.models.overcommit.report import from_points
from emulator.models.overcommit.usage import F
from emulator.models.point import ModelPoint

TINY = E4Config(days=1.0, warmup_days=0.25, machines=3, jobs_per_mode=5, replicas_max=5, buckets=100)


def test_percentile_is_load_adjusted() -> None:
    # One sample at 1 GiB, one at 10: by count the median is 1; weighted by b[k] (the lecture's
    # h[k] = b[k]·Σ w·s) 10 carries 10/11 of the load.
    bounds = np.arange(1.0, 11.0)[None, :]
    hist = np.zeros((1, 10))
    hist[0, [0, 9]] = 1.0
    assert load_adjusted_percentile(bounds, hist, 50.0)[0] == 10.0
    assert load_adjusted_percentile(bounds, hist, 5.0)[0] == 1.0


def test_autopilot_waits_for_history_then_holds_the_hour_max() -> None:
    cfg = E4Config(buckets=100, min_history_s=600, hold_s=3600, margin=0.1, max_windows=1)
    width = np.array([0.1, 0.1])
    stats = AutopilotStats(cfg, width, np.array([1, 0]))  # minimal tolerance (S_max), low (S_p98)
    rows = np.array([0, 0, 1, 1])
    first = stats.close(window_counts(width, 100, rows, np.array([2.0, 3.0, 2.0, 3.0])))
    assert np.isnan(first).all()  # one window: less than min_history_s
    ones = window_counts(width, 100, rows, np.array([1.0, 1.0, 1.0, 1.0]))
    second = stats.close(ones)
    # S_max of the last window is 1, but the hour's hold keeps the first window's 3.0 (+10%).
    assert second[0] == pytest.approx(3.0 * 1.1)
    for _ in range(10):
        held = stats.close(ones)
    assert held[0] == pytest.approx(3.0 * 1.1)  # 12 windows: still within the hour
    assert stats.close(ones)[0] == pytest.approx(1.0 * 1.1)


def test_ml_prices_overruns_and_limit_changes() -> None:
    rng = np.random.default_rng(0)
    width = np.array([0.05, 0.05])

    def limits(over: float = 20.0, change: float = 0.02) -> tuple[float, int]:
        cfg = E4Config(buckets=100, min_history_s=0, ml_over_cost=over, ml_change_cost=change,
                       ml_switch_cost=change)
        ml = MLRecommender(cfg, width)
        seen: list[float] = []
        changes, last = 0, np.nan
        for _ in range(100):
            x = 2.0 + 0.2 * rng.standard_normal(20)
            out = ml.close(window_counts(width, 100, np.repeat([0, 1], 10), x), np.array([last, last]))
            changes += int(not np.isclose(out[0], last))
            last = out[0]
            seen.extend(x)
        return last / float(np.percentile(seen, 99)), changes

    high, _ = limits(over=100.0)
    low, _ = limits(over=0.5)
    assert high > 1.0 > low  # an overrun priced high keeps the limit above 99% of the samples
    _, free = limits(change=0.0)
    _, sticky = limits(change=1.0)
    assert sticky < free / 2  # priced changes: the limit moves less often


def test_shortage_kills_batch_then_above_soft_limit_first() -> None:
    cell = Cell(TINY, 1)
    j = cell.jobs
    tasks = np.arange(len(j.slot))
    cell.machine[:] = -1
    prod = tasks[cell.task_prod][:2]
    batch = tasks[~cell.task_prod][:3]
    on = np.concatenate([prod, batch])
    cell.machine[on] = 0
    u = np.zeros(len(tasks))
    u[on] = 10.0
    cell.limit[j.slot[batch]] = 100.0
    cell.limit[j.slot[batch[2]]] = 5.0  # this batch task is above its (soft) limit
    u[batch[0]] = 30.0  # the largest batch task
    cap = TINY.machine_ram_gib
    u[prod] = (cap - 35.0) / 2  # the machine is 15 GiB over
    killed = cell.shortage(u, cell.machine >= 0)
    assert not killed[prod].any()
    assert killed.sum() == 2 and killed[batch[2]] and killed[batch[0]]  # above soft first, then largest


def test_reservations_reclaim_memory_and_production_fits_by_limits() -> None:
    cfg = msgspec.structs.replace(TINY, machines=1)  # more limits than memory
    cell = Cell(cfg, 1)
    j = cell.jobs
    for w in range(40):
        cell.step(w)
        run = cell.machine >= 0
        lim = cell.limit[j.slot]
        prod = run & cell.task_prod
        assert lim[prod].sum() <= cfg.machine_ram_gib + 1e-9  # production never overcommitted
    run = cell.machine >= 0
    assert (cell.resv[run] <= cell.limit[j.slot][run] + 1e-9).all()
    # Reclaimed: reservations decayed toward usage, so the machine holds more limits than memory.
    assert cell.resv[run].sum() <= cfg.machine_ram_gib * 1.1
    assert cell.limit[j.slot][run].sum() > 1.2 * cfg.machine_ram_gib
    # Production only: reservations decay just the same, but no more limits than memory run.
    prod_only = Cell(msgspec.structs.replace(cfg, prod_share=1.0), 1)
    for w in range(40):
        prod_only.step(w)
    run = prod_only.machine >= 0
    assert prod_only.limit[prod_only.jobs.slot][run].sum() <= cfg.machine_ram_gib + 1e-9
    assert not run.all()  # the rest wait


def test_oom_bump_raises_an_autopilot_limit_above_the_usage_that_killed() -> None:
    cell = Cell(TINY, 2)
    for w in range(3):
        cell.step(w)
    j = cell.jobs
    slot = int(np.flatnonzero((j.mode == AUTOPILOT) & (cell.acc["windows"] >= 0))[0])
    mine = (j.slot == slot) & (cell.machine >= 0)
    assert mine.any()
    cell.limit[slot] = 1e-3  # far below any usage: every running replica dies at the next window
    cell.step(3)
    assert (cell.machine[j.slot == slot] < 0).all()
    assert cell.floor[slot] > 0 and cell.limit[slot] >= cell.floor[slot] > 1e-3


def test_one_day_of_the_four_modes_beside_the_lecture() -> None:
    runs = [msgspec.structs.replace(TINY, seed=s) for s in (1, 2)]
    data = from_points([ModelPoint(variant="as-run", label="as run", coords={"seed": cfg.seed},
                                   params=msgspec.to_builtins(cfg), output=run_point(cfg)) for cfg in runs])
    assert data["seeds"] == [1, 2] and data["variants"] == {}
    rows = {r["mode"]: r for r in data["rows"]}
    assert list(rows) == ["hard", "soft", "autopilot", "ml"]
    slack = {m: r["slack"][0] for m, r in rows.items()}
    assert slack["hard"] > slack["soft"] > slack["autopilot"]
    assert 0.5 < slack["hard"] < 0.7 and 0.35 < slack["soft"] < 0.55  # users' limits as drawn
    for r in rows.values():
        assert 0.0 <= r["jobs_oom_free"][0] <= 1.0 and r["task_days"][0] > 0
        assert len(r["slack"]) == 2  # mean, sd over the seeds
    table = markdown_table(data)
    assert "| autopilot | " in table and "(31%)" in table and "(0.069)" in table
    assert "as run" in variants_table(data)


def test_bad_cell_parameters_are_refused_with_the_field(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    study = tmp_path / "e4.toml"
    warmup = "at `params`: `days` must exceed the 1 warm-up day(s) (`warmup_days`)"
    for params, message in (("days = 0.5", warmup),
                            ("days = -1", "at `params.days`: expected `float` > 0.0"),
                            ("machines = 0", "at `params.machines`: expected `int` >= 1"),
                            ("[axes]\nseed = [0]", "at `axes.seed`: expected whole numbers >= 1, got [0]")):
        study.write_text(f'model = "borg-cell"\n[params]\n{params}\n', encoding="utf-8")
        assert main(["study", str(study), "--out", str(tmp_path / "e4.json")]) == 2
        assert capsys.readouterr().err.strip() == f"error: {study}: {message}"
    assert main(["study", "--table", str(tmp_path / "none.json")]) == 2
    assert "none.json: no such file" in capsys.readouterr().err


def test_window_samples_peak_above_the_mean_and_machines_are_judged_at_them() -> None:
    cell = Cell(msgspec.structs.replace(TINY, peak_job_corr=1.0), 4)
    j = cell.jobs
    u = j.advance(0.0)
    s = j.samples(u)
    assert s.shape == (len(u), TINY.peak_samples)
    assert np.allclose(s.mean(axis=1), u) and (s.max(axis=1) > u).all()  # peaks above the mean
    two = np.flatnonzero(j.slot == j.slot[0])[:2]  # replicas of one job share their samples' shape
    assert np.allclose(s[two[0]] / u[two[0]], s[two[1]] / u[two[1]])
    one = Cell(msgspec.structs.replace(TINY, peak_samples=1), 4).jobs
    assert np.array_equal(one.samples(u), u[:, None])
    # A burst the cell shares: every production task's samples rise and fall together.
    shared = Cell(msgspec.structs.replace(TINY, peak_cell_corr=1.0, peak_sd_min=0.05, peak_sd_max=0.05), 4)
    prod = shared.task_prod
    shape = shared.jobs.samples(u)[prod] / u[prod, None]
    assert np.allclose(shape, shape[0]) and not np.allclose(s[prod] / u[prod, None], shape[0])
    # A machine under its memory on the window's mean but over at one sample runs short.
    cell.machine[:] = -1
    t = np.flatnonzero(~cell.task_prod)[:2]
    cell.machine[t] = 0
    cap = TINY.machine_ram_gib
    samples = np.zeros((len(u), 2))
    samples[t] = [[0.40 * cap, 0.56 * cap], [0.50 * cap, 0.50 * cap]]  # means 0.48 and 0.5 of it
    killed = cell.shortage(samples, cell.machine >= 0)
    assert killed.sum() == 1 and cell.short_now == 1


def test_a_recurring_batch_job_keeps_its_profile_and_autopilot_its_history() -> None:
    def rerun(share: float) -> tuple[float, float, float, float, bool]:
        cell = Cell(msgspec.structs.replace(TINY, prod_share=0.0, recurring_share=share), 5)
        j = cell.jobs
        slot = int(cell.ap_rows[0])
        w = 0
        while j.ends_at[slot] > w * TINY.window_s or not cell.recommended[slot]:
            cell.step(w)
            w += 1
        base, user, limit = j.base[slot], j.user_limit[slot], cell.limit[slot]
        cell.step(w)  # the job ends and its slot is drawn again
        assert j.started_at[slot] == w * TINY.window_s
        return base, j.base[slot], user, cell.limit[slot] / limit, bool(cell.recommended[slot])

    base, again, _, kept, recommended = rerun(1.0)
    assert again == base and recommended and kept == pytest.approx(1.0, rel=0.3)
    base, new, _, _, recommended = rerun(0.0)
    assert new != base and not recommended


def test_task_days_count_a_crash_loop_from_its_first_start() -> None:
    def windows(how: str) -> float:
        cfg = msgspec.structs.replace(TINY, warmup_days=0.0, days=0.1, task_days=how)
        cell = Cell(cfg, 6)
        slot = int(np.flatnonzero(cell.jobs.mode == 0)[0])  # a hard-limit job
        for w in range(cfg.windows):
            if w == 2:
                cell.limit[slot] = 1e-3  # from now on every start dies: a crash loop with backoff
            cell.step(w)
        return float(cell.acc["windows"][slot])

    running, started = windows("running"), windows("started")
    assert started > 2 * running


def test_a_young_job_is_not_limited_below_its_largest_sample() -> None:
    def recommendations(young_s: float) -> list[float]:
        cfg = E4Config(buckets=100, min_history_s=0, hold_s=300, margin=0.1, young_history_s=young_s)
        width = np.array([0.1])
        stats = AutopilotStats(cfg, width, np.array([0]))  # low tolerance: S_p98
        values = np.array([1.0] * 200 + [3.0])  # one sample at 3 GiB among 200 at 1 GiB
        counts = window_counts(width, 100, np.zeros(len(values), dtype=np.int64), values)
        return [float(stats.close(counts)[0]) for _ in range(4)]

    young = recommendations(3 * 300.0)
    assert young[:2] == pytest.approx([3.3, 3.3])  # under three windows of history: S_max (+10%)
    assert young[2:] == pytest.approx([1.1, 1.1])  # then the load-adjusted S_p98
    assert recommendations(0.0)[0] == pytest.approx(1.1)


def test_a_hard_limit_kills_at_a_peak_within_the_window() -> None:
    cell = Cell(msgspec.structs.replace(TINY, warmup_days=0.0), 7)
    for w in range(3):
        cell.step(w)
    j = cell.jobs
    running = np.bincount(j.slot[cell.machine >= 0], minlength=len(j.mode)) > 0
    slot = int(np.flatnonzero((j.mode == 0) & running)[0])  # a hard-limit job with replicas running
    mine = j.slot == slot
    limit = float(cell.limit[slot])

    def samples(u: F) -> F:
        # This job's replicas: mean 0.8 × the limit, one sample 1.2 ×; everyone else flat.
        flat = np.repeat(u[:, None], 2, axis=1)
        flat[mine] = [0.4 * limit, 1.2 * limit]
        return flat

    cell.jobs.samples = samples  # type: ignore[method-assign,assignment]
    before = cell.acc["oom_limit"][slot]
    cell.step(3)
    assert cell.acc["oom_limit"][slot] - before >= 1
    assert (cell.machine[mine] < 0).all()  # every replica that ran died at the peak
