"""A study file: a base scenario, named variants (``--set``-style overrides), axes, the metrics to
collect and the tables to render, read into typed config with errors that name the file and the
field path."""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from emulator.results.registry import BY_NAME, WHOLE_RUN
from emulator.scenario.loader import ScenarioError
from emulator.study.sections import TIMESERIES, section_problem

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.+-]+$")]
# Dimensions a point has besides its variant: `seed` (run.seed), `nodes` (the cluster scaled to this
# many nodes, and with `scale_workload` every operation's task count) or a scenario field path.
SEED, NODES, VARIANT, METRIC = "seed", "nodes", "variant", "metric"
Aggregate = Literal["mean_sd", "mean", "median", "min", "max"]


class StudyError(ScenarioError):
    """A study file (or a study's output) cannot be used; the message is meant for the user as-is."""


class Variant(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    name: Name
    description: str = ""
    scenario: str = ""  # another base scenario for this variant (relative to the study file)
    # Dotted scenario field paths to values, as `emulator run --set` takes them.
    set: dict[str, Any] = {}


class Table(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    title: str = ""
    # Each a dimension: "variant", "metric", "seed", "nodes" or a field axis; the dimensions in
    # neither are aggregated over (seeds, typically: mean ± sd).
    rows: str = VARIANT
    columns: str = METRIC
    metrics: list[str] = []  # default: the study's
    aggregate: Aggregate = "mean_sd"
    # Only the points with these axis values (e.g. { nodes = 100 }).
    where: dict[str, Any] = {}


class Plot(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    name: Name  # the files: NAME.png and NAME.csv
    series: str  # a collected `timeseries.COLUMN`: one line per point against `timeseries.t_s`
    title: str = ""
    cumulative: bool = False  # a second panel: the running total
    log: bool = False  # a log-like y axis (linear near 0): a few real events beside thousands
    where: dict[str, Any] = {}  # only the points with these axis values


class Study(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    name: str = ""
    description: str = ""
    scenario: Annotated[str, msgspec.Meta(min_length=1)]  # relative to the study file
    set: dict[str, Any] = {}  # overrides of every point, under the variants'
    variants: list[Variant] = []  # none: one variant, "base"
    # Axis name to its values; `[axes] heartbeat.mode = [...]` (a nested table) is read as a path.
    axes: dict[str, list[Any] | dict[str, Any]] = {}
    scale_workload: bool = True  # with a `nodes` axis: scale task counts with the cluster
    metrics: Annotated[list[str], msgspec.Meta(min_length=1)]
    # More of each point than its metrics, for renderers that need it (emulator/study/sections.py):
    # a summary.json section (`pools`), a timeseries column (`timeseries.to_rm_messages`), `removals`.
    collect: list[str] = []
    tables: list[Table] = []
    plots: list[Plot] = []  # rendered by `emulator study --plots DIR`


def flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{heartbeat = {mode = "delta"}}`` (TOML's dotted keys) as ``{"heartbeat.mode": "delta"}``;
    an empty table is a value (it clears an optional table, e.g. ``rm.service_time = {}``)."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value:
            out.update(flatten(value, path))
        else:
            out[path] = value
    return out


def variant_names(study: Study) -> list[str]:
    return [v.name for v in study.variants] or ["base"]


def dimensions(study: Study) -> list[str]:
    return [VARIANT, *study.axes]


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_UNKNOWN = re.compile(r"^Object contains unknown field `(.*)`$", re.S)


def _explain(err: msgspec.ValidationError) -> str:
    m = _AT.match(str(err))
    assert m is not None
    msg, path = m.group("msg"), (m.group("path") or "").lstrip(".")
    unknown = _UNKNOWN.match(msg)
    if unknown:
        return _unknown_field(path, unknown.group(1))
    return f"at `{path or '(top level)'}`: {msg[:1].lower()}{msg[1:]}"


def _unknown_field(path: str, name: str) -> str:
    struct: type[msgspec.Struct] = Study
    if path.startswith("variants"):
        struct = Variant
    elif path.startswith("tables"):
        struct = Table
    elif path.startswith("plots"):
        struct = Plot
    fields = list(struct.__struct_fields__)
    close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    where = f"{path}.{name}" if path else name
    return f"at `{where}`: unknown field{hint} (expected one of {', '.join(f'`{f}`' for f in fields)})"


def metric_problem(name: str) -> str | None:
    """Why ``name`` is not a whole-run metric of the registry (None if it is one)."""
    metric = BY_NAME.get(name)
    if metric is not None and metric.scope == "run":
        return None
    known = [m.name for m in WHOLE_RUN]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean `{close[0]}`? " if close else ""
    if metric is not None:
        return (f"`{name}` is a value of one instant of a live run, not a whole-run figure "
                f"({hint}see docs/metrics.md)")
    return f"unknown metric `{name}`; {hint}(the whole-run metrics of docs/metrics.md)"


def _check(study: Study, source: str) -> None:
    """What the types cannot say: names unique, metrics and dimensions known."""
    def fail(where: str, message: str) -> None:
        raise StudyError(f"{source}: at `{where}`: {message}")

    seen: set[str] = set()
    for i, v in enumerate(study.variants):
        if v.name in seen:
            fail(f"variants[{i}].name", f"`{v.name}` is the name of an earlier variant")
        seen.add(v.name)
    for i, name in enumerate(study.metrics):
        problem = metric_problem(name)
        if problem:
            fail(f"metrics[{i}]", problem)
    for axis, values in study.axes.items():
        if not isinstance(values, list) or not values:
            fail(f"axes.{axis}", f"expected a non-empty list of values, got {values!r}")
        if axis in (VARIANT, METRIC):
            fail(f"axes.{axis}", f"`{axis}` is not an axis: variants are [[variants]], metrics `metrics`")
        if axis in (SEED, NODES) and not all(type(x) is int and x >= 1 for x in values):
            fail(f"axes.{axis}", f"expected whole numbers >= 1, got {values}")
        if len(set(map(repr, values))) != len(values):
            fail(f"axes.{axis}", f"a value is given twice: {values}")
    for i, name in enumerate(study.collect):
        problem = section_problem(name)
        if problem:
            fail(f"collect[{i}]", problem)
        if name in study.collect[:i]:
            fail(f"collect[{i}]", f"`{name}` is collected already")
    for i, plot in enumerate(study.plots):
        if plot.series not in study.collect or not plot.series.startswith(TIMESERIES):
            fail(f"plots[{i}].series", f"`{plot.series}` is not a `{TIMESERIES}COLUMN` the study collects "
                 f"(its `collect`: {study.collect})")
        if TIMESERIES + "t_s" not in study.collect:
            fail(f"plots[{i}].series", f"a plot needs `{TIMESERIES}t_s` in `collect` too (its time axis)")
        if plot.name in [q.name for q in study.plots[:i]]:
            fail(f"plots[{i}].name", f"`{plot.name}` is the name of an earlier plot")
        _check_where(study, plot.where, f"plots[{i}].where", fail)
    dims = [*dimensions(study), METRIC]
    for i, t in enumerate(study.tables):
        for field in ("rows", "columns"):
            dim = getattr(t, field)
            if dim not in dims:
                close = difflib.get_close_matches(dim, dims, n=1, cutoff=0.6)
                hint = f"did you mean `{close[0]}`? " if close else ""
                fail(f"tables[{i}].{field}", f"`{dim}` is not a dimension of the study; {hint}"
                     f"(expected one of {', '.join(f'`{d}`' for d in dims)})")
        if t.rows == t.columns:
            fail(f"tables[{i}].columns", f"`{t.columns}` is the rows' dimension too")
        for j, name in enumerate(t.metrics):
            if name not in study.metrics:
                fail(f"tables[{i}].metrics[{j}]", f"`{name}` is not one of the study's `metrics`")
        _check_where(study, t.where, f"tables[{i}].where", fail)


def _check_where(study: Study, where: dict[str, Any], at: str, fail: Callable[[str, str], None]) -> None:
    for axis, value in where.items():
        if axis not in dimensions(study):
            fail(f"{at}.{axis}", "not a dimension of the study")
        values = variant_names(study) if axis == VARIANT else study.axes[axis]
        if value not in values:  # an empty table otherwise
            fail(f"{at}.{axis}", f"{value!r} is not one of its values {values}")


def study_from_data(data: dict[str, Any], source: str) -> Study:
    try:
        raw = msgspec.convert(data, Study, strict=True)
    except msgspec.ValidationError as err:
        raise StudyError(f"{source}: {_explain(err)}") from None
    # Overrides and field axes in either TOML spelling: "a.b" = ... or a.b = ... (nested tables).
    study = msgspec.structs.replace(
        raw, set=flatten(raw.set), axes=_flat_axes(raw.axes),
        variants=[msgspec.structs.replace(v, set=flatten(v.set)) for v in raw.variants],
        tables=[msgspec.structs.replace(t, where=flatten(t.where)) for t in raw.tables],
        plots=[msgspec.structs.replace(p, where=flatten(p.where)) for p in raw.plots],
    )
    _check(study, source)
    return study


def _flat_axes(axes: dict[str, Any]) -> dict[str, list[Any] | dict[str, Any]]:
    out: dict[str, list[Any] | dict[str, Any]] = {}
    for key, value in axes.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, key))
        else:
            out[key] = value
    return out


def load_study(path: Path) -> Study:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StudyError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise StudyError(f"{path}: cannot read: {err}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise StudyError(f"{path}: not valid TOML: {err}") from None
    return study_from_data(data, str(path))


def scenario_path(study_file: Path, study: Study, variant: str) -> tuple[str, Path]:
    """(where in the study file, the path) of the base scenario of ``variant``."""
    for i, v in enumerate(study.variants):
        if v.name == variant and v.scenario:
            return f"variants[{i}].scenario", study_file.parent / v.scenario
    return "scenario", study_file.parent / study.scenario
