"""E2 with a YARN-like RM (issue 33): the sweep of ``scenarios/e2-scale-sweep-yarn2020.toml``
(service-time model ``yarn-2020``) beside Mao et al. (2020)'s YARN.

The sweep runs periodic mode over the node counts around the paper's stock-YARN limit and delta
mode over those around its improved-YARN limit (``make e2-yarn2020``: scenarios/studies/e2-yarn2020.toml
run once per mode, two outputs); the table states each mode's limit (the largest n with h1, h2 >= 0.99) and
their ratio beside the paper's, and whether each is within 15% of it.
"""

from __future__ import annotations

from typing import Any

from emulator.study.sweep import sweep_of

# The paper's findings (§3.1): stock YARN degrades at ~4,000-4,500 nodes, improved YARN (delta
# heartbeats and ring monitoring) holds to ~7,500-8,000, a 1.88x larger cluster.
PAPER: dict[str, tuple[float, float]] = {
    "periodic": (4000, 4500), "delta": (7500, 8000), "ratio": (1.88, 1.88),
}
TOLERANCE = 0.15
LABELS = {"periodic": "stock YARN / periodic limit (nodes)", "delta": "improved YARN / delta limit (nodes)",
          "ratio": "delta / periodic"}


def within(value: float | None, key: str, tolerance: float = TOLERANCE) -> bool:
    """Whether ``value`` lies within ``tolerance`` of the paper's range for ``key``."""
    lo, hi = PAPER[key]
    return value is not None and lo * (1 - tolerance) <= value <= hi * (1 + tolerance)


def limits(periodic: dict[str, Any], delta: dict[str, Any]) -> dict[str, float | None]:
    """Each mode's limit from its sweep (None if even the smallest n failed, or the sweep never
    reached a failing n: then the limit is not measured), and their ratio."""
    out: dict[str, float | None] = {}
    for mode, sweep in (("periodic", sweep_of(periodic)), ("delta", sweep_of(delta))):
        best = sweep["largest_ok"].get(mode)
        out[mode] = best["nodes"] if best and best["nodes"] and not best["limited_by_sweep"] else None
    p, d = out["periodic"], out["delta"]
    out["ratio"] = d / p if p and d else None
    return out


def markdown_table(periodic: dict[str, Any], delta: dict[str, Any]) -> str:
    """The limits and ratio beside the paper's, then every point of both sweeps (h1, h2, RM CPU)."""
    periodic, delta = sweep_of(periodic), sweep_of(delta)
    got = limits(periodic, delta)
    lines = ["| | Mao et al. 2020, YARN | `yarn-2020` model, virtual time | within 15% |",
             "|---|---|---|---|"]
    for key in ("periodic", "delta", "ratio"):
        lo, hi = PAPER[key]
        paper = f"{lo:.2f}×" if key == "ratio" else f"{lo:,.0f}–{hi:,.0f}"
        v = got[key]
        mine = "not measured" if v is None else f"{v:.2f}×" if key == "ratio" else f"{v:,.0f}"
        lines.append(f"| {LABELS[key]} | {paper} | {mine} | {'yes' if within(v, key) else '**no**'} |")
    lines += ["", "| mode | nodes | h1 | h2 | RM CPU % | heartbeats skipped |", "|---|---|---|---|---|---|"]
    for sweep in (periodic, delta):
        ok = sweep["threshold"]
        for r in sweep["rows"]:
            h1, h2 = (("n/a" if v is None else f"**{v:.3f}**" if v >= ok else f"{v:.3f}")
                      for v in (r["h1"], r["h2"]))
            lines.append(f"| {r['mode']} | {r['nodes']:,} | {h1} | {h2} | {r['rm_cpu_percent']:.1f} | "
                         f"{r['heartbeats_skipped']:,} |")
    return "\n".join(lines) + "\n"
