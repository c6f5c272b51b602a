"""Bounds from the machine: a scenario whose run cannot fit in memory is refused at validation
with the estimate and what the machine has, instead of passing `validate` and being killed."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from emulator.cli.main import main
from emulator.models.bench.memcal import measure
from emulator.scenario.footprint import (
    CONTAINER_BYTES,
    NODE_DELTA_BYTES,
    NODE_PERIODIC_BYTES,
    PROCESS_BYTES,
    TASK_BYTES,
    estimate,
)
from emulator.scenario.loader import ScenarioError, scenario_from_dict

GIB = 1 << 30


def doc(nodes: list[dict[str, Any]], ops: list[dict[str, Any]] | None = None, **run: Any) -> dict[str, Any]:
    return {
        "cluster": {"nodes": nodes},
        "workload": {"operations": ops or []},
        "run": {"duration_s": 3600, **run},
    }


def op(tasks: int, **kw: Any) -> dict[str, Any]:
    return {"name": kw.pop("name", "a"), "cpu": 1, "ram_gib": 2, "tasks": tasks, "seconds_mean": 60, **kw}


def test_the_estimate_counts_nodes_tasks_containers_and_processes() -> None:
    sc = scenario_from_dict(doc([{"count": 1000, "cpu": 20, "ram_gib": 40}],
                                [op(50_000, repeat=4, repeat_every_s=1000)]))
    need = estimate(sc)
    # Copies submitted before the end (at 0, 1000, 2000, 3000 s) each hold their tasks; every one
    # of the 1000 nodes' 20 slots runs a container.
    assert (need.nodes, need.tasks, need.containers, need.processes) == (1000, 200_000, 20_000, 1)
    assert need.total == (1000 * NODE_PERIODIC_BYTES + 200_000 * TASK_BYTES + 20_000 * CONTAINER_BYTES
                          + PROCESS_BYTES)
    # Copies due after the end are never made; the ring costs more per node.
    late_doc = doc([{"count": 1000, "cpu": 20, "ram_gib": 40}], [op(50_000, submit_at_s=4000)])
    late = scenario_from_dict(late_doc | {"heartbeat": {"mode": "delta"}})
    assert estimate(late).tasks == 0 and estimate(late).node_bytes == NODE_DELTA_BYTES


@pytest.mark.parametrize(
    ("nodes", "ops", "path"),
    [
        # 1e7 nodes: each group within its bound, together far beyond the machine.
        ([{"count": 1_000_000, "cpu": 8, "ram_gib": 16}] * 10, [], "cluster.nodes"),
        # 5e8 tasks: 10 million tasks, 50 copies at once.
        ([{"count": 10, "cpu": 8, "ram_gib": 16}], [op(10_000_000, repeat=50)], "workload.operations[0]"),
    ],
    ids=["1e7-nodes", "5e8-tasks"],
)
def test_what_cannot_fit_is_refused_with_the_estimate_and_the_machine(
    nodes: list[dict[str, Any]], ops: list[dict[str, Any]], path: str
) -> None:
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(doc(nodes, ops), "big.toml", machine_bytes=16 * GIB)
    text = str(err.value)
    assert text.startswith(f"big.toml: at `{path}`: the run needs about ")
    assert "this machine has 16.0 GiB available" in text
    # The same scenario fits a machine big enough.
    need = estimate(scenario_from_dict(doc(nodes, ops), machine_bytes=1 << 62))
    scenario_from_dict(doc(nodes, ops), machine_bytes=need.total)


def test_validate_refuses_what_no_machine_has(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    groups = ", ".join(["{ count = 1000000, cpu = 8, ram_gib = 16 }"] * 200)  # 2e8 nodes: > 1 TiB
    p = tmp_path / "huge.toml"
    p.write_text(f"[cluster]\nnodes = [{groups}]\n[run]\nduration_s = 10\n")
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {p}: at `cluster.nodes`: the run needs about ")
    assert "200,000,000 nodes ×" in err and "GiB available" in err


def test_the_estimate_bounds_a_measured_run_closely() -> None:
    """The constants still describe the emulator: the peak RSS of a real scenario (2,000 delta
    nodes with the ring, ~38,000 running containers) is below the estimate, and not far below."""
    path = Path(__file__).parents[2] / "scenarios" / "e3-rack.toml"
    data = tomllib.loads(path.read_text())
    measured = sum(measure(data).values())  # RSS before the run + its growth: the peak
    estimated = estimate(scenario_from_dict(data)).total
    assert measured <= estimated <= 2 * measured, (measured, estimated)
