"""E5 on trace-like demand (issue 33; scenarios/studies/e5-cluster.toml): stochastic bin packing
judged per machine.

``Packing`` parametrises the demand generator (demand.py, calibrated to the
lecture's published properties of the Google trace) and the packing. Per seed: ``tasks``
long-running tasks, each observed for ``history`` 5-minute intervals, arrive in random order and
are placed best-fit with the admission method under test (the inequalities of the RM's
rm/borg/sbp.py, arrays.py); then the next ``future`` intervals of their usage say, machine
by machine, how often the machine's usage exceeded its capacity. The SLO is per machine: a
machine meets it when its share of intervals over capacity is at most η = 1 − SLO; reported are
the worst machine, the median and 90th-percentile machine, the share of machines over η and the
pooled share. A per-machine share can show η only with enough intervals: with none over capacity
in n intervals the 95% upper bound is 3/n, so n ≥ 3/η is needed (30,000 for 99.99%); the JSON
and the table say per SLO whether the run had them.

Also measured per seed, beside the lecture's values: the generator's properties (demand.py) and
the bin size a random bin of 50 tasks needs at each SLO relative to its mean (the lecture's
1.294 / 1.488 / 1.643 / 1.760).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import msgspec
import numpy as np

from emulator.models.binpacking.arrays import (
    Judge,
    TaskStats,
    pack,
    per_machine,
    rank_index,
    shape_check,
    significant_count,
    skewness,
)
from emulator.models.binpacking.demand import LECTURE, Demand, Tasks, properties
from emulator.models.point import ModelPoint, per_variant, plain
from rm import sbp

Method = Literal["request", "av", "perc", "gpa-g", "gpa-sqrt", "cantelli", "emp-perc"]
LECTURE_BIN_SIZE = {0.9: 1.294, 0.99: 1.488, 0.999: 1.643, 0.9999: 1.760}
SLO_INDEPENDENT = ("request", "av")


class Packing(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    seed: Annotated[int, msgspec.Meta(ge=0)] = 1  # the demand's draws (a study's `seed` axis sets it)
    tasks: Annotated[int, msgspec.Meta(ge=50, le=20_000)] = 1000
    history: Annotated[int, msgspec.Meta(ge=10, le=20_000)] = 2016  # a week of 5-minute intervals
    future: Annotated[int, msgspec.Meta(ge=10, le=1_000_000)] = 30_000
    chunk: Annotated[int, msgspec.Meta(ge=10, le=100_000)] = 3000  # future intervals per pass
    bin_tasks: Annotated[int, msgspec.Meta(ge=2)] = 50
    slos: Annotated[list[Annotated[float, msgspec.Meta(gt=0, lt=1)]], msgspec.Meta(min_length=1)] = (
        msgspec.field(default_factory=lambda: [0.9, 0.99, 0.999, 0.9999]))
    methods: list[Method] = msgspec.field(
        default_factory=lambda: ["request", "av", "perc", "gpa-g", "gpa-sqrt", "cantelli", "emp-perc"])
    av_factors: list[Annotated[float, msgspec.Meta(gt=0)]] = msgspec.field(
        default_factory=lambda: [1.0, 1.25, 2.0])
    demand: Demand

    def __post_init__(self) -> None:
        if self.bin_tasks > self.tasks:
            raise ValueError("expected `bin_tasks` <= `tasks`")


def configs(cfg: Packing) -> list[tuple[str, str, float | None, float]]:
    """(row label, method, SLO or None where the method ignores it, av factor)."""
    out: list[tuple[str, str, float | None, float]] = []
    for method in cfg.methods:
        if method == "request":
            out.append(("request", method, None, 1.0))
        elif method == "av":
            out += [(f"av {f:g}", method, None, f) for f in cfg.av_factors]
        else:
            out += [(method, method, slo, 1.0) for slo in cfg.slos]
    return out


def resolution(slos: list[float], intervals: int) -> list[dict[str, Any]]:
    """Per SLO: can a machine's share of intervals over capacity show η with this many?"""
    out = []
    for slo in slos:
        eta = round(1.0 - slo, 12)  # 1 − 0.9999 is not 0.0001 in floating point
        need = math.ceil(3.0 / eta - 1e-9)
        ok = intervals >= need
        out.append({
            "slo": slo, "target": eta, "intervals_per_machine": intervals, "needed": need, "measurable": ok,
            "note": (f"{intervals:,} intervals per machine: zero overflows bound a machine's rate at "
                     f"{3 / intervals:.2g} (95%), <= {eta:.2g}") if ok else
                    (f"cannot be measured: {intervals:,} intervals per machine bound a machine's rate only "
                     f"at {3 / intervals:.2g} (95%), above {eta:.2g}; it needs {need:,}"),
        })
    return out


def run_point(cfg: Packing) -> dict[str, Any]:
    """A model study's point: every method's packing at ``cfg.seed``, judged machine by machine."""
    return plain(run_seed(cfg, cfg.seed))


def run_seed(cfg: Packing, seed: int) -> dict[str, Any]:
    tasks = Tasks(cfg.demand, cfg.tasks, seed)
    history = tasks.next(cfg.history)
    props = properties(cfg.demand, tasks, history, seed)
    judges: list[tuple[str, float | None, Judge]] = []
    stats = {slo: TaskStats(tasks.size, history, slo) for slo in cfg.slos}
    for label, method, slo, f in configs(cfg):
        where = pack(stats[slo if slo is not None else cfg.slos[0]], method, slo or cfg.slos[0], f)
        judges.append((label, slo, Judge(where)))
    rng = np.random.default_rng([seed, 5, 4])
    k = cfg.bin_tasks
    bins = rng.permutation(cfg.tasks)[: cfg.tasks // k * k].reshape(-1, k)
    bin_sums = np.zeros((bins.shape[0], cfg.future))
    done = 0
    while done < cfg.future:
        usage = tasks.next(min(cfg.chunk, cfg.future - done))
        for _, _, judge in judges:
            judge.feed(usage)
        bin_sums[:, done:done + usage.shape[1]] = usage[bins].sum(axis=1)
        done += usage.shape[1]
    rows = []
    for label, slo, judge in judges:
        seen = Judge(judge.where)  # the same packing on the history it was made from
        seen.feed(history)
        skew = skewness(seen.sums(history))
        targets = cfg.slos if slo is None else [slo]
        for s in targets:  # an SLO-independent packing is judged against every target
            inside = per_machine(seen.over, seen.intervals, 1.0 - s)
            rows.append({"method": label, "slo": s, "independent": slo is None,
                         **per_machine(judge.over, judge.intervals, 1.0 - s),
                         **{f"in_sample_{k}": inside[k] for k in IN_SAMPLE_KEYS},
                         **shape_check(judge.over, skew, significant_count(1.0 - s, judge.intervals))})
    return {"seed": seed, "properties": props, "rows": rows,
            "bin_sizes": bin_sizes(bin_sums, cfg.slos),
            "mean_usage_machines": float(history.mean(axis=1).sum()),
            "requests_machines": float(tasks.size.sum())}


def bin_sizes(sums: np.ndarray[Any, Any], slos: list[float]) -> list[dict[str, float]]:
    """The p-quantile of each bin's usage over the future relative to its mean (nearest rank),
    averaged over bins, beside the normal fit 1 + z_p·σ/μ."""
    mean, sd = sums.mean(axis=1), sums.std(axis=1)
    ordered = np.sort(sums, axis=1)
    out = []
    for slo in slos:
        q = ordered[:, rank_index(slo, sums.shape[1])]
        out.append({"slo": slo, "measured": float(np.mean(q / mean)),
                    "normal_fit": float(np.mean(1 + sbp.z(slo) * sd / mean))})
    return out


def _mean_sd(values: list[float | None]) -> list[float] | None:
    """Mean and sd over seeds of the values that exist (None where none does)."""
    xs = [x for x in values if x is not None]
    if not xs:
        return None
    m = sum(xs) / len(xs)
    return [m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0]


SHAPE_ROWS = ("gpa-g", "gpa-sqrt", "emp-perc")
SHAPE_KEYS = ("skew_overflow_corr", "skew_significantly_over", "skew_others")
IN_SAMPLE_KEYS = ("overflow", "worst", "machines_over_target")
ROW_KEYS = ("machines", "overflow", "worst", "p50", "p90", "machines_over_target",
            "machines_significantly_over", *(f"in_sample_{k}" for k in IN_SAMPLE_KEYS))


def from_points(points: list[ModelPoint]) -> dict[str, Any]:
    """What the tables read: each figure as [mean, sd] over ``points`` (one variant's seeds), at
    the parameters of the first."""
    if not points:
        raise ValueError("the study has no points yet")
    cfg, per_seed = points[0].params, [p.output for p in points]
    rows = []
    for i, r0 in enumerate(per_seed[0]["rows"]):
        row: dict[str, Any] = {"method": r0["method"], "slo": r0["slo"], "target": 1.0 - r0["slo"],
                               "independent": r0["independent"]}
        for key in ROW_KEYS + SHAPE_KEYS:
            row[key] = _mean_sd([p["rows"][i][key] for p in per_seed])
        rows.append(row)
    props = {key: _mean_sd([float(p["properties"][key]) for p in per_seed])
             for key in per_seed[0]["properties"]}
    bins = [{"slo": b["slo"], "lecture": LECTURE_BIN_SIZE.get(b["slo"]),
             "measured": _mean_sd([p["bin_sizes"][i]["measured"] for p in per_seed]),
             "normal_fit": _mean_sd([p["bin_sizes"][i]["normal_fit"] for p in per_seed])}
            for i, b in enumerate(per_seed[0]["bin_sizes"])]
    return {
        "seeds": [p.params["seed"] for p in points], "tasks": cfg["tasks"], "interval_s": 300,
        "history_intervals": cfg["history"], "future_intervals": cfg["future"], "bin_tasks": cfg["bin_tasks"],
        "slos": list(cfg["slos"]), "lecture": LECTURE, "properties": props, "bin_sizes": bins,
        "slo_resolution": resolution(list(cfg["slos"]), cfg["future"]),
        "mean_usage_machines": _mean_sd([p["mean_usage_machines"] for p in per_seed]),
        "requests_machines": _mean_sd([p["requests_machines"] for p in per_seed]),
        "rows": rows,
    }


# ---- tables -------------------------------------------------------------------------------------


def methods_of(points: list[ModelPoint]) -> str:
    return per_variant(points, lambda ps: markdown_table(from_points(ps)))


def demand_of(points: list[ModelPoint]) -> str:
    return per_variant(points, lambda ps: demand_table(from_points(ps)))


def compact_of(points: list[ModelPoint]) -> str:
    return per_variant(points, lambda ps: compact_table(from_points(ps)))



def _pct(x: float) -> str:
    if abs(x) < 1e-12:  # zero, or a float sum's residue
        return "0%"
    return f"{x * 100:.2g}%" if x < 0.001 else f"{x * 100:.3g}%"


def _num(v: list[float] | None) -> str:
    return "-" if v is None else f"{v[0]:.2f} ± {v[1]:.2f}"


def _pm(v: list[float], pct: bool = True) -> str:
    return f"{_pct(v[0])} ± {_pct(v[1])}" if pct else f"{v[0]:.1f} ± {v[1]:.1f}"


def _rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """SLO-independent methods once (their packing is the same at every SLO), the others per SLO."""
    seen: set[str] = set()
    out = []
    for r in data["rows"]:
        if r["independent"]:
            if r["method"] in seen:
                continue
            seen.add(r["method"])
        out.append(r)
    return out


def markdown_table(data: dict[str, Any]) -> str:
    mu, req = data["mean_usage_machines"], data["requests_machines"]
    lines = [
        f"{data['tasks']} tasks; each packed on {data['history_intervals']:,} 5-minute intervals of history "
        f"and judged on the next {data['future_intervals']:,}; mean usage {mu[0]:.1f} machines, requests "
        f"{req[0]:.1f}; mean ± sd over seeds {', '.join(str(s) for s in data['seeds'])}",
        "",
        "| method | SLO | machines | overflow, all machine-intervals | median machine | worst machine "
        "| machines over 1 − SLO | significantly over | worst machine on its history |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in _rows(data):
        slo = "any" if r["independent"] else f"{r['slo'] * 100:g}% ({_pct(r['target'])})"
        over = ("" if r["independent"] else
                f"{_pm(r['machines_over_target'])} | {_pm(r['machines_significantly_over'])}")
        lines.append(f"| {r['method']} | {slo} | {_pm(r['machines'], False)} | {_pm(r['overflow'])} | "
                     f"{_pm(r['p50'])} | {_pm(r['worst'])} | {over or ' | '} | {_pm(r['in_sample_worst'])} |")
    lines += ["", "Which machines go over: the correlation of a machine's overflow with the skewness of its "
              "summed history, and the mean skewness of the machines significantly over beside the others'",
              "", "| method | SLO | correlation | skewness, significantly over | skewness, the others |",
              "|---|---|---|---|---|"]
    for r in _rows(data):
        if r["independent"] or r["method"] not in SHAPE_ROWS:
            continue
        cells = [_num(r[k]) for k in SHAPE_KEYS]
        lines.append(f"| {r['method']} | {r['slo'] * 100:g}% | " + " | ".join(cells) + " |")
    lines.append("")
    for res in data["slo_resolution"]:
        lines.append(f"- SLO {res['slo'] * 100:g}%: {res['note']}.")
    return "\n".join(lines)


def demand_table(data: dict[str, Any]) -> str:
    """The generator's properties beside the lecture's, and the bin sizes a random bin needs."""
    p, lec = data["properties"], data["lecture"]
    td = lec["time_dependent_share"]
    lines = [
        "| property (the Google trace, per the lecture) | generator | lecture |", "|---|---|---|",
        f"| C² of per-job CPU consumption | {p['cpu_c2'][0]:,.0f} ± {p['cpu_c2'][1]:,.0f} | "
        f"{lec['cpu_c2']:,.0f} |",
        f"| C² of per-job RAM consumption | {p['ram_c2'][0]:,.0f} ± {p['ram_c2'][1]:,.0f} | "
        f"{lec['ram_c2']:,.0f} |",
        f"| share of CPU consumption of the largest 1% of jobs | {_pm(p['cpu_top1_share'])} | "
        f"> {lec['top1_share_min'] * 100:g}% |",
        f"| C² of the packed tasks' CPU requests (heavy-tailed sizes) | {p['request_cpu_c2'][0]:.2f} ± "
        f"{p['request_cpu_c2'][1]:.2f} | - |",
        f"| share of the requested CPU of the largest 5% of packed tasks | "
        f"{_pm(p['request_top5_share'])} | - |",
        f"| tasks not time-independent (lag-1 autocorrelation) | {_pm(p['time_dependent_share'])} | "
        f"{td[0] * 100:g}–{td[1] * 100:.0f}% |",
        f"| random 50-task sums not normal (Jarque–Bera, 5%) | {_pm(p['non_normal_50'])} | "
        f"{lec['non_normal_50'] * 100:g}% |",
        f"| random 500-task sums not normal | {_pm(p['non_normal_500'])} | "
        f"{lec['non_normal_500'] * 100:g}% |",
        "",
        f"| SLO | bin size / mean, random {data['bin_tasks']}-task bins | normal fit | lecture (Google) | "
        "here rel. to 90% | lecture rel. to 90% |",
        "|---|---|---|---|---|---|",
    ]
    b0 = data["bin_sizes"][0]
    for b in data["bin_sizes"]:
        lec_b = b["lecture"]
        rel = (f"{lec_b / b0['lecture']:.2f}" if lec_b and b0["lecture"] else "-")
        lines.append(f"| {b['slo'] * 100:g}% | {b['measured'][0]:.3f} ± {b['measured'][1]:.3f} | "
                     f"{b['normal_fit'][0]:.3f} | {'-' if lec_b is None else f'{lec_b:.3f}'} | "
                     f"{b['measured'][0] / b0['measured'][0]:.2f} | {rel} |")
    return "\n".join(lines)


README_ROWS = ("request", "av 1.25", "gpa-g", "gpa-sqrt", "emp-perc", "cantelli")


def compact_table(data: dict[str, Any]) -> str:
    """A short version: machines, pooled overflow and the worst machine per method and SLO."""
    slos = data["slos"]
    lines = ["| method | " + " | ".join(f"SLO {s * 100:g}%" for s in slos) + " |",
             "|---" * (len(slos) + 1) + "|"]
    per: dict[str, dict[float, dict[str, Any]]] = {}
    for r in data["rows"]:
        per.setdefault(r["method"], {})[r["slo"]] = r
    for method, by in per.items():
        if method not in README_ROWS:
            continue
        cells = ["" if s not in by else
                 f"{by[s]['machines'][0]:.0f}, {_pct(by[s]['overflow'][0])}, worst {_pct(by[s]['worst'][0])}"
                 for s in slos]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    mu = data["mean_usage_machines"][0]
    return "\n".join(lines) + (
        f"\n\nCells: machines, overflow over all machine-intervals, the worst machine's (target 1 − SLO); "
        f"mean usage {mu:.1f} machines, {len(data['seeds'])} seeds.")
