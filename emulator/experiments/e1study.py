"""`emulator e1 --study FILE`: E1's runs taken from a study file (scenarios/studies/e1*.toml) instead
of a command line: its base scenario, its variants as the packing policies, its `seed` axis and its
preemption setting (`set` or a `scheduler.preemption.enabled` axis). E1's own tables (gap closed,
user moves, the pooled bound) come from the results file as before; the study's `metrics` and
`tables` are what `emulator study` renders from the same runs."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, NamedTuple

from emulator.study.spec import SEED, Study, StudyError, load_study

PREEMPTION_FIELD = "scheduler.preemption.enabled"
# What the command line would also choose: with --study, the study file says it.
_EXCLUSIVE = (("seeds", "--seeds"), ("policies", "--policies"), ("variant", "--variant"))


class E1Grid(NamedTuple):
    scenario: Path
    seeds: tuple[int, ...]
    policies: tuple[str, ...]  # E1's named policies, as the study defines them
    preemption: tuple[bool, ...]
    variants: dict[str, dict[str, Any]]  # the other variants, by name, as scenario overrides


def _preemption(study: Study, source: str) -> tuple[bool, ...]:
    axis = study.axes.get(PREEMPTION_FIELD)
    if axis is not None:
        if not isinstance(axis, list) or not all(isinstance(v, bool) for v in axis):
            raise StudyError(f"{source}: at `axes.{PREEMPTION_FIELD}`: expected true and/or false")
        return tuple(axis)
    value = study.set.get(PREEMPTION_FIELD, False)
    if not isinstance(value, bool):
        raise StudyError(f"{source}: at `set.{PREEMPTION_FIELD}`: expected true or false")
    return (value,)


def e1_grid(path: Path, named: dict[str, dict[str, Any]]) -> E1Grid:
    """The study at ``path`` as `run_e1`'s arguments (``named``: E1's policies by name); a study E1
    cannot run is one clear error."""
    study, source = load_study(path), str(path)
    for axis in study.axes:
        if axis not in (SEED, PREEMPTION_FIELD):
            raise StudyError(f"{source}: at `axes.{axis}`: `emulator e1 --study` varies only `seed` and "
                             f"`{PREEMPTION_FIELD}` (run other axes with `emulator study`)")
    seeds = study.axes.get(SEED)
    if not isinstance(seeds, list):
        raise StudyError(f"{source}: at `axes`: `emulator e1 --study` needs a `seed` axis")
    if not study.variants:
        raise StudyError(f"{source}: at `variants`: `emulator e1 --study` needs the policies as variants")
    common = {k: v for k, v in study.set.items() if k != PREEMPTION_FIELD}
    policies, variants = [], {}
    for i, v in enumerate(study.variants):
        if v.scenario:
            raise StudyError(f"{source}: at `variants[{i}].scenario`: E1 runs every policy on one scenario")
        overrides = {**common, **v.set}
        if v.name in named:
            if overrides != named[v.name]:
                raise StudyError(f"{source}: at `variants[{i}].set`: `{v.name}` is E1's name for "
                                 f"{named[v.name]}; give other overrides another name")
            policies.append(v.name)
        else:
            variants[v.name] = overrides
    scenario = Path(os.path.normpath(path.parent / study.scenario))
    return E1Grid(scenario, tuple(seeds), tuple(policies), _preemption(study, source), variants)


def check_alone(args: argparse.Namespace) -> None:
    """With --study, the study file says what runs: the options that would say it too are refused."""
    given = [flag for name, flag in _EXCLUSIVE if getattr(args, name, None)]
    if args.preemption != "both":
        given.append("--preemption")
    if given:
        raise StudyError(f"{', '.join(given)}: not with --study (the study file says what runs)")
