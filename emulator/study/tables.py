"""A study's tables, rendered from its output JSON alone (no run): each cell one aggregate (by
default mean ± sd) over the points that share its row and column values."""

from __future__ import annotations

import difflib
import statistics
from collections.abc import Callable
from typing import Any

import msgspec

from emulator.results.registry import BY_NAME, Unit
from emulator.study.models import MODELS
from emulator.study.output import FORMAT, PointResult, StudyOutput, model_points
from emulator.study.points import expand
from emulator.study.renderers import own_renderers, render_own
from emulator.study.spec import (
    METRIC,
    SWEEP_TABLES,
    VARIANT,
    Aggregate,
    Study,
    StudyError,
    Table,
    study_from_data,
    variant_names,
)
from emulator.study.sweep import calibration_toml, limits_text, view

_AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "mean": statistics.mean, "median": statistics.median, "min": min, "max": max,
}


def _number(value: float, unit: Unit, digits: int) -> str:
    if unit == "frac":
        return f"{100 * value:.{digits}f}"
    if unit == "count" and digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _digits(values: list[float], unit: Unit) -> int:
    """Enough decimals to tell the values apart at about 4 significant digits."""
    if unit == "frac":
        return 2
    if unit == "count" and all(float(v).is_integer() for v in values):
        return 0
    top = max(abs(v) for v in values)
    return 0 if top >= 1000 else 1 if top >= 100 else 2 if top >= 10 else 3


def cell(values: list[Any], unit: Unit, how: Aggregate) -> str:
    xs = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if not xs:
        return "n/a"
    digits = _digits(xs, unit)
    suffix = " %" if unit == "frac" else " s" if unit == "s" else ""
    if how != "mean_sd":
        return _number(_AGGREGATES[how](xs), unit, digits) + suffix
    mean = statistics.mean(xs)
    if len(xs) == 1:
        return _number(mean, unit, digits) + suffix
    return f"{_number(mean, unit, digits)} ± {_number(statistics.stdev(xs), unit, digits)}{suffix}"


def _values(study: Study, dim: str, metrics: list[str]) -> list[Any]:
    if dim == METRIC:
        return metrics
    if dim == VARIANT:
        return variant_names(study)
    axis = study.axes[dim]
    assert isinstance(axis, list)
    return axis


def _label(dim: str, value: Any) -> str:
    if dim == METRIC:
        return str(BY_NAME[value].label)
    return str(value)


def _coord(point: PointResult, dim: str) -> Any:
    return point.variant if dim == VARIANT else point.coords.get(dim)


def _unit(metric: str) -> Unit:
    return BY_NAME[metric].unit


def render_table(study: Study, points: list[PointResult], table: Table) -> str:
    metrics = table.metrics or list(study.metrics)
    chosen = [p for p in points if all(_coord(p, d) == v for d, v in table.where.items())]
    rows, cols = _values(study, table.rows, metrics), _values(study, table.columns, metrics)
    pooled = [d for d in study.axes if d not in (table.rows, table.columns) and d not in table.where]
    # Neither rows nor columns are metrics: one such grid per metric.
    per_metric = METRIC not in (table.rows, table.columns)
    out = [f"**{table.title}**", ""] if table.title else []
    for metric in (metrics if per_metric else [None]):
        if per_metric:
            out += [f"*{BY_NAME[str(metric)].label}*", ""]
        out.append("| " + " | ".join([table.rows, *(_label(table.columns, c) for c in cols)]) + " |")
        out.append("|---" + "|---:" * len(cols) + "|")
        for r in rows:
            cells = [_label(table.rows, r)]
            for c in cols:
                m = str(metric if per_metric else (r if table.rows == METRIC else c))
                hits = [p.metrics.get(m) for p in chosen
                        if (table.rows == METRIC or _coord(p, table.rows) == r)
                        and (table.columns == METRIC or _coord(p, table.columns) == c)]
                cells.append(cell(hits, _unit(m), table.aggregate))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    notes = []
    varied = [d for d in pooled if len(_values(study, d, metrics)) > 1]
    if varied:
        what = "mean ± sd" if table.aggregate == "mean_sd" else table.aggregate
        notes.append(f"{what} over " + "; ".join(
            f"{d} {', '.join(map(str, _values(study, d, metrics)))}" for d in varied))
    fixed = {**{d: _values(study, d, metrics)[0] for d in pooled if d not in varied}, **table.where}
    if fixed:
        notes.append("at " + ", ".join(f"{d} = {v}" for d, v in fixed.items()))
    if notes:
        out.append(f"<sub>{'; '.join(notes)}.</sub>")
    return "\n".join(out).rstrip("\n") + "\n"


def check_renders(study: Study, source: str) -> None:
    """A scenario study's ``[[tables]] render``: one of its sweep tables or of the docs' renderers of
    one study's output (a model study's are checked with its model, in spec.py)."""
    if study.model:
        return
    known = [*SWEEP_TABLES, *own_renderers()]
    for i, t in enumerate(study.tables):
        if t.render and t.render not in known:
            close = difflib.get_close_matches(t.render, known, n=1, cutoff=0.6)
            hint = f"did you mean `{close[0]}`? " if close else ""
            raise StudyError(f"{source}: at `tables[{i}].render`: `{t.render}` is not a scenario study's "
                             f"table; {hint}(expected one of {', '.join(f'`{k}`' for k in known)})")


def tables_of(output: StudyOutput) -> tuple[Study, list[Table]]:
    if output.format != FORMAT:
        raise StudyError(f"{output.file}: written as {output.format!r}; this emulator reads {FORMAT!r}")
    source = f"{output.file} (as stored in the output)"
    study = study_from_data(output.study, source)
    check_renders(study, source)
    if study.model and not study.tables:  # every table its model has
        return study, [Table(render=name) for name in MODELS[study.model].tables]
    return study, list(study.tables) or [Table()]


def render_sweep_table(study: Study, output: StudyOutput, table: Table) -> str:
    """A scenario study's named table: `render = "limits"` or `"calibration"` (its points read as
    E2's sweep, emulator/study/sweep.py), or one of the docs' renderers of its output."""
    if table.render not in SWEEP_TABLES:
        text = render_own(table.render, msgspec.to_builtins(output)).rstrip("\n") + "\n"
        return (f"**{table.title}**\n\n" if table.title else "") + text
    sweep = view(study, output)
    text = limits_text(sweep) if table.render == "limits" else calibration_toml(sweep)
    if table.render == "calibration" and sweep["calibration_us"]:
        text = f"```toml\n{text}```\n"
    return (f"**{table.title}**\n\n" if table.title else "") + text


def render_model_table(study: Study, points: list[PointResult], table: Table) -> str:
    text = MODELS[study.model].tables[table.render](model_points(study, points))
    return (f"**{table.title}**\n\n" if table.title else "") + text.rstrip("\n") + "\n"


def model_table(model: str, name: str) -> Callable[[dict[str, Any]], str]:
    """The renderer of figure blocks that show table ``name`` of a ``model`` study's output (the
    figures registry passes the decoded JSON)."""
    if name not in MODELS[model].tables:
        raise KeyError(f"model {model!r} has no table {name!r}")

    def render(data: dict[str, Any]) -> str:
        output = msgspec.convert(data, StudyOutput)
        study, _ = tables_of(output)
        if study.model != model:
            raise StudyError(f"{output.file}: the output of a study of {study.model or 'a scenario'!r}, "
                             f"not of model {model!r}")
        return render_model_table(study, output.points, Table(render=name)) + _partial(study, output)

    return render


def _partial(study: Study, output: StudyOutput) -> str:
    missing = len(expand(study)) - len(output.points) - len(output.skipped)
    skipped = (f"\n<sub>Not run: {len(output.skipped)} points past a failed one (`[limits] "
               "stop_after_failure`).</sub>\n") if output.skipped else ""
    if missing <= 0:
        return skipped
    return f"{skipped}\n<sub>Partial: {missing} points of the study are not in its output yet.</sub>\n"


def markdown(output: StudyOutput | dict[str, Any]) -> str:
    """Every table of the study, from its output (the figures registry passes the decoded JSON)."""
    if isinstance(output, dict):
        output = msgspec.convert(output, StudyOutput)
    study, tables = tables_of(output)
    parts = [render_model_table(study, output.points, t) if t.render and study.model
             else render_sweep_table(study, output, t) if t.render
             else render_table(study, output.points, t) for t in tables]
    return "\n".join(parts) + _partial(study, output)
