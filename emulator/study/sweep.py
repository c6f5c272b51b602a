"""A study over node counts and heartbeat modes read as E2's sweep: one row per point (h1, h2, what
the RM and the node hosts spent, lag), each mode's limit (the largest node count that kept h1 and h2
at the threshold and was not overloaded) and the fitted service-time model. The E2 renderers take
``sweep_of(data)``: a study's output and the ``sweep.json`` files that `emulator sweep` wrote before
studies replaced it look the same to them."""

from __future__ import annotations

import statistics
from typing import Any

import msgspec

from emulator.study.output import FORMAT, PointResult, StudyOutput
from emulator.study.points import expand
from emulator.study.spec import DEFAULT_THRESHOLD, ROW_NEEDS, Study, StudyError, study_from_data


def _get(point: PointResult, name: str) -> Any:
    return point.metrics[name] if name in point.metrics else point.collected.get(name)


def node_count(scenario: dict[str, Any]) -> int:
    return sum(int(g.get("count", 1)) for g in scenario["cluster"]["nodes"])


def row(point: PointResult) -> dict[str, Any]:
    """The point's row: what `emulator sweep` measured of each run (its ``measure``), from the
    registry metrics and the sections (``ROW_NEEDS``) the study kept."""
    sc = point.scenario
    nodes, duration = node_count(sc), float(sc["run"]["duration_s"])
    sent = int(_get(point, "heartbeats_sent"))
    out: dict[str, Any] = {
        "mode": sc["heartbeat"]["mode"], "nodes": nodes, "h1": _get(point, "h1"), "h2": _get(point, "h2"),
        "heartbeats_sent": sent, "heartbeats_skipped": int(_get(point, "heartbeats_skipped")),
        **{k: _get(point, k) for k in ("update_events", "allocations", "nodes_lost", "rm_queue_depth_max",
                                       "rm_wait_p99_s")},
        "wall_s": round(float(_get(point, "timing.wall_s")), 2),
    }
    costs, workers, lag = _get(point, "costs"), _get(point, "workers"), _get(point, "lag")
    if costs is not None:  # real time: measured
        out.update({k: costs[k] for k in ("rm_cpu_percent", "rm_busy_fraction", "rm_cost_us_per_heartbeat")})
        out["messages_to_rm_per_node_minute"] = costs.get("messages_to_rm_per_node_minute")
        out["bytes_to_rm_per_node_minute"] = costs.get("bytes_to_rm_per_node_minute")
        out["service_time_us"] = costs["service_time_us"]
        # The longest one item of each kind held the RM's loop (wall µs), frame decoding aside.
        held = {k: v for k, v in costs.get("busy_us_by_type", {}).items() if k != "decode"}
        if held:
            kind = max(held, key=lambda k: held[k]["p99"])
            out["worst_handler"], out["worst_handler_p99_us"] = kind, held[kind]["p99"]
            out["worst_handler_max_us"] = max(v["max"] for v in held.values())
        if "SchedulePass" in held:
            out["schedule_pass_p99_us"] = held["SchedulePass"]["p99"]
            out["schedule_pass_max_us"] = held["SchedulePass"]["max"]
        if sent:  # the RM process's CPU, everything, per heartbeat the nodes sent
            out["rm_process_us_per_heartbeat"] = round(
                1e6 * costs["rm_cpu_percent"] / 100 * costs["wall_s"] / sent, 1)
    if workers:  # TCP: the busiest node-hosting process, to set beside the RM
        def load(w: dict[str, Any]) -> float:
            return float(w["cpu_s"] / w["wall_s"]) if w["wall_s"] else 0.0
        busiest = max(workers, key=load)
        out["worker_cpu_percent"] = round(100 * load(busiest), 1) if busiest["wall_s"] else None
        out["workers"] = len(workers)
        cpu = sum(w["cpu_s"] for w in workers)
        out["worker_cpu_us_per_heartbeat"] = round(1e6 * cpu / sent, 1) if sent else None
        # Hosting one node for one heartbeat interval, whatever it sent (a delta node ticks its ring).
        intervals = nodes * duration / float(sc["heartbeat"]["interval_s"])
        out["worker_cpu_us_per_node_interval"] = round(1e6 * cpu / intervals, 1)
    elif costs is None:  # virtual time: the service-time model's busy time is the RM's CPU
        busy = float(_get(point, "rm.busy_s")) / duration
        out["rm_cpu_percent"], out["rm_busy_fraction"] = round(100 * busy, 2), round(busy, 4)
        out["messages_to_rm_per_node_minute"] = round(float(_get(point, "messages_to_rm_per_node_minute")), 3)
    out["lateness_p99_s"] = _get(point, "timing.lateness_p99_s")
    # A real-time point whose emulator fell behind real time is no finding, whatever its h1/h2.
    out["overloaded"] = bool(lag is not None and lag["overloaded"])
    if lag is not None and lag.get("reasons"):
        out["overload_reasons"] = list(lag["reasons"])
    return out


def failed(r: dict[str, Any], threshold: float) -> bool:
    return bool(r["h1"] is None or r["h2"] is None or r["h1"] < threshold or r["h2"] < threshold
                or r.get("overloaded"))


def largest_ok(rows: list[dict[str, Any]], mode: str, threshold: float) -> tuple[int | None, bool]:
    """Largest n of ``mode`` such that it and every smaller n keep h1, h2 >= threshold; and whether
    a larger n failed (False: the true limit may be higher than the sweep went)."""
    best = None
    for r in sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["nodes"]):
        if failed(r, threshold):
            return best, True
        best = r["nodes"]
    return best, False


def ratio_of(limits: dict[str, tuple[int | None, bool]]) -> float | None:
    p, d = limits.get("periodic", (None, False))[0], limits.get("delta", (None, False))[0]
    return d / p if p and d else None


def calibration(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """Median of the per-run fitted service-time models (wall µs); None without real-time points."""
    fits = [r["service_time_us"] for r in rows if r.get("service_time_us")]
    if not fits:
        return None
    return {k: round(statistics.median(f[k] for f in fits), 3) for k in fits[0]}


def calibration_toml(sweep: dict[str, Any]) -> str:
    """The fitted model as a scenario's ``[rm.service_time]``, scaled by the runs' speed: ready to
    paste into the virtual-time variant (scenarios/e2-scale-sweep-virtual.toml)."""
    fit, speed = sweep.get("calibration_us"), sweep.get("speed") or 1.0
    if not fit:
        return "No service-time model: no point of this study measured the RM's costs (real time only).\n"
    lines = [f"[rm.service_time]  # fitted wall µs x speed {speed:g}"]
    return "\n".join([*lines, *(f"{k} = {v * speed:.3f}" for k, v in fit.items())]) + "\n"


def modes_of(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["mode"] for r in rows))


def limits_text(sweep: dict[str, Any]) -> str:
    lines = []
    for mode, v in sweep["largest_ok"].items():
        text = "none" if v["nodes"] is None else f"{'≥ ' if v['limited_by_sweep'] else ''}{v['nodes']:,}"
        lines.append(f"Largest n with h1, h2 ≥ {sweep['threshold']:g}, {mode}: {text}")
    ratio = sweep.get("delta_over_periodic")
    if ratio is not None:
        lower = "≥ " if sweep["largest_ok"]["delta"]["limited_by_sweep"] else ""
        lines.append(f"delta / periodic: {lower}{ratio:.2f}×")
    if sweep.get("transport") == "tcp":  # each process's CPU measured: which one was the limit
        lines.append(f"Which process saturated first: {saturates_first(sweep)}")
    return "\n".join(lines) + "\n"


def _busier(r: dict[str, Any]) -> str:
    who = "node host" if r["worker_cpu_percent"] > r["rm_cpu_percent"] else "RM"
    return f"{who} (RM {r['rm_cpu_percent']:.0f}%, node host {r['worker_cpu_percent']:.0f}%)"


def saturates_first(sweep: dict[str, Any]) -> str:
    """Which process was busier at each mode's limit (its largest size that kept up) and at the
    first size past it (real-time TCP sweeps, CPU of each process over the same window)."""
    sweep = sweep_of(sweep)
    verdicts = []
    for mode in ("periodic", "delta"):
        best, failed = largest_ok(sweep["rows"], mode, sweep["threshold"])
        rows = [r for r in sweep["rows"] if r["mode"] == mode and r.get("worker_cpu_percent") is not None]
        at = [r for r in rows if r["nodes"] == best]
        past = [r for r in rows if best is None or r["nodes"] > best]
        if not failed or not past:
            continue
        parts = []
        if at:
            parts.append(f"at the limit {_busier(at[0])}")
        parts.append(f"past it {_busier(min(past, key=lambda r: r['nodes']))}")
        verdicts.append(f"{mode}: busier " + ", ".join(parts))
    return "; ".join(verdicts) if verdicts else "no limit reached"


def view(study: Study, output: StudyOutput) -> dict[str, Any]:
    """The study's output as `emulator sweep` wrote ``sweep.json``: rows in the study's point order,
    the limits at the study's threshold, the fitted model, how the nodes were hosted."""
    threshold = study.limits.threshold if study.limits else DEFAULT_THRESHOLD
    rows = [row(p) for p in output.points]
    first = output.points[0].scenario if output.points else {}
    run, transport = first.get("run", {}), first.get("transport", {}).get("kind", "memory")
    hosts = next((len(p.collected["workers"]) for p in output.points if p.collected.get("workers")), 0)
    cluster = output.overrides.get("cluster")
    limits = {m: largest_ok(rows, m, threshold) for m in modes_of(rows)}
    result: dict[str, Any] = {
        "file": output.file, "threshold": threshold, "rows": rows, "calibration_us": calibration(rows),
        "speed": run.get("speed", 1.0), "clock": run.get("clock", "virtual"), "transport": transport,
        "workers": hosts or None,
        "hosting": None if transport != "tcp" else "processes" if cluster is None else f"dask {cluster}",
        "largest_ok": {m: {"nodes": v[0], "limited_by_sweep": not v[1]} for m, v in limits.items()},
        "delta_over_periodic": ratio_of(limits),
    }
    if len(expand(study)) > len(output.points) + len(output.skipped):  # a study still running
        result["points_planned"] = len(expand(study))
    return result


def sweep_of(data: dict[str, Any]) -> dict[str, Any]:
    """The one boundary of the E2 renderers: a ``sweep.json`` as it is, or a study's output (JSON
    decoded) as one."""
    if data.get("format") != FORMAT:  # `emulator sweep`'s sweep.json, or a part of one
        return data
    output = msgspec.convert(data, StudyOutput)
    study = study_from_data(output.study, f"{output.file} (as stored in the output)")
    missing = [n for n in ROW_NEEDS if n not in study.metrics and n not in study.collect]
    if missing:
        raise StudyError(f"{output.file}: read as E2's sweep, a study keeps {', '.join(missing)} (in its "
                         "`metrics` or `collect`)")
    return view(study, output)
