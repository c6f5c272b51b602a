"""A model study's points, each resolved to the exact parameters it runs: the study's ``params``
with the study's ``set``, the variant's and the axes' overrides (dotted paths, as a scenario
study's), checked before any point runs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec

from emulator.study.models import MODELS, SEED_FIELD
from emulator.study.params import params_problem
from emulator.study.points import Point, override_origins
from emulator.study.spec import Study, StudyError


def apply_params(data: dict[str, Any], sets: dict[str, Any]) -> str | None:
    """Each dotted path of ``sets`` set in ``data`` (tables made as needed); the path that runs
    into a value that is not a table, or None."""
    for path, value in sets.items():
        node = data
        parts = path.split(".")
        for i, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                return ".".join(parts[:i + 1])
        node[parts[-1]] = copy.deepcopy(value)
    return None


class ModelResolver:
    """Builds each point's parameters from the study's."""

    def __init__(self, study: Study, study_file: Path, cli_sets: dict[str, Any] | None = None) -> None:
        self.study, self.study_file = study, study_file
        self.cli_sets = cli_sets or {}  # `emulator study --set`: after the file's `set`, under the variants
        self.model = MODELS[study.model]

    def origins(self, point: Point) -> list[tuple[str, dict[str, Any]]]:
        """(where in the study file, dotted overrides) in the order they apply."""
        return override_origins(self.study, self.cli_sets, point, SEED_FIELD)

    def params(self, point: Point) -> dict[str, Any]:
        """The point's parameters as plain data (every default filled in): what it runs and what
        the output keeps."""
        data = copy.deepcopy(self.study.params)
        origins = self.origins(point)
        for where, sets in origins:
            bad = apply_params(data, sets)
            if bad:
                raise StudyError(f"{self.study_file}: at `{where}`: `{bad}` is a value, not a table of "
                                 "parameters")
        problem = params_problem(self.model.params, data)
        if problem:
            field, why = problem
            path = field.removeprefix("params").lstrip(".")
            blame = next((f" (from `{where}`)" for where, sets in reversed(origins) for key in sets
                          if path == key or path.startswith((f"{key}.", f"{key}["))
                          or key.startswith(f"{path}.")), "")
            raise StudyError(f"{self.study_file}: point `{point.key}`{blame}: at `{field}`: {why}")
        out: dict[str, Any] = msgspec.to_builtins(msgspec.convert(data, self.model.params))
        return out
