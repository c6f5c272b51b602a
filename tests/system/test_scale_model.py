"""The scale model: costs per node-interval from a bench, the RM's saturation point from its
service times, and a prediction that grows linearly with nodes x emulated time."""

from __future__ import annotations

from typing import Any

from emulator.study.renderers.scale import coefficients, markdown_table, predict_cpu_s


def _bench(cpu_periodic: float, cpu_delta: float) -> dict[str, Any]:
    def mode(cpu: float, hb: int, statuses: int) -> dict[str, Any]:
        return {"nodes": 1000, "emulated_s": 3000.0, "cpu_s": cpu, "heartbeats": hb, "statuses": statuses}

    return {
        "periodic": mode(cpu_periodic, 1_000_000, 20_000_000),
        "delta": mode(cpu_delta, 100_000, 200_000),
        "memory": {"bytes_per_idle_node": 1000, "bytes_per_node_with_20_containers": 9000},
    }


SWEEP = {"calibration_us": {"heartbeat_us": 10.0, "heartbeat_per_status_us": 0.5, "node_update_us": 2.0,
                            "allocation_us": 0.0}}


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
