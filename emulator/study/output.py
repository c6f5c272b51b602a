"""A study's output: one JSON with every point's figures and its exact scenario (or a model's
parameters and result), and the command-line overrides the study ran with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from emulator.models.point import ModelPoint
from emulator.study.spec import Study, StudyError

FORMAT = "hbemu-study/1"


class PointResult(msgspec.Struct, kw_only=True):
    key: str
    variant: str
    coords: dict[str, Any]
    metrics: dict[str, Any] = {}  # registry name -> the run's value (None where it has none)
    collected: dict[str, Any] = {}  # the study's `collect` sections, by name (study/sections.py)
    scenario: dict[str, Any] = {}  # exactly as run: the base file with every override
    # A model study's point: its parameters exactly as run, and the model's result.
    params: dict[str, Any] = {}
    output: dict[str, Any] = {}
    wall_s: float


class StudyOutput(msgspec.Struct, kw_only=True):
    format: str
    file: str  # the study file, as given
    study: dict[str, Any]  # the study as read (its overrides and axes as dotted paths)
    points: list[PointResult]
    # `emulator study --set/--axis/--cluster`: `set` (dotted path -> value, under the variants'),
    # `axes` (the axes given instead of the file's; `study` holds them too), `cluster`.
    overrides: dict[str, Any] = {}
    # Points the stop rule (`[limits] stop_after_failure`) did not run: a smaller one had failed.
    skipped: list[str] = []


def read_output(path: Path) -> StudyOutput:
    try:
        return msgspec.json.decode(path.read_bytes(), type=StudyOutput)
    except FileNotFoundError:
        raise StudyError(f"{path}: no such file") from None
    except OSError as err:
        raise StudyError(f"{path}: cannot read: {err.strerror}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise StudyError(f"{path}: not the output of `emulator study`: {err}") from None


def write_output(path: Path, output: StudyOutput) -> None:
    """Whole or not at all: a study killed mid-write keeps its previous output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(output)) + b"\n")
    tmp.replace(path)


def model_points(study: Study, points: list[PointResult]) -> list[ModelPoint]:
    """A model study's points as its model's tables see them."""
    labels = {v.name: v.description or v.name for v in study.variants}
    return [ModelPoint(variant=p.variant, label=labels.get(p.variant, p.variant), coords=p.coords,
                       params=p.params, output=p.output) for p in points]
