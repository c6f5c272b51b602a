"""The scale model: costs per node-interval from a bench, the RM's saturation point from its
service times, and a prediction that grows linearly with nodes x emulated time."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.study.renderers.scale import coefficients, markdown_table, predict_cpu_s
from emulator.study.spec import StudyError


def _bench(cpu_periodic: float, cpu_delta: float) -> dict[str, Any]:
    def mode(cpu: float, hb: int, statuses: int) -> dict[str, Any]:
        return {"nodes": 1000, "emulated_s": 3000.0, "cpu_s": cpu, "heartbeats": hb, "statuses": statuses}

    return {
        "periodic": mode(cpu_periodic, 1_000_000, 20_000_000),
        "delta": mode(cpu_delta, 100_000, 200_000),
        "memory": {"bytes_per_idle_node": 1000, "bytes_per_node_with_20_containers": 9000},
    }


def _row(mode: str, nodes: int, node_host_us: float) -> dict[str, Any]:
    return {"mode": mode, "nodes": nodes, "worker_cpu_us_per_node_interval": node_host_us}


SWEEP = {"calibration_us": {"heartbeat_us": 10.0, "heartbeat_per_status_us": 0.5, "node_update_us": 2.0,
                            "allocation_us": 0.0},
         "rows": [_row("periodic", 2000, 9.0), _row("periodic", 4000, 8.0), _row("periodic", 6000, 7.5),
                  _row("delta", 6000, 4.0), _row("delta", 12000, 3.0)],
         "largest_ok": {"periodic": {"nodes": 4000}, "delta": {"nodes": None}}}


def test_costs_per_node_interval_and_rm_share() -> None:
    coef = coefficients(_bench(30.0, 15.0), SWEEP)
    # 1,000 nodes x 1,000 intervals: 30 s is 30 µs per node-interval.
    assert coef["periodic"]["us_per_node_interval"] == 30.0
    # One heartbeat (10 + 2 µs) and 20 statuses (10 µs) per node-interval.
    assert coef["periodic"]["rm_us_per_node_interval"] == 22.0
    assert coef["delta"]["rm_us_per_node_interval"] == 0.1 * 12.0 + 0.2 * 0.5
    assert predict_cpu_s(coef["periodic"], 2000, 6000.0) == 4 * 30.0


def test_the_table_says_where_the_rm_saturates_and_checks_a_run() -> None:
    run = _bench(30.0, 15.0)
    run["periodic"] = {**run["periodic"], "nodes": 2000, "cpu_s": 66.0, "peak_rss_mb": 500}
    table = markdown_table(_bench(30.0, 15.0), SWEEP, run)
    # 22 µs per node per 3 s: one core is busy at 3 s / 22 µs = 136,364 nodes.
    assert "136,364 nodes" in table
    assert "| 2,000 nodes × 50 emulated min | periodic | 60 s | 66 s | 1.10 | 500 MB |" in table


def test_the_node_hosts_share_is_their_cost_measured_at_each_modes_limit() -> None:
    """Measured, not the in-process run less the RM's share (a difference of two runs on
    different paths, which once read below zero): periodic kept up to 4,000, so its 8.0 µs;
    delta kept up nowhere, so its largest point's 3.0."""
    coef = coefficients(_bench(30.0, 15.0), SWEEP)
    assert coef["periodic"]["node_us_per_node_interval"] == 8.0
    assert coef["delta"]["node_us_per_node_interval"] == 3.0
    # 1M nodes x 8 µs per 3 s = 2.67 cores busy, planned at 70% of a core: 3.8 node-host cores.
    assert "3.8 cores |" in markdown_table(_bench(30.0, 15.0), SWEEP).splitlines()[2]


def test_a_sweep_without_node_hosts_is_refused_with_its_reason() -> None:
    virtual = {**SWEEP, "file": "runs/e2-virtual.json",
               "rows": [{"mode": "periodic", "nodes": 2000}, {"mode": "delta", "nodes": 2000}]}
    with pytest.raises(StudyError, match=r"runs/e2-virtual.json: no periodic point measured a node host"):
        coefficients(_bench(30.0, 15.0), virtual)
