"""The bench's report, from its study's points: what ``docs/bench.json`` holds (each mode's speed
on today's design against the floor, the first design's beside it, the memory per NodeManager) and
docs/results.md's table of it. Files written by the `emulator bench` command that the study
replaced hold that report already; study output is turned into it here, point by point."""

from __future__ import annotations

from typing import Any

from emulator.models.point import ModelPoint

MODES = ("periodic", "delta")


class NotBench(ValueError):
    """Points that do not make a bench report."""


def report_of(points: list[ModelPoint]) -> dict[str, Any]:
    """Today's design's speed per mode (with its multiple of the floor), the first design's per
    mode (``baseline``, when the study ran it), the floor, the memory and the machine."""
    by: dict[str, dict[tuple[str, str], dict[str, Any]]] = {"speed": {}, "floor": {}, "memory": {}}
    for p in points:
        by[p.params["measure"]][(p.params["mode"], p.params["design"])] = p.output
    current = {m: by["speed"].get((m, "des")) for m in MODES}
    missing = [m for m, r in current.items() if r is None]
    if missing or not by["floor"] or not by["memory"]:
        what = [f"the {m} speed on design `des`" for m in missing] + [
            f"a `{k}` point" for k in ("floor", "memory") if not by[k]]
        raise NotBench(f"a bench report needs {', '.join(what)}")
    floor = next(iter(by["floor"].values()))["floor_us_per_heartbeat"]
    periodic, delta = ({**r, "x_floor": round(r["us_per_heartbeat"] / floor, 1)}
                       for r in (current["periodic"], current["delta"]) if r is not None)
    baseline = {m: r for (m, d), r in by["speed"].items() if d == "asyncio"}
    ratio = periodic["wall_s"] / delta["wall_s"] if delta["wall_s"] > 0 else float("inf")
    return {
        "periodic": periodic, "delta": delta, "periodic_over_delta_wall": round(ratio, 3),
        "memory": next(iter(by["memory"].values())),
        "baseline": baseline if set(baseline) == set(MODES) else {},
        "floor_us_per_heartbeat": round(floor, 2), "machine": periodic.get("machine", {}),
    }


def table(points: list[ModelPoint]) -> str:
    """The bench study's table (``[[tables]] render = "bench"``)."""
    return markdown_table(report_of(points))


def markdown_table(report: dict[str, Any]) -> str:
    """docs/results.md's table, from a bench report (``report_of``, or a committed ``bench.json``)."""
    lines = [
        "| mode | wall time | CPU time | heartbeats | heartbeats / CPU s | µs / heartbeat (× floor) "
        "| tasks scheduled / wall s | emulated s / wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    names = {"periodic": "periodic (+ RM liveliness monitor)", "delta": "delta (+ `kring` ring monitor)"}
    for mode in ("periodic", "delta"):
        r = report[mode]
        lines.append(
            f"| {names[mode]} | {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s | {r['heartbeats']:,} | "
            f"{r['heartbeats_per_cpu_s']:,} | {r['us_per_heartbeat']:.1f} ({r['x_floor']:g}×) | "
            f"{r['tasks_per_wall_s']:,} | {r['emulated_per_wall']:,} |"
        )
    mem, m = report["memory"], report.get("machine", {})
    busy = next(v for k, v in mem.items() if k.startswith("bytes_per_node_with"))
    lines.append("")
    lines.append(
        f"{report['periodic']['nodes']:,} nodes × {report['periodic']['emulated_s'] / 3600:g} emulated h; "
        f"periodic / delta wall-time ratio {report['periodic_over_delta_wall']:.2f}; floor "
        f"{report['floor_us_per_heartbeat']:.2f} µs per periodic heartbeat; memory per NodeManager "
        f"{mem['bytes_per_idle_node']:,} B idle, {busy:,} B with 20 containers (tracemalloc); "
        f"{m.get('cores', '?')} cores, Python {m.get('python', '?')}."
    )
    base = report.get("baseline") or {}
    if base:
        lines.append("")
        lines.append(
            "The first design (asyncio's loop as the virtual clock, every ring liveness a message), "
            "measured in the same invocation: "
            + "; ".join(
                f"{mode} {base[mode]['cpu_s']:.1f} s CPU, {base[mode]['cpu_s'] / report[mode]['cpu_s']:.2f}× "
                "the current design's"
                for mode in ("periodic", "delta")
            )
            + "."
        )
    return "\n".join(lines)
