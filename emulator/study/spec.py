"""A study file: a base scenario, named variants (``--set``-style overrides), axes, the metrics to
collect and the tables to render, read into typed config with errors that name the file and the
field path."""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from emulator.results.registry import BY_NAME, WHOLE_RUN
from emulator.scenario.loader import ScenarioError
from emulator.study.models import MODELS
from emulator.study.params import AT, UNKNOWN, params_problem
from emulator.study.sections import TIMESERIES, section_problem

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.+-]+$")]
# Dimensions a point has besides its variant: `seed` (run.seed), `nodes` (the cluster scaled to this
# many nodes, and with `scale_workload` every operation's task count) or a scenario field path.
SEED, NODES, VARIANT, METRIC = "seed", "nodes", "variant", "metric"
AXIS_NAMES = "an axis is `seed`, `nodes` or a scenario field path"
Aggregate = Literal["mean_sd", "mean", "median", "min", "max"]
DEFAULT_THRESHOLD = 0.99
# What each point must keep (in `metrics` or `collect`) for a study to be read as E2's sweep (its
# `[limits]`, the E2 tables, plots of row fields): emulator/study/sweep.py's row.
ROW_NEEDS: tuple[str, ...] = (
    "h1", "h2", "heartbeats_sent", "heartbeats_skipped", "registrations", "update_events", "allocations",
    "nodes_lost", "rm_queue_depth_max", "rm_wait_p99_s", "messages_to_rm_per_node_minute", "costs",
    "workers", "lag", "timing.wall_s", "timing.lateness_p99_s", "rm.busy_s",
)
# The row's fields a plot may draw besides the study's metrics.
ROW_FIELDS: tuple[str, ...] = (
    "rm_cpu_percent", "rm_busy_fraction", "rm_process_us_per_heartbeat", "worker_cpu_percent",
    "worker_cpu_us_per_node_interval", "messages_to_rm_per_node_minute", "bytes_to_rm_per_node_minute",
    "lateness_p99_s", "heartbeats_skipped",
)
# A scenario study's own tables (`[[tables]] render`), from its points read as E2's sweep.
SWEEP_TABLES: dict[str, str] = {
    "limits": "each heartbeat mode's largest node count with h1, h2 >= the threshold, and their ratio",
    "calibration": "the RM's service-time model fitted to the real-time points, as [rm.service_time]",
}


class StudyError(ScenarioError):
    """A study file (or a study's output) cannot be used; the message is meant for the user as-is."""


class Variant(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    name: Name
    description: str = ""
    scenario: str = ""  # another base scenario for this variant (relative to the study file)
    # Dotted scenario field paths to values, as `emulator run --set` takes them.
    set: dict[str, Any] = {}
    # Dotted paths removed from the base scenario before the overrides apply: a table an override
    # cannot clear (`workload.operations[0].usage`: the operation without its usage model).
    unset: list[str] = []
    # This variant's own values of some of the study's axes (a measurement that one value of an
    # axis covers: the bench's floor is the same in either heartbeat mode).
    axes: dict[str, Any] = {}


class Table(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    title: str = ""
    # A table by name: a model study's, one its model renders (emulator/study/models.py); a scenario
    # study's, its sweep tables (SWEEP_TABLES) or one of the docs' renderers of study output.
    render: str = ""
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
    # Either a collected `timeseries.COLUMN`: one line per point against `timeseries.t_s`;
    series: str = ""
    # or over an axis: `x` an axis (`nodes`), a panel per `y` (a metric of the study, or a field of
    # its sweep row: `rm_cpu_percent` ...), a line per value of `lines` (a dimension).
    x: str = ""
    y: list[str] = []
    lines: str = VARIANT
    title: str = ""
    cumulative: bool = False  # a second panel: the running total
    log: bool = False  # a log-like y axis (linear near 0): a few real events beside thousands
    where: dict[str, Any] = {}  # only the points with these axis values


class Limits(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """E2's limits: per heartbeat mode the largest `nodes` value whose point and every smaller one
    kept h1 and h2 >= threshold and did not fall behind real time (emulator/study/sweep.py)."""
    threshold: Annotated[float, msgspec.Meta(gt=0, le=1)] = DEFAULT_THRESHOLD
    # Skip a mode's larger node counts once one has failed: the points past a limit say nothing new.
    stop_after_failure: bool = False


class Study(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    name: str = ""
    description: str = ""
    scenario: str = ""  # relative to the study file
    # Or a model instead of a scenario (emulator/study/models.py) and its parameters; `set`,
    # variants and axes override those by dotted path.
    model: str = ""
    params: dict[str, Any] = {}
    set: dict[str, Any] = {}  # overrides of every point, under the variants'
    variants: list[Variant] = []  # none: one variant, "base"
    # Axis name to its values; `[axes] heartbeat.mode = [...]` (a nested table) is read as a path.
    axes: dict[str, list[Any] | dict[str, Any]] = {}
    scale_workload: bool = True  # with a `nodes` axis: scale task counts with the cluster
    metrics: list[str] = []  # a scenario study's: at least one
    # More of each point than its metrics, for renderers that need it (emulator/study/sections.py):
    # a summary.json section (`pools`), a timeseries column (`timeseries.to_rm_messages`), `removals`.
    collect: list[str] = []
    tables: list[Table] = []
    plots: list[Plot] = []  # rendered by `emulator study --plots DIR`
    limits: Limits | None = None  # read the points as E2's sweep: each mode's largest node count


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


def _explain(err: msgspec.ValidationError) -> str:
    m = AT.match(str(err))
    assert m is not None
    msg, path = m.group("msg"), (m.group("path") or "").lstrip(".")
    unknown = UNKNOWN.match(msg)
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
    elif path.startswith("limits"):
        struct = Limits
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

    if study.model:
        check_model_study(study, fail)
    elif not study.scenario:
        fail("scenario", "a study runs a base scenario (`scenario = FILE`) or a model (`model = NAME`; "
             f"one of {', '.join(f'`{m}`' for m in MODELS)})")
    elif not study.metrics:
        fail("metrics", "expected at least one metric (the whole-run metrics of docs/metrics.md)")
    else:
        if study.params:
            fail("params", "a model study's parameters: a scenario study changes its scenario with `set`")
        # Other names are the docs' renderers (emulator/study/renderers), which read studies, so
        # they are checked above this module: study/tables.py `check_renders`.
        for i, t in enumerate(study.tables):
            if t.render in SWEEP_TABLES and study.limits is None:
                fail(f"tables[{i}].render", f"`{t.render}` reads the study as E2's sweep: needs `[limits]`")
        if study.limits is not None:
            missing = [n for n in ROW_NEEDS if n not in study.metrics and n not in study.collect]
            if missing:
                fail("limits", f"E2's row of each point needs {', '.join(f'`{n}`' for n in missing)} in "
                     "`metrics` or `collect`")
            if NODES not in study.axes:
                fail("limits", f"limits are node counts: the study needs a `{NODES}` axis")
    seen: set[str] = set()
    for i, v in enumerate(study.variants):
        if v.name in seen:
            fail(f"variants[{i}].name", f"`{v.name}` is the name of an earlier variant")
        seen.add(v.name)
        for axis, own in v.axes.items():
            if axis not in study.axes:
                fail(f"variants[{i}].axes.{axis}", f"`{axis}` is not an axis of the study; a variant gives "
                     f"its own values of the study's axes ({', '.join(f'`{a}`' for a in study.axes)})")
            if not isinstance(own, list) or not own:
                fail(f"variants[{i}].axes.{axis}", f"expected a non-empty list of values, got {own!r}")
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
        if plot.x or plot.y:
            _check_axis_plot(study, i, plot, fail)
            continue
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
        if t.render:
            continue
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


def _check_axis_plot(study: Study, i: int, plot: Plot, fail: Callable[[str, str], None]) -> None:
    if plot.series:
        fail(f"plots[{i}].series", "a plot draws a timeseries `series` or `y` over an axis `x`, not both")
    if plot.x not in study.axes:
        fail(f"plots[{i}].x", f"`{plot.x}` is not an axis of the study (its axes: {list(study.axes)})")
    if not plot.y:
        fail(f"plots[{i}].y", "expected at least one metric or sweep-row field to draw")
    if plot.lines not in dimensions(study) or plot.lines == plot.x:
        fail(f"plots[{i}].lines", f"`{plot.lines}` is not a dimension of the study besides `x` "
             f"(expected one of {[d for d in dimensions(study) if d != plot.x]})")
    for j, y in enumerate(plot.y):
        if y in study.metrics or (y in ROW_FIELDS and study.limits is not None):
            continue
        fail(f"plots[{i}].y[{j}]", f"`{y}` is not one of the study's `metrics`" + (
            f" (or a sweep-row field: {', '.join(ROW_FIELDS)})" if study.limits is not None
            else "; a sweep-row field needs `[limits]`"))
    if plot.name in [q.name for q in study.plots[:i]]:
        fail(f"plots[{i}].name", f"`{plot.name}` is the name of an earlier plot")
    _check_where(study, plot.where, f"plots[{i}].where", fail)


def _check_where(study: Study, where: dict[str, Any], at: str, fail: Callable[[str, str], None]) -> None:
    for axis, value in where.items():
        if axis not in dimensions(study):
            fail(f"{at}.{axis}", "not a dimension of the study")
        values = variant_names(study) if axis == VARIANT else study.axes[axis]
        if value not in values:  # an empty table otherwise
            fail(f"{at}.{axis}", f"{value!r} is not one of its values {values}")


def check_model_study(study: Study, fail: Callable[[str, str], None]) -> None:
    """A model study: a known model, parameters it takes, and nothing that only a scenario has."""
    model = MODELS.get(study.model)
    if model is None:
        close = difflib.get_close_matches(study.model, list(MODELS), n=1, cutoff=0.6)
        hint = f"did you mean `{close[0]}`? " if close else ""
        known = ", ".join(f"`{m}`" for m in MODELS)
        fail("model", f"unknown model `{study.model}`; {hint}(expected one of {known})")
        return
    only_scenario = {"scenario": "a study runs a scenario or a model, not both",
                     "metrics": "a model has no registry metrics: its tables are its own "
                                "(`[[tables]] render`)",
                     "collect": "a model point keeps the model's whole result",
                     "plots": "a model study's figures are its model's tables",
                     "limits": "limits are node counts of scenario runs (E2)"}
    for field, why in only_scenario.items():
        if getattr(study, field):
            fail(field, why)
    for i, v in enumerate(study.variants):
        for field in ("scenario", "unset"):
            if getattr(v, field):
                fail(f"variants[{i}].{field}", "a model study's variants change its `params` with `set`")
    if NODES in study.axes:
        fail(f"axes.{NODES}", "a model has no cluster to scale: name a parameter path instead")
    problem = params_problem(model.params, study.params)
    if problem:
        fail(*problem)
    tables = list(model.tables)
    for i, t in enumerate(study.tables):
        if t.render not in model.tables:
            close = difflib.get_close_matches(t.render, tables, n=1, cutoff=0.6)
            hint = f"did you mean `{close[0]}`? " if close else ""
            got = f"`{t.render}` is not a table of model `{study.model}`; " if t.render else ""
            fail(f"tables[{i}].render", f"{got}{hint}(expected one of {', '.join(f'`{n}`' for n in tables)})")


def study_from_data(data: dict[str, Any], source: str) -> Study:
    try:
        raw = msgspec.convert(data, Study, strict=True)
    except msgspec.ValidationError as err:
        raise StudyError(f"{source}: {_explain(err)}") from None
    # Overrides and field axes in either TOML spelling: "a.b" = ... or a.b = ... (nested tables).
    study = msgspec.structs.replace(
        raw, set=flatten(raw.set), axes=_flat_axes(raw.axes),
        variants=[msgspec.structs.replace(v, set=flatten(v.set), axes=_flat_axes(v.axes))
                  for v in raw.variants],
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
