"""A trace as scenario data: its jobs as ``[[workload.operations]]`` tables (sampled, windowed,
time-scaled as ``[workload.trace]`` asks), and its cluster when it describes one."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from emulator.scenario.schema import TraceConfig
from emulator.scenario.traces import alibaba, google, google2019, rumen, sls, swf, synth
from emulator.scenario.traces.model import Limits, NodeGroup, Trace, TraceJob
from emulator.scenario.traces.stream import Progress

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:@/-]+")


# Cluster archives whose times count from the start of a days-long trace: a replay (or a window of
# it) starts with its first kept job. SLS's formats keep their submit times, as SLS does.
REBASED_BY_DEFAULT = frozenset({"google2011", "google2019", "alibaba2018", "swf"})

def read_trace(cfg: TraceConfig, path: Path, progress: Progress | None = None,
               base_dir: Path | None = None) -> Trace:
    """Parse ``path`` in ``cfg.format``; raises ``TraceError`` naming file, record and field.
    ``base_dir``: where the files named beside it are (default: the current directory)."""
    limits = trace_limits(cfg)
    if cfg.format == "sls":
        return sls.read(path, cfg.pool, limits, cfg.am_types)
    if cfg.format == "rumen":
        return rumen.read(path, cfg.pool, limits)
    if cfg.format == "synth":
        return synth.read(path, cfg.pool, cfg.seed, limits)
    if cfg.format == "swf":
        return swf.read(path, cfg, progress)
    if cfg.format == "alibaba2018":
        return alibaba.read(path, cfg, _beside(cfg.instances, base_dir), progress)
    if cfg.format == "google2019":
        return google2019.read(path, cfg, _beside(cfg.collections, base_dir), progress)
    return google.read(path, cfg.pool, cfg.machine_cpu, cfg.machine_ram_gib, limits,
                       _beside(cfg.machine_events, base_dir))


def _beside(name: str, base_dir: Path | None) -> Path | None:
    if not name:
        return None
    p = Path(name)
    return p if p.is_absolute() else (base_dir or Path.cwd()) / p


def trace_limits(cfg: TraceConfig) -> Limits:
    return Limits(max_tasks=cfg.max_tasks, max_bytes=cfg.max_bytes)


def select(jobs: list[TraceJob], cfg: TraceConfig) -> list[TraceJob]:
    """The jobs submitted in the window, every ``sample``-th of them, at most ``max_jobs``."""
    ordered = sorted(jobs, key=lambda j: j.submit_s)
    if not ordered:
        return []
    t0 = ordered[0].submit_s + cfg.start_s
    end = t0 + cfg.span_s if cfg.span_s is not None else math.inf
    kept = [j for j in ordered if t0 <= j.submit_s < end][:: cfg.sample]
    return kept[: cfg.max_jobs] if cfg.max_jobs is not None else kept


def operations(trace: Trace, cfg: TraceConfig, taken: set[str] | None = None) -> list[dict[str, Any]]:
    """Per selected job: its AM container (``JOB.am``, when the format has one and ``cfg.am``),
    then one operation table per task group (named after the job, ``.1``, ``.2`` for further
    groups; ``job`` ties them together). A group waits for its AM to run (``after_start``) and
    for the groups it depends on to complete (``after``). ``taken``: names already in use. A trace
    read with its window applied while streaming (``trace.selected``) is not selected again."""
    jobs = trace.jobs if trace.selected else select(trace.jobs, cfg)
    if not jobs:
        return []
    used = set(taken or ())
    rebase = cfg.rebase if cfg.rebase is not None else cfg.format in REBASED_BY_DEFAULT
    t0 = jobs[0].submit_s if rebase else 0.0
    scale = cfg.time_scale
    out = []
    for job in jobs:
        base = _unique(_UNSAFE.sub("_", job.job_id) or "job", used)
        submit = round(cfg.offset_s + (job.submit_s - t0) * scale, 6)
        names = [base if k == 0 else _unique(f"{base}.{k}", used) for k in range(len(job.groups))]
        am = _unique(f"{base}.am", used) if cfg.am and job.am is not None else None
        ops: list[dict[str, Any]] = []
        if am is not None and job.am is not None:
            ops.append({"name": am, "pool": cfg.pool or job.pool, "cpu": job.am[0], "ram_gib": job.am[1],
                        "durations_s": [round(max(_critical_path_s(job) * scale, 1e-6), 6)],
                        "submit_at_s": submit, "lasts_for_job": True})
        for k, g in enumerate(job.groups):
            op: dict[str, Any] = {
                "name": names[k], "pool": cfg.pool or job.pool, "cpu": g.cpu, "ram_gib": round(g.ram_gib, 6),
                "durations_s": [round(max(d * scale, 1e-6), 6) for d in g.durations_s],
                "submit_at_s": round(submit + g.delay_s * scale, 6),
            }
            if g.after:
                op["after"] = [names[i] for i in g.after]
            if am is not None:
                op["after_start"] = [am]
            ops.append(op)
        if len(ops) > 1 or am is not None:
            for op in ops:
                op["job"] = base
        out.extend(ops)
    return out


def _critical_path_s(job: TraceJob) -> float:
    """How long the job runs on an empty cluster from its submission: each group starts at its
    request delay or when the groups it waits for end, whichever is later (an AM lasts as long)."""
    ends: dict[int, float] = {}

    def end(k: int) -> float:
        if k not in ends:
            g = job.groups[k]
            start = max([g.delay_s, *(end(i) for i in g.after)])  # readers order groups without cycles
            ends[k] = start + max(g.durations_s, default=0.0)
        return ends[k]

    return max((end(k) for k in range(len(job.groups))), default=0.0)


def _unique(name: str, used: set[str]) -> str:
    out, n = name, 1
    while out in used:
        n += 1
        out = f"{name}~{n}"
    used.add(out)
    return out


def cluster(nodes: list[NodeGroup]) -> dict[str, Any]:
    return {"nodes": [
        {"count": g.count, "cpu": g.cpu, "ram_gib": round(g.ram_gib, 6),
         "name": "node" if i == 0 else f"node{i}"}
        for i, g in enumerate(nodes)
    ]}


def horizon_s(ops: list[dict[str, Any]]) -> float:
    """A run length that lets the last job finish on an uncontended cluster (each operation after
    what it waits for), with room to queue."""
    by_name = {op["name"]: op for op in ops}
    times: dict[str, tuple[float, float]] = {}

    def ideal(name: str) -> tuple[float, float]:
        if name not in times:
            op = by_name[name]
            start = max([op["submit_at_s"], *(ideal(a)[1] for a in op.get("after", [])),
                         *(ideal(a)[0] for a in op.get("after_start", []))])
            times[name] = (start, start + max(op["durations_s"], default=0.0))
        return times[name]

    end = max((ideal(op["name"])[1] for op in ops), default=60.0)
    return float(max(60, math.ceil(end * 1.5 / 60) * 60))


def import_scenario(
    cfg: TraceConfig, path: Path, nodes: list[NodeGroup] | None = None, policy: str | None = None,
    duration_s: float | None = None, progress: Progress | None = None,
) -> tuple[dict[str, Any], Trace]:
    """A whole scenario replaying the trace: its cluster (``nodes``, else what the trace says),
    its jobs as operations, a run long enough for the last job."""
    from emulator.scenario.traces.model import TraceError

    trace = read_trace(cfg, path, progress)
    ops = operations(trace, cfg)
    if not ops:
        raise TraceError(f"{path}: no job in the window (start {cfg.start_s:g} s, span {cfg.span_s} s)")
    groups = nodes or trace.nodes
    if not groups:
        raise TraceError(f"{path}: the trace does not describe its cluster: give --nodes FILE (SLS nodes "
                         "file) or --node-count with --node-cpu and --node-ram-gib")
    data: dict[str, Any] = {
        "name": f"import-{path.stem}",
        "description": f"{cfg.format} trace {path.name}: {len(ops)} operations of "
                       f"{len({o.get('job', o['name']) for o in ops})} jobs (emulator import)",
        "cluster": cluster(groups),
        "run": {"duration_s": duration_s or horizon_s(ops)},
        "workload": {"operations": ops},
    }
    if policy is not None:
        data["scheduler"] = {"policy": policy}
    return data, trace
