"""`emulator compare`: result directories side by side on the metric groups of
``emulator.results.metrics`` (each row with its delta and ratio against the first run), optionally
next to the thesis's figures; as a terminal table, CSV and JSON (the HTML page: compare_page)."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from rich.table import Table

from emulator.results.metrics import (
    GROUPS,
    Row,
    SelectionError,
    fmt_delta,
    fmt_ratio,
    fmt_value,
    rows,
    select,
)

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
    timing = f.with_name("timing.json")
    if timing.is_file():  # wall-clock figures, kept apart from the reproducible summary
        try:
            data["timing"] = msgspec.json.decode(timing.read_bytes())
        except (OSError, msgspec.DecodeError) as err:
            raise CompareError(f"{timing}: cannot read: {err}") from None
    return data


@dataclass
class Comparison:
    """Runs side by side on the metric groups (emulator.results.metrics), optionally next to a
    reference: the one model the text table, the HTML page and the CSV are drawn from."""

    names: list[str]
    rows: list[Row]
    reference: dict[str, dict[str, float]] = field(default_factory=dict)

    def groups(self) -> list[tuple[str, list[Row]]]:
        out: dict[str, list[Row]] = {}
        for row in self.rows:
            out.setdefault(row.metric.group, []).append(row)
        return [(GROUPS[g], rs) for g, rs in out.items()]

    def reference_values(self, row: Row) -> list[float | None]:
        return [r.get(row.metric.key) for r in self.reference.values()]


def compare(summaries: list[tuple[str, dict[str, Any]]], reference: str | None = None,
            metrics: str | None = None) -> Comparison:
    """``metrics``: the ``--metrics`` selection (None: every group)."""
    if reference is not None and reference not in REFERENCES:
        raise CompareError(f"unknown reference {reference!r}; known: {', '.join(REFERENCES)}")
    if not summaries:
        raise CompareError("give at least one results directory")
    refs = REFERENCES.get(reference or "", {})
    try:
        chosen = select(metrics)
    except SelectionError as err:
        raise CompareError(str(err)) from None
    found = rows([s for _, s in summaries], chosen, keep=lambda m: any(m.key in r for r in refs.values()))
    return Comparison([n for n, _ in summaries], found, refs)


def delta_headers(names: list[str]) -> list[tuple[str, str]]:
    if len(names) == 2:
        return [("Δ (2nd − 1st)", "ratio (2nd / 1st)")]
    return [(f"Δ {n} − {names[0]}", f"{n} / {names[0]}") for n in names[1:]]


def compare_table(
    summaries: list[tuple[str, dict[str, Any]]], reference: str | None = None, metrics: str | None = None
) -> Table:
    return comparison_table(compare(summaries, reference, metrics))


def comparison_table(c: Comparison) -> Table:
    t = Table(title="comparison (means over each run's measurement window; Δ and ratio against the "
              "first run)")
    t.add_column("metric")
    heads = delta_headers(c.names)
    t.add_column(c.names[0], justify="right")
    for name, (dh, rh) in zip(c.names[1:], heads, strict=True):
        t.add_column(name, justify="right")
        t.add_column(dh, justify="right")
        t.add_column(rh, justify="right")
    for col in c.reference:
        t.add_column(col, justify="right", style="dim")
    two_refs = len(c.reference) == 2
    if two_refs:
        t.add_column("reference Δ", justify="right", style="dim")
    width = 1 + 3 * (len(c.names) - 1) + len(c.reference) + two_refs
    for gi, (label, group_rows) in enumerate(c.groups()):
        if gi:
            t.add_section()
        t.add_row(f"[bold]{label}[/]", *[""] * width)
        for row in group_rows:
            unit = row.metric.unit
            cells = [fmt_value(row.values[0], unit)]
            for i in range(1, len(c.names)):
                style = {"better": "green", "worse": "red"}.get(row.verdict(i))
                delta = fmt_delta(row.deltas[i - 1], unit)
                shown = f"[{style}]{delta}[/]" if style and delta else delta
                cells += [fmt_value(row.values[i], unit), shown, fmt_ratio(row.ratios[i - 1])]
            refs = c.reference_values(row)
            cells += [fmt_value(v, unit) if v is not None else "" for v in refs]
            if two_refs:
                a, b = refs
                cells.append(fmt_delta(b - a, unit) if a is not None and b is not None else "")
            t.add_row(f"  {row.metric.label}", *cells)
    return t


def comparison_records(c: Comparison) -> list[dict[str, Any]]:
    """One plain record per row (the CSV's and the JSON's content)."""
    out = []
    for row in c.rows:
        m = row.metric
        rec: dict[str, Any] = {"group": m.group, "key": m.key, "label": m.label, "unit": m.unit,
                               "better": m.better or ""}
        for i, name in enumerate(c.names):
            rec[name] = row.values[i]
            if i:
                rec[f"delta {name}"] = row.deltas[i - 1]
                rec[f"ratio {name}"] = row.ratios[i - 1]
        for col, v in zip(c.reference, c.reference_values(row), strict=True):
            rec[col] = v
        out.append(rec)
    return out


def write_csv(c: Comparison, path: Path) -> Path:
    records = comparison_records(c)
    with path.open("w", newline="", encoding="utf-8") as f:
        fields = list(records[0]) if records else ["group", "key", "label", "unit", "better", *c.names]
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows({k: "" if v is None else v for k, v in r.items()} for r in records)
    return path


def write_json(c: Comparison, path: Path) -> Path:
    doc = {"runs": c.names, "baseline": c.names[0], "reference": list(c.reference),
           "rows": comparison_records(c)}
    path.write_bytes(msgspec.json.format(msgspec.json.encode(doc)) + b"\n")
    return path


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


def run_names(dirs: list[Path]) -> list[str]:
    """Column names: each directory's name, or more of its path where two names are the same."""
    names = [d.name or str(d) for d in dirs]
    if len(set(names)) == len(names):
        return names
    names = ["/".join(d.parts[-2:]) or str(d) for d in dirs]
    if len(set(names)) == len(names):
        return names
    seen: dict[str, int] = {}
    out = []
    for n in names:  # the same directory given twice
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


def markdown_table(doc: dict[str, Any]) -> str:
    """A saved compare.json as a Markdown table (the docs' tables are printed from such files)."""
    from emulator.results.metrics import Metric

    names: list[str] = doc["runs"]
    head = ["metric", names[0]]
    for name in names[1:]:
        head += [name, f"Δ {name}", f"{name} / {names[0]}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rec in doc["rows"]:
        m = Metric(rec["group"], rec["key"], rec["label"], rec["unit"], rec["better"] or None)
        cells = [m.label, fmt_value(rec[names[0]], m.unit)]
        for name in names[1:]:
            cells += [fmt_value(rec[name], m.unit), fmt_delta(rec[f"delta {name}"], m.unit),
                      fmt_ratio(rec[f"ratio {name}"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
