"""One results directory as read back for reports: summary.json, timeseries.csv (the sampler's
columns and the per-pool / per-entry share columns) and, from events.jsonl, the times of
removals and faults; plus the per-interval rates and ratios the charts show."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec


class ReportError(ValueError):
    """A results directory that cannot be reported on (missing or malformed files)."""


@dataclass
class RunData:
    directory: Path
    summary: dict[str, Any]
    series: dict[str, list[float]]
    removals: list[float] = field(default_factory=list)  # emulated times of node.lost events
    faults: list[float] = field(default_factory=list)  # emulated times of faults (scenario's and page's)

    @property
    def label(self) -> str:
        name = self.summary.get("scenario") or self.directory.name
        return name if name == self.directory.name else f"{name} ({self.directory.name})"


def load_run(directory: Path) -> RunData:
    summary_path = directory / "summary.json"
    ts_path = directory / "timeseries.csv"
    for p in (summary_path, ts_path):
        if not p.is_file():
            raise ReportError(f"{p}: missing (is {directory} a results directory of `emulator run`?)")
    try:
        summary = msgspec.json.decode(summary_path.read_bytes(), type=dict[str, Any])
    except msgspec.DecodeError as err:
        raise ReportError(f"{summary_path}: not valid JSON ({err})") from None
    header, rows = _read_csv(ts_path)
    series = {name: [r[i] for r in rows] for i, name in enumerate(header)}
    series.update(_usage_series(directory / "usage_timeseries.csv", series.get("t_s", [])))
    removals, faults = _event_times(directory / "events.jsonl")
    return RunData(directory, summary, series, removals, faults)


def _read_csv(path: Path) -> tuple[list[str], list[list[float]]]:
    """A numeric CSV with a `t_s` column first: its header and rows (empty cells NaN)."""
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or header[0] != "t_s":
            raise ReportError(f"{path}: expected a header row starting with `t_s`")
        rows = []
        for lineno, row in enumerate(reader, start=2):
            try:
                values = [float(v) if v != "" else math.nan for v in row]
            except ValueError:
                raise ReportError(f"{path}:{lineno}: non-numeric value in {row}") from None
            if len(values) != len(header):
                raise ReportError(f"{path}:{lineno}: {len(values)} values, header has {len(header)}")
            rows.append(values)
    return header, rows


def _usage_series(path: Path, times: list[float]) -> dict[str, list[float]]:
    """usage_timeseries.csv (runs with usage models) as ``usage:<column>`` series on the rows of
    timeseries.csv (both are sampled together; a row missing from it is NaN)."""
    if not path.is_file():
        return {}
    header, rows = _read_csv(path)
    by_t = {round(r[0], 6): r[1:] for r in rows}
    blank = [math.nan] * (len(header) - 1)
    aligned = [by_t.get(round(t, 6), blank) for t in times]
    return {f"usage:{name}": [r[i] for r in aligned] for i, name in enumerate(header[1:])}


# Events that are faults: the scenario's [[faults]] and the page's crashes and pauses.
FAULT_EVENTS = ("fault.injected", "control.crash", "control.node_paused")


def _event_times(path: Path) -> tuple[list[float], list[float]]:
    """(times of node.lost, distinct times of faults) from the event log."""
    if not path.is_file():
        return [], []
    removals: list[float] = []
    faults: set[float] = set()
    decode = msgspec.json.Decoder(dict[str, Any]).decode
    with path.open("rb") as f:
        for line in f:
            if b'"node.lost"' not in line and b'"fault.' not in line and b'"control.' not in line:
                continue
            try:
                ev = decode(line)
            except msgspec.DecodeError:
                continue
            name = ev.get("event")
            if name == "node.lost":
                removals.append(float(ev.get("t", 0.0)))
            elif name in FAULT_EVENTS:
                faults.add(round(float(ev.get("at_s", ev.get("t", 0.0))), 3))
    return removals, sorted(faults)


def derived(run: RunData) -> dict[str, list[float]]:
    """Per-interval rates and ratios the charts show, from the raw time-series columns."""
    s = run.series
    t = s["t_s"]
    dt = [b - a for a, b in zip([0.0, *t[:-1]], t, strict=True)]

    def rate(col: str) -> list[float]:
        values = s.get(col, [math.nan] * len(t))
        return [v / d if d > 0 else math.nan for v, d in zip(values, dt, strict=True)]

    def ratio(num: str, den: str) -> list[float]:
        return [a / b if b > 0 else math.nan for a, b in zip(s[num], s[den], strict=True)]

    removals = [0.0] * len(t)
    j = 0
    for rt in sorted(run.removals):
        while j < len(t) and t[j] < rt:
            j += 1
        if j < len(t):
            removals[j] += 1
    out = {
        "sent_per_s": rate("n_i"),
        "responses_per_s": rate("m_i"),
        "updates_per_s": rate("s_i"),
        "h1_i": ratio("m_i", "n_i"),
        "h2_i": ratio("s_i", "a_i" if "a_i" in s else "n_i"),  # runs before a_i: s_i/n_i
        "removals": removals,
    }
    return out
