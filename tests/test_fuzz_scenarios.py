"""Property-based fuzzing of the scenario schema: any input is either a valid scenario or one clear
ScenarioError naming the file; nothing else ever escapes."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator.loader import ScenarioError, load_scenario, scenario_from_dict

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
KEYS = [
    "cluster", "heartbeat", "scheduler", "rm", "workload", "faults", "run", "transport", "name",
    "nodes", "count", "cpu", "ram_gib", "mode", "interval_s", "policy", "duration_s", "seed",
    "operations", "pools", "job_count", "seconds_mean", "kind", "at_s", "fraction", "uniform",
]


def mutate(base: Any, path: list[str], value: Any) -> Any:
    if not path or not isinstance(base, dict):
        return value
    out = dict(base)
    out[path[0]] = mutate(base.get(path[0], {}), path[1:], value)
    return out


BASE = tomllib.loads((SCENARIOS / "quickstart.toml").read_text())


def accepts_or_explains(data: Any) -> None:
    try:
        sc = scenario_from_dict(data, "fuzz.toml")
    except ScenarioError as err:
        text = str(err)
        assert text.startswith("fuzz.toml: at `"), text
        assert "\n" not in text.strip() or "TOML" in text
        return
    # A valid scenario must hold the bounds the runner relies on.
    numbers = [sc.run.duration_s, sc.run.warmup_s, sc.run.speed, sc.heartbeat.interval_s, sc.rm.expiry_s]
    numbers += [o.seconds_mean for o in sc.workload.operations]
    assert all(math.isfinite(x) and x >= 0 for x in numbers)
    assert sc.run.duration_s > 0
    assert all(g.count >= 1 for g in sc.cluster.nodes)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=6))
def test_random_documents(doc: dict[str, Any]) -> None:
    accepts_or_explains(doc)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4), values)
def test_mutations_of_a_valid_scenario(path: list[str], value: Any) -> None:
    accepts_or_explains(mutate(BASE, path, value))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_file_text(tmp_path_factory: Any, text: str) -> None:
    p = tmp_path_factory.mktemp("fz") / "f.toml"
    p.write_text(text, encoding="utf-8")
    try:
        load_scenario(p)
    except ScenarioError as err:
        assert str(err).startswith(f"{p}: ")
