"""E5: stochastic bin packing (design.md §3b, the lecture's SBP slides).

Offline, on a synthetic workload (scenarios/studies/e5.toml's ``params``): each task's usage is drawn by
the emulator's own usage processes (nodemanager/usage.py) every ``sample_interval_s``; the first
``history_samples`` are what the scheduler observed (per-task statistics), the next
``test_samples`` are the future the packing is judged on. Tasks arrive in a seeded random
order and go best-fit (the machine with the largest estimated mean load) onto machines of
capacity 1, a task fitting a machine when the admission method says so (rm/borg/sbp.py, the
same functions the RM uses). Per method and SLO: machines used, and the measured overflow
frequency (machine-samples with usage > capacity) against the target η = 1 − SLO.

Also: the bin size a random bin of ``bin_tasks`` tasks needs for each SLO relative to its mean
(the lecture's 1.294 / 1.488 / 1.643 / 1.760 on the Google trace) beside what a normal fit
predicts, and the bin-packing baselines (next-fit / first-fit / best-fit / FFD on the tasks'
requests), on the same tasks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec

from emulator.measure.binpack import ALGORITHMS, RATIOS, lower_bound
from emulator.models.point import ModelPoint
from nodemanager.usage import UsageProcess
from rm import sbp
from rm.protocol import UsageModel

Method = Literal["request", "av", "perc", "gpa-g", "gpa-sqrt", "cantelli", "emp-perc"]
# The lecture's required bin size relative to the mean, Google 2011 trace, SLO 90/99/99.9/99.99%.
LECTURE_BIN_SIZE = {0.9: 1.294, 0.99: 1.488, 0.999: 1.643, 0.9999: 1.760}
# The 1.496 bound (normal demands: the deterministic approximations need 49.6% more capacity).
LECTURE_NORMAL_BOUND = 1.496


class TaskGroup(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """``share`` of the tasks: requests uniform in [size_min, size_max] of a machine, usage a
    fraction of the request drawn by ``usage``."""

    share: Annotated[float, msgspec.Meta(gt=0, le=1)]
    size_min: Annotated[float, msgspec.Meta(gt=0, le=1)]
    size_max: Annotated[float, msgspec.Meta(gt=0, le=1)]
    usage: UsageModel

    def __post_init__(self) -> None:
        if self.size_max < self.size_min:
            raise ValueError("`size_max` must be >= `size_min`")


class E5Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    seed: int = 1
    tasks: Annotated[int, msgspec.Meta(ge=2, le=100_000)] = 400
    history_samples: Annotated[int, msgspec.Meta(ge=2, le=100_000)] = 200
    test_samples: Annotated[int, msgspec.Meta(ge=10, le=1_000_000)] = 1000
    sample_interval_s: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    slos: list[Annotated[float, msgspec.Meta(gt=0, lt=1)]] = msgspec.field(
        default_factory=lambda: [0.9, 0.99, 0.999, 0.9999])
    methods: list[Method] = msgspec.field(
        default_factory=lambda: ["request", "av", "perc", "gpa-g", "gpa-sqrt", "cantelli", "emp-perc"])
    av_factors: list[Annotated[float, msgspec.Meta(gt=0)]] = msgspec.field(
        default_factory=lambda: [1.0, 1.25, 2.0])
    bin_tasks: Annotated[int, msgspec.Meta(ge=1)] = 50
    groups: Annotated[list[TaskGroup], msgspec.Meta(min_length=1)]


class Task:
    __slots__ = ("hist", "mean", "request", "sd", "test")

    def __init__(self, request: float, hist: list[float], test: list[float]) -> None:
        self.request = request
        self.hist = hist
        self.test = test
        self.mean, self.sd = sbp.mean_sd(hist)


def workload(cfg: E5Config) -> list[Task]:
    rng = random.Random(f"e5:{cfg.seed}")
    total = sum(g.share for g in cfg.groups)
    tasks: list[Task] = []
    n_samples = cfg.history_samples + cfg.test_samples
    for gi, g in enumerate(cfg.groups):
        for k in range(round(cfg.tasks * g.share / total)):
            size = rng.uniform(g.size_min, g.size_max)
            proc = UsageProcess(g.usage, random.Random(f"e5:{cfg.seed}:{gi}:{k}"), 0.0)
            draws = [size * proc.draw(i * cfg.sample_interval_s) for i in range(n_samples)]
            tasks.append(Task(size, draws[: cfg.history_samples], draws[cfg.history_samples:]))
    rng.shuffle(tasks)  # the arrival order
    return tasks


class Machine:
    __slots__ = ("hist", "mean", "perc", "request", "tasks", "var")

    def __init__(self, h: int) -> None:
        self.tasks: list[Task] = []
        self.mean = self.var = self.request = self.perc = 0.0
        self.hist = [0.0] * h

    def add(self, t: Task, perc: float) -> None:
        self.tasks.append(t)
        self.mean += t.mean
        self.var += t.sd * t.sd
        self.request += t.request
        self.perc += perc
        self.hist = [a + b for a, b in zip(self.hist, t.hist, strict=True)]


def _fits(m: Machine, t: Task, method: str, slo: float, f: float, perc: float) -> bool:
    """The admission test (capacity 1) on the machine's sums; the same inequalities as
    rm/borg/sbp.py (gpa-sqrt and emp-perc call its functions on the summed history)."""
    mu = m.mean + t.mean
    sd = math.sqrt(m.var + t.sd * t.sd)
    if method == "request":
        return m.request + t.request <= 1.0 + 1e-9
    if method == "av":
        return f * mu <= 1.0 + 1e-9
    if method == "perc":
        return m.perc + perc <= 1.0 + 1e-9
    if method == "gpa-g":
        return mu + sbp.z(slo) * sd <= 1.0 + 1e-9
    if method == "cantelli":
        return mu + sbp.cantelli_b(1.0 - slo) * sd <= 1.0 + 1e-9
    series = [a + b for a, b in zip(m.hist, t.hist, strict=True)]
    return (sbp.fits_gpa_sqrt if method == "gpa-sqrt" else sbp.fits_emp_perc)(series, slo, 1.0)


def pack(tasks: list[Task], method: str, slo: float, f: float, h: int) -> list[Machine]:
    machines: list[Machine] = []
    for t in tasks:
        perc = sbp.percentile(t.hist, slo) if method == "perc" else 0.0
        best: Machine | None = None
        for m in machines:
            if (best is None or m.mean > best.mean) and _fits(m, t, method, slo, f, perc):
                best = m
        if best is None:
            best = Machine(h)
            machines.append(best)
        best.add(t, perc)
    return machines


def overflow(machines: list[Machine], n: int) -> tuple[float, float]:
    """(share of machine-samples over capacity, share of machines over their own η budget)."""
    over = 0
    per_machine: list[float] = []
    for m in machines:
        sums = [sum(t.test[i] for t in m.tasks) for i in range(n)]
        k = sum(1 for s in sums if s > 1.0 + 1e-9)
        over += k
        per_machine.append(k / n)
    return over / (len(machines) * n), 0.0 if not per_machine else sum(per_machine) / len(per_machine)


def bin_sizes(tasks: list[Task], cfg: E5Config) -> list[dict[str, Any]]:
    """Random bins of ``bin_tasks`` tasks: the p-quantile of each bin's usage over the test
    samples relative to its mean, averaged over the bins; beside the normal fit 1 + z_p·σ/μ."""
    rng = random.Random(f"e5-bins:{cfg.seed}")
    order = list(tasks)
    rng.shuffle(order)
    k = min(cfg.bin_tasks, len(order))
    bins = [order[i:i + k] for i in range(0, len(order) - k + 1, k)]
    rows: list[dict[str, Any]] = []
    for slo in cfg.slos:
        measured = normal = 0.0
        for b in bins:
            sums = [sum(t.test[i] for t in b) for i in range(cfg.test_samples)]
            m, s = sbp.mean_sd(sums)
            measured += sbp.percentile(sums, slo) / m
            normal += 1 + sbp.z(slo) * s / m
        rows.append({"slo": slo, "measured": measured / len(bins), "normal_fit": normal / len(bins),
                     "lecture": LECTURE_BIN_SIZE.get(slo)})
    base = rows[0]
    for r in rows:
        r["measured_rel"] = r["measured"] / base["measured"]
        r["lecture_rel"] = (r["lecture"] / base["lecture"]) if r["lecture"] and base["lecture"] else None
    return rows


def run_point(cfg: E5Config) -> dict[str, Any]:
    """A model study's point: the packing per method and SLO, the bin sizes, the normal bound and
    the bin-packing baselines on the same tasks."""
    return {**run_e5(cfg), "baselines": baselines(cfg)}


def run_e5(cfg: E5Config) -> dict[str, Any]:
    tasks = workload(cfg)
    mean_total = sum(t.mean for t in tasks)
    rows = []
    for slo in cfg.slos:
        for method in cfg.methods:
            for f in (cfg.av_factors if method == "av" else [1.0]):
                machines = pack(tasks, method, slo, f, cfg.history_samples)
                freq, _ = overflow(machines, cfg.test_samples)
                rows.append({
                    "slo": slo, "method": f"av {f:g}" if method == "av" else method,
                    "machines": len(machines), "overflow": freq, "target": 1.0 - slo,
                    "mean_load": mean_total / len(machines),
                })
    return {"tasks": len(tasks), "mean_usage_machines": mean_total, "rows": rows,
            "bin_sizes": bin_sizes(tasks, cfg), "normal_bound": normal_bound()}


def normal_bound() -> dict[str, float]:
    """The lecture's claim: for normal items with effective sizes 1/Nᵢ (Nμ + Z√N·σ = 1),
    1/N₁ + 1/N₂ ≤ 1 implies μ₁ + μ₂ + Z√(σ₁² + σ₂²) ≤ 1.496. With μᵢ = tᵢ/Nᵢ and
    Zσᵢ = (1 − tᵢ)/√Nᵢ the left side is Σtᵢuᵢ + √Σ(1 − tᵢ)²uᵢ (uᵢ = 1/Nᵢ), whose supremum
    over u₁ + u₂ ≤ 1 is a + √(1 − a) at a = 3/4: 1.25. Found here by a grid search."""
    best = 0.0
    steps = 200
    for i in range(1, steps):
        u1 = i / steps
        u2 = 1.0 - u1
        for a in range(0, 41):
            t1 = a / 40
            for b in range(0, 41):
                t2 = b / 40
                v = t1 * u1 + t2 * u2 + math.sqrt((1 - t1) ** 2 * u1 + (1 - t2) ** 2 * u2)
                best = max(best, v)
    return {"max_found": best, "analytic_sup": 1.25, "lecture_bound": LECTURE_NORMAL_BOUND}


def _items(sizes: list[float]) -> list[tuple[float, ...]]:
    return [(x,) for x in sizes]


def baselines(cfg: E5Config) -> dict[str, Any]:
    """Next-fit / first-fit / best-fit / FFD on the E5 tasks' requests (arrival order), and on
    the classic worst cases, against a lower bound on the optimum."""
    tasks = workload(cfg)
    cases: dict[str, list[tuple[float, ...]]] = {"e5 requests": [(t.request,) for t in tasks]}
    e = 0.01
    cases["FFD worst case"] = _items(([0.5 + e] * 6 + [0.25 + 2 * e] * 6 + [0.25 + e] * 6
                                      + [0.25 - 2 * e] * 12) * 5)
    cases["first-fit worst case"] = _items([1 / 7 + 0.001] * 30 + [1 / 3 + 0.001] * 30 + [1 / 2 + 0.001] * 30)
    cases["next-fit worst case"] = _items([0.5, 0.001] * 100)
    out = []
    for name, items in cases.items():
        lb = lower_bound(items, (1.0,))
        row: dict[str, Any] = {"workload": name, "items": len(items), "lower_bound": lb}
        for alg, fn in ALGORITHMS.items():
            row[alg] = fn(items, (1.0,))
        out.append(row)
    return {"rows": out, "ratios": RATIOS}


# ---- tables -----------------------------------------------------------------------------------


def _each(points: list[ModelPoint], table: Callable[[dict[str, Any]], str]) -> str:
    """One table per point (a study of one point, as E5's: the table alone)."""
    if len(points) == 1:
        return table(points[0].output)
    return "\n\n".join(f"**{p.label}, seed {p.params['seed']}**\n\n{table(p.output)}" for p in points)


def methods_of(points: list[ModelPoint]) -> str:
    return _each(points, markdown_table)


def bin_sizes_of(points: list[ModelPoint]) -> str:
    return _each(points, bin_sizes_table)


def baselines_of(points: list[ModelPoint]) -> str:
    return _each(points, lambda out: baselines_table(out["baselines"]))



def markdown_table(data: dict[str, Any]) -> str:
    slos = sorted({r["slo"] for r in data["rows"]})
    methods = list(dict.fromkeys(r["method"] for r in data["rows"]))
    by = {(r["method"], r["slo"]): r for r in data["rows"]}
    head = "| method | " + " | ".join(f"SLO {s * 100:g}%: machines, overflow (target)" for s in slos) + " |"
    lines = [f"{data['tasks']} tasks, mean total usage {data['mean_usage_machines']:.1f} machines", "",
             head, "|---" * (len(slos) + 1) + "|"]
    for m in methods:
        cells = []
        for s in slos:
            r = by.get((m, s))
            cells.append("" if r is None else
                         f"{r['machines']}, {r['overflow'] * 100:.3g}% ({r['target'] * 100:.3g}%)")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", bin_sizes_table(data)]
    nb = data["normal_bound"]
    lines += ["", f"Normal-demand bound: max found {nb['max_found']:.4f} (analytic supremum "
              f"{nb['analytic_sup']}) <= lecture's {nb['lecture_bound']}"]
    return "\n".join(lines)


def bin_sizes_table(data: dict[str, Any]) -> str:
    """Bin size a random bin needs at each SLO, relative to its mean, beside the lecture's."""
    lines = ["| SLO | bin size / mean (here) | normal fit | lecture (Google) | here rel. to 90% | "
             "lecture rel. to 90% |", "|---|---|---|---|---|---|"]
    for b in data["bin_sizes"]:
        lec = f"{b['lecture']:.3f}" if b["lecture"] else "-"
        lrel = f"{b['lecture_rel']:.2f}" if b["lecture_rel"] else "-"
        lines.append(f"| {b['slo'] * 100:g}% | {b['measured']:.3f} | {b['normal_fit']:.3f} | {lec} | "
                     f"{b['measured_rel']:.2f} | {lrel} |")
    return "\n".join(lines)


def baselines_table(data: dict[str, Any]) -> str:
    algs = list(data["ratios"])
    lines = ["| workload | items | lower bound | " + " | ".join(algs) + " |", "|---" * (len(algs) + 3) + "|"]
    for r in data["rows"]:
        cells = [f"{r[a]} ({r[a] / r['lower_bound']:.2f})" for a in algs]
        lines.append(f"| {r['workload']} | {r['items']} | {r['lower_bound']} | " + " | ".join(cells) + " |")
    ratios = " | ".join(f"{data['ratios'][a]:.3g}" for a in algs)
    lines.append(f"| lecture worst-case ratio | | | {ratios} |")
    return "\n".join(lines)
