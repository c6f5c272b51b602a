"""E3's table (paper 004 §3.4, Fig. 9: the crash experiment in every failure-detection mode), from
the output of `emulator study scenarios/studies/e3.toml` (docs/ring-e3.json; rack and stalls:
e3-rack.toml, e3-stalls.toml). The modes are the study's variants:

- ``ring``: delta heartbeats + the improved ``kring`` detector (scenarios/e3-crash.toml);
- ``paper-ring``: the same with the paper's single-successor ``ring`` detector;
- ``periodic``: periodic heartbeats + the RM liveliness monitor, RM overloaded through its
  service-time model (scenarios/e3-crash-periodic.toml);
- ``periodic-no-overload``: the same with a zero-cost RM.

The study keeps each point's messages to the RM per sample, so that the rate "while nothing
fails" is taken over a window before the crash rather than over the whole run.
"""

from __future__ import annotations

from typing import Any

# Messages to the RM "while nothing fails" are measured over this window (before the crash).
QUIET_WINDOW_S = (100.0, 400.0)
NEEDED = ("nodes", "false_removed_nodes", "timeseries.t_s", "timeseries.to_rm_messages")
MODE_LABELS = {
    "ring": "delta + `kring` (ours)",
    "paper-ring": "delta + paper `ring`",
    "periodic": "periodic + liveliness monitor, RM overloaded",
    "periodic-no-overload": "periodic, no overload",
}


class NotE3(ValueError):
    """A study output without what E3's table needs."""


def quiet_rate(collected: dict[str, Any], column: str = "to_rm_messages") -> float:
    """Per node and minute, over QUIET_WINDOW_S, of a per-sample count of the run."""
    lo, hi = QUIET_WINDOW_S
    t, xs = collected["timeseries.t_s"], collected[f"timeseries.{column}"]
    total = sum(x for ti, x in zip(t, xs, strict=True) if lo < ti <= hi)
    rate = float(total) / float(collected["nodes"]) / ((hi - lo) / 60)
    return round(rate, 3)


def _g(x: float | None) -> str:
    return "–" if x is None else f"{x:g}"


def markdown_table(output: dict[str, Any]) -> str:
    """The README's table: a row per point (per mode; per mode and seed when there are several)."""
    lacking = [c for c in NEEDED if c not in output["study"].get("collect", [])]
    if lacking:
        raise NotE3(f"{output['file']}: E3's table needs the study to collect {', '.join(lacking)}")
    several = len({p["variant"] for p in output["points"]}) < len(output["points"])
    lines = [
        "| mode | nodes removed | false removals (nodes) | detection p50 / p99 / max | "
        "msgs to RM per node-min (no failures) | wall |",
        "|---|---|---|---|---|---|",
    ]
    for p in output["points"]:
        m, c = p["metrics"], p["collected"]
        label = MODE_LABELS.get(p["variant"], p["variant"])
        if several:
            label += ", " + ", ".join(f"{k} {v}" for k, v in p["coords"].items())
        lat = [m[f"detection_latency_s.{q}"] for q in ("p50", "p99", "max")]
        lines.append(
            f"| {label} | {m['nodes_lost']:,} | {m['false_removals']:,} "
            f"({c['false_removed_nodes']:,}) | {_g(lat[0])} / {_g(lat[1])} / {_g(lat[2])} s | "
            f"{quiet_rate(c):g} | {round(p['wall_s'], 1):g} s |"
        )
    return "\n".join(lines)
