"""E5 inside an emulated cluster (design.md §3b): stochastic bin packing done by the RM.

The offline E5 (``emulator e5``, e5.py) packs tasks that arrive with their history. Here the RM
places tasks of ``scenarios/e5-cluster.toml`` as they arrive, best-fit with the admission method
under test on the usage its nodes reported (a task not observed yet counts as its request; a
task observed a few times has a small history), and the nodes' ground truth says how often a
machine's usage really exceeded its capacity. Per admission method × SLO, over several seeds
(each seed: other task sizes, arrival times and usage draws): machines used (nodes holding a
task, mean and max over the measurement window), machine overflow in the window (share of
sampled node-time with usage above capacity) against the target 1 − SLO, and tasks left pending
(a method may need more machines than the cluster has). ``av`` does not depend on the SLO and
``request`` (no admission, no overcommit) is the baseline: each runs once per seed. The last row
is gpa-g trusting a task's statistics from its first report on (``min_samples = 1``).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from emulator.harness.runner import RunHandle, run_scenario
from emulator.harness.workload import instance
from emulator.measure.binpack import ffd, lower_bound
from emulator.results.usage import usage_summary
from emulator.scenario.loader import ScenarioError, load_scenario
from emulator.scenario.schema import Scenario
from emulator.scenario.topology import node_specs
from emulator.time.clock import LoopClock, run
from nodemanager.usage import model_mean

SLOS = (0.9, 0.99, 0.999, 0.9999)
AV_FACTORS = (1.0, 1.25, 2.0)
SLO_METHODS = ("perc", "gpa-g", "gpa-sqrt", "cantelli", "emp-perc")
SEEDS = (1, 2, 3)
YOUNG = "gpa-g, min_samples 1"


def configs() -> list[tuple[str, float | None, dict[str, Any]]]:
    """(row label, SLO or None for SLO-independent rows, scenario overrides)."""
    out: list[tuple[str, float | None, dict[str, Any]]] = [
        ("request", None, {"scheduler.admission.method": "request", "scheduler.placement.overcommit": 1.0,
                           "heartbeat.overcommit": 1.0}),
    ]
    for f in AV_FACTORS:
        out.append((f"av {f:g}", None,
                    {"scheduler.admission.method": "av", "scheduler.admission.av_factor": f}))
    for method in SLO_METHODS:
        for slo in SLOS:
            out.append((method, slo, {"scheduler.admission.method": method, "scheduler.admission.slo": slo}))
    for slo in SLOS:  # trusting a task's statistics from its first report on
        out.append((YOUNG, slo, {"scheduler.admission.method": "gpa-g", "scheduler.admission.slo": slo,
                                 "scheduler.admission.min_samples": 1}))
    return out


def workload_bounds(sc: Scenario) -> dict[str, Any]:
    """Every submitted task's request (all arrivals, not one instance per entry): FFD and a lower
    bound on the machines they need, and their mean CPU usage in machines."""
    specs = [res for _, res in node_specs(sc)]
    cap = (sum(r.cpu for r in specs) / len(specs), sum(r.ram_gib for r in specs) / len(specs))
    items: list[tuple[float, ...]] = []
    mean_cpu = 0.0
    for op in sc.workload.operations:
        cpu_mean = model_mean(op.usage.cpu if op.usage is not None else None)
        for k in range(op.instance_count):
            _, cpu, ram = instance(op, sc.run.seed, k, sc.workload.min_task_seconds)
            items += [(cpu, ram)] * op.task_count
            mean_cpu += cpu * cpu_mean * op.task_count
    n = ffd(items, cap)
    return {"tasks": len(items), "ffd_machines": n, "lower_bound_machines": lower_bound(items, cap, n),
            "mean_usage_machines": mean_cpu / cap[0], "nodes": len(specs), "node_cpu": cap[0]}


def run_one(sc: Scenario) -> dict[str, Any]:
    """One emulated run: machines used and machine overflow over the measurement window."""
    window: list[tuple[float, float]] = []  # the nodes' (node-time, overflow time) at its start

    def on_start(handle: RunHandle) -> None:
        counters = handle.hosting.counters()

        def sample(row: Any) -> None:
            if not window and row.t_s >= sc.run.warmup_s:
                window.append((counters.usage.node_s, counters.usage.overflow_s))

        handle.side.on_sample(sample)

    async def main(clock: LoopClock) -> Any:
        return await run_scenario(sc, clock, on_start=on_start)

    out = run(main, "virtual")
    st = out.nodes.usage
    node_s, over_s = (st.node_s - window[0][0], st.overflow_s - window[0][1]) if window else (0.0, 0.0)
    used = out.machines_used or {"mean": 0.0, "max": 0}
    return {
        "machines_mean": used["mean"], "machines_max": used["max"],
        "overflow": over_s / node_s if node_s > 0 else 0.0,
        "overflow_whole_run": usage_summary(out.nodes)["machine_overflow_fraction"],
        "placed": sum(o.running + o.completed for o in out.operations),
        "pending": sum(o.pending for o in out.operations),
    }


def _mean_sd(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0


def run_e5_cluster(
    path: Path, seeds: tuple[int, ...] = SEEDS, only: set[str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``overrides``: applied to every run (a smaller cluster for a test)."""
    common = overrides or {}
    base = load_scenario(path, common)
    if base.scheduler.placement.policy == "default" or not any(
            op.usage is not None for op in base.workload.operations):
        raise ScenarioError(f"{path}: at `scheduler.placement.policy`: E5 in a cluster needs a placement "
                            "policy and operations with a `usage` table")
    bounds = {s: workload_bounds(load_scenario(path, {**common, "run.seed": s})) for s in seeds}
    rows = []
    started = time.process_time()
    for label, slo, over in configs():
        if only is not None and label not in only:
            continue
        runs = []
        for s in seeds:
            runs.append(run_one(load_scenario(path, {**common, **over, "run.seed": s})))
        agg: dict[str, Any] = {"method": label, "slo": slo, "target": None if slo is None else 1.0 - slo,
                               "seeds": list(seeds), "runs": runs}
        for k in ("machines_mean", "machines_max", "overflow", "pending"):
            agg[k], agg[k + "_sd"] = _mean_sd([float(r[k]) for r in runs])
        rows.append(agg)
        print(f"{label} {'' if slo is None else slo}: machines {agg['machines_mean']:.1f}, overflow "
              f"{agg['overflow'] * 100:.3g}%, pending {agg['pending']:.0f}", flush=True)
    b = list(bounds.values())
    return {
        "scenario": str(path), "nodes": b[0]["nodes"], "node_cpu": b[0]["node_cpu"], "tasks": b[0]["tasks"],
        "placement": base.scheduler.placement.policy, "overcommit": base.scheduler.placement.overcommit,
        "warmup_s": base.run.warmup_s, "duration_s": base.run.duration_s,
        "history": base.scheduler.admission.history,
        "bounds": {str(s): v for s, v in bounds.items()},
        "ffd_machines": _mean_sd([float(v["ffd_machines"]) for v in b]),
        "mean_usage_machines": _mean_sd([v["mean_usage_machines"] for v in b]),
        "cpu_s": round(time.process_time() - started, 1), "slos": list(SLOS), "rows": rows,
    }


# ---- table ------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x * 100:.2g}%" if x < 0.001 else f"{x * 100:.3g}%"


def _cell(r: dict[str, Any], target: float | None) -> str:
    text = (f"{r['machines_mean']:.1f} ± {r['machines_sd']:.1f}, "
            f"{_pct(r['overflow'])} ± {_pct(r['overflow_sd'])}")
    if target is not None:
        text += f" ({_pct(target)})"
    if r["pending"] > 0:
        text += f", {r['pending']:.0f} pending"
    return text


def markdown_table(data: dict[str, Any]) -> str:
    slos = data["slos"]
    f, fsd = data["ffd_machines"]
    mu, _ = data["mean_usage_machines"]
    seeds = len(data["rows"][0]["seeds"]) if data["rows"] else 0
    lines = [
        f"{data['nodes']} nodes of {data['node_cpu']:g} cores, {data['tasks']} tasks, {data['placement']}; "
        f"mean usage {mu:.1f} machines, FFD on the requests {f:.1f} ± {fsd:.1f} machines; "
        f"mean ± sd over {seeds} seeds",
        "",
        "| method | " + " | ".join(f"SLO {s * 100:g}%: machines, overflow (target)" for s in slos) + " |",
        "|---" * (len(slos) + 1) + "|",
    ]
    for r in data["rows"]:
        r = {**r, "machines_sd": r["machines_mean_sd"]}
        if r["slo"] is None:  # the same run in every SLO column
            cells = [_cell(r, 1.0 - s) for s in slos]
            lines.append(f"| {r['method']} | " + " | ".join(cells) + " |")
    by: dict[str, dict[float, dict[str, Any]]] = {}
    for r in data["rows"]:
        if r["slo"] is not None:
            by.setdefault(r["method"], {})[r["slo"]] = {**r, "machines_sd": r["machines_mean_sd"]}
    for method, per in by.items():
        cells = [_cell(per[s], 1.0 - s) if s in per else "" for s in slos]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


README_ROWS = ("request", "av 1.25", "gpa-g", "emp-perc", "cantelli", YOUNG)


def compact_table(data: dict[str, Any]) -> str:
    """README's short version: machines and overflow of a few methods at each SLO (seed means)."""
    slos = data["slos"]
    lines = ["| method | " + " | ".join(f"SLO {s * 100:g}%" for s in slos) + " |",
             "|---" * (len(slos) + 1) + "|"]
    per: dict[str, dict[float | None, dict[str, Any]]] = {}
    for r in data["rows"]:
        per.setdefault(r["method"], {})[r["slo"]] = r
    for method, by in per.items():
        if method not in README_ROWS:
            continue
        cells = []
        for s in slos:
            r = by.get(s, by.get(None))
            cells.append("" if r is None else f"{r['machines_mean']:.0f}, {_pct(r['overflow'])}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    mu, _ = data["mean_usage_machines"]
    return "\n".join(lines) + (f"\n\nCells: machines used, machine overflow (target 1 − SLO); mean usage "
                               f"{mu:.1f} machines, {len(data['rows'][0]['seeds'])} seeds.")
