"""`emulator compare`: result directories side by side, optionally next to the thesis's figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from rich.table import Table

# Seed 000, Table 4.3 (73-node YT cluster): the E1 reference, in fractions.
REFERENCES: dict[str, dict[str, dict[str, float]]] = {
    "thesis-e1": {
        "thesis without packing": {
            "cpu_utilization": 0.922,
            "cpu_utilization_excl_preempted": 0.906,
            "ram_utilization": 0.915,
        },
        "thesis with packing": {
            "cpu_utilization": 0.967,
            "cpu_utilization_excl_preempted": 0.939,
            "ram_utilization": 0.964,
        },
    },
}

# (summary key, label, format)
ROWS: tuple[tuple[str, str, str], ...] = (
    ("policy", "policy", "text"),
    ("cpu_utilization", "mean CPU utilisation", "pct"),
    ("cpu_utilization_excl_preempted", "CPU utilisation excl. preempted", "pct"),
    ("ram_utilization", "mean RAM utilisation", "pct"),
    ("fair_cpu_bound", "pooled bound CPU", "pct"),
    ("fair_ram_bound", "pooled bound RAM", "pct"),
    ("fragmentation_gap_cpu", "fragmentation gap CPU", "pp"),
    ("fragmentation_gap_ram", "fragmentation gap RAM", "pp"),
    ("allocations", "allocations", "int"),
    ("refusals", "refusals", "int"),
    ("refusals_per_allocation", "refusals per allocation", "num"),
    ("acceptance_rate", "acceptance rate", "pct"),
    ("fallback_allocations", "fallback allocations", "int"),
    ("preemptions", "preemptions", "int"),
    ("preempted_cpu_s", "preempted CPU-seconds", "int"),
    ("fairness_deviation", "fairness deviation (mean |rel.|)", "pct"),
    ("fairness_deviation_max", "fairness deviation (max |rel.|)", "pct"),
)
# Rows where the difference between two runs is worth a column (percentage points).
_DELTA = {"pct", "pp"}


class CompareError(Exception):
    """A results directory cannot be read; the message is meant for the user as-is."""


def load_summary(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    f = p / "summary.json" if p.is_dir() else p
    try:
        data = msgspec.json.decode(f.read_bytes())
    except FileNotFoundError:
        raise CompareError(f"{f}: no such file (give a results directory of `emulator run`)") from None
    except (OSError, msgspec.DecodeError) as err:
        raise CompareError(f"{f}: cannot read summary: {err}") from None
    if not isinstance(data, dict) or "cpu_utilization" not in data:
        raise CompareError(f"{f}: not a run summary (no `cpu_utilization`)")
    return data


def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "n/a"
    if kind == "text":
        return str(value)
    if kind == "pct":
        return f"{value:.2%}"
    if kind == "pp":
        return f"{value * 100:+.2f} pp"
    if kind == "int":
        return f"{round(value):,}"
    return f"{value:.4g}"


def compare_table(
    summaries: list[tuple[str, dict[str, Any]]], reference: str | None = None
) -> Table:
    if reference is not None and reference not in REFERENCES:
        raise CompareError(f"unknown reference {reference!r}; known: {', '.join(REFERENCES)}")
    refs = REFERENCES.get(reference or "", {})
    t = Table(title="comparison (means over each run's measurement window)")
    t.add_column("metric")
    for name, _ in summaries:
        t.add_column(name, justify="right")
    delta = len(summaries) == 2
    if delta:
        t.add_column("Δ (2nd − 1st)", justify="right")
    for col in refs:
        t.add_column(col, justify="right", style="dim")
    if refs and len(refs) == 2:
        t.add_column("thesis Δ", justify="right", style="dim")
    for key, label, kind in ROWS:
        values = [s.get(key) for _, s in summaries]
        if all(v is None for v in values) and not any(key in r for r in refs.values()):
            continue
        cells = [_fmt(v, kind) for v in values]
        if delta:
            a, b = values
            ok = kind in _DELTA and isinstance(a, int | float) and isinstance(b, int | float)
            cells.append(f"{(b - a) * 100:+.2f} pp" if ok and a is not None and b is not None else "")
        ref_values = [r.get(key) for r in refs.values()]
        cells += [_fmt(v, kind) if v is not None else "" for v in ref_values]
        if refs and len(refs) == 2:
            a, b = ref_values
            cells.append(f"{(b - a) * 100:+.2f} pp" if a is not None and b is not None else "")
        t.add_row(label, *cells)
    return t


def operations_table(summaries: list[tuple[str, dict[str, Any]]]) -> Table:
    """Per-operation mean dominant share in each run (and its fairness deviation)."""
    t = Table(title="operations: mean dominant share (fairness deviation)")
    t.add_column("operation")
    for name, _ in summaries:
        t.add_column(name, justify="right")
    if len(summaries) == 2:
        t.add_column("2nd / 1st", justify="right")
    by_run = [{o["name"]: o for o in s.get("operations", [])} for _, s in summaries]
    names = list(dict.fromkeys(n for run in by_run for n in run))
    for name in names:
        cells = []
        for run in by_run:
            o = run.get(name)
            if o is None or o.get("dominant_share") is None:
                cells.append("")
                continue
            dev = o.get("fairness_deviation")
            cells.append(f"{o['dominant_share']:.4f}" + (f" ({dev:+.1%})" if dev is not None else ""))
        if len(by_run) == 2:
            a, b = (run.get(name, {}).get("dominant_share") for run in by_run)
            cells.append(f"{b / a:.3f}" if a and b is not None else "")
        t.add_row(name, *cells)
    return t
