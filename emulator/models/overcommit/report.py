"""E4 over seeds (a model study's points, emulator/study/models.py): per mode the lecture's three
figures (median relative slack over jobs, share of jobs without an OOM, OOMs per task-day) as
mean ± sd over seeds, beside the lecture's; what the OOMs were (over a limit, a machine short,
before Autopilot's first recommendation, in jobs whose user under-provisioned them) and how often
the cell ran short."""

from __future__ import annotations

import statistics
from typing import Any

from emulator.models.overcommit.cell import Cell
from emulator.models.overcommit.config import LECTURE, MODES, E4Config
from emulator.models.overcommit.usage import TOLERANCES
from emulator.models.point import ModelPoint, by_variant, plain


def mode_figures(jobs: list[dict[str, Any]], by_tolerance: bool = False) -> dict[str, float]:
    days = sum(j["task_days"] for j in jobs)
    ooms = [j["oom_limit"] + j["oom_shortage"] for j in jobs]
    slack = [1 - j["usage"] / j["limit"] for j in jobs if j["limit"] > 0]
    under = [o for j, o in zip(jobs, ooms, strict=True) if j["underprovisioned"]]
    prod = [j for j in jobs if j["tier"] == "production"]
    batch = [j for j in jobs if j["tier"] == "batch"]

    def per_day(js: list[dict[str, Any]], key: str | None = None) -> float:
        d = sum(j["task_days"] for j in js)
        n = sum((j[key] if key else j["oom_limit"] + j["oom_shortage"]) for j in js)
        return n / d if d else 0.0

    tolerance = {f"ooms_per_task_day_tolerance_{t}": per_day([j for j in jobs if j["tolerance"] == t])
                 for t in TOLERANCES} if by_tolerance else {}
    return tolerance | {
        "jobs": float(len(jobs)),
        "task_days": days,
        "slack": statistics.median(slack) if slack else 0.0,
        "slack_pooled": 1 - sum(j["usage"] for j in jobs) / max(1e-9, sum(j["limit"] for j in jobs)),
        "jobs_oom_free": sum(o == 0 for o in ooms) / len(jobs) if jobs else 0.0,
        "ooms_per_task_day": sum(ooms) / days if days else 0.0,
        "ooms_over_limit_per_task_day": per_day(jobs, "oom_limit"),
        "ooms_shortage_per_task_day": per_day(jobs, "oom_shortage"),
        "ooms_before_first_recommendation_share":
            sum(j["oom_before_rec"] for j in jobs) / sum(ooms) if sum(ooms) else 0.0,
        "ooms_underprovisioned_share": sum(under) / sum(ooms) if sum(ooms) else 0.0,
        "ooms_after_step_share": sum(j["oom_after_step"] for j in jobs) / sum(ooms) if sum(ooms) else 0.0,
        "ooms_in_first_day_share": sum(j["oom_young_job"] for j in jobs) / sum(ooms) if sum(ooms) else 0.0,
        "ooms_per_task_day_provisioned": per_day([j for j in jobs if not j["underprovisioned"]]),
        "ooms_per_task_day_production": per_day(prod),
        "ooms_per_task_day_batch": per_day(batch),
    }


def run_seed(cfg: E4Config, seed: int) -> dict[str, Any]:
    out = Cell(cfg, seed).run()
    jobs, cell = out["jobs"], out["cell"]
    modes = {m: mode_figures([j for j in jobs if j["mode"] == m], m == "autopilot") for m in MODES}
    # Which ML models set the limits: the share of job-windows per model's half-life.
    choices = out["ml_choices"].reshape(len(cfg.ml_half_lives_h), len(cfg.ml_margins)).sum(axis=1)
    for h, n in zip(cfg.ml_half_lives_h, choices, strict=True):
        modes["ml"][f"model_half_life_{h:g}h_share"] = float(n / choices.sum()) if choices.sum() else 0.0
    mw, tw = cell["machine_windows"], cell["task_windows"]
    cap = mw * cfg.machine_ram_gib
    return {"seed": seed, "modes": modes, "cell": {
        "machine_windows_short": cell["short_machine_windows"] / mw if mw else 0.0,
        "tasks_pending": cell["pending_task_windows"] / max(1, tw + cell["pending_task_windows"]),
        "usage_of_capacity": cell["usage"] / cap if cap else 0.0,
        "reserved_of_capacity": cell["reserved"] / cap if cap else 0.0,
        "fullest_machine_peak": cell["fullest_peak"] / cfg.machine_ram_gib,
        # Of the memory reserved above usage, what tasks started under 3 h ago hold (their
        # reservations start at the limit).
        "reserved_above_usage_young_of_capacity": cell["reserved_above_usage_young"] / cap if cap else 0.0,
    }}


def _mean_sd(xs: list[float]) -> list[float]:
    return [statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0]


def run_point(cfg: E4Config) -> dict[str, Any]:
    """One cell at ``cfg.seed``: a model study's point (plain data: numpy's numbers as floats)."""
    return plain(run_seed(cfg, cfg.seed))


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per mode and for the cell: each figure as [mean, sd] over ``runs`` (one per seed)."""
    rows = []
    for mode in MODES:
        keys = runs[0]["modes"][mode].keys()
        row: dict[str, Any] = {"mode": mode, "lecture": LECTURE[mode]}
        row.update({k: _mean_sd([r["modes"][mode][k] for r in runs]) for k in keys})
        rows.append(row)
    cell = {k: _mean_sd([r["cell"][k] for r in runs]) for k in runs[0]["cell"]}
    return {"rows": rows, "cell": cell}


def from_points(points: list[ModelPoint]) -> dict[str, Any]:
    """What the tables read, from a study's points: the first variant is the cell as configured
    (its seeds aggregated), each further variant a column of the variants table, named by its
    label. A variant's seeds are the first's (paired: the same draws with one mechanism changed)."""
    groups = list(by_variant(points).values())
    if not groups:
        raise ValueError("the study has no points yet")
    base = groups[0]
    data: dict[str, Any] = {"config": base[0].params, "seeds": [p.params["seed"] for p in base],
                            **aggregate([p.output for p in base]), "runs": [p.output for p in base]}
    data["variants"] = {g[0].label: {"change": _change(base[0].params, g[0].params),
                                     **aggregate([p.output for p in g])} for g in groups[1:]}
    return data


def _change(base: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "seed" and base.get(k) != v}


def _ms(v: list[float], pct: bool = False, digits: int = 3) -> str:
    if pct:
        return f"{v[0] * 100:.1f} ± {v[1] * 100:.1f}%"
    return f"{v[0]:.{digits}g} ± {v[1]:.{digits - 1}g}"


def _lec(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x * 100:g}%" if pct else f"{x:g}"


def modes_table(points: list[ModelPoint]) -> str:
    """The lecture's three figures per mode, mean ± sd over the first variant's seeds."""
    return markdown_table(from_points(points))


def why_table(points: list[ModelPoint]) -> str:
    """The cell as configured beside each variant: where the OOMs come from."""
    return variants_table(from_points(points))


def markdown_table(data: dict[str, Any]) -> str:
    n = len(data["seeds"])
    lines = [
        "| mode | median relative slack (lecture) | jobs OOM-free (lecture) | OOMs per task-day (lecture) | "
        "OOMs per task-day: over limit / machine short | jobs |",
        "|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        lec = r["lecture"]
        lines.append(
            f"| {r['mode']} | {_ms(r['slack'], True)} ({_lec(lec['slack'], True)}) | "
            f"{_ms(r['jobs_oom_free'], True)} ({_lec(lec['jobs_oom_free'], True)}) | "
            f"{_ms(r['ooms_per_task_day'])} ({_lec(lec['ooms_per_task_day'])}) | "
            f"{r['ooms_over_limit_per_task_day'][0]:.3g} / {r['ooms_shortage_per_task_day'][0]:.3g} | "
            f"{r['jobs'][0]:.0f} |")
    rows = {r["mode"]: r for r in data["rows"]}
    h, a = rows["hard"]["ooms_per_task_day"][0], rows["autopilot"]["ooms_per_task_day"][0]
    ratio = f"÷{h / a:.1f}" if a > 0 else "no Autopilot OOM"
    c = data["cell"]
    lines += ["", f"Hard limits → Autopilot: OOMs per task-day {ratio} (lecture ÷{0.069 / 0.002:.1f}). "
              f"Mean ± sd over {n} seeds; the cell: memory used {c['usage_of_capacity'][0] * 100:.0f}% and "
              f"reserved {c['reserved_of_capacity'][0] * 100:.0f}% of capacity, machines short "
              f"{c['machine_windows_short'][0] * 100:.2f}% of machine-windows (the fullest machine's highest "
              f"sample {c['fullest_machine_peak'][0] * 100:.1f}% of its memory), tasks pending "
              f"{c['tasks_pending'][0] * 100:.1f}%."]
    return "\n".join(lines)


def variants_table(data: dict[str, Any]) -> str:
    """OOMs per task-day and machine shortage, the committed cell beside its variants."""
    cols = [("as run", data)] + [(k, v) for k, v in data.get("variants", {}).items()]
    lines = ["| | " + " | ".join(c for c, _ in cols) + " |", "|---|" + "---|" * len(cols)]
    for i, mode in enumerate(MODES):
        cells = [_ms(d["rows"][i]["ooms_per_task_day"]) + f" ({d['rows'][i]['slack'][0] * 100:.0f}%)"
                 for _, d in cols]
        lines.append(f"| {mode}: OOMs per task-day (slack) | " + " | ".join(cells) + " |")
    ratio = []
    for _, d in cols:
        h, a = d["rows"][0]["ooms_per_task_day"][0], d["rows"][2]["ooms_per_task_day"][0]
        ratio.append(f"÷{h / a:.1f}" if a > 0 else "∞")
    lines.append("| hard → autopilot OOMs | " + " | ".join(ratio) + " |")
    ratio = []
    for _, d in cols:
        h, a = (d["rows"][i]["ooms_per_task_day_provisioned"][0] for i in (0, 2))
        ratio.append(f"÷{h / a:.1f}" if a > 0 else "∞")
    lines.append("| the same, under-provisioned jobs left out | " + " | ".join(ratio) + " |")
    lines.append("| machines short (machine-windows) | " + " | ".join(
        f"{d['cell']['machine_windows_short'][0] * 100:.3f}%" for _, d in cols) + " |")
    lines.append("| the fullest machine's highest sample (of its memory) | " + " | ".join(
        f"{d['cell']['fullest_machine_peak'][0] * 100:.1f}%" for _, d in cols) + " |")
    lines.append("| memory reserved above usage (of capacity): all / in tasks (re)started under 3 h ago | "
                 + " | ".join(
        f"{(d['cell']['reserved_of_capacity'][0] - d['cell']['usage_of_capacity'][0]) * 100:.1f}% / "
        f"{d['cell']['reserved_above_usage_young_of_capacity'][0] * 100:.1f}%" for _, d in cols) + " |")
    lines.append("| autopilot OOMs within an hour of a step up | " + " | ".join(
        f"{d['rows'][2]['ooms_after_step_share'][0] * 100:.0f}%" for _, d in cols) + " |")
    lines.append("| autopilot OOMs under the user's limit (before the first recommendation) | " + " | ".join(
        f"{d['rows'][2]['ooms_before_first_recommendation_share'][0] * 100:.0f}%" for _, d in cols) + " |")
    lines.append("| autopilot OOMs in a job's first day | " + " | ".join(
        f"{d['rows'][2]['ooms_in_first_day_share'][0] * 100:.0f}%" for _, d in cols) + " |")
    shortest = min(data["config"]["ml_half_lives_h"])
    key = f"model_half_life_{shortest:g}h_share"
    lines.append(f"| ml: job-windows whose limit a {shortest:g} h half-life model set | " + " | ".join(
        f"{d['rows'][3][key][0] * 100:.0f}%" for _, d in cols) + " |")
    lines.append("| hard OOMs in under-provisioned jobs | " + " | ".join(
        f"{d['rows'][0]['ooms_underprovisioned_share'][0] * 100:.0f}%" for _, d in cols) + " |")
    return "\n".join(lines)
