"""E2's tables: the docs' sweep table, the costs table, the README's E2 headline, the many-core
runs and which process saturated first. Each takes an E2 study's output (scenarios/studies/e2*.toml)
or a ``sweep.json`` that `emulator sweep` wrote before studies replaced it: both read through
``sweep_of``, the one boundary (emulator/study/sweep.py). Pure: no run."""

from __future__ import annotations

from typing import Any

from emulator.study.sweep import largest_ok, saturates_first, sweep_of


def markdown_table(result: dict[str, Any]) -> str:
    """The docs' table: a row per point, then each mode's limit and the ratio."""
    result = sweep_of(result)
    lines = [
        "| mode | nodes | h1 | h2 | RM CPU % | RM busy | µs / hb | RM process µs / hb | node host CPU % "
        "| node host µs / node-interval | msgs / node / min | bytes / node / min | skipped "
        "| lateness p99 (s) | RM wait p99 (s) | overloaded |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ok = result["threshold"]

    def h(v: float | None) -> str:
        return "n/a" if v is None else f"**{v:.3f}**" if v >= ok else f"{v:.3f}"

    def f(r: dict[str, Any], key: str, spec: str) -> str:
        v = r.get(key)  # a virtual-time sweep measures no wall costs and no bytes
        return "–" if v is None else format(v, spec)

    for r in result["rows"]:
        lines.append(
            f"| {r['mode']} | {r['nodes']:,} | {h(r['h1'])} | {h(r['h2'])} | "
            f"{f(r, 'rm_cpu_percent', '.1f')} | {f(r, 'rm_busy_fraction', '.3f')} | "
            f"{f(r, 'rm_cost_us_per_heartbeat', '.1f')} | {f(r, 'rm_process_us_per_heartbeat', '.1f')} | "
            f"{f(r, 'worker_cpu_percent', '.1f')} | {f(r, 'worker_cpu_us_per_node_interval', '.1f')} | "
            f"{f(r, 'messages_to_rm_per_node_minute', '.2f')} | "
            f"{f(r, 'bytes_to_rm_per_node_minute', ',.0f')} | "
            f"{f(r, 'heartbeats_skipped', ',')} | {f(r, 'lateness_p99_s', '.2f')} | "
            f"{f(r, 'rm_wait_p99_s', '.2f')} | {'**yes**' if r.get('overloaded') else 'no'} |"
        )
    best = result["largest_ok"]
    # "≥": no point of the mode failed, so its limit may lie beyond the sweep's largest n.
    at_least = {m: "≥ " if v.get("limited_by_sweep") else "" for m, v in best.items()}
    parts = [f"{m} {at_least[m]}{v['nodes']:,}" if v["nodes"] else f"{m} none" for m, v in best.items()]
    ratio = result.get("delta_over_periodic")
    lines.append("")
    lines.append(f"Largest n with h1, h2 ≥ {ok:g}: **{', '.join(parts)}"
                 + (f", ratio {at_least.get('delta', '')}{ratio:.2f}×**" if ratio is not None else "**"))
    return "\n".join(lines)


def costs_table(result: dict[str, Any]) -> str:
    """Per real-time point: how long one item held the RM's loop, and what each process spent."""
    result = sweep_of(result)
    lines = [
        "| mode | nodes | speed | overloaded | worst handler p99 (µs) | any handler max (µs) "
        "| scheduling pass p99 / max (µs) | RM process µs / hb | node host µs / node-interval |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def f(r: dict[str, Any], key: str, spec: str = ",.0f") -> str:
        v = r.get(key)
        return "–" if v is None else format(v, spec)

    for r in result["rows"]:
        worst = f"{f(r, 'worst_handler_p99_us')} ({r['worst_handler']})" if r.get("worst_handler") else "–"
        lines.append(
            f"| {r['mode']} | {r['nodes']:,} | {result.get('speed', '–')} | "
            f"{'**yes**' if r.get('overloaded') else 'no'} | {worst} | {f(r, 'worst_handler_max_us')} | "
            f"{f(r, 'schedule_pass_p99_us')} / {f(r, 'schedule_pass_max_us')} | "
            f"{f(r, 'rm_process_us_per_heartbeat', '.1f')} | "
            f"{f(r, 'worker_cpu_us_per_node_interval', '.1f')} |"
        )
    return "\n".join(lines) + "\n"


PAPER_RATIO = 1.88
PAPER_E2 = ("paper (YARN, Mao et al.)", "~4,000–4,500", "~7,500–8,000", f"{PAPER_RATIO}×")


def _largest(sweeps: list[dict[str, Any]], mode: str) -> int | None:
    """The largest node count at which ``mode`` kept h1 and h2 at the threshold and was not
    overloaded, over several sweeps of one setup (a grid and its extra points)."""
    ok = [r["nodes"] for sw in sweeps for r in sw["rows"]
          if r["mode"] == mode and not r.get("overloaded") and r["h1"] is not None and r["h2"] is not None
          and min(r["h1"], r["h2"]) >= sw["threshold"]]
    return max(ok) if ok else None


def _open_ended(sweeps: list[dict[str, Any]], mode: str) -> bool:
    """No point of ``mode`` failed in these sweeps: its limit may lie beyond their largest n."""
    return all(largest_ok(sw["rows"], mode, sw["threshold"])[1] is False for sw in sweeps)


def _ratio(p: int, d: int, bound: str) -> str:
    """delta/periodic with its bound, and where it stands against the paper's when that is known."""
    r = d / p
    if bound != "≤ " and r >= PAPER_RATIO:
        note = f" (at least the paper's {PAPER_RATIO}×)"
    elif bound != "≥ " and r < PAPER_RATIO:
        note = f" (below the paper's {PAPER_RATIO}×)"
    else:
        note = ""
    return f"{bound}{r:.2f}×{note}"


def headline_table(real: dict[str, Any], virtual: dict[str, Any], *more: dict[str, Any]) -> str:
    """The README's E2 row set: the paper, the real-time TCP sweep (and each repeat of it among
    ``more``: a row of its own), the virtual-time sweep (with the virtual ``more``, e.g. delta at
    larger sizes)."""
    real, virtual, more = sweep_of(real), sweep_of(virtual), tuple(sweep_of(m) for m in more)
    lines = ["| largest cluster with h1, h2 ≥ 0.99 | periodic | delta | delta / periodic |",
             "|---|---|---|---|", "| " + " | ".join(PAPER_E2) + " |"]
    reals = [real, *(m for m in more if m.get("clock") == "realtime")]
    rows: list[tuple[str, list[dict[str, Any]]]] = []
    seen: set[str] = set()
    for r in reals:
        workers = r.get("workers") or 1
        setup = f"speed {r.get('speed', 20):g}, {workers} node-host process{'es' if workers > 1 else ''}"
        again = ", run again" if setup in seen else ""
        seen.add(setup)
        rows.append((f"real time over TCP, {setup}{again} ({saturates_first(r)})", [r]))
    rows.append(("virtual time, RM service-time model fitted to a real-time run (docs/scalability.md §5.2)",
                 [virtual, *(m for m in more if m.get("clock") != "realtime")]))
    for label, sweeps in rows:
        p, d = _largest(sweeps, "periodic"), _largest(sweeps, "delta")
        p_more, d_more = _open_ended(sweeps, "periodic"), _open_ended(sweeps, "delta")
        bound = "–" if p_more and d_more else "≥ " if d_more else "≤ " if p_more else ""
        ratio = _ratio(p, d, bound) if p and d and bound != "–" else "–"
        p_txt = f"{'≥ ' if p_more else ''}{p:,}" if p else "none"
        d_txt = f"{'≥ ' if d_more else ''}{d:,}" if d else "none"
        lines.append(f"| {label} | {p_txt} | {d_txt} | {ratio} |")
    return "\n".join(lines) + "\n"


def many_core_table(*sweeps: dict[str, Any]) -> str:
    """E2 on a many-core machine: sweeps in (periodic, delta) pairs, one pair per run (``make
    e2-many-core`` runs each mode's grid as its own sweep). Per run: every point, each mode's
    limit, the ratio and which process was the busier at and past each limit."""
    sweeps = tuple(sweep_of(s) for s in sweeps)
    lines = ["| run | mode | nodes | h1 | h2 | RM CPU % | busiest node host CPU % | RM process µs / hb "
             "| overloaded |", "|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for i in range(0, len(sweeps) - 1, 2):
        run = chr(ord("A") + i // 2)
        pair = {"threshold": sweeps[i]["threshold"], "rows": sweeps[i]["rows"] + sweeps[i + 1]["rows"]}
        for r in pair["rows"]:
            h = ["n/a" if r[k] is None else f"{r[k]:.3f}" for k in ("h1", "h2")]
            why = "; ".join(r.get("overload_reasons", []))
            over = f"**yes**{' (' + why + ')' if why else ''}" if r.get("overloaded") else "no"
            lines.append(f"| {run} | {r['mode']} | {r['nodes']:,} | {h[0]} | {h[1]} | "
                         f"{r['rm_cpu_percent']:.1f} | {r['worker_cpu_percent']:.1f} | "
                         f"{r['rm_process_us_per_heartbeat']:.1f} | {over} |")
        limits = {m: largest_ok(pair["rows"], m, pair["threshold"]) for m in ("periodic", "delta")}
        text = {m: "none" if n is None else f"{'' if failed else '≥ '}{n:,}"
                for m, (n, failed) in limits.items()}
        (p, _), (d, d_failed) = limits["periodic"], limits["delta"]
        ratio = f", {'' if d_failed else '≥ '}{d / p:.2f}×" if p and d else ""
        workers = sweeps[i].get("workers")
        setup = f"{workers} node-host process{'' if workers == 1 else 'es'}, speed {sweeps[i]['speed']:g}"
        verdicts.append(f"Run {run} ({setup}): periodic {text['periodic']}, delta {text['delta']}{ratio}; "
                        f"{saturates_first(pair)}.")
    return "\n".join(lines) + "\n\n" + "\n".join(f"* {v}" for v in verdicts) + "\n"
