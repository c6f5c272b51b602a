"""The bench's one boundary: a ``bench.json`` as the bench's renderers read it (docs/results.md's
table, the scale headline and model), from the output of `emulator study
scenarios/studies/bench.toml` (docs/bench.json, docs/scale-*.json)."""

from __future__ import annotations

from typing import Any

import msgspec

from emulator.models.bench import NotBench, markdown_table, report_of
from emulator.study.output import FORMAT, StudyOutput, model_points
from emulator.study.spec import StudyError, study_from_data

MODEL = "emulator-bench"


def bench_of(data: dict[str, Any]) -> dict[str, Any]:
    """The bench report of a study output (its points made into one); a report already made
    (``report_of``'s) as it is."""
    if data.get("format") != FORMAT:
        return data
    output = msgspec.convert(data, StudyOutput)
    study = study_from_data(output.study, f"{output.file} (as stored in the output)")
    if study.model != MODEL:
        raise StudyError(f"{output.file}: the output of a study of {study.model or 'a scenario'!r}, "
                         f"not of the bench (model {MODEL!r})")
    try:
        return report_of(model_points(study, output.points))
    except NotBench as err:
        raise StudyError(f"{output.file}: {err}") from None


def table(data: dict[str, Any]) -> str:
    """docs/results.md's table of a bench."""
    return markdown_table(bench_of(data))
