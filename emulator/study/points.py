"""A study's points: every variant × every combination of axis values, each resolved to the exact
scenario it runs (the base file with the study's, the variant's and the axes' overrides)."""

from __future__ import annotations

import copy
import hashlib
import itertools
import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from emulator.results.record import scenario_data
from emulator.scenario.loader import ScenarioError, apply_overrides, scenario_from_dict
from emulator.scenario.schema import Scenario, scale_tasks
from emulator.study.spec import NODES, SEED, Study, StudyError, scenario_path, variant_names


class Point(msgspec.Struct, frozen=True, kw_only=True):
    key: str  # "delta|seed=2|nodes=100": unique in the study, what a resumed study matches on
    variant: str
    coords: dict[str, Any]  # axis name -> value, in the study's axis order


def point_key(variant: str, coords: dict[str, Any]) -> str:
    return "|".join([variant, *(f"{axis}={value}" for axis, value in coords.items())])


def expand(study: Study) -> list[Point]:
    """Every point, variants outermost, then the axes in the file's order (the last varies fastest);
    a variant's own axis values replace the study's."""
    axes = list(study.axes)
    own = {v.name: v.axes for v in study.variants}
    out = []
    for variant in variant_names(study):
        values_of = {**study.axes, **own.get(variant, {})}
        for values in itertools.product(*(values_of[a] for a in axes)):
            coords = dict(zip(axes, values, strict=True))
            out.append(Point(key=point_key(variant, coords), variant=variant, coords=coords))
    return out


def scale_cluster(data: dict[str, Any], nodes: int, scale_workload: bool) -> None:
    """The node groups scaled to ``nodes`` in all (the last group takes the rounding), and with
    ``scale_workload`` every operation's task count by the same factor (E2: t = n·c·l/a)."""
    groups = data.get("cluster", {}).get("nodes", [])
    if not groups:
        raise ScenarioError("at `cluster.nodes`: no node groups to scale to a node count")
    factor = nodes / sum(g.get("count", 1) for g in groups)
    left = nodes
    for i, g in enumerate(groups):
        g["count"] = left if i == len(groups) - 1 else max(1, round(g.get("count", 1) * factor))
        left -= g["count"]
    if groups[-1]["count"] < 1:
        raise ScenarioError(f"at `cluster.nodes`: cannot split {nodes} nodes over {len(groups)} node groups")
    if scale_workload:
        for op in data.get("workload", {}).get("operations", []):
            scale_tasks(op, factor)


def override_origins(study: Study, cli_sets: dict[str, Any], point: Point,
                     seed_path: str) -> list[tuple[str, dict[str, Any]]]:
    """A point's overrides as (where in the study file, dotted overrides), in the order they apply:
    the file's `set`, `--set`, its variant's `set`, its axes (the seed at ``seed_path``; the
    `nodes` axis scales the cluster instead)."""
    out: list[tuple[str, dict[str, Any]]] = [("set", study.set), ("--set", cli_sets)]
    for i, v in enumerate(study.variants):
        if v.name == point.variant:
            out.append((f"variants[{i}].set", v.set))
    for axis, value in point.coords.items():
        if axis != NODES:
            out.append((f"axes.{axis}", {seed_path if axis == SEED else axis: value}))
    return out


class Resolver:
    """Builds each point's scenario from the base file, read once."""

    def __init__(self, study: Study, study_file: Path, cli_sets: dict[str, Any] | None = None) -> None:
        self.study, self.study_file = study, study_file
        self.cli_sets = cli_sets or {}  # `emulator study --set`: after the file's `set`, under the variants
        self._bases: dict[Path, dict[str, Any]] = {}
        self._variant_unsets = {v.name: (i, v.unset) for i, v in enumerate(study.variants)}

    def path(self, point: Point) -> Path:
        return scenario_path(self.study_file, self.study, point.variant)[1]

    def _base(self, point: Point) -> dict[str, Any]:
        where, path = scenario_path(self.study_file, self.study, point.variant)
        if path not in self._bases:
            try:
                self._bases[path] = tomllib.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise StudyError(f"{self.study_file}: at `{where}`: {path}: no such file") from None
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
                raise StudyError(f"{self.study_file}: at `{where}`: {path}: cannot be read: {err}") from None
        return self._bases[path]

    def origins(self, point: Point) -> list[tuple[str, dict[str, Any]]]:
        """(where in the study file, dotted overrides) in the order they apply."""
        return override_origins(self.study, self.cli_sets, point, "run.seed")

    def overrides(self, point: Point) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for _, sets in self.origins(point):
            merged.update(sets)
        return merged

    def scenario(self, point: Point) -> Scenario:
        data = self._unset(point, copy.deepcopy(self._base(point)))
        path = self.path(point)
        origins = self.origins(point)
        try:
            for where, sets in origins:
                try:
                    apply_overrides(data, sets, path)
                except ScenarioError as err:
                    raise StudyError(f"{self.study_file}: at `{where}`: {err}") from None
            if NODES in point.coords:
                scale_cluster(data, point.coords[NODES], self.study.scale_workload)
            return scenario_from_dict(data, str(path), path.parent)
        except StudyError:
            raise
        except ScenarioError as err:
            raise StudyError(f"{self.study_file}: point `{point.key}`{self._blame(str(err), origins)}: "
                             f"{err}") from None

    def _unset(self, point: Point, data: dict[str, Any]) -> dict[str, Any]:
        """The base scenario without the variant's ``unset`` paths (each must be there)."""
        i, paths = self._variant_unsets.get(point.variant, (0, []))
        for j, dotted in enumerate(paths):
            *parents, leaf = re.sub(r"\[(\d+)\]", r".\1", dotted).split(".")
            node: Any = data
            for key in [*parents, leaf]:
                holder = node
                if isinstance(node, list) and key.isdigit() and int(key) < len(node):
                    node = node[int(key)]
                elif isinstance(node, dict) and key in node:
                    node = node[key]
                else:
                    raise StudyError(f"{self.study_file}: at `variants[{i}].unset[{j}]`: `{dotted}` is not "
                                     f"in {self.path(point)}")
            if isinstance(holder, list):
                holder.pop(int(leaf))
            else:
                del holder[leaf]
        return data

    @staticmethod
    def _blame(message: str, origins: list[tuple[str, dict[str, Any]]]) -> str:
        """Which of the study's overrides set the field the scenario's error is about."""
        m = re.search(r"at `([^`]+)`", message)
        if not m:
            return ""
        field = m.group(1)
        for where, sets in reversed(origins):
            for key in sets:
                if field == key or field.startswith((f"{key}.", f"{key}[")) or key.startswith(f"{field}."):
                    return f" (from `{where}`)"
        return ""

    def scenario_data(self, point: Point, scenario: Scenario) -> dict[str, Any]:
        """The scenario as run, as plain data (its secret left out, as a run's scenario.toml). A
        replayed trace's jobs, expanded into operations, are megabytes a point: the output keeps
        their count and digest instead (a changed trace still changes the point; `--runs` keeps
        them whole in each scenario.toml)."""
        data, _ = scenario_data(scenario, self.path(point), self.overrides(point))
        workload = data["workload"]
        # Expanded on loading, a trace leaves no `workload.trace` behind: the base file says it.
        if self._base(point).get("workload", {}).get("trace") or any(
                k.startswith("workload.trace") for k in self.overrides(point)):
            operations = workload.pop("operations")
            workload["operations_count"] = len(operations)
            workload["operations_sha256"] = hashlib.sha256(msgspec.json.encode(operations)).hexdigest()
        return data
