"""The models a study can run instead of a scenario (``model = NAME``): per name its parameter
struct (the study's ``params``, which variants and axes override by dotted path), the function
that runs one point (the parameters, seed included, to a plain result dict) and the tables it
renders from a study's points (``[[tables]] render = TABLE``). One registry, imported, so the
layer check sees every model. A model whose points time the CPU says so (``timed``): they run one
at a time in the study's process, as real-time points do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from emulator.models import bench
from emulator.models.binpacking import cluster, offline
from emulator.models.overcommit import E4Config, modes_table, why_table
from emulator.models.overcommit import run_point as run_cell
from emulator.models.point import ModelPoint


class Model(NamedTuple):
    about: str
    params: type[msgspec.Struct]
    run: Callable[[Any], dict[str, Any]]  # params -> result (plain data); runs in a worker process
    tables: dict[str, Callable[[list[ModelPoint]], str]]
    timed: bool = False  # its points measure CPU time: never two at once


MODELS: dict[str, Model] = {
    "borg-cell": Model(
        "E4: a Borg cell of hard-limit, soft-limit, Autopilot and ML jobs over days of 5-minute windows",
        E4Config, run_cell, {"modes": modes_table, "why": why_table}),
    "sbp-offline": Model(
        "E5: stochastic bin packing of synthetic tasks per admission method, and the bin-packing baselines",
        offline.E5Config, offline.run_point,
        {"methods": offline.methods_of, "bin-sizes": offline.bin_sizes_of,
         "baselines": offline.baselines_of}),
    "sbp-cluster": Model(
        "E5 on trace-like demand: stochastic bin packing judged machine by machine",
        cluster.Packing, cluster.run_point,
        {"methods": cluster.methods_of, "demand": cluster.demand_of, "compact": cluster.compact_of}),
    "emulator-bench": Model(
        "the bench: the emulator's own speed per heartbeat mode and design, its floor, memory per node",
        bench.BenchParams, bench.run_point, {"bench": bench.table}, timed=True),
}
SEED_FIELD = "seed"  # every model's parameters have it: a study's `seed` axis sets it


def run_model(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """One point, in whichever process (the parameters travel as plain data)."""
    model = MODELS[name]
    return model.run(msgspec.convert(params, model.params))
